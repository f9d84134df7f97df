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


def _shared_trained(tmp_path_factory) -> Path:
    """The trained demo world, trained once for all test workers (and reused by later runs while its version
    holds) under pytest's temp root: the builder itself is safe when several processes ask at once."""
    from eaglekit.demo.trained import build_trained_demo

    shared = tmp_path_factory.getbasetemp().parent
    return build_trained_demo(shared / "eaglekit-trained-demo", progress=False).root


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
def executed_notebook(demo, trained):
    """``executed_notebook("04_weight_similarity")``: the notebook run once per test process, on the demo."""
    from eaglekit.view.report import execute_notebook

    folder = Path(__file__).resolve().parent.parent / "notebooks"
    cache: dict[str, object] = {}

    def run(name: str):
        if name not in cache:
            cache[name] = execute_notebook(folder / f"{name}.ipynb", demo=demo.root)
        return cache[name]

    return run


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
