"""``eaglekit demo PATH``: write the synthetic demo workspace (drafters, targets, a Hub folder)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="write the synthetic demo workspace (deterministic, offline)",
                       description="Write synthetic EAGLE-3 drafters in real layout at 1/16 scale, target configs "
                                   "and a folder for the Hub-compatible demo server. Reuses an existing workspace.")
    p.add_argument("path", help="folder to create (reused when it already holds the demo)")
    p.add_argument("--force", action="store_true", help="rebuild even when the workspace exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.demo.world import build_demo

    print(build_demo(args.path, force=args.force))
    return 0
