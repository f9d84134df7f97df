"""``eaglekit plan --contexts C1,C2,... [--schedule-format FORMAT]``: the plan by (batch size, context length) and
the schedules engines read (:mod:`eaglekit.analysis.serving.context_plan`, :mod:`eaglekit.core.serving.schedules`)."""

from __future__ import annotations

import argparse
from typing import Any

from eaglekit.cli.common import emit, print_json
from eaglekit.core.serving.schedules import FORMATS


def add_context_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("plan by context length, and engine schedules")
    g.add_argument("--contexts", default=None, metavar="C1,C2,...",
                   help="plan at each of these context lengths (costs from the cost model at each; the acceptance "
                        "from an `eaglekit acceptance --by-position N --json` result's buckets): the best k per "
                        "(batch, context) cell with its interval and verdict")
    g.add_argument("--schedule-format", choices=FORMATS, default=None,
                   help="print the schedule an engine reads, written from the plan: vLLM's "
                        "num_speculative_tokens_per_batch_size (a (batch, context) grid with --contexts), vllm bench's "
                        "synthetic acceptance rates, TensorRT-LLM's draft_len_schedule, SGLang flags per batch range, "
                        "or the per-position profile (conditional and marginal)")


def run_by_context(args: argparse.Namespace, acceptance: Any, plan_args: dict[str, Any]) -> int:
    from dataclasses import replace

    from eaglekit.analysis.serving.context_plan import plan_by_context
    from eaglekit.core.errors import InputError
    from eaglekit.core.serving.context import acceptance_at_contexts, check_contexts
    from eaglekit.core.serving.schedules import write_schedule

    contexts = check_contexts(_contexts(args.contexts) if args.contexts else (args.context,))
    if len(contexts) > 1 and args.target is None:
        raise InputError("--contexts prices the verify at each context length with the cost model: give --target "
                         "(and --gpu, or --costs measured at one context that the model's KV read then scales).")
    if isinstance(acceptance, list):
        raise InputError("--contexts plans one EAGLE-3 drafter; drop the block drafters' --acceptance results.")
    per_context = [acceptance] * len(contexts)
    by_position = _by_position(args)
    if by_position is not None and acceptance is not None:
        per_context = acceptance_at_contexts(by_position, contexts, what=args.acceptance[0])
    elif acceptance is not None and len(contexts) > 1:
        per_context = [replace(acceptance, source=f"{acceptance.source}; over all positions, the same at every "
                               "context (measure with --by-position to plan with acceptance by context)")] * len(contexts)
    grid = plan_by_context(per_context, contexts, **plan_args)
    if args.schedule_format is None:
        emit(grid, args)
        return 0
    print_json(write_schedule(grid.choices(), args.schedule_format))
    return 0


def _contexts(text: str) -> tuple[int, ...]:
    from eaglekit.core.errors import InputError

    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or len(part) > 12:
            raise InputError(f"--contexts: {part[:40]!r} is not a context length (give e.g. 2048,16384,65536)")
        out.append(int(part))
    return tuple(out)


def _by_position(args: argparse.Namespace):
    """The ``--acceptance`` result's JSON when it holds accept length by position, else None."""
    from pathlib import Path

    from eaglekit.core import safejson
    from eaglekit.core.errors import InputError

    if len(args.acceptance) != 1:
        return None
    path = Path(args.acceptance[0])
    try:
        data = safejson.loads(path.read_bytes(), what=str(path), error=InputError)
    except OSError:
        return None
    return data if isinstance(data, dict) and "by_position" in data else None
