"""``eaglekit acceptance-curve``: accept length across training checkpoints, the curve through them, and what
more data (or a warm start) would buy.

    eaglekit acceptance-curve CKPT CKPT CKPT ... --samples 37K,74K,148K --target T --prompts p.jsonl \\
        [--steps 3] [--predict 500K] [--reach 2.5] [--break-even 2.2 | --plan plan.json] [--json]
    eaglekit acceptance-curve --label warm W1 W2 W3 --label scratch S1 S2 S3 --samples ... --samples ... \\
        --hidden-states DUMP --break-even 3.6 --compare warm scratch 37K
    eaglekit acceptance-curve --label warm W1 W2 W3 --label scratch S1 S2 S3 --batch-size 32 \\
        --hidden-states DUMP [--target-head T --scheduler tcp://...]

Each checkpoint is measured as ``eaglekit acceptance`` measures one drafter; see
:mod:`eaglekit.analysis.acceptance.curve` and docs/acceptance.md ("How many samples").
"""

from __future__ import annotations

import argparse
import re

from eaglekit.cli._dumps import DUMP_ONLY, add_dump_options, check_sources
from eaglekit.cli.common import (NEW_TOKENS, SEED, STEPS, add_json_option, add_remote_options, add_trust_remote_code_option,
                                 emit, whole)

#: eaglekit.core.acceptance.curve.MAX_RESAMPLES (not imported: it pulls numpy, and `eaglekit --help` must not)
MAX_RESAMPLES = 20_000

_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9}


def number_list(text: str) -> list[float]:
    """``37K,74K,1.4M`` -> [37000.0, 74000.0, 1400000.0] (an argparse type)."""
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([kKmMbB]?)\s*", part)
        if not m:
            raise argparse.ArgumentTypeError(f"expected numbers separated by commas (37K, 1.4M allowed), got {part!r}")
        out.append(float(m.group(1)) * _SUFFIX[m.group(2).lower()])
    return out


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "acceptance-curve", help="accept length across training checkpoints, the curve in samples, and predictions",
        description="Measure each checkpoint's accept length (as `eaglekit acceptance` does, with a bootstrap interval "
                    "over prompts), fit six curve forms in training samples (3 checkpoints or more) weighted by fit, and "
                    "predict the accept length at more samples (the interval the union of the plausible forms') and "
                    "the samples needed for an accept length or a serving plan's break-even.")
    p.add_argument("checkpoints", nargs="*", metavar="CKPT",
                   help="checkpoints of one training run, in training order (local folder, hf://, https://, ssh://)")
    p.add_argument("--label", nargs="+", action="append", metavar=("NAME", "CKPT"),
                   help="a named curve: --label warm CKPT CKPT ... (repeat for curves side by side)")
    p.add_argument("--samples", type=number_list, action="append", metavar="N,N,...",
                   help="samples seen by each checkpoint (37K, 1.4M allowed); once per curve, in order. Default: read "
                        "from each checkpoint's training_state.pt (global_step) or folder name (step_N) x --batch-size")
    p.add_argument("--batch-size", type=whole(1, 1 << 24, "a batch size"), metavar="B",
                   help="samples per training step, summed over data-parallel ranks (turns steps into samples)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--target", metavar="T", help="a causal LM transformers loads (folder or Hub repo id)")
    src.add_argument("--hidden-states", metavar="DIR",
                     help="a dump folder: `eaglekit dump-hidden`'s, or SpecForge's, speculators' or Model-Optimizer's")
    p.add_argument("--prompts", metavar="FILE", help="JSONL prompts (needed with --target)")
    p.add_argument("--embeddings", metavar="LOCATION", help="with --hidden-states: the target checkpoint whose "
                   "embed_tokens the drafters use (default: the dump's target when it is a local folder)")
    p.add_argument("--max-new-tokens", type=NEW_TOKENS, default=64, metavar="N", help="greedy continuation length (64)")
    p.add_argument("--steps", type=STEPS, default=5, metavar="K", help="draft steps per cycle (5)")
    p.add_argument("--predict", type=number_list, default=[], metavar="N,N,...",
                   help="sample counts to predict the accept length at")
    p.add_argument("--reach", type=number_list, default=[], metavar="AL,AL,...",
                   help="accept lengths to find the samples for")
    p.add_argument("--break-even", type=float, metavar="AL", help="the break-even accept length at K (from the account)")
    p.add_argument("--plan", metavar="PLAN.json",
                   help="an `eaglekit plan --json` file: its break-even at K for each batch size, and its best tok/s")
    p.add_argument("--compare", nargs=3, metavar=("CANDIDATE", "BASELINE", "N"),
                   help="the seed's question in two sentences, as notebook 06 ends: with N samples (37K allowed), does "
                        "curve CANDIDATE (a warm start) reach the break-even, and how many samples would BASELINE (from "
                        "scratch) need; needs --break-even or --plan and two --label curves")
    p.add_argument("--family", choices=("average", "loglogistic", "power", "exp", "loglinear", "sigmoid", "growth", "auto"),
                   default="average",
                   help="the curve: average (default: every form fitted, weighted by fit; the interval is the union of "
                        "the plausible forms' intervals, and the output says when they disagree), or one form: "
                        "log-logistic from 1 to a ceiling, power law or exponential toward a ceiling, straight in log "
                        "samples, a logistic in log samples from a fitted floor to the cap, a power rise from a fitted "
                        "floor; or auto (the one form with the lowest error predicting each next checkpoint)")
    p.add_argument("--bootstrap-seed", type=SEED, default=0, metavar="S", help="seed of the fit's bootstrap (0)")
    p.add_argument("--resamples", type=whole(100, MAX_RESAMPLES, "a resample count"), default=1000, metavar="R",
                   help=f"bootstrap resamples of the fit (1000; 100 to {MAX_RESAMPLES:,})")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    add_json_option(p)
    add_dump_options(p)
    add_remote_options(p)
    add_trust_remote_code_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.acceptance.curve import acceptance_curve
    from eaglekit.core.errors import InputError

    if args.checkpoints and args.label:
        raise InputError("give the checkpoints of one curve as arguments, or every curve with --label NAME CKPT ...; "
                         "not both.")
    if not args.checkpoints and not args.label:
        raise InputError("give the checkpoints of a training run (CKPT CKPT ...) or --label NAME CKPT ...")
    series = {}
    for group in args.label or ():
        if len(group) < 2:
            raise InputError(f"--label {group[0]} names no checkpoint: --label NAME CKPT [CKPT ...]")
        if group[0] in series:
            raise InputError(f"--label {group[0]} is given twice; give each curve once.")
        series[group[0]] = group[1:]
    if not series:
        series = {"checkpoints": list(args.checkpoints)}
    samples = None
    if args.samples:
        if len(args.samples) != len(series):
            raise InputError(f"--samples given {len(args.samples)} times for {len(series)} curves: give it once per "
                             "curve, in the order of the curves (or read samples from the checkpoints).")
        samples = dict(zip(series, args.samples))
    compare = None
    if args.compare:
        if args.break_even is None and args.plan is None:
            raise InputError("--compare judges against a break-even: give --break-even AL or --plan PLAN.json.")
        missing = [n for n in args.compare[:2] if n not in series]
        if missing:
            raise InputError(f"--compare names {missing[0]!r}, not a curve: name two of the --label curves "
                             f"({', '.join(series)}).")
        try:
            (at,) = number_list(args.compare[2])
        except (argparse.ArgumentTypeError, ValueError) as e:
            raise InputError(f"--compare N: expected one sample count (37K allowed), got {args.compare[2]!r}.") from e
        if not 0 < at < float("inf"):
            raise InputError(f"--compare N: the sample count must be a positive number (37K allowed), got "
                             f"{args.compare[2]!r}.")
        compare = (args.compare[0], args.compare[1], at)
    training_dump = check_sources(args)
    dump: dict = {}
    if training_dump:
        if args.target_head is None:
            raise InputError("--hidden-states with a training pipeline's dump needs --target-head LOCATION: the target "
                             "checkpoint whose final norm and lm_head give the target's next tokens.")
        dump = {k: getattr(args, k) for k in DUMP_ONLY if k not in ("target_head", "seed")}
        dump["sample_seed"] = args.seed   # --seed draws --sample's files; the curve's own seed is --bootstrap-seed
        dump["dump_format"] = None if args.dump_format == "auto" else args.dump_format
    result = acceptance_curve(
        series, samples=samples, batch_size=args.batch_size, target=args.target, prompts=args.prompts,
        hidden_states=args.hidden_states, target_head=args.target_head if training_dump else None, steps=args.steps,
        max_new_tokens=args.max_new_tokens, predict=args.predict, reach=args.reach, break_even=args.break_even,
        plan=args.plan, family=args.family, seed=args.bootstrap_seed, resamples=args.resamples, device=args.device,
        dtype=args.dtype, embeddings=args.embeddings, endpoint=args.endpoint, timeout=args.timeout,
        trust_remote_code=args.trust_remote_code, **dump)
    if compare is not None:
        result = result.with_comparison(compare[0], compare[1], samples=compare[2], break_even=args.break_even)
    emit(result, args)
    return 0
