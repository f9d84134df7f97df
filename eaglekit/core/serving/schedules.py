"""Speculative-token schedules engines read, each written from one plan's choices (:class:`PlanChoices`).

Every writer encodes the plan's best k at every planned (batch size, context length) cell exactly, or refuses with
an :class:`~eaglekit.core.errors.InputError` saying why the engine's format cannot hold it. Each was checked against
the engine's own parser (tests/serving/test_schedules.py carries faithful copies, sources named there and in
docs/serving-plan.md):

* vLLM ``num_speculative_tokens_per_batch_size`` (vllm-project/vllm ``vllm/v1/spec_decode/dynamic/utils.py``):
  inclusive ``[bs_lo, bs_hi, k]`` ranges, first at 1, gaps and the tail carrying the previous k; with several
  contexts the 5-item ``[bs_lo, bs_hi, ctx_lo, ctx_hi, k]`` grid of the (batch, context) schedule (the same file at
  commit 14b450ca; RFC #48627, PR #48944, which also names the field ``speculative_token_schedule``).
* vLLM's synthetic acceptance for ``vllm bench`` (``vllm/config/speculative.py``, ``rejection_sample_method:
  "synthetic"``): ``synthetic_acceptance_rates``, one **marginal** rate per position (entry i = P(the first i + 1
  drafts all accepted)), length ``num_speculative_tokens``, non-increasing.
* TensorRT-LLM ``draft_len_schedule`` (NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py`` validator and
  ``tensorrt_llm/_torch/speculative/utils.py`` ``get_draft_len_for_batch_size``): ``{batch: k}``, each key the
  LAST batch size of its range, the smallest key's k equal to ``max_draft_len``, batch sizes past the largest key
  not speculating. It has no context axis: one schedule per context.
* SGLang has no schedule: one set of launch flags per batch range (``--speculative-num-steps``, ``-eagle-topk``,
  ``-num-draft-tokens``, ``--max-running-requests``), for a router that sends each load to its server.
* The per-position profile in both conventions: **conditional** ``c_j`` = P(step j accepted | steps 1..j-1
  accepted) (EAGLE papers, SpecForge, eaglekit's per-step acceptance) and **marginal** ``p_j = c_1 ... c_j`` (vLLM's
  per-position acceptance rate and its synthetic rates). Accept length = 1 + sum of the marginal rates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from eaglekit.core.errors import InputError

ScheduleFormat = Literal["vllm", "vllm-bench", "trtllm", "sglang", "profile"]
FORMATS: tuple[str, ...] = ("vllm", "vllm-bench", "trtllm", "sglang", "profile")


@dataclass(frozen=True)
class PlanChoices:
    """A plan's choices: ``steps[c][b]`` is the best k at ``contexts[c]`` and ``batches[b]``; ``per_step[c]`` the
    conditional per-step acceptance at ``contexts[c]`` (what the profiles are written from)."""

    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    steps: tuple[tuple[int, ...], ...]
    per_step: tuple[tuple[float, ...], ...]
    method: str = "eagle3"

    def __post_init__(self) -> None:
        if not self.batches or any(b < 1 for b in self.batches) or list(self.batches) != sorted(set(self.batches)):
            raise InputError(f"a schedule needs rising batch sizes >= 1, got {list(self.batches)}.")
        if not self.contexts or any(c < 1 for c in self.contexts) or list(self.contexts) != sorted(set(self.contexts)):
            raise InputError(f"a schedule needs rising context lengths >= 1, got {list(self.contexts)}.")
        if len(self.steps) != len(self.contexts) or any(len(row) != len(self.batches) for row in self.steps):
            raise InputError("a schedule needs one best k per (context, batch size) cell.")
        if len(self.per_step) != len(self.contexts):
            raise InputError("a schedule needs one per-step acceptance profile per context.")

    def at(self, context: int) -> int:
        """The index of ``context`` among the planned ones."""
        if context not in self.contexts:
            raise InputError(f"context {context} was not planned; planned: {', '.join(map(str, self.contexts))}.")
        return self.contexts.index(context)

    @property
    def max_steps(self) -> int:
        return max(max(row) for row in self.steps)


def batch_ranges(batches: Sequence[int], steps: Sequence[int]) -> list[tuple[int, int, int]]:
    """Contiguous inclusive ranges ``(lo, hi, k)``: planned size b_i's k holds from b_i to b_(i+1) - 1 (the first
    from 1, the last to the largest planned size), equal neighbours merged."""
    out: list[list[int]] = []
    for i, (b, k) in enumerate(zip(batches, steps)):
        lo = 1 if i == 0 else b
        hi = batches[i + 1] - 1 if i + 1 < len(batches) else b
        if out and out[-1][2] == k:
            out[-1][1] = hi
        else:
            out.append([lo, hi, k])
    return [(lo, hi, k) for lo, hi, k in out]


def context_ranges(contexts: Sequence[int]) -> list[tuple[int, int]]:
    """Contiguous context buckets: a context in ``(c_(i-1), c_i]`` takes the plan at ``c_i`` (the first from 1)."""
    return [(1 if i == 0 else contexts[i - 1] + 1, c) for i, c in enumerate(contexts)]


def _needs_speculation(choices: PlanChoices) -> int:
    k = choices.max_steps
    if k == 0:
        raise InputError("speculation pays in no planned cell (the best k is 0 everywhere): serve without a "
                         "speculative config.")
    return k


def vllm_schedule(choices: PlanChoices) -> dict[str, Any]:
    """vLLM's ``--speculative-config`` keys: ``num_speculative_tokens`` (the largest k) and
    ``num_speculative_tokens_per_batch_size``: 3-item ranges for one context, the 5-item (batch, context) grid for
    several (every context shares the same batch ranges, as vLLM requires)."""
    k_max = _needs_speculation(choices)
    if len(choices.contexts) == 1:
        table = [list(r) for r in batch_ranges(choices.batches, choices.steps[0])]
    else:
        cuts = sorted({lo for row in choices.steps for lo, _, _ in batch_ranges(choices.batches, row)})
        ends = [c - 1 for c in cuts[1:]] + [choices.batches[-1]]
        table = []
        for lo, hi in zip(cuts, ends):
            b = max(i for i, size in enumerate(choices.batches) if size <= max(lo, choices.batches[0]))
            for (clo, chi), row in zip(context_ranges(choices.contexts), choices.steps):
                table.append([lo, hi, clo, chi, row[b]])
    return {"method": choices.method, "num_speculative_tokens": k_max, "num_speculative_tokens_per_batch_size": table}


def marginal(per_step: Sequence[float], k: int) -> list[float]:
    """``p_j = c_1 ... c_j`` for j = 1..k (steps past the profile repeat its last one)."""
    out, run = [], 1.0
    for j in range(k):
        run *= per_step[min(j, len(per_step) - 1)]
        out.append(run)
    return out


def vllm_bench(choices: PlanChoices, context: int) -> dict[str, Any]:
    """vLLM's ``--speculative-config`` for ``vllm bench`` at the acceptance the plan assumes at ``context``:
    ``rejection_sample_method: "synthetic"`` with the marginal per-position rates up to the largest k at that
    context (a benchmark, never a served config: synthetic acceptance emits wrong tokens)."""
    c = choices.at(context)
    k = max(choices.steps[c])
    if k == 0:
        raise InputError(f"at context {context} speculation pays at no planned batch size: nothing to benchmark.")
    return {"method": choices.method, "num_speculative_tokens": k, "rejection_sample_method": "synthetic",
            "synthetic_acceptance_rates": [round(p, 6) for p in marginal(choices.per_step[c], k)]}


def trtllm_schedule(choices: PlanChoices, context: int) -> dict[str, Any]:
    """TensorRT-LLM's ``max_draft_len`` and ``draft_len_schedule`` at ``context``: ``{last batch of the range: k}``
    (keys as JSON strings; pydantic reads them as ints); past the largest planned batch size TensorRT-LLM stops
    speculating. Refused where the smallest batch range's k is not the largest (TensorRT-LLM requires it)."""
    c = choices.at(context)
    ranges = batch_ranges(choices.batches, choices.steps[c])
    first = ranges[0][2]
    if first == 0:
        raise InputError(f"at context {context} speculation does not pay at batch size 1: TensorRT-LLM's "
                         "draft_len_schedule must start with max_draft_len > 0; serve without speculation there.")
    if any(k > first for _, _, k in ranges):
        raise InputError(f"at context {context} the plan drafts more at a larger batch size "
                         f"({max(k for *_, k in ranges)}) than at batch size 1 ({first}): TensorRT-LLM requires the "
                         "smallest batch range to use max_draft_len, so its draft_len_schedule cannot hold this plan.")
    return {"max_draft_len": first, "draft_len_schedule": {str(hi): k for _, hi, k in ranges}}


def sglang_flags(choices: PlanChoices, context: int, *, algorithm: str = "EAGLE3") -> list[dict[str, Any]]:
    """SGLang launch flags per batch range at ``context``: a chain of k steps is ``--speculative-num-steps k
    --speculative-eagle-topk 1 --speculative-num-draft-tokens k+1``; k = 0 runs without speculation;
    ``--max-running-requests`` caps each server at its range's last batch size."""
    out = []
    for lo, hi, k in batch_ranges(choices.batches, choices.steps[choices.at(context)]):
        flags = ["--max-running-requests", str(hi)]
        if k:
            flags = ["--speculative-algorithm", algorithm, "--speculative-num-steps", str(k),
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(k + 1), *flags]
        out.append({"batch_from": lo, "batch_to": hi, "steps": k, "flags": flags})
    return out


def profile(choices: PlanChoices, context: int) -> dict[str, Any]:
    """The per-position acceptance at ``context`` in both conventions, up to the largest k planned there."""
    c = choices.at(context)
    per_step = choices.per_step[c]
    k = max(max(choices.steps[c]), len(per_step))
    cond = [per_step[min(j, len(per_step) - 1)] for j in range(k)]
    marg = marginal(per_step, k)
    return {"context": context, "conditional": cond, "marginal": marg, "accept_length": 1 + math.fsum(marg),
            "conventions": {"conditional": "P(step j accepted | steps 1..j-1 accepted): EAGLE, SpecForge, eaglekit",
                            "marginal": "P(steps 1..j all accepted): vLLM's per-position acceptance rate and "
                                        "synthetic_acceptance_rates"}}


def write_schedule(choices: PlanChoices, fmt: str, *, context: int | None = None) -> Any:
    """The schedule in ``fmt`` (:data:`FORMATS`): one object, or ``{context: object}`` for the formats without a
    context axis (``context``: that one context's object alone)."""
    if fmt == "vllm":
        return vllm_schedule(choices)
    writers = {"vllm-bench": vllm_bench, "trtllm": trtllm_schedule, "sglang": sglang_flags, "profile": profile}
    if fmt not in writers:
        raise InputError(f"unknown schedule format {fmt!r}: choose one of {', '.join(FORMATS)}.")
    if context is not None:
        return writers[fmt](choices, context)
    return {str(c): writers[fmt](choices, c) for c in choices.contexts}
