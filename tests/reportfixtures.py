"""The rendered report, built once per test session for test_report.py and test_browser.py.

Rendering executes every notebook (tens of seconds), so the first xdist worker that needs the report
builds it in the session's shared temporary folder and the others wait for it and read it (a file lock;
``xdist_group`` keeps these modules on one worker only under ``--dist loadgroup``, which measured no faster).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = [p.stem for p in NOTEBOOKS]
CELL_TIMEOUT = 300  # seconds; a stuck kernel fails the session in minutes, not make report's 15


@dataclass(frozen=True)
class Report:
    out: Path
    pages: dict  # notebook name -> eaglekit.report.RenderedNotebook
    demo: Path  # the demo workspace it was rendered on
    seconds: float  # how long rendering took


@pytest.fixture(scope="session")
def report(request, tmp_path_factory) -> Report:
    from filelock import FileLock

    from eaglekit.view.report import RenderedNotebook, build_report

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # one folder for all workers of this session
    out, done = shared / "eaglekit-report", shared / "eaglekit-report.json"
    with FileLock(str(shared / "eaglekit-report.lock")):
        if not done.exists():
            demo = request.getfixturevalue("demo").root
            request.getfixturevalue("trained")  # notebooks 00 and 06 measure on it: trained once, linked in
            start = time.perf_counter()
            with pytest.MonkeyPatch.context() as mp:  # the kernels import this checkout's eaglekit
                mp.setenv("PYTHONPATH", str(ROOT), prepend=os.pathsep)
                pages = build_report(out, demo=demo, timeout=CELL_TIMEOUT)
            done.write_text(json.dumps({"demo": str(demo), "seconds": time.perf_counter() - start, "pages": [
                {"name": p.name, "title": p.title, "html_path": str(p.html_path), "figures": p.figures,
                 "single_path": str(p.single_path)}
                for p in pages]}))
    record = json.loads(done.read_text())
    pages = [RenderedNotebook(p["name"], p["title"], Path(p["html_path"]), tuple(p["figures"]), Path(p["single_path"]))
             for p in record["pages"]]
    return Report(out, {p.name: p for p in pages}, Path(record["demo"]), record["seconds"])
