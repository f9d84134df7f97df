"""``eaglekit diff A B [--json]``: two config.json files side by side, each difference classified."""

from __future__ import annotations

import argparse

from eaglekit.cli.common import add_json_option, add_location, add_remote_options, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="diff two config.json files (shape / behaviour / metadata)",
                       description="Diff two configs (files, or the config.json beside checkpoint locations); "
                                   "every difference is classified as shape, behaviour or metadata with a reason. "
                                   "Equal values spelled differently across formats are not differences.")
    add_location(p, "a", "a config.json, or the checkpoint beside it")
    add_location(p, "b", "a config.json, or the checkpoint beside it")
    add_json_option(p, "print the differences as one JSON object")
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.core.configs.diff import diff_configs
    from eaglekit.core.redact import location_label
    from eaglekit.io.reader import load_config

    a = load_config(args.a, endpoint=args.endpoint, timeout=args.timeout)
    b = load_config(args.b, endpoint=args.endpoint, timeout=args.timeout)
    diff = diff_configs(a, b, a_name=location_label(args.a), b_name=location_label(args.b))
    emit(diff, args)
    return 0
