"""``eaglekit compat A B [--target T] [--json]``: can drafter A initialise or replace drafter B?

Exit codes: 0 compatible, 3 compatible-after-remap, 4 incompatible, 2 error.
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import add_json_option, add_location, add_remote_options, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compat", help="EAGLE-3 compatibility verdict for two drafters (exit 0/3/4)",
                       description="Compare two drafters: tensors (names normalised across layouts), the d2t/t2d "
                                   "vocabulary maps by value, aux layer ids, and optionally a target config. "
                                   "Exit 0 compatible, 3 compatible-after-remap, 4 incompatible, 2 error.")
    add_location(p, "a", "drafter A")
    add_location(p, "b", "drafter B (for one drafter against a target, use eaglekit check)", nargs="?")
    p.add_argument("--target", metavar="CONFIG_OR_LOCATION", help="target model config.json or location")
    add_json_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.compat.pair import compat
    from eaglekit.core.errors import InputError

    if args.b is None:
        target = f" --target {args.target}" if args.target else " --target T"
        raise InputError(f"compat compares two drafters; to check one drafter against a target run: "
                         f"eaglekit check {args.a}{target}")
    report = compat(args.a, args.b, target=args.target, endpoint=args.endpoint, timeout=args.timeout)
    emit(report, args)
    return report.exit_code
