"""``eaglekit inspect LOCATION [--json]``: every tensor's name, dtype and shape, from headers alone; for a block
drafter (DFlash, DFlash2, DSpark) also what it is: family, block size, target layers read, shapes against its
config."""

from __future__ import annotations

import argparse
import sys

from eaglekit.cli.common import add_json_option, add_location, add_remote_options, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="list a checkpoint's tensors from its headers (local, hf://, http(s)://, ssh://)",
                       description="Read only the safetensors headers of a checkpoint, wherever it lives, and "
                                   "list every tensor's name, dtype and shape. A block drafter (DFlash, DFlash2, "
                                   "DSpark) also gets its verdicts: family, block size, drafts per block, the target "
                                   "layers it reads, no embedding or lm_head of its own, shapes against its config.")
    add_location(p, "location", "the checkpoint (a file or a folder)")
    add_json_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.inspection import inspect_block
    from eaglekit.io.reader import read_inventory

    inv = read_inventory(args.location, endpoint=args.endpoint, timeout=args.timeout, progress=None if sys.stderr.isatty() else False)
    emit(inspect_block(inv) or inv, args)
    return 0
