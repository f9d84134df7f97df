"""``eaglekit speedup``: throughput, speedup and break-even of speculative decoding for one scenario.

    eaglekit speedup --baseline-tps 82 --verify-ms 30 --accept-length 2.0 --target-tps 150

All arithmetic is :mod:`eaglekit.specmath`; bad values raise :class:`~eaglekit.errors.InputError`
there and become one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse

_EPILOG = (
    "Accept length counts the bonus token (as vLLM, SGLang and EAGLE report it). "
    "Cycle = verify + steps x draft + overhead; without --steps the chain is unbounded "
    "(accept length = 1/(1-alpha)) and --draft-ms must be 0."
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "speedup",
        help="speculative-decoding throughput, speedup and break-even accept length",
        description="Throughput, speedup and break-even accept length of one draft-verify scenario.",
        epilog=_EPILOG,
    )
    p.add_argument("--baseline-tps", type=float, required=True, metavar="X", help="decode tok/s without speculation")
    p.add_argument("--verify-ms", type=float, required=True, metavar="V", help="target verify time per cycle (ms)")
    p.add_argument("--draft-ms", type=float, default=0.0, metavar="D", help="drafter time per step (ms, default 0)")
    p.add_argument("--steps", type=int, default=None, metavar="K", help="draft steps k per cycle (default: unbounded)")
    p.add_argument("--overhead-ms", type=float, default=0.0, metavar="O", help="other time per cycle (ms, default 0)")
    rate = p.add_mutually_exclusive_group(required=True)
    rate.add_argument("--accept-length", type=float, metavar="L", help="mean tokens per cycle, bonus included")
    rate.add_argument("--alpha", type=float, metavar="A", help="i.i.d. per-token acceptance in [0, 1)")
    p.add_argument("--target-tps", type=float, default=None, metavar="T", help="what a target tok/s needs")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from eaglekit.core.specmath import Scenario, estimate

    scenario = Scenario(
        baseline_tps=args.baseline_tps,
        verify_ms=args.verify_ms,
        draft_ms=args.draft_ms,
        steps=args.steps,
        overhead_ms=args.overhead_ms,
    )
    result = estimate(scenario, accept_length=args.accept_length, alpha=args.alpha, target_tps=args.target_tps)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result)
    return 0
