"""``eaglekit compat A B [--target T] [--json]``: can drafter A initialise or replace drafter B?

Exit codes: 0 compatible, 3 compatible-after-remap, 4 incompatible, 2 error.
"""

from __future__ import annotations

import argparse
import json

from eaglekit.cli.common import add_hub_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compat", help="EAGLE-3 compatibility verdict for two drafters (exit 0/3/4)",
                       description="Compare two drafters: tensors (names normalised across layouts), the d2t/t2d "
                                   "vocabulary maps by value, aux layer ids, and optionally a target config. "
                                   "Exit 0 compatible, 3 compatible-after-remap, 4 incompatible, 2 error.")
    p.add_argument("a", help="drafter location (local, hf://, http(s)://, ssh://)")
    p.add_argument("b", nargs="?", help="drafter location (for one drafter against a target, use eaglekit check)")
    p.add_argument("--target", metavar="CONFIG_OR_LOCATION", help="target model config.json or location")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_hub_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.compat.pair import compat
    from eaglekit.core.errors import InputError

    if args.b is None:
        target = f" --target {args.target}" if args.target else " --target T"
        raise InputError(f"compat compares two drafters; to check one drafter against a target run: "
                         f"eaglekit check {args.a}{target}")
    report = compat(args.a, args.b, target=args.target, endpoint=args.endpoint)
    print(json.dumps(report.to_json(), indent=2) if args.json else report)
    return report.exit_code
