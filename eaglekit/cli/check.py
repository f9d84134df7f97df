"""``eaglekit check DRAFTER [--target T] [--engine vllm|sglang|sglang==0.5.9] [--full] [--json]``: can it serve?

Header-only pre-serving checks for one drafter (and a target): lm_head, embed_tokens against the
target's (sampled rows, or every row with ``--full``), d2t/t2d, fc width, aux ids per engine, vocabulary
and hidden size, architecture name, dtype, rope. Exit 0 ready, 4 not ready, 2 error.
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import add_engine_option, add_json_option, add_location, add_remote_options, emit


_WHAT = ("Check one EAGLE-3 drafter before serving it: lm_head present and shaped, embed_tokens absent or equal to "
         "the target's, d2t/t2d valid, fc width, aux ids in range and what each engine feeds, vocabulary and hidden "
         "size, the architecture name each engine needs, dtype, rope. Every finding comes with a one-line fix. "
         "Exit 0 ready, 4 not ready, 2 error.")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", description=_WHAT,
                       help="pre-serving checks for one drafter against a target (exit 0 ready / 4 not)")
    add_location(p, "drafter", "the drafter")
    p.add_argument("--target", metavar="T", help="target config.json, folder or location (with weights, "
                                                  "embed_tokens is compared by value)")
    add_engine_option(p, "check for this engine only: sglang (every SGLang release reading, newest first), "
                         "sglang==0.5.9 (that release), vllm (default: both engines; a fault of one is then a warning)")
    p.add_argument("--full", action="store_true", help="compare every embed_tokens row, not a sample")
    add_json_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.compat.check import check

    report = check(args.drafter, target=args.target, engine=args.engine, full=args.full, endpoint=args.endpoint, timeout=args.timeout)
    emit(report, args)
    return report.exit_code
