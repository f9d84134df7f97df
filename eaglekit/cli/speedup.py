"""``eaglekit speedup``: throughput, speedup and break-even of speculative decoding for one scenario.

    eaglekit speedup --baseline-tps 82 --verify-ms 30 --accept-length 2.0 --target-tps 150
    eaglekit speedup --baseline-tps 82 --verify-ms 30 --accept-length 2.0 --steps 2 --spec-tps 60 --target-tps 150 \
        --candidate-accept-length 3.2

With ``--spec-tps`` (the throughput measured with speculation) the cycle is fitted from the
measurement and the whole account is printed (:class:`~eaglekit.core.serving.account.Account`): the measured
cycle beside the verify-only arithmetic, and what each target needs at the given steps. All arithmetic
is :mod:`eaglekit.core.speedup.specmath`; bad values raise :class:`~eaglekit.errors.InputError` there and
become one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import FIGURE, add_json_option, capped, emit, whole
from eaglekit.core.serving.costmodel import MAX_TP

_EPILOG = (
    "Accept length counts the bonus token (as vLLM, SGLang and EAGLE report it). "
    "Cycle = verify + steps x draft + overhead; without --steps the chain is unbounded "
    "(accept length = 1/(1-alpha)) and --draft-ms must be 0. "
    "--spec-tps fits the cycle from a measurement (needs --accept-length and --steps): "
    "cycle = accept length / spec tok/s, the part beyond --verify-ms is drafting, per step unless --draft-ms is given."
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "speedup",
        help="speculative-decoding throughput, speedup and break-even accept length",
        description="Throughput, speedup and break-even accept length of one draft-verify scenario.",
        epilog=_EPILOG,
    )
    p.add_argument("--baseline-tps", type=FIGURE, required=True, metavar="X", help="decode tok/s without speculation")
    p.add_argument("--verify-ms", type=FIGURE, required=True, metavar="V", help="target verify time per cycle (ms)")
    p.add_argument("--draft-ms", type=FIGURE, default=None, metavar="D",
                   help="drafter time per step (ms; default 0, or derived from --spec-tps)")
    p.add_argument("--steps", type=capped(), default=None, metavar="K", help="draft steps k per cycle (default: unbounded)")
    p.add_argument("--overhead-ms", type=FIGURE, default=0.0, metavar="O", help="other time per cycle (ms, default 0)")
    rate = p.add_mutually_exclusive_group(required=True)
    rate.add_argument("--accept-length", type=FIGURE, metavar="L", help="mean tokens per cycle, bonus included")
    rate.add_argument("--alpha", type=FIGURE, metavar="A", help="i.i.d. per-token acceptance in [0, 1)")
    p.add_argument("--spec-tps", type=FIGURE, default=None, metavar="S",
                   help="measured tok/s with speculation at --accept-length: fit the cycle from it")
    p.add_argument("--candidate-accept-length", type=FIGURE, action="append", default=None, metavar="L",
                   help="with --spec-tps: what an expected accept length (a candidate drafter's) gives, at the k it "
                        "was measured at (--candidate-steps) or else the fewest steps that allow it (repeatable)")
    p.add_argument("--candidate-steps", type=capped(), action="append", default=None, metavar="K",
                   help="the draft steps each --candidate-accept-length was measured at, in the same order")
    p.add_argument("--target-tps", type=FIGURE, action="append", default=None, metavar="T",
                   help="what a target tok/s needs (repeatable with --spec-tps)")
    p.add_argument("--verify-grows-for", action="append", default=None, metavar="TARGET",
                   help="with --spec-tps: price the targets again with a verify that grows with k, from this target's "
                        "cost model calibrated to the measurement (a config.json, or kimi-k25-int4, kimi-k2-fp8; "
                        "repeatable)")
    p.add_argument("--tp", type=whole(1, MAX_TP, "a tensor-parallel degree"), default=1, metavar="N",
                   help="with --verify-grows-for: the GPUs the deployment ran on (tensor parallel, default 1)")
    p.add_argument("--verify-split", default="per-token", metavar="per-token|per-forward|FRACTION",
                   help="with --verify-grows-for: what the measured verify holds beyond bytes and FLOPs is a cost per "
                        "verified token (per-token, the default), per verify forward (per-forward: launches without "
                        "CUDA graphs, all-reduces) or this fraction per forward; both ends are printed beside it")
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.core.errors import InputError
    from eaglekit.core.speedup.specmath import Scenario, estimate

    targets = args.target_tps or []
    if args.tp != 1 and not args.verify_grows_for:
        raise InputError("--tp sizes the cost model of --verify-grows-for: add --verify-grows-for (with --spec-tps)")
    if args.verify_split != "per-token" and not args.verify_grows_for:
        raise InputError("--verify-split reads the verify of --verify-grows-for: add --verify-grows-for (with --spec-tps)")
    if args.spec_tps is not None:
        from eaglekit.core.serving.account import Account

        if args.accept_length is None:
            raise InputError("--spec-tps needs --accept-length: the accept length measured with that throughput")
        if args.steps is None:
            raise InputError("--spec-tps needs --steps: the draft steps per cycle the measurement ran with "
                             "(the measured cycle is split into verify and k draft steps)")
        if args.overhead_ms:
            raise InputError("--spec-tps derives the overhead from the measurement: leave out --overhead-ms")
        result = Account.from_measurements(args.baseline_tps, args.spec_tps, args.accept_length,
                                           verify_ms=args.verify_ms, steps=args.steps, draft_ms=args.draft_ms,
                                           targets=targets, expected=_candidates(args),
                                           verify_grows_for=_grows_for(args.verify_grows_for or ()), tp=args.tp,
                                           verify_split=args.verify_split)
    else:
        if args.verify_grows_for:
            raise InputError("--verify-grows-for calibrates to the measured cycle: add --spec-tps (with --steps)")
        if args.candidate_accept_length or args.candidate_steps:
            raise InputError("--candidate-accept-length is priced on the measured cycle: add --spec-tps (with "
                             "--steps), or use --accept-length alone for one scenario")
        if len(targets) > 1:
            raise InputError("give --target-tps once without --spec-tps (or add --spec-tps for several targets)")
        scenario = Scenario(
            baseline_tps=args.baseline_tps,
            verify_ms=args.verify_ms,
            draft_ms=args.draft_ms or 0.0,
            steps=args.steps,
            overhead_ms=args.overhead_ms,
        )
        result = estimate(scenario, accept_length=args.accept_length, alpha=args.alpha,
                          target_tps=targets[0] if targets else None)
    emit(result, args)
    return 0


def _candidates(args: argparse.Namespace) -> list:
    """Each --candidate-accept-length, paired with its --candidate-steps where given."""
    from eaglekit.core.errors import InputError

    lengths, steps = args.candidate_accept_length or [], args.candidate_steps or []
    if steps and len(steps) != len(lengths):
        raise InputError(f"give one --candidate-steps per --candidate-accept-length ({len(lengths)} accept lengths, "
                         f"{len(steps)} steps)")
    return [(L, k) for L, k in zip(lengths, steps)] if steps else list(lengths)


def _grows_for(names: list[str]) -> dict:
    """Published names as they are; a config.json path read and labelled by its location."""
    from eaglekit.core.redact import location_label
    from eaglekit.core.serving.published import PUBLISHED, published
    from eaglekit.io.reader import load_config

    out = {}
    for name in names:
        label, config = published(name) if name in PUBLISHED else (location_label(name),
                                                                      load_config(name, kind="target"))
        out[label] = config
    return out
