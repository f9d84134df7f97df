"""``eaglekit serve-metrics``: the demo's engine, a loopback server replaying vLLM's ``/metrics`` for ``eaglekit live``.

Its counters move on at every scrape, as a served drafter's do (:mod:`eaglekit.demo.metricsserver`; notebook 10
starts the same server in its kernel). Runs until Ctrl-C.
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import number, whole

#: The replayed drafter by default: notebook 10's demo engine, the warm start on K2.5 at 3 steps with its first step
#: accepted 30% less often than offline (rounded), so an accept length of 1 + 0.7 + 0.7 x 0.92 + 0.7 x 0.92 x 0.93
#: = 2.94 in the long run, where offline measures about 3.6.
DEFAULT_PER_STEP = (0.7, 0.92, 0.93)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-metrics", help="replay a vLLM /metrics page on 127.0.0.1 for `eaglekit live` (the demo)",
                       description="Serve, on 127.0.0.1, a vLLM /metrics page whose speculative-decoding counters move "
                                   "on at every scrape, as a live engine's do: the demo's engine for `eaglekit live`. "
                                   "Prints its URL; runs until Ctrl-C.")
    p.add_argument("--port", type=whole(0, 65535, "a port (0: a free one)"), default=8766,
                   help="port on 127.0.0.1; 0 picks a free one (default: 8766)")
    p.add_argument("--per-step", type=_per_step, default=DEFAULT_PER_STEP, metavar="A1,A2,...",
                   help="the served drafter's acceptance of step j given steps 1..j-1, one per draft step "
                        f"(default: {','.join(map(str, DEFAULT_PER_STEP))})")
    p.add_argument("--seed", type=whole(0, 2**32 - 1, "a seed"), default=0,
                   help="the replay's seed: the same seed replays the same pages (default: 0)")
    p.add_argument("--model", default="demo/k25-warm", help="the model_name label (default: demo/k25-warm)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.demo.metricsserver import serve

    serve(args.per_step, port=args.port, seed=args.seed, model=args.model)
    return 0


def _per_step(text: str) -> tuple[float, ...]:
    acceptance = number(0.0, 1.0, "an acceptance")
    parts = text.split(",")
    if len(parts) > 64:
        raise argparse.ArgumentTypeError(f"expected at most 64 draft steps, got {len(parts)}")
    return tuple(acceptance(part.strip()) for part in parts)
