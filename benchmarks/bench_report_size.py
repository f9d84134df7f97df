"""Size of the rendered report, folder form against single-file form (issue 12, item 9).

Renders every notebook on the demo once (``eaglekit.view.report.build_report``, which writes both forms)
and prints the bytes each form takes: the folder form's pages plus its shared ``assets/`` (one plotly.js,
the widget front end), and the single-file pages, each with plotly.js and the widget manager inlined.
The naive way, measured in the same run, is the single-file form: one self-contained page per notebook.

    .venv/bin/python benchmarks/bench_report_size.py
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from eaglekit.demo.world import build_demo
from eaglekit.view.report import build_report


def _size(paths) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        demo = build_demo(Path(tmp) / "demo")
        out = Path(tmp) / "report"
        start = time.perf_counter()
        pages = build_report(out, demo=demo.root)
        seconds = time.perf_counter() - start
        folder_pages = _size(p.html_path for p in pages)
        assets = _size((out / "assets").iterdir())
        single = _size(p.single_path for p in pages)
        figures = sum(bool(p.figures) for p in pages)
        print(f"{len(pages)} notebooks ({figures} with figures), rendered in {seconds:.0f} s")
        for p in pages:
            print(f"  {p.name:24} folder {p.html_path.stat().st_size / 1e6:6.2f} MB   "
                  f"single {p.single_path.stat().st_size / 1e6:6.2f} MB")
        print(f"folder form: pages {folder_pages / 1e6:.2f} MB + assets {assets / 1e6:.2f} MB "
              f"= {(folder_pages + assets) / 1e6:.2f} MB")
        print(f"single-file form: {single / 1e6:.2f} MB")
        print(f"ratio single / folder: {single / (folder_pages + assets):.2f}x")
        print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
