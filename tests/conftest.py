"""Shared fixtures: the demo workspace (built once per test process), and the loopback servers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the fixture helper modules beside this file

from sshd import sshd  # noqa: E402,F401  (a real OpenSSH sshd on 127.0.0.1, one per test module)

# Never reach huggingface.co from tests, and keep the Hub client's cache out of ~/.cache.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"  # a closed port: a test that forgets endpoint= fails fast


#: One folder for the whole ``make test`` run, shared by every xdist worker, every notebook kernel and both pytest
#: sessions (the Makefile names it; a lone ``pytest`` makes one): the result cache, the shared demo the pages
#: run on, each page executed once, and the report rendered from those pages.
RUN_ENV = "EAGLEKIT_TEST_RUN"


def pytest_configure(config):
    if not os.environ.get(RUN_ENV) and not hasattr(config, "workerinput"):  # the controller; workers inherit it
        import tempfile

        os.environ[RUN_ENV] = tempfile.mkdtemp(prefix="eaglekit-test-run-")
    # every measurement in this run (tests, notebook kernels) reads and writes one result cache, not the user's
    os.environ["EAGLEKIT_CACHE_DIR"] = os.path.join(os.environ[RUN_ENV], "cache")


def run_folder() -> Path:
    """The run's shared folder (see :data:`RUN_ENV`)."""
    return Path(os.environ[RUN_ENV])


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


#: Each cell's bound while the suite executes a page: far above any cell's time on a loaded 2-core machine (the
#: slowest measured about 60 s quiet, README), so only a kernel that is stuck trips it; the error names the cell.
CELL_TIMEOUT = 1800


def executed_page(name: str, demo_root: Path):
    """The executed notebook ``name`` of this run (see :func:`executed_notebook`)."""
    import nbformat
    from filelock import FileLock

    from eaglekit.view.report import execute_notebook

    folder = run_folder() / "executed"
    folder.mkdir(exist_ok=True)
    done = folder / f"{name}.ipynb"
    with FileLock(str(folder / f"{name}.lock")):
        if not done.exists():
            source = Path(__file__).resolve().parent.parent / "notebooks" / f"{name}.ipynb"
            with pytest.MonkeyPatch.context() as mp:  # the kernels import this checkout's eaglekit
                mp.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent), prepend=os.pathsep)
                nb = execute_notebook(source, demo=demo_root, timeout=CELL_TIMEOUT)
            partial = folder / f".{name}.{os.getpid()}.partial.ipynb"
            nbformat.write(nb, str(partial))
            os.replace(partial, done)
    return nbformat.read(str(done), as_version=4)


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
