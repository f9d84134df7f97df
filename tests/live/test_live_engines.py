"""`eaglekit live` against pages as the engines' own prometheus_client registries write them (issue 46 §1):
per-series differencing across engine restarts and vLLM's elastic scale-up, SGLang's per-scheduler gauges under
data parallelism and priority scheduling, SGLang's tree drafts, a fresh SGLang server, and the batch per engine.

Pages: :func:`livefixtures.vllm_registry_page` (vllm-project/vllm ``vllm/v1/metrics/loggers.py``,
``vllm/v1/spec_decode/metrics.py``) and :func:`livefixtures.sglang_registry_page` (sgl-project/sglang
``python/sglang/srt/metrics/collector.py``), written by prometheus_client itself.
"""

from __future__ import annotations

import json

import pytest
from livefixtures import sglang_registry_page, vllm_registry_page

from eaglekit.core.errors import InputError
from eaglekit.core.serving.live import difference, parse_metrics
from eaglekit.core.serving.runs import parse_runs
from eaglekit.demo.metricsserver import VllmCounters


def drafts(n: int, running: int = 8) -> VllmCounters:
    """n drafts of 3 tokens, 70%, 50%, 40% of them accepted at positions 0, 1, 2."""
    pos = (n * 7 // 10, n // 2, n * 2 // 5)
    return VllmCounters(n, 3 * n, sum(pos), pos, n + sum(pos), running)


def read(before: str, after: str):
    return difference(parse_metrics(before), parse_metrics(after), 10.0)


def test_one_engine_of_two_restarting_is_differenced_per_series():
    """Engine 0 drafts 1450; engine 1 restarts and drafts 300 from zero: 1750 (the sums' difference is 1350)."""
    r = read(vllm_registry_page({"0": drafts(1000), "1": drafts(400)}),
             vllm_registry_page({"0": drafts(2450), "1": drafts(300)}))
    assert r.drafts == 1750 and r.draft_tokens == 3 * 1750
    assert r.accepted_per_position == (2450 * 7 // 10 - 700 + 210, 1225 - 500 + 150, 980 - 400 + 120)
    assert any("reset during the window" in n and 'engine="1"' in n and 'engine="0"' not in n for n in r.notes)


def test_a_restart_already_past_its_old_count_is_told_by_created():
    """Engine 1 restarted and has drafted 600 since, more than its 400 before: its counters did not go down, but
    prometheus_client's ``_created`` timestamp of its series changed, so it counts from zero (750 + 600)."""
    r = read(vllm_registry_page({"0": drafts(1000), "1": drafts(400)}),
             vllm_registry_page({"0": drafts(1750), "1": drafts(600)}, created={"1": 1.8e9}))
    assert r.drafts == 1350 and any("reset during the window" in n and 'engine="1"' in n for n in r.notes)
    same = read(vllm_registry_page({"0": drafts(1000), "1": drafts(400)}),
                vllm_registry_page({"0": drafts(1750), "1": drafts(600)}))
    assert same.drafts == 950 and not any("reset" in n for n in same.notes)


def test_elastic_scale_up_resets_every_series_and_adds_engines():
    """vLLM re-creates its loggers on scale-up: engine 0 counts 800 from zero, engine 1 is new with 800: 1600
    drafts happened (the sums' difference is 600)."""
    r = read(vllm_registry_page({"0": drafts(1000)}),
             vllm_registry_page({"0": drafts(800), "1": drafts(800)}))
    assert r.drafts == 1600 and r.engines == 2
    assert any("reset" in n and 'engine="0"' in n for n in r.notes)
    assert any("new in the second scrape" in n and 'engine="1"' in n for n in r.notes)


def test_vllm_running_requests_are_per_engine_in_the_plan():
    """Two engines of 6 and 10 running: 16 in all, batch 8 per engine, and the plan takes the per-engine one."""
    r = read(vllm_registry_page({"0": drafts(1000, 6), "1": drafts(1000, 10)}),
             vllm_registry_page({"0": drafts(1500, 6), "1": drafts(1500, 10)}))
    j = r.to_json()
    assert (j["engines"], j["batch"], j["batch_total"], j["batch_per"]) == (2, 8, 16, "engine")
    (run,) = parse_runs(json.dumps(j), what="live.json")
    assert run.batch == 8
    assert "8.0 per engine over 2 engines" in str(r)


SCHED = dict(spec_accept_length=2.66, spec_accept_rate=0.547, spec_num_steps=3, spec_num_draft_tokens=4)


def sglang(tokens: dict | None, schedulers: dict) -> str:
    return sglang_registry_page(tokenizer=tokens, schedulers=schedulers)


BEFORE = dict(generation_tokens=10_000, requests=100, verify_calls=3_000)
#: 800 verify calls and 40 requests in the window, 1313 accepted: accept length 1 + 1313 / 800 = 2.64.
AFTER = dict(generation_tokens=10_000 + 40 + 800 + 1313, requests=140, verify_calls=3_800)


def test_sglang_gauges_under_data_parallelism_are_not_summed():
    """Two data-parallel schedulers, each exporting its own gauges: steps 3 (not 6), the accept-length gauge 2.66
    (not 5.32), 7 + 7 running requests over 2 engines."""
    both = {(0, 0): {**SCHED, "num_running_reqs": 7}, (1, 0): {**SCHED, "num_running_reqs": 7}}
    r = read(sglang(BEFORE, both), sglang(AFTER, both))
    assert r.steps == 3 and r.draft_tokens == 800 * 3
    assert r.engine_gauges["spec_accept_length"] == pytest.approx(2.66)
    assert r.engine_gauges["spec_accept_rate"] == pytest.approx(0.547)
    assert r.acceptance_rate == pytest.approx(1313 / 2400)
    assert (r.engines, r.running_requests, r.batch_per_engine) == (2, 14.0, 7.0)


def test_sglang_tensor_parallel_ranks_of_one_engine_count_once():
    """Metrics for all TP schedulers: the ranks of one engine report the same scheduler; one engine, 14 running."""
    tp = {(0, 0): {**SCHED, "num_running_reqs": 14}, (0, 1): {**SCHED, "num_running_reqs": 14}}
    r = read(sglang(BEFORE, tp), sglang(AFTER, tp))
    assert (r.engines, r.running_requests, r.steps) == (1, 14.0, 3)


def test_sglang_priority_breakdown_is_not_added_to_its_total():
    prio = {(0, 0): {**SCHED, "num_running_reqs": {"": 14, "0": 6, "1": 8}}}
    r = read(sglang(BEFORE, prio), sglang(AFTER, prio))
    assert r.running_requests == 14.0 and r.to_json()["batch"] == 14


def test_sglang_tree_drafts_count_num_draft_tokens_minus_one_per_verify():
    """3 steps, a tree of 8 draft tokens: SGLang's own rate is accepted / (verify calls x 7) = 0.234, not 0.547;
    the accept length is the same either way."""
    tree = {(0, 0): {**SCHED, "spec_num_draft_tokens": 8, "num_running_reqs": 8}}
    r = read(sglang(BEFORE, tree), sglang(AFTER, tree))
    assert r.draft_tokens == 800 * 7
    assert r.acceptance_rate == pytest.approx(1313 / 5600) and round(r.acceptance_rate, 3) == 0.234
    assert r.accept_length.value == pytest.approx(1 + 1313 / 800)
    assert r.spec_config == {"spec_num_steps": 3, "spec_num_draft_tokens": 8}


def test_a_fresh_sglang_server_counts_from_zero():
    """No request has finished at the first scrape, so no counter series yet: they count from zero."""
    gauges = {(0, 0): {**SCHED, "num_running_reqs": 4}}
    first = sglang(None, gauges)
    assert "sglang:spec_verify_calls_total{" not in first  # prometheus_client writes no series before .labels()
    r = read(first, sglang(dict(generation_tokens=2153, requests=40, verify_calls=800), gauges))
    assert (r.drafts, r.accepted_tokens, r.requests_finished) == (800, 1313, 40)
    with pytest.raises(InputError, match="no speculative request finished"):
        read(first, first)


@pytest.mark.parametrize("gauge, value, says", [
    ("spec_num_steps", 1e18, "spec_num_steps reads 1e\\+18"),
    ("spec_num_steps", 100, "from 1 to 64"),
    ("spec_num_draft_tokens", 5000, "from 1 to 1024"),
])
def test_sglang_configs_no_engine_serves_are_refused(gauge, value, says):
    bad = {(0, 0): {**SCHED, gauge: value, "num_running_reqs": 4}}
    with pytest.raises(InputError, match=says):
        read(sglang(BEFORE, bad), sglang(AFTER, bad))


def test_sglang_accepted_past_the_served_steps_is_refused():
    """3 steps: at most 3 accepted per verify."""
    one = {(0, 0): {**SCHED, "num_running_reqs": 4}}
    with pytest.raises(InputError, match="1 to 4 per verify"):
        read(sglang(BEFORE, one), sglang({**AFTER, "generation_tokens": 10_000 + 40 + 800 + 4 * 800}, one))
