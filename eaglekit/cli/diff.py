"""``eaglekit diff A B [--json]``: two config.json files side by side, each difference classified."""

from __future__ import annotations

import argparse
import json

from eaglekit.cli.common import add_hub_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="diff two config.json files (shape / behaviour / metadata)",
                       description="Diff two configs (files, or the config.json beside checkpoint locations); "
                                   "every difference is classified as shape, behaviour or metadata with a reason. "
                                   "Equal values spelled differently across formats are not differences.")
    p.add_argument("a", help="config.json path or checkpoint location")
    p.add_argument("b", help="config.json path or checkpoint location")
    p.add_argument("--json", action="store_true", help="print a JSON list of differences")
    add_hub_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.core.configdiff import diff_configs
    from eaglekit.core.redact import location_label
    from eaglekit.io.reader import load_config

    a = load_config(args.a, endpoint=args.endpoint)
    b = load_config(args.b, endpoint=args.endpoint)
    diff = diff_configs(a, b, a_name=location_label(args.a), b_name=location_label(args.b))
    print(json.dumps(diff.to_json(), indent=2) if args.json else diff)
    return 0
