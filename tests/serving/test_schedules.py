"""The schedules eaglekit writes, each read back by a faithful copy of the engine's own parser, and checked to give
the plan's best k at every planned (batch size, context length) cell.

Sources of the copies (kept to the lines that parse and look up; error texts as the engines write them):

* vLLM: vllm-project/vllm ``vllm/v1/spec_decode/dynamic/utils.py`` at commit 14b450ca590cbff96e7004bdb147a5d3acf5a4f6
  (``validate_and_normalize_dynamic_sd_schedule``, ``build_dynamic_sd_schedule_lookup``, ``DynamicSDLookup.bucket_of``:
  3-item and 5-item (batch, context) entries), and ``vllm/config/speculative.py``
  (``SpeculativeConfig._resolve_synthetic_acceptance_rates``).
* TensorRT-LLM: NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py`` at commit 0004396720054fd8e205cbf616f21f0b57c6b412
  (``DecodingBaseConfig.validate_draft_len_schedule_and_sort``) and ``tensorrt_llm/_torch/speculative/utils.py`` at
  commit 011d0933dcb5e592f5fa2626beaf42a96324c578 (``get_draft_len_for_batch_size``).
* SGLang: sgl-project/sglang ``python/sglang/srt/server_args.py`` (the ``--speculative-*`` and
  ``--max-running-requests`` arguments, and the rule that ``speculative_eagle_topk == 1`` forces
  ``speculative_num_draft_tokens = speculative_num_steps + 1``).
"""

from __future__ import annotations

import argparse
import json
from bisect import bisect_left
from typing import NamedTuple

import pytest

from eaglekit.core.errors import InputError
from eaglekit.core.serving.schedules import (PlanChoices, marginal, profile, sglang_flags, trtllm_schedule,
                                             vllm_bench, vllm_schedule, write_schedule)

# -- vLLM: vllm/v1/spec_decode/dynamic/utils.py (commit 14b450ca) -----------------------------------------------
_CTX_INFINITY = 2**31 - 1


class DynamicSDLookup(NamedTuple):
    dense: list[list[int]]
    ctx_boundaries: list[tuple[int, int]]

    def bucket_of(self, ctx_value: int) -> int:
        for i, (_, hi) in enumerate(self.ctx_boundaries):
            if ctx_value <= hi:
                return i
        return len(self.ctx_boundaries) - 1


def validate_and_normalize_dynamic_sd_schedule(speculative_token_schedule):
    if speculative_token_schedule is None:
        raise ValueError("speculative_token_schedule is required for dynamic speculative decoding.")
    if not isinstance(speculative_token_schedule, list):
        raise ValueError("speculative_token_schedule must be a non-empty list of 3-item or 5-item entries.")
    if not speculative_token_schedule:
        raise ValueError("speculative_token_schedule must not be empty.")
    arities, parsed = set(), []
    for entry in speculative_token_schedule:
        if not isinstance(entry, list | tuple) or len(entry) not in (3, 5):
            raise ValueError("Each speculative_token_schedule entry must be a 3-item or a 5-item sequence.")
        arities.add(len(entry))
        if len(entry) == 3:
            bs_lo, bs_hi, k = int(entry[0]), int(entry[1]), int(entry[2])
            ctx_lo, ctx_hi = 1, _CTX_INFINITY
        else:
            bs_lo, bs_hi, ctx_lo, ctx_hi, k = (int(x) for x in entry)
        if bs_lo <= 0 or bs_hi <= 0:
            raise ValueError(f"Batch-size range ({bs_lo}, {bs_hi}) must be positive.")
        if bs_lo > bs_hi:
            raise ValueError(f"Batch-size range start must be <= end for ({bs_lo}, {bs_hi}, ..., {k}).")
        if ctx_lo <= 0 or ctx_hi <= 0:
            raise ValueError(f"Context range ({ctx_lo}, {ctx_hi}) must be positive.")
        if ctx_lo > ctx_hi:
            raise ValueError(f"Context range start must be <= end for ({bs_lo}, {bs_hi}, {ctx_lo}, {ctx_hi}, {k}).")
        if k < 0:
            raise ValueError("speculative_token_schedule K values must be >= 0.")
        parsed.append((bs_lo, bs_hi, ctx_lo, ctx_hi, k))
    if len(arities) > 1:
        raise ValueError("speculative_token_schedule entries must all be 3-item or all 5-item.")
    bs_ranges = sorted({(bs_lo, bs_hi) for bs_lo, bs_hi, *_ in parsed})
    prev_bs_end = 0
    for bs_lo, bs_hi in bs_ranges:
        if bs_lo <= prev_bs_end:
            raise ValueError("Batch-size ranges must be non-overlapping and sorted.")
        prev_bs_end = bs_hi
    if bs_ranges[0][0] != 1:
        raise ValueError("The first batch-size range must start at 1 so every runtime batch size has a defined "
                         "schedule.")
    ctx_ranges = sorted({(ctx_lo, ctx_hi) for _, _, ctx_lo, ctx_hi, _ in parsed})
    if len(parsed) != len(bs_ranges) * len(ctx_ranges):
        raise ValueError("speculative_token_schedule must form a rectangular (batch_size x context) grid.")
    if ctx_ranges[0][0] != 1:
        raise ValueError("The first context range must start at 1 so every runtime context length has a defined "
                         "bucket.")
    for i in range(1, len(ctx_ranges)):
        if ctx_ranges[i][0] != ctx_ranges[i - 1][1] + 1:
            raise ValueError("Context ranges must be contiguous with no gaps.")
    last_ctx_lo, _ = ctx_ranges[-1]
    ctx_ranges[-1] = (last_ctx_lo, _CTX_INFINITY)
    ctx_hi_by_lo = {lo: hi for lo, hi in ctx_ranges}
    normalized, seen = [], set()
    for bs_lo, bs_hi, ctx_lo, _, k in parsed:
        key = (bs_lo, bs_hi, ctx_lo)
        if key in seen:
            raise ValueError(f"Duplicate schedule cell for (bs=[{bs_lo},{bs_hi}], ctx_lo={ctx_lo}).")
        seen.add(key)
        normalized.append((bs_lo, bs_hi, ctx_lo, ctx_hi_by_lo[ctx_lo], k))
    normalized.sort(key=lambda e: (e[0], e[2]))
    return normalized


def build_dynamic_sd_schedule_lookup(speculative_token_schedule, vllm_max_batch_size, vllm_num_speculative_tokens):
    if vllm_max_batch_size <= 0:
        raise ValueError("vllm_max_batch_size must be > 0.")
    if vllm_num_speculative_tokens <= 0:
        raise ValueError("vllm_num_speculative_tokens must be > 0.")
    normalized = validate_and_normalize_dynamic_sd_schedule(speculative_token_schedule)
    ctx_boundaries = sorted({(ctx_lo, ctx_hi) for _, _, ctx_lo, ctx_hi, _ in normalized})
    ctx_index = {r: i for i, r in enumerate(ctx_boundaries)}
    per_ctx = [[] for _ in ctx_boundaries]
    for bs_lo, bs_hi, ctx_lo, ctx_hi, k in normalized:
        per_ctx[ctx_index[(ctx_lo, ctx_hi)]].append((bs_lo, bs_hi, k))
    dense = [[0] * len(ctx_boundaries) for _ in range(vllm_max_batch_size + 1)]
    for c, entries in enumerate(per_ctx):
        entries.sort(key=lambda e: e[0])
        next_bs, last_k = 1, None
        for bs_lo, bs_hi, k in entries:
            if bs_lo > next_bs and last_k is not None:
                for bs in range(next_bs, min(bs_lo, vllm_max_batch_size + 1)):
                    dense[bs][c] = min(vllm_num_speculative_tokens, last_k)
            for bs in range(max(bs_lo, next_bs), min(bs_hi, vllm_max_batch_size) + 1):
                dense[bs][c] = min(vllm_num_speculative_tokens, k)
            next_bs = max(next_bs, bs_hi + 1)
            last_k = k
            if next_bs > vllm_max_batch_size:
                break
        if last_k is not None:
            for bs in range(next_bs, vllm_max_batch_size + 1):
                dense[bs][c] = min(vllm_num_speculative_tokens, last_k)
    return DynamicSDLookup(dense=dense, ctx_boundaries=ctx_boundaries)


# -- vLLM: vllm/config/speculative.py SpeculativeConfig._resolve_synthetic_acceptance_rates ------------------------
def resolve_synthetic_acceptance_rates(n, rates, length):
    if (rates is None) == (length is None):
        raise ValueError("rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates or "
                         "synthetic_acceptance_length.")
    if len(rates) != n:
        raise ValueError(f"synthetic_acceptance_rates must have length {n}, got {rates}.")
    if not all(0.0 <= r <= 1.0 for r in rates):
        raise ValueError(f"synthetic_acceptance_rates entries must be in [0, 1], got {rates}.")
    if any(rates[i] > rates[i - 1] for i in range(1, n)):
        raise ValueError(f"synthetic_acceptance_rates must be non-increasing, got {rates}.")
    return list(rates)


# -- TensorRT-LLM: llm_args.py validator, _torch/speculative/utils.py lookup ------------------------------------------
def validate_draft_len_schedule_and_sort(v, max_draft_len):
    if v is not None:
        for batch_size, draft_len in v.items():
            if batch_size < 1:
                raise ValueError(f"draft_len_schedule: batch size threshold must be >= 1, got {batch_size}")
            if draft_len < 0:
                raise ValueError(f"draft_len_schedule: draft length must be >= 0, got {draft_len}")
        smallest_batch_size = min(v.keys())
        if max_draft_len is not None and v[smallest_batch_size] != max_draft_len:
            raise ValueError(f"draft_len_schedule[{smallest_batch_size}] must equal max_draft_len because it is the "
                             "smallest batch-size key.")
        if max_draft_len is not None:
            for batch_size, draft_len in v.items():
                if draft_len > max_draft_len:
                    raise ValueError("draft_len_schedule: all draft lengths must be <= max_draft_len.")
        return dict(sorted(v.items(), key=lambda x: x[0]))
    return v


def get_draft_len_for_batch_size(draft_len_schedule, batch_size, max_draft_len, min_draft_len=0):
    if draft_len_schedule is None:
        return max_draft_len
    schedule_batch_sizes = list(draft_len_schedule.keys())
    idx = bisect_left(schedule_batch_sizes, batch_size)
    if idx < len(schedule_batch_sizes):
        return max(draft_len_schedule[schedule_batch_sizes[idx]], min_draft_len)
    return min_draft_len


def trtllm_parse(config):
    """TensorRT-LLM reads the YAML/JSON through pydantic: a ``dict[int, int]`` field (string keys become ints)."""
    schedule = {int(b): int(k) for b, k in config["draft_len_schedule"].items()}
    return validate_draft_len_schedule_and_sort(schedule, config["max_draft_len"])


# -- SGLang: server_args.py arguments ----------------------------------------------------------------------------------
def sglang_parser():
    p = argparse.ArgumentParser(exit_on_error=False)
    p.add_argument("--speculative-algorithm", type=str)
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--max-running-requests", type=int)
    return p


# -- the plans ---------------------------------------------------------------------------------------------------
BATCHES = (1, 2, 4, 8, 16, 32, 64)
#: best k per (context, batch): long contexts cost more per verify, so k falls sooner with batch size
GRID = PlanChoices(BATCHES, (2048, 16384, 65536),
                   ((5, 5, 4, 4, 3, 2, 1), (4, 4, 4, 3, 2, 0, 0), (2, 2, 1, 0, 0, 0, 0)),
                   ((0.8, 0.75, 0.7), (0.7, 0.65, 0.6), (0.5, 0.4, 0.3)))


def test_vllm_grid_is_read_back_cell_for_cell():
    cfg = vllm_schedule(GRID)
    table = json.loads(json.dumps(cfg))["num_speculative_tokens_per_batch_size"]
    assert all(len(e) == 5 for e in table)
    lookup = build_dynamic_sd_schedule_lookup(table, 128, cfg["num_speculative_tokens"])
    for c, ctx in enumerate(GRID.contexts):
        bucket = lookup.bucket_of(ctx)
        assert bucket == c
        for b, size in enumerate(BATCHES):
            assert lookup.dense[size][bucket] == GRID.steps[c][b], (ctx, size)
        # between planned sizes the smaller planned size's choice holds (vLLM carries the previous k)
        assert lookup.dense[5][bucket] == GRID.steps[c][2] and lookup.dense[100][bucket] == GRID.steps[c][-1]
    assert lookup.dense[1][lookup.bucket_of(2049)] == GRID.steps[1][0]     # just past 2k: the 16k plan


def test_vllm_one_context_writes_the_three_item_form():
    one = PlanChoices(BATCHES, (4096,), ((4, 4, 3, 3, 1, 0, 0),), ((0.8,),))
    cfg = vllm_schedule(one)
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [4, 15, 3], [16, 31, 1], [32, 64, 0]]
    lookup = build_dynamic_sd_schedule_lookup(cfg["num_speculative_tokens_per_batch_size"], 64, 4)
    assert [lookup.dense[b][0] for b in BATCHES] == list(one.steps[0])


def test_vllm_bench_rates_are_marginal_and_accepted():
    for ctx in GRID.contexts:
        cfg = vllm_bench(GRID, ctx)
        rates = cfg["synthetic_acceptance_rates"]
        assert resolve_synthetic_acceptance_rates(cfg["num_speculative_tokens"], rates, None) == rates
        c = GRID.at(ctx)
        assert cfg["num_speculative_tokens"] == max(GRID.steps[c])
        assert rates[0] == pytest.approx(GRID.per_step[c][0])
        assert rates[1] == pytest.approx(GRID.per_step[c][0] * GRID.per_step[c][1])


def test_trtllm_schedule_is_read_back_per_context():
    for c, ctx in enumerate(GRID.contexts):
        cfg = json.loads(json.dumps(trtllm_schedule(GRID, ctx)))
        schedule = trtllm_parse(cfg)
        for b, size in enumerate(BATCHES):
            assert get_draft_len_for_batch_size(schedule, size, cfg["max_draft_len"]) == GRID.steps[c][b], (ctx, size)
    rising = PlanChoices((1, 8), (4096,), ((2, 4),), ((0.8,),))
    with pytest.raises(InputError, match="smallest batch range to use max_draft_len"):
        trtllm_schedule(rising, 4096)


def test_sglang_flags_parse_and_follow_the_plan():
    for c, ctx in enumerate(GRID.contexts):
        servers = sglang_flags(GRID, ctx)
        assert servers[0]["batch_from"] == 1 and servers[-1]["batch_to"] == BATCHES[-1]
        for s in servers:
            args = sglang_parser().parse_args(s["flags"])
            assert args.max_running_requests == s["batch_to"]
            for b, size in enumerate(BATCHES):
                if s["batch_from"] <= size <= s["batch_to"]:
                    assert (args.speculative_num_steps or 0) == GRID.steps[c][b]
            if args.speculative_num_steps:
                assert args.speculative_eagle_topk == 1
                assert args.speculative_num_draft_tokens == args.speculative_num_steps + 1


def test_profile_states_both_conventions():
    p = profile(GRID, 2048)
    assert p["conditional"] == [0.8, 0.75, 0.7, 0.7, 0.7]
    assert p["marginal"] == pytest.approx(marginal(GRID.per_step[0], 5))
    assert p["accept_length"] == pytest.approx(1 + sum(p["marginal"]))
    assert "vLLM" in p["conventions"]["marginal"]
    assert set(write_schedule(GRID, "trtllm")) == {"2048", "16384", "65536"}
    with pytest.raises(InputError, match="unknown schedule format"):
        write_schedule(GRID, "tgi")
    with pytest.raises(InputError, match="serve without a speculative config"):
        vllm_schedule(PlanChoices((1,), (4096,), ((0,),), ((0.5,),)))
