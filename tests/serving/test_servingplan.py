"""The plan's maths: accept length from per-step acceptance, best k per batch size against an exhaustive
search over a grid of cost models and acceptance profiles, and vLLM's schedule round trip."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from eaglekit.core.serving.costmodel import distinct_experts
from eaglekit.core.errors import InputError
from eaglekit.core.serving.plan import (
    Acceptance,
    Cost,
    accept_length,
    expand_schedule,
    parse_schedule,
    plan_batches,
    schedule_dict,
    schedule_from_steps,
    stops_paying_at,
)

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def test_accept_length_is_one_plus_the_sum_of_running_products():
    assert accept_length((0.8, 0.5), 0) == 1.0
    assert accept_length((0.8, 0.5), 2) == pytest.approx(1 + 0.8 + 0.4)
    assert accept_length((0.8, 0.5), 4) == pytest.approx(1 + 0.8 + 0.4 + 0.2 + 0.1)  # last step repeated
    a = Acceptance((0.8, 0.5))
    assert not a.extrapolated(2) and a.extrapolated(3)


def test_per_position_rates_become_per_step_acceptance():
    a = Acceptance.from_positions([0.712, 0.503, 0.338])
    assert a.per_step == pytest.approx((0.712, 0.503 / 0.712, 0.338 / 0.503))
    assert a.at(3) == pytest.approx(1 + 0.712 + 0.503 + 0.338)  # rates sum to accept length - 1
    with pytest.raises(InputError, match="cannot rise"):
        Acceptance.from_positions([0.5, 0.6])
    with pytest.raises(InputError, match=r"in \[0, 1\]"):
        Acceptance((0.9, 1.2))


def _exhaustive(batch, steps, per_step, target, draft):
    """Every k's tokens/s at ``batch`` from the definitions, written out again."""
    out = []
    for k in range(steps + 1):
        L, run = 1.0, 1.0
        for j in range(k):
            run *= per_step[min(j, len(per_step) - 1)]
            L += run
        out.append(batch * L * 1000.0 / (target(batch, k + 1) + k * draft(batch)))
    top = max(out)
    return min(k for k, t in enumerate(out) if t >= top * (1 - 0.01)), out  # ties within 1% go to fewer steps


def _models(rng):
    """A grid of cost models: dense linear ones and MoE ones with random sizes."""
    for _ in range(12):
        fixed, per_token = rng.uniform(0, 20), rng.uniform(0.001, 2)
        yield lambda b, n, f=fixed, t=per_token: f + t * b * n
    for _ in range(12):
        e, k = rng.choice([(64, 4), (128, 8), (384, 8), (256, 8)])
        always, expert, flop = rng.uniform(1, 30), rng.uniform(0.01, 0.5), rng.uniform(0.001, 0.1)
        fixed = rng.uniform(0, 10)
        yield (lambda b, n, e=e, k=k, a=always, x=expert, c=flop, f=fixed:
               f + max(a + 60 * distinct_experts(b * n, experts=e, per_token=k) * x / 60, c * b * n))


def test_best_steps_equal_an_exhaustive_search_over_a_grid():
    rng = random.Random(20261201)
    profiles = [tuple(rng.uniform(0.2, 0.95) for _ in range(rng.randint(1, 6))) for _ in range(10)]
    profiles += [(1.0,), (0.0,), (0.9, 0.0)]
    checked = 0
    for target, per_step, draft_ms in itertools.product(list(_models(rng)), profiles, (0.0, 0.3, 2.0)):
        plans = plan_batches(BATCHES, Acceptance(per_step), lambda b, n, t=target: Cost(t(b, n), False),
                             None if draft_ms == 0 else (lambda b, d=draft_ms: Cost(d * (1 + b / 64), True)),
                             max_steps=8)
        for p in plans:
            want, tps = _exhaustive(p.batch, 8, per_step, target, lambda b, d=draft_ms: d * (1 + b / 64))
            assert p.best.steps == want, (per_step, p.batch, tps)
            assert [o.tokens_per_s for o in p.options] == pytest.approx(tps)
            checked += 1
        ranges = schedule_from_steps(BATCHES, [p.best.steps for p in plans])
        for form in (schedule_dict(ranges), [list(r) for r in ranges]):
            back = parse_schedule(json.loads(json.dumps(form)))
            assert back == ranges
            assert [expand_schedule(back, b) for b in BATCHES] == [p.best.steps for p in plans]
        stop = stops_paying_at(plans)
        zero_from = [p.batch for i, p in enumerate(plans) if all(q.best.steps == 0 for q in plans[i:])]
        assert stop == (zero_from[0] if zero_from else None)
    assert checked == 24 * 13 * 3 * len(BATCHES)


def test_schedule_ranges_start_at_one_and_gaps_inherit_the_previous_k():
    ranges = schedule_from_steps((2, 4, 16, 64, 256), (3, 3, 2, 2, 0))
    assert schedule_dict(ranges) == {"1-4": 3, "16-64": 2, "256-256": 0}
    assert expand_schedule(ranges, 10) == 3 and expand_schedule(ranges, 100) == 2 and expand_schedule(ranges, 4096) == 0
    issue = parse_schedule({"1-16": 3, "64-128": 2, "256-4096": 0})  # the issue's (and vLLM PR 32374's) example
    assert [expand_schedule(issue, b) for b in (1, 16, 32, 64, 200, 256, 9999)] == [3, 3, 3, 2, 2, 0, 0]
    for bad, match in (({"2-16": 3}, "start at batch size 1"), ({"1-16": 3, "8-32": 2}, "overlaps"),
                       ({"1-x": 3}, "expected 'N' or 'N-M'"), ({"1-4": -1}, "k must be"), ([[1, 2]], "expected")):
        with pytest.raises(InputError, match=match):
            parse_schedule(bad)


def test_fewer_steps_at_larger_batches_on_a_moe_target_and_where_speculation_stops_paying():
    """Kimi-K2.5-shaped (INT4 experts) on 8 H20s at 2048 tokens of context, a 12.2 ms decode at batch 1."""
    from eaglekit.analysis.serving.plan import plan
    from eaglekit.core.serving.published import KIMI_K25_INT4

    p = plan((0.8, 0.75, 0.7, 0.65, 0.6), target=KIMI_K25_INT4, gpu="custom:4,148,296,1000", tp=8, context=2048,
             calibrate_points=[(1, 1, 12.2)], batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
             draft_costs={1: 0.4, 256: 1.2})  # an H20 with memory enough for every batch size
    steps = dict(zip(p.batches, p.best_steps))
    assert steps[1] >= 4 and steps[256] < steps[1] and steps[512] < steps[64]
    assert list(p.best_steps) == sorted(p.best_steps, reverse=True)  # the schedule never climbs
    stop = p.stops_paying_at
    assert stop is not None and steps[1024] == 0 and f"stops paying at batch {stop}" in str(p)
    assert all(b.best.speedup >= 1 for b in p.plans)


def test_batch_sizes_that_do_not_fit_in_memory_get_no_k():
    """K2.5 on 8 H20s (96 GB) at 2048 tokens: 74 GB of weights per GPU, 144 MB of MLA cache per request."""
    from eaglekit.analysis.serving.plan import plan
    from eaglekit.core.serving.published import KIMI_K25_INT4

    p = plan((0.8, 0.75, 0.7), target=KIMI_K25_INT4, gpu="H20", tp=8, context=2048, calibrate_points=[(1, 1, 12.2)],
             batches=(1, 16, 128, 256, 1024))
    cap = p.capacity
    assert 70 < cap.weights_gb < 80  # MLA: 61 layers x 576 x bf16 per token on every rank, the drafter's cache on top
    assert 61 * 576 * 2 * 2048 / 1e9 < cap.kv_gb_per_request < 1.1 * 61 * 576 * 2 * 2048 / 1e9
    assert 64 < p.largest_batch < 128 and [b.fits for b in p.plans] == [True, True, False, False, False]
    j = p.to_json()
    assert j["batches"][3]["best_steps"] is None and j["batches"][3]["fits"] is False
    assert j["largest_batch"] == p.largest_batch and "256" not in json.dumps(j["schedule"])
    assert "do not fit" in str(p)
    with pytest.raises(InputError, match="no planned batch size fits"):
        plan((0.8,), target=KIMI_K25_INT4, gpu="H20", tp=8, context=2048, batches=(4096,)).schedule


def test_a_dense_target_takes_fewer_steps_as_batch_grows():
    from eaglekit.analysis.serving.plan import plan
    from eaglekit.core.serving.published import DENSE_LLAMA_8B

    p = plan((0.8, 0.7, 0.6), target=DENSE_LLAMA_8B, gpu="H100-SXM", tp=1, context=256,
             calibrate_points=[(1, 1, 6.0)], batches=(1, 8, 64, 256, 1024, 2048), draft_costs={1: 0.5, 1024: 2.0})
    assert list(p.best_steps) == sorted(p.best_steps, reverse=True) and p.best_steps[0] > 0
    assert p.stops_paying_at is not None


def test_a_vllm_log_line_followed_by_a_timestamp_reads_only_its_own_rates():
    from eaglekit.core.serving.inputs import acceptance_from_vllm_log

    log = "INFO Per-position acceptance rate: 0.800, 0.600\n2026-05-01 12:00:01 INFO next line\n"
    assert acceptance_from_vllm_log(log).per_step == pytest.approx((0.8, 0.75))


def test_speculation_that_pays_again_at_a_larger_batch_has_not_stopped_paying():
    from types import SimpleNamespace as NS
    plans = [NS(batch=b, fits=True, best=NS(steps=k)) for b, k in ((1, 0), (16, 0), (64, 2), (128, 0), (256, 0))]
    assert stops_paying_at(plans) == 128
    assert stops_paying_at(plans[:3]) is None
    assert stops_paying_at([*plans, NS(batch=512, fits=False, best=None)]) == 128
