"""The rendered report, built once per ``make test`` run for test_report.py and test_browser.py.

It is rendered from the pages the suite executed (conftest.py: each page once per run, shared by every worker),
in the run's shared folder, by the first process that needs it (a file lock); the browser session, run after the
rest, finds it there and renders nothing again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from runfixtures import executed_page, run_folder

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = [p.stem for p in NOTEBOOKS]


@dataclass(frozen=True)
class Report:
    out: Path
    pages: dict  # notebook name -> eaglekit.report.RenderedNotebook
    demo: Path  # the demo workspace it was rendered on
    seconds: float  # how long rendering took


@pytest.fixture(scope="session")
def report(request) -> Report:
    from filelock import FileLock

    from eaglekit.view.report import RenderedNotebook, build_report

    shared = run_folder()
    out, done = shared / "eaglekit-report", shared / "eaglekit-report.json"
    with FileLock(str(shared / "eaglekit-report.lock")):
        if not done.exists():
            demo = request.getfixturevalue("notebook_demo").root
            start = time.perf_counter()
            pages = build_report(out, demo=demo, execute=lambda path: executed_page(path.stem, demo))
            done.write_text(json.dumps({"demo": str(demo), "seconds": time.perf_counter() - start, "pages": [
                {"name": p.name, "title": p.title, "html_path": str(p.html_path), "figures": p.figures,
                 "single_path": str(p.single_path)}
                for p in pages]}))
    record = json.loads(done.read_text())
    pages = [RenderedNotebook(p["name"], p["title"], Path(p["html_path"]), tuple(p["figures"]), Path(p["single_path"]))
             for p in record["pages"]]
    return Report(out, {p.name: p for p in pages}, Path(record["demo"]), record["seconds"])
