"""``eaglekit inspect LOCATION [--json]``: every tensor's name, dtype and shape, from headers alone."""

from __future__ import annotations

import argparse
import json
import sys

from eaglekit.cli.common import add_hub_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="list a checkpoint's tensors from its headers (local, hf://, http(s)://, ssh://)",
                       description="Read only the safetensors headers of a checkpoint, wherever it lives, and "
                                   "list every tensor's name, dtype and shape.")
    p.add_argument("location", help="local path, hf://OWNER/REPO[@REV][/PATH], http(s)://URL, ssh://host/path "
                                    "or user@host:/path")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_hub_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.io.reader import read_inventory

    inv = read_inventory(args.location, endpoint=args.endpoint, progress=None if sys.stderr.isatty() else False)
    print(json.dumps(inv.to_json(), indent=2) if args.json else inv)
    return 0
