"""eaglekit.plan: the seed's deployment reproduced, measured cells used as they are, inputs from files (an
acceptance result, a vLLM log), the record's text, HTML and JSON, and bytes per expert from a header."""

from __future__ import annotations

import json

import pytest

import eaglekit
from eaglekit.analysis.serving.target import target_shape
from eaglekit.core.errors import InputError
from eaglekit.core.serving.published import KIMI_K2_FP8, KIMI_K25_INT4
from eaglekit.core.serving.plan import Cost

GOLDEN = (0.6180339887498949, 0.6180339887498949)  # accept length 2.0 at k = 2: 1 + c + c^2 = 2
SEED_COSTS = [(1, 1, 12.2), (1, 3, 30.0)]
SEED_DRAFT = {1: (2.0 / 60.0 * 1000.0 - 30.0) / 2}  # 60 tok/s at accept length 2.0: 33.3 ms cycle, 1.67 ms per step
SEED_RUNS = [(1, 0, None, None, None, 82.0), (1, 2, 1, 3, 2.0, 60.0)]  # batch, steps, topk, draft tokens, L, tok/s


@pytest.mark.parametrize("config", [KIMI_K25_INT4, KIMI_K2_FP8], ids=["k25-int4", "k2-fp8"])
def test_seed_calibration_reproduces_82_and_60_and_shows_the_verify_by_k(config):
    p = eaglekit.plan(GOLDEN, costs=SEED_COSTS, measured=SEED_RUNS, target=config, tp=8, batches=(1,),
                      extrapolate=True)
    row = p.plans[0]
    assert round(row.options[0].tokens_per_s) == 82 and row.options[0].measured
    assert row.options[2].accept_length == pytest.approx(2.0) and row.options[2].tokens_per_s == pytest.approx(60.0)
    assert row.options[2].measured and row.options[2].verify.measured and not row.options[3].verify.measured
    for o in row.options:  # every k priced with an interval around its value; the measured ones narrow
        assert o.tps.low <= o.tokens_per_s <= o.tps.high and o.gain.low <= o.speedup <= o.gain.high
        if not o.measured:
            assert o.tps.high / o.tps.low > 1.1
    verify = p.verify_by_steps(1)
    assert [round(r["distinct_experts"], 1) for r in verify[:4]] == [8.0, 15.8, 23.5, 31.0]
    assert all(b["verify_ms"] > a["verify_ms"] for a, b in zip(verify, verify[1:]))
    b, n, est, got = p.uncalibrated_ratio()
    assert (b, n) == (1, 3) and got == pytest.approx(30.0 / 12.2, rel=1e-3)  # decode: 12.2 ms and 82 tok/s averaged
    low, high = (1.6, 1.75) if config is KIMI_K25_INT4 else (2.1, 2.3)  # KV reads at 4096 tokens come on top
    assert low < est < high
    text = str(p)
    assert "measured 2.46x" in text and f"{est:.2f}x a decode step" in text
    assert "60.0" in text and "82.0" in text and "23.5" in text  # tok/s at k = 2 and 0; experts behind the verify
    assert p.best_steps == (0,) and p.stops_paying_at == 1  # the seed's drafter does not pay at batch 1


def test_measured_cells_are_used_as_they_are_and_the_rest_is_marked_fitted():
    costs = [(1, 1, 10.0), (1, 2, 14.0), (1, 3, 19.0), (8, 1, 13.0), (8, 3, 30.0)]
    p = eaglekit.plan((0.9, 0.8), costs=costs, target=KIMI_K2_FP8, tp=8, batches=(1, 4, 8), max_steps=3,
                      extrapolate=True)
    one, four, eight = p.plans
    assert [o.verify.ms for o in one.options[:3]] == [10.0, 14.0, 19.0]
    assert all(o.verify.measured for o in one.options[:3]) and not one.options[3].verify.measured
    assert not any(o.verify.measured for o in four.options)
    assert eight.options[0].verify == eaglekit.ServingPlan.target_ms(p, 8, 1) and eight.options[0].verify.ms == 13.0
    j = p.to_json()
    assert j["batches"][1]["fitted"] is True and not any(s["measured"] for s in j["batches"][0]["steps"])
    assert j["drafting_free"] is False and "no speculative run or draft table" in str(p)
    assert "EAGLE-3 drafter sized from" in str(p)  # drafting estimated from a drafter of the target's hidden size


def test_json_follows_the_interface():
    p = eaglekit.plan((0.8, 0.7, 0.6), target=KIMI_K25_INT4, gpu="H20", tp=8, context=2048,
                      calibrate_points=[(1, 1, 12.2)], batches=(1, 16, 256, 1024), draft_costs={1: 0.4, 256: 1.2})
    j = json.loads(json.dumps(p.to_json(), allow_nan=False))
    assert set(j) >= {"batches", "schedule", "stops_paying_at", "engine_config", "fit", "largest_batch"}
    for row in j["batches"]:
        for cell in row["steps"]:
            assert set(cell) >= {"tokens_per_s", "tokens_per_s_low", "tokens_per_s_high", "speedup", "speedup_low",
                                 "speedup_high", "measured"}
            assert cell["tokens_per_s_low"] <= cell["tokens_per_s"] <= cell["tokens_per_s_high"]
        if not row["fits"]:
            assert row["best_steps"] is None
            continue
        assert set(row) >= {"batch", "best_steps", "accept_length", "cycle_ms", "tokens_per_s",
                            "per_request_tokens_per_s", "speedup", "verdict"}
        assert row["tokens_per_s"] == pytest.approx(row["batch"] * row["per_request_tokens_per_s"])
    assert [t["term"] for t in j["fit"]["cycle"]["terms"]] == ["draft_ms", "draft_ms_per_row", "overhead_ms"]
    assert [r["row"] for r in j["fit"]["cycle"]["rows"]] == ["draft step at batch 1", "draft step at batch 256"]
    vllm = j["engine_config"]["vllm"]["speculative_config"]
    assert vllm["num_speculative_tokens"] == max(j["schedule"].values())
    if len(j["schedule"]) > 1:
        assert vllm["num_speculative_tokens_per_batch_size"] == [[int(k.split("-")[0]), int(k.split("-")[1]), v]
                                                                 for k, v in j["schedule"].items()]
    sglang = j["engine_config"]["sglang"]["ranges"]
    first = j["batches"][0]["best_steps"]
    assert f"--speculative-num-steps {first} --speculative-eagle-topk 1 --speculative-num-draft-tokens {first + 1}" \
        in sglang[0]["flags"]
    assert all((r["steps"] == 0) == (r["flags"] == "") for r in sglang)  # k = 0: no speculative flags


def test_acceptance_from_a_result_file_and_a_vllm_log(tmp_path):
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"steps": 3, "per_step_acceptance": [0.7, 0.6, None],
                                  "accept_length_by_steps": [1.7, 2.12, 2.12]}))
    p = eaglekit.plan(str(result), costs=SEED_COSTS, batches=(1,), max_steps=4)
    assert p.acceptance.per_step == (0.7, 0.6) and "measured to 3 step(s)" in str(p)
    assert p.acceptance.at(2) == 2.12 and "basis" in p.acceptance.source  # the simulated accept length, stated
    log = tmp_path / "vllm.log"
    log.write_text("INFO 12-01 10:00:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.10, "
                   "Accepted throughput: 41.2 tokens/s, Drafted throughput: 120.0 tokens/s, Accepted: 412 tokens, "
                   "Drafted: 1200 tokens, Per-position acceptance rate: 0.600, 0.330, 0.170, Avg Draft acceptance "
                   "rate: 36.7%\nINFO later: Per-position acceptance rate: 0.700, 0.420, 0.210\n")
    p = eaglekit.plan(str(log), costs=SEED_COSTS, batches=(1,))
    assert p.acceptance.per_step == pytest.approx((0.7, 0.6, 0.5))
    log.write_text("nothing here\n")
    with pytest.raises(InputError, match="Per-position acceptance rate"):
        eaglekit.plan(str(log), costs=SEED_COSTS)


def test_the_record_renders_html_with_every_k():
    p = eaglekit.plan(GOLDEN, costs=SEED_COSTS, draft_costs=SEED_DRAFT, batches=(1,))
    html = p._repr_html_()
    assert "Best k per batch size" in html and "every k at every batch size" in html and "<table" in html
    assert "<svg" in html and "k=0 1.00x" in html and "<script" not in html  # the chart draws with no script
    assert "dense target" in str(p)  # no target config: the fit is fixed + per-token, and it says so


def test_bytes_per_expert_come_from_the_header(tmp_path):
    """The demo targets in K2's FP8 and K2.5's INT4 layouts: the expert bytes are what the headers store."""
    from eaglekit.demo.targets import build_targets
    from eaglekit.io.reader import read_inventory

    build_targets(tmp_path)
    extra = {"num_experts_per_tok": 2, "num_attention_heads": 2, "qk_nope_head_dim": 16, "qk_rope_head_dim": 16,
             "v_head_dim": 16}  # what the thin demo configs leave out and the cost model's FLOPs need
    for name in ("k2-fp8", "k25-int4"):
        folder = tmp_path / "target-weights" / name
        raw = json.loads((folder / "config.json").read_text())
        body = raw.get("text_config", raw)
        body.update(extra)
        (folder / "config.json").write_text(json.dumps(raw))
        shape = target_shape(str(folder))
        inv = read_inventory(str(folder))
        expert = [t.nbytes for t in inv.tensors if ".mlp.experts.1." in t.name and ".layers.5." in t.name]
        assert shape.bytes_from == "header" and shape.expert_bytes == pytest.approx(sum(expert))
        assert shape.experts == 4 and shape.moe_layers == shape.layers - 1
    k25 = target_shape(str(tmp_path / "target-weights" / "k25-int4"))
    assert any("vision" in n for n in k25.notes)  # the vision tower is not read by a language-model forward


def test_missing_inputs_say_what_to_give():
    with pytest.raises(InputError, match="costs table.*--target, --gpu"):
        eaglekit.plan((0.8,), target=KIMI_K2_FP8)
    with pytest.raises(InputError, match="at least two"):
        eaglekit.plan((0.8,), costs=[(1, 1, 12.2)])
    with pytest.raises(InputError, match="calibration points go with the estimate"):
        eaglekit.plan((0.8,), costs=SEED_COSTS, calibrate_points=[(1, 1, 12.0)])
    one = eaglekit.plan((0.8,), costs=SEED_COSTS, draft_costs={1: 1.0}, batches=(1, 2))  # one draft row: everywhere
    assert one.plans[0].options[1].draft == Cost(1.0, True)
    assert one.plans[1].options[1].draft.ms == pytest.approx(1.0, rel=0.05) and not one.plans[1].options[1].draft.measured


def test_sglang_bench_one_batch_results_are_a_costs_table(tmp_path):
    """``python -m sglang.bench_one_batch --batch-size 1 8 64 --result-filename r.jsonl``: decode steps by batch."""
    lines = [{"run_name": "default", "batch_size": b, "input_len": 1024, "output_len": 16, "prefill_latency": 0.2,
              "median_decode_latency": s, "median_decode_throughput": b / s} for b, s in ((1, 0.0122), (8, 0.0131),
                                                                                        (64, 0.0190))]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    p = eaglekit.plan((0.8, 0.7), costs=str(path), target=KIMI_K2_FP8, tp=8, context=1024, batches=(1, 8, 64))
    assert [p.target_ms(b, 1).ms for b in (1, 8, 64)] == pytest.approx([12.2, 13.1, 19.0])
    assert all(p.target_ms(b, 1).measured for b in (1, 8, 64)) and not p.target_ms(1, 3).measured
    path.write_text(json.dumps(lines[0]) + "\n" + json.dumps({**lines[1], "input_len": 4096}) + "\n")
    with pytest.raises(InputError, match="input lengths \\[1024, 4096\\]"):
        eaglekit.plan((0.8,), costs=str(path))


def test_a_drafter_checkpoint_prices_the_draft_step_on_the_gpu_table(demo):
    """The demo's K2 drafter (EAGLE-3 layout): weights read once per step, its own KV over the context."""
    from eaglekit.io.reader import read_inventory

    drafter = str(demo.drafter("k2"))
    p = eaglekit.plan((0.8, 0.7), target=KIMI_K2_FP8, gpu="H200", tp=8, context=2048, drafter=drafter,
                      batches=(1, 64))
    inv = read_inventory(drafter)
    weights = sum(t.nbytes for t in inv.tensors if "embed_tokens" not in t.name and t.dtype not in ("I64", "BOOL"))
    step = p.plans[0].options[1].draft
    assert not step.measured and step.ms >= weights / 8 / 1e9 / 4.8  # at least its weights over the bandwidth
    assert p.plans[1].options[1].draft.ms > step.ms  # the drafter's KV over 64 requests
    assert f"prior from {p.fit.prior.source.split('prior from ')[1].split(' on ')[0]}" in str(p)
    assert p.fit.prior.mean[0] >= weights / 8 / 1e9 / 4.8
    assert p.engine_config["vllm"]["speculative_config"] is None or \
        p.engine_config["vllm"]["speculative_config"]["model"] == drafter
