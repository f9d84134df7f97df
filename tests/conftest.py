"""Shared fixtures: the demo workspace (built once per test process), and the loopback servers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the fixture helper modules beside this file

from sshd import sshd  # noqa: E402,F401  (a real OpenSSH sshd on 127.0.0.1, one per test module)
from runfixtures import RUN_ENV, executed_page, run_folder  # noqa: E402

# Never reach huggingface.co from tests, and keep the Hub client's cache out of ~/.cache.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"  # a closed port: a test that forgets endpoint= fails fast


def pytest_configure(config):
    if not os.environ.get(RUN_ENV) and not hasattr(config, "workerinput"):  # the controller; workers inherit it
        import tempfile

        os.environ[RUN_ENV] = tempfile.mkdtemp(prefix="eaglekit-test-run-")
        config._eaglekit_own_run = os.environ[RUN_ENV]  # made here: removed at the end (make test removes its own)
    # every measurement in this run (tests, notebook kernels) reads and writes one result cache, not the user's
    os.environ["EAGLEKIT_CACHE_DIR"] = os.path.join(os.environ[RUN_ENV], "cache")


def pytest_unconfigure(config):
    own = getattr(config, "_eaglekit_own_run", None)
    if own and os.environ.get(RUN_ENV) == own:
        import shutil

        shutil.rmtree(own, ignore_errors=True)
        os.environ.pop(RUN_ENV, None)


def _shared_trained(tmp_path_factory) -> Path:
    """The trained demo world, trained once for the whole run (every worker, both sessions) in the run's folder,
    which outlives pytest's rotation of its temporary folders: the builder itself is safe when several processes
    ask at once."""
    from eaglekit.demo.trained import build_trained_demo

    return build_trained_demo(run_folder() / "eaglekit-trained-demo", progress=False).root


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    """The demo workspace, its ``trained/`` linked to the shared trained world."""
    from eaglekit.demo.world import build_demo

    return build_demo(tmp_path_factory.mktemp("demo") / "ws", trained=_shared_trained(tmp_path_factory))


@pytest.fixture(scope="session")
def trained(demo):
    """The trained demo world (small K2/K2.5 targets, EAGLE-3 drafters), as the demo workspace links it
    (where notebooks 00, 06 and 07 look for it)."""
    return demo.trained


@pytest.fixture(scope="session")
def hub(demo):
    """The Hub-compatible server over the demo's hub/ folder, on 127.0.0.1."""
    from eaglekit.demo.hubserver import HubServer

    with HubServer(demo.hub_root, tokens={"hf_test_token"}) as server:
        yield server


@pytest.fixture(scope="session")
def notebook_demo(tmp_path_factory):
    """The demo workspace the pages run on: one for the whole run (every worker and session), built under a lock
    by whichever process asks first; the same world whoever builds it."""
    from filelock import FileLock

    from eaglekit.demo.world import build_demo

    folder = run_folder() / "notebook-demo"
    with FileLock(str(run_folder() / "notebook-demo.lock")):
        return build_demo(folder, trained=_shared_trained(tmp_path_factory))


@pytest.fixture(scope="session")
def executed_notebook(notebook_demo):
    """``executed_notebook("04_weight_similarity")``: the page executed once per run, on the run's demo; whichever
    process asks first executes it under the page's lock and writes it, the others read it (tests and the report
    alike)."""
    return lambda name: executed_page(name, notebook_demo.root)


CHROMIUM = "/usr/bin/chromium"  # Debian's package (.ci/run installs it)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium through Playwright, for the browser tests (offline: no background traffic)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        message = f"no {CHROMIUM}: install Debian's chromium package (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()
