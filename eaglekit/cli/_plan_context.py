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
    bounds = None
    by_position = _by_position(args)
    if by_position is not None and acceptance is not None:
        per_context = acceptance_at_contexts(by_position, contexts, what=args.acceptance[0])
        if by_position.get("by_position_by_steps"):   # each bucket's accept length carries its interval: price both ends
            bounds = list(zip(*(acceptance_at_contexts(by_position, contexts, what=args.acceptance[0], end=e)
                                for e in ("low", "high"))))
    elif acceptance is not None and len(contexts) > 1:
        per_context = [replace(acceptance, source=f"{acceptance.source}; over all positions, the same at every "
                               "context (measure with --by-position to plan with acceptance by context)")] * len(contexts)
    by_context = runs_by_context(args.measured)
    if by_context is None:
        grid = plan_by_context(per_context, contexts, acceptance_bounds=bounds, **plan_args)
    else:   # each context fitted to the runs measured there (the cost model alone where none were)
        grid = plan_by_context(per_context, contexts, acceptance_bounds=bounds, **plan_args,
                               measured_by_context={c: by_context.get(c) for c in contexts})
    if args.schedule_format is None:
        emit(grid, args)
        return 0
    print_json(write_schedule(grid.choices(), args.schedule_format))
    return 0


def runs_by_context(paths) -> dict[int, list] | None:
    """The ``--measured`` CSV rows grouped by their ``context`` column, each group parsed as runs; None when no
    file has that column (the runs then hold at every context)."""
    import csv
    import io
    from pathlib import Path

    from eaglekit.core.errors import InputError
    from eaglekit.core.serving.runs import parse_runs

    texts = [(Path(p).name, Path(p).read_text(encoding="utf-8", errors="replace")) for p in paths or ()]
    if not any("context" in (t.splitlines() or [""])[0].split(",") for _, t in texts):
        return None
    out: dict[int, list] = {}
    for name, text in texts:
        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows or "context" not in rows[0]:
            raise InputError(f"{name}: with a context column in one --measured file, give it in every one")
        groups: dict[int, list[dict[str, str]]] = {}
        for i, row in enumerate(rows, 2):
            c = (row.pop("context") or "").strip()
            if not c.isdigit() or len(c) > 9:
                raise InputError(f"{name} line {i}: context {c[:40]!r} is not a whole number of tokens")
            groups.setdefault(int(c), []).append(row)
        for c, group in groups.items():
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=list(group[0]))
            writer.writeheader()
            writer.writerows(group)
            out.setdefault(c, []).extend(parse_runs(buf.getvalue(), what=f"{name} at context {c}"))
    return out


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
