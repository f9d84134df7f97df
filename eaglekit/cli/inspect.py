"""``eaglekit inspect LOCATION [--json]``: every tensor's name, dtype and shape, from headers alone."""

from __future__ import annotations

import argparse
import sys

from eaglekit.cli.common import add_json_option, add_location, add_remote_options, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="list a checkpoint's tensors from its headers (local, hf://, http(s)://, ssh://)",
                       description="Read only the safetensors headers of a checkpoint, wherever it lives, and "
                                   "list every tensor's name, dtype and shape.")
    add_location(p, "location", "the checkpoint (a file or a folder)")
    add_json_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.io.reader import read_inventory

    inv = read_inventory(args.location, endpoint=args.endpoint, timeout=args.timeout, progress=None if sys.stderr.isatty() else False)
    emit(inv, args)
    return 0
