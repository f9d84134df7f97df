"""The rendered report, built once per test session for test_report.py and test_browser.py.

Both modules are marked ``xdist_group("report")`` so that under ``pytest -n 2 --dist loadgroup`` they run
in one worker and share this session fixture: rendering executes every notebook (tens of seconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = [p.stem for p in NOTEBOOKS]


@dataclass(frozen=True)
class Report:
    out: Path
    pages: dict  # notebook name -> eaglekit.report.RenderedNotebook
    seconds: float


@pytest.fixture(scope="session")
def report(demo, tmp_path_factory) -> Report:
    from eaglekit.report import build_report

    out = tmp_path_factory.mktemp("report")
    start = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:  # the kernels import this checkout's eaglekit
        mp.setenv("PYTHONPATH", str(ROOT), prepend=":")
        pages = build_report(out, demo=demo.root)
    return Report(out, {p.name: p for p in pages}, time.perf_counter() - start)
