"""``eaglekit search [QUERY] [--target T] [--author A] [--limit N] [--json]``: EAGLE-3 and block drafters (DFlash,
DFlash2, DSpark) on the Hub."""

from __future__ import annotations

import argparse

from eaglekit.cli.common import add_json_option, add_remote_options, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="find EAGLE-3 and block drafters on the Hub by their configs, ranked for a target",
                       description="List Hub models, keep those whose config.json says EAGLE-3 or a block drafter "
                                   "(DFlash, DFlash2, DSpark; not their name), and summarise each: format, family and "
                                   "block size, target, hidden size, vocabularies, aux (target layer) ids, "
                                   "parameters, downloads. With --target, drafters whose hidden size and vocab fit "
                                   "that model come first and misfits say why.")
    p.add_argument("query", nargs="?", default=None,
                   help="text the repo id must contain (the Hub's search); omit to examine the most downloaded models")
    p.add_argument("--target", metavar="T", default=None,
                   help="the target model: its config.json, a folder, a location (hf://, https://, ssh://) or a Hub "
                        "repo id (OWNER/NAME)")
    p.add_argument("--author", metavar="A", default=None, help="only repos of this user or organisation")
    p.add_argument("--limit", metavar="N", type=_positive, default=1000,
                   help="how many Hub models to examine (default: %(default)s)")
    add_json_option(p, 'print one JSON object: {"drafters": [...]}')
    add_remote_options(p)
    p.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if not 1 <= value <= 1 << 20:  # the Hub lists far fewer drafters; a 400-digit count is a typo
        raise argparse.ArgumentTypeError(f"expected a positive whole number up to {1 << 20:,}, got {text[:40]!r}"
                                         if value > 1 else f"expected a positive whole number, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.search import find_drafters

    results = find_drafters(args.query, target=args.target, author=args.author, limit=args.limit,
                            endpoint=args.endpoint, timeout=args.timeout)
    emit(results, args)
    return 0
