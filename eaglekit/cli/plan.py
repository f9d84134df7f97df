"""``eaglekit plan``: the best draft steps per batch size, where speculation stops paying, and the engines' configs.

    eaglekit plan --per-step 0.72,0.61,0.55 --costs costs.csv [--draft-costs draft.csv] [--batch 1,2,4,8] \
        [--max-steps 8] [--json]
    eaglekit plan --acceptance result.json --target moonshotai/Kimi-K2-Instruct --gpu H200 --tp 8 \
        [--context 4096] [--calibrate 1,1,12.2 --calibrate 1,3,30]
    eaglekit plan --acceptance by-position.json --target T --gpu H200 --contexts 2048,16384,65536 \
        [--schedule-format vllm|vllm-bench|trtllm|sglang|profile]
    eaglekit plan --measured runs.csv --target llama-3.1-8b --gpu H100-SXM [--extrapolate] [--json]
    eaglekit plan --measured seed.csv --costs verify.csv --target kimi-k25-int4 --tp 8 [--verify-split per-forward]

RUNS: ``batch,steps,topk,draft_tokens,accept_length,tokens_per_s`` (steps 0: no speculation), or a bench tool's
result file (SGLang bench_speculative.py / bench_one_batch JSONL, SpecForge bench_eagle3.py JSON, ``vllm bench
serve --save-result`` JSON); :mod:`eaglekit.core.serving.runs`.

COSTS.csv: ``batch,tokens,ms``, one target forward per row (tokens 1: a decode step; k + 1: a verify of k
drafts). DRAFT.csv: ``batch,ms``, one draft step. The maths: :mod:`eaglekit.core.serving.costmodel` and
:mod:`eaglekit.core.serving.plan`; bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from eaglekit.cli._plan_context import add_context_options, run_by_context
from eaglekit.cli.common import add_json_option, add_remote_options, capped, emit, whole
from eaglekit.core.serving.costmodel import MAX_CONTEXT, MAX_TP

#: the context a plan assumes without --context (the headline says so)
DEFAULT_CONTEXT = 4096
#: the GPU whose figures a plan without --gpu takes (the headline says so)
DEFAULT_GPU = "H100-SXM"

_EPILOG = ("Accept length at k steps = 1 + sum over j <= k of the product of the first j per-step acceptances "
           "(bonus token included); cycle = target forward at k + 1 tokens + k draft steps + the per-cycle overhead; "
           "k = 0 is a decode step. Measured runs (--measured) fit the forward (steps 0) and drafting and overhead "
           "(speculative rows); every cell gets a 95% interval. Without --costs or runs the target's forward is "
           "estimated from its config (and checkpoint header) on --gpu x --tp: a roofline lower bound, calibrated "
           "by --calibrate B,N,MS. See docs/serving-plan.md.")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan", help="best draft steps per batch size, and vLLM / SGLang configs",
        description="The serving plan: per batch size and k = 0..max steps, accept length, cycle time and "
                    "tokens/s; the best k per batch size; vLLM's num_speculative_tokens_per_batch_size schedule; "
                    "SGLang flags.", epilog=_EPILOG)
    acc = p.add_mutually_exclusive_group(required=False)
    acc.add_argument("--per-step", metavar="C1,C2,...", help="per-step acceptances P(step j | steps 1..j-1)")
    p.add_argument("--acceptance", action="append", default=[], metavar="RESULT.json",
                   help="an `eaglekit acceptance --json` result (repeatable: one EAGLE-3 result, and block drafters' "
                        "results, family dflash, priced beside it)")
    p.add_argument("--block-drafter", action="append", default=[], metavar="CONFIG",
                   help="a block drafter's config.json or location, one per block --acceptance result in the same "
                        "order: sizes its block forward (layers, heads, hidden and intermediate sizes)")
    acc.add_argument("--per-position", metavar="P1,P2,...",
                     help="vLLM's per-position acceptance rates (accepted at position i / drafts)")
    acc.add_argument("--vllm-log", metavar="LOG", help="a vLLM log: its last 'Per-position acceptance rate' line")
    acc.add_argument("--accept-length", metavar="L", help="one accept length (SGLang's 'accept len') at --steps K: a "
                     "constant per-step acceptance, labelled as such")
    p.add_argument("--steps", type=capped(), default=None, metavar="K", help="the draft steps --accept-length was measured at")
    p.add_argument("--measured", action="append", default=[], metavar="RUNS",
                   help="measured runs (repeatable): CSV batch,steps,topk,draft_tokens,accept_length,tokens_per_s, or "
                        "SGLang bench_speculative.py / bench_one_batch JSONL, SpecForge bench_eagle3.py JSON, `vllm "
                        "bench serve --save-result` JSON; the fit of drafting and overhead, measured cells as measured")
    p.add_argument("--trees", metavar="TREES.json", help="tree accept lengths: {\"trees\": [{steps, topk, "
                   "draft_tokens, accept_length}, ...]}")
    p.add_argument("--extrapolate", action="store_true",
                   help="price steps past the measured acceptance (repeating its last per-step acceptance)")
    p.add_argument("--costs", metavar="COSTS.csv", help="measured target forwards: batch,tokens,ms (or SGLang "
                   "bench_one_batch --result-filename lines, .jsonl: decode steps per batch size)")
    p.add_argument("--draft-costs", metavar="DRAFT.csv",
                   help="measured draft steps: batch,ms (default: a prior sized from --drafter, or from an EAGLE-3 "
                        "drafter of the target's hidden size; never free)")
    p.add_argument("--target", metavar="CONFIG_OR_LOCATION",
                   help="the target's config.json or checkpoint (its header is read by range for bytes per expert), or "
                        "a published config: kimi-k25-int4, kimi-k2-fp8, llama-3.1-8b, qwen3-30b-a3b")
    p.add_argument("--gpu", metavar="NAME", help="GPU table entry (H100-SXM, H200, B200, ...) or custom:TBPS,BF16[,FP8[,MEMORY_GB]]")
    p.add_argument("--tp", type=whole(1, MAX_TP, "a tensor-parallel degree"), default=1, metavar="N", help="tensor-parallel degree (default 1)")
    p.add_argument("--context", type=whole(0, MAX_CONTEXT, "a context length"), default=None, metavar="TOKENS",
                   help=f"context length (default {DEFAULT_CONTEXT}, said in the headline)")
    p.add_argument("--calibrate", action="append", default=[], metavar="B,N,MS",
                   help="a measured forward (batch, tokens per request, ms) to calibrate the estimate (repeatable)")
    p.add_argument("--batch", default="1,2,4,8,16,32,64,128,256", metavar="1,2,4,...", help="batch sizes to plan")
    p.add_argument("--max-steps", type=whole(0, 16, "a number of draft steps"), default=8, metavar="K",
                   help="plan k = 0..K draft steps (default 8; past the measured acceptance only with --extrapolate)")
    p.add_argument("--drafter", default=None, metavar="LOCATION",
                   help="the drafter: named in the engine configs; with --gpu its header (read by range) sizes the "
                        "prior on the draft step from its own layer (MLA, MoE experts a row routes to); 'mtp': the "
                        "target's own MTP / NextN layer (default: an EAGLE-3 drafter of the target's hidden size)")
    p.add_argument("--verify-split", default=None, metavar="per-token|per-forward|FRACTION",
                   help="what a measured verify holds beyond bytes and FLOPs: a cost per verified token (per-token, "
                        "the default), per verify forward (per-forward: launches without CUDA graphs, all-reduces) or "
                        "this fraction per forward; where one verify cannot tell, both ends are priced beside it")
    add_context_options(p)
    add_json_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def _ints(text: str, what: str) -> tuple[int, ...]:
    from eaglekit.core.errors import InputError

    out = []
    for part in text.split(","):
        part = part.strip()
        shown = part if len(part) <= 40 else f"{part[:40]}... ({len(part):,} characters)"
        if len(part) > 40:   # no batch size has 40 digits: refused before int() (and shown cut)
            raise InputError(f"{what}: {shown!r} is not a batch size (give e.g. 1,2,4,8)")
        try:
            out.append(int(part))
        except ValueError:
            raise InputError(f"{what}: {shown!r} is not a whole number (give e.g. 1,2,4,8)") from None
    return tuple(out)


def _point(text: str):
    from eaglekit.core.serving.costmodel import Point
    from eaglekit.core.errors import InputError

    parts = [s.strip() for s in text.split(",")]
    shown = text if len(text) <= 80 else f"{text[:80]}... ({len(text):,} characters)"
    if len(parts) != 3:
        raise InputError(f"--calibrate {shown!r}: give B,N,MS (batch, tokens per request, milliseconds)")
    try:
        if max(len(x) for x in parts) > 40:   # past any measurement: refused before int() and float()
            raise ValueError
        b, n, ms = int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        raise InputError(f"--calibrate {shown!r}: B and N are whole numbers, MS a number") from None
    return Point(b, n, ms)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.serving.plan import plan, read_acceptance, split_acceptance
    from eaglekit.core.errors import InputError
    from eaglekit.core.serving.inputs import parse_numbers
    from eaglekit.core.serving.plan import Acceptance, constant_acceptance

    if args.costs is None and not args.measured and (args.target is None or args.gpu is None):
        raise InputError("give --costs COSTS.csv (batch,tokens,ms), --measured RUNS, or --target and --gpu (with --tp) "
                         "for an estimate")
    if (args.accept_length is None) != (args.steps is None):
        raise InputError("--accept-length and --steps go together: the accept length SGLang logged and the "
                         "--speculative-num-steps it ran at")
    if args.costs is not None and args.calibrate:
        raise InputError("--calibrate goes with the estimate (--target --gpu); with --costs add the points as rows")
    acceptance: Any = None
    blocks: list[Any] = []
    eagle_files: list[Any] = []
    for path in args.acceptance:
        eagle, found = split_acceptance(path)
        blocks += [b for b, _ in found]
        if isinstance(eagle, str):   # not named .json: read as an acceptance result all the same
            eagle = read_acceptance(eagle, kind="json")
        if eagle is not None:
            eagle_files.append(eagle)
    given = [name for name, v in (("--per-step", args.per_step), ("--per-position", args.per_position),
                                  ("--vllm-log", args.vllm_log), ("--accept-length", args.accept_length))
             if v is not None]
    if len(eagle_files) > 1 or (eagle_files and given) or len(given) > 1:
        raise InputError("give one EAGLE-3 acceptance (--per-step, --acceptance, --per-position, --vllm-log or "
                         "--accept-length); block drafters' --acceptance results go beside it")
    if args.block_drafter and not blocks:
        raise InputError("--block-drafter goes with a block drafter's --acceptance result (family dflash)")
    if args.per_step is not None:
        acceptance = Acceptance(parse_numbers(args.per_step, "--per-step"),
                                "--per-step; basis: P(step j accepted | steps 1..j-1 accepted) as typed")
    elif args.per_position is not None:
        acceptance = Acceptance.from_positions(
            parse_numbers(args.per_position, "--per-position"),
            source="--per-position (vLLM per-position rates); basis: accept length at k = 1 + the first k rates, "
                   "as the engine counted them at its own K")
    elif eagle_files:
        acceptance = eagle_files[0]
    elif args.vllm_log is not None:
        acceptance = read_acceptance(args.vllm_log, kind="log")
    elif args.accept_length is not None:
        (value,) = parse_numbers(args.accept_length, "--accept-length")
        acceptance = constant_acceptance(value, args.steps, source=f"--accept-length {value:g} at --steps {args.steps}")
    elif not args.measured and not blocks:
        raise InputError("give the drafter's acceptance (--per-step, --acceptance, --per-position, --vllm-log, or "
                         "--accept-length with --steps), or --measured runs with their accept lengths")
    if blocks:
        acceptance = [a for a in (acceptance,) if a is not None] + blocks
    context = DEFAULT_CONTEXT if args.context is None else args.context
    kwargs = dict(costs=args.costs, draft_costs=args.draft_costs, target=args.target, gpu=args.gpu,
                  tp=args.tp, calibrate_points=[_point(c) for c in args.calibrate],
                  batches=_ints(args.batch, "--batch"), max_steps=args.max_steps, drafter=args.drafter,
                  endpoint=args.endpoint, timeout=args.timeout, measured=args.measured or None, trees=args.trees,
                  extrapolate=args.extrapolate, verify_split=args.verify_split,
                  block_drafter=args.block_drafter or None)
    if args.contexts is not None or args.schedule_format is not None:
        return run_by_context(argparse.Namespace(**{**vars(args), "context": context}), acceptance, kwargs)
    result = plan(acceptance, context=context, **kwargs)
    assumed = [f"GPU {DEFAULT_GPU}'s figures" if args.gpu is None else "",
               f"context {DEFAULT_CONTEXT}" if args.context is None else ""]
    if any(assumed):
        result = replace(result, assumed=", ".join(a for a in assumed if a) + "; pass "
                         + "/".join(o for o, a in zip(("--gpu", "--context"), assumed) if a))
    emit(result, args)
    return 0
