"""``eaglekit report``: build the demo workspace when missing, execute every notebook on it and write
the rendered pages (``make report``). The pages themselves come from :mod:`eaglekit.view.report`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from eaglekit.cli.common import whole


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="execute every notebook on the demo and write rendered HTML",
                       description="Execute every notebook on the demo workspace (built when missing) and write "
                                   "pages sharing assets/, self-contained copies in single/, and index.html to OUT.")
    p.add_argument("--demo", default="build/demo", help="demo workspace (built when missing)")
    p.add_argument("--out", default="build/report", help="output folder")
    p.add_argument("--only", nargs="*", help="notebook names (without .ipynb) to render")
    p.add_argument("--timeout", type=whole(1, 86_400, "a number of seconds"), default=900, metavar="S",
                   help="the most one notebook cell may run, in seconds (900; the slowest demo cell takes about a "
                        "minute on 2 cores); a cell past it stops the report with its number and first line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.demo.world import build_demo
    from eaglekit.view.report import build_report

    start = time.perf_counter()
    build_demo(args.demo)
    pages = build_report(args.out, demo=args.demo, only=args.only, timeout=args.timeout)
    print(f"wrote {len(pages)} pages (folder form, sharing assets/) and their single-file copies (single/) to "
          f"{args.out} in {time.perf_counter() - start:.0f} s; open {Path(args.out) / 'index.html'}")
    return 0
