"""The plan against measured runs: the readers of the engines' bench tools, the fit of drafting and the cycle's
overhead with its prior, intervals, ties and the schedule, the seed, bad and hostile rows."""

from __future__ import annotations

import json

import pytest

import eaglekit
from eaglekit.cli import main
from eaglekit.core.errors import InputError
from eaglekit.core.serving.costmodel import CostModel, Point, calibrate, estimate_model, gpu, shape_from_config
from eaglekit.core.serving.cyclefit import CycleFit, Row, draft_prior, eagle3_drafter, fit_cycle, fit_without_each
from eaglekit.core.serving.plan import Acceptance, best_steps, constant_acceptance, overlaps
from eaglekit.core.serving.published import DENSE_LLAMA_8B, KIMI_K2_TEXT, KIMI_K25_INT4
from eaglekit.core.serving.runs import merge_runs, parse_runs

HEADER = "batch,steps,topk,draft_tokens,accept_length,tokens_per_s\n"
SEED_RUNS = HEADER + "1,0,,,,82\n1,2,1,3,2.0,60\n"


def _truth(batch, k, L, *, decode=7.0, per_request=0.05, draft=1.1, overhead=0.8):
    """A synthetic engine: tok/s of a chain at batch B with k steps (the verify grows 0.2 ms per token)."""
    target = decode + per_request * batch + (0.2 * k if k else 0.0)
    cycle = target + (k * draft + overhead if k else 0.0)
    return batch * L * 1000.0 / cycle


def test_csv_and_every_bench_tool_format_read_as_runs():
    runs = parse_runs(SEED_RUNS + "4,3,4,16,2.5,300\n")
    assert [(r.batch, r.steps, r.topk, r.draft_tokens) for r in runs] == [(1, 0, 0, 0), (1, 2, 1, 3), (4, 3, 4, 16)]
    assert runs[1].cycle_ms == pytest.approx(1000 * 2.0 / 60)
    # SGLang scripts/playground/bench_speculative.py: speed is per sequence (acc_length / step_time)
    spec = [{"batch_size": 4, "steps": 0, "topk": 0, "num_draft_tokens": 0, "acc_length": 1.0, "step_time": 0.01,
             "speed": 100.0, "completion_tokens": 512.0},
            {"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.8, "step_time": 0.014,
             "speed": 200.0, "completion_tokens": 512.0}]
    got = parse_runs("\n".join(json.dumps(x) for x in spec), what="output.jsonl")
    assert [(r.steps, r.tokens_per_s, r.accept_length) for r in got] == [(0, 400.0, 1.0), (3, 800.0, 2.8)]
    # vllm bench serve --save-result (with --append-result: one object per line)
    base = {"completed": 80, "output_throughput": 140.0, "max_concurrency": 1}
    spec_v = {**base, "output_throughput": 240.0, "spec_decode_acceptance_length": 3.08, "spec_decode_num_drafts": 1000,
              "spec_decode_draft_tokens": 4000, "spec_decode_accepted_tokens": 2080}
    got = parse_runs(json.dumps(base) + "\n" + json.dumps(spec_v))
    assert [(r.steps, r.draft_tokens, r.accept_length) for r in got] == [(0, 0, 1.0), (4, 5, 3.08)]
    with pytest.raises(InputError, match="--max-concurrency"):
        parse_runs(json.dumps({**base, "max_concurrency": None}))
    # SpecForge benchmarks/bench_eagle3.py: one JSON document
    doc = {"model": "d", "mtbench": [
        {"batch_size": 1, "steps": 0, "topk": 0, "num_draft_tokens": 0, "num_samples": 20,
         "metrics": [{"latency": 10.0, "output_throughput": 222.47, "accept_length": 1.0}]},
        {"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "num_samples": 20,
         "metrics": [{"latency": 10.0, "output_throughput": 159.78, "accept_length": 1.86}]}]}
    assert [r.tokens_per_s for r in parse_runs(json.dumps(doc))] == [222.47, 159.78]
    # SGLang bench_one_batch: decode steps as baseline rows
    one = {"run_name": "default", "batch_size": 8, "input_len": 1024, "output_len": 16, "median_decode_latency": 0.0125}
    (r,) = parse_runs(json.dumps(one))
    assert (r.steps, r.tokens_per_s) == (0, pytest.approx(640.0))


@pytest.mark.parametrize("row, message", [
    ("1,0,,,,-3", "negative"), ("1,0,,,,nan", "finite"), ("1,0,,,,1e308", "outside"), ("1,0,,,,5e-324", "outside"),
    ("1,0,,,," + "9" * 400, "not a number"), ("1" * 400 + ",0,,,,80", "not a whole number"),
    ("1,2,1,3,,60", "needs its accept length"), ("1,2,1,4,2.0,60", "a chain .* verifies 3 draft tokens"),
    ("1,2,1,3,3.5,60", "outside 1..3"), ("1,2,4,40,2.0,60", "holds at most"), ("1,0,2,4,,80", "baseline row"),
    ("1,x,,,,80", "whole number"), ("1,2,1,3,2.0", "expected 6 values"),
])
def test_bad_rows_are_one_line_and_exit_2(tmp_path, capsys, row, message):
    path = tmp_path / "runs.csv"
    path.write_text(HEADER + row + "\n")
    with pytest.raises(InputError, match=message):
        parse_runs(path.read_text())
    assert main(["plan", "--measured", str(path), "--per-step", "0.7"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_hostile_numbers_in_the_other_new_inputs_are_refused(capsys):
    for args in (["--accept-length", "1e308", "--steps", "3"], ["--accept-length", "nan", "--steps", "3"],
                 ["--accept-length", "2.0"], ["--accept-length", "5e-324", "--steps", "3"]):
        assert main(["plan", "--costs", "x.csv", *args]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(InputError, match="JSON"):
        parse_runs('{"batch_size": ' + "9" * 5000 + "}")


def test_repeats_that_disagree_are_named_and_averaged():
    rs = merge_runs(parse_runs(HEADER + "1,0,,,,80\n1,0,,,,120\n1,0,,,,100\n"))
    assert len(rs.runs) == 1 and rs.runs[0].tokens_per_s == pytest.approx(100.0)
    assert rs.warnings[0].startswith("contradicting-repeats:")
    p = eaglekit.plan((0.7,), measured=parse_runs(HEADER + "1,0,,,,80\n1,0,,,,120\n4,0,,,,300\n"), batches=(1,))
    assert any(w.startswith("contradicting-repeats") for w in p.warnings) and "warning" in str(p)


def test_a_speculative_cycle_shorter_than_its_verify_is_named():
    p = eaglekit.plan(None, costs=[(1, 1, 12.2), (1, 3, 30.0)], measured=[(1, 2, 1, 3, 2.0, 90.0)], batches=(1,))
    assert any(w.startswith("cycle-shorter-than-verify") for w in p.warnings)


def test_the_seed_gives_back_its_figures_and_prices_every_k_with_intervals(tmp_path, capsys):
    (tmp_path / "runs.csv").write_text(SEED_RUNS)
    (tmp_path / "costs.csv").write_text("batch,tokens,ms\n1,3,30\n")
    assert main(["plan", "--measured", str(tmp_path / "runs.csv"), "--costs", str(tmp_path / "costs.csv"),
                 "--target", "kimi-k25-int4", "--tp", "8", "--batch", "1", "--max-steps", "8", "--extrapolate",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cells = out["batches"][0]["steps"]
    assert [c["steps"] for c in cells] == list(range(9))
    assert cells[0]["tokens_per_s"] == pytest.approx(82.0) and cells[0]["measured"]
    assert cells[2]["tokens_per_s"] == pytest.approx(60.0) and cells[2]["measured"] and cells[2]["verify_ms"] == 30.0
    for c in cells:
        assert c["tokens_per_s_low"] <= c["tokens_per_s"] <= c["tokens_per_s_high"]
        assert c["speedup_low"] <= c["speedup"] <= c["speedup_high"]
        assert c["measured"] == (c["steps"] in (0, 2))
    assert cells[5]["tokens_per_s_high"] < 82  # the seed's drafter does not pay at any k
    assert out["batches"][0]["verdict"] == "NO-GO"
    fit = out["fit"]
    assert {t["term"] for t in fit["target"]["terms"]} >= {"fixed_ms", "memory_factor", "compute_factor"}
    (row,) = fit["cycle"]["rows"]
    assert row["row"] == "batch 1, steps 2" and abs(row["residual"]) < 0.05
    assert all(t["rows"] == ["batch 1, steps 2"] for t in fit["cycle"]["terms"] if t["term"] != "draft_ms_per_row")


def test_two_seed_points_never_give_a_compute_coefficient_of_hundreds():
    """The issue's case: both seed points on K2.5 at 8 x H20: decode at batch 64 stays within reading the weights
    once (the time the roofline gives for every byte a batch-64 step reads) plus the batch-1 step's fixed part."""
    base = estimate_model(shape_from_config(KIMI_K25_INT4), "H20", tp=8, context=2048)
    m = calibrate(base, [Point(1, 1, 12.2), Point(1, 3, 30.0)])
    assert m.compute <= 20 and m.ms(1, 1) == pytest.approx(12.2) and m.ms(1, 3) == pytest.approx(30.0)
    read_once = base.features(64, 1)[0]  # memory ms of a batch-64 decode: weights touched once + its KV cache
    assert m.ms(64, 1) <= 12.2 + read_once + base.features(64, 1)[1] * 2
    assert m.ms(64, 1) < 60 and m.ms(256, 1) < 120  # was 548.7 and 2026 ms
    plan = eaglekit.plan((0.8, 0.7, 0.6), target=KIMI_K25_INT4, gpu="H20", tp=8, context=2048,
                         calibrate_points=[(1, 1, 12.2), (1, 3, 30.0)], batches=(1, 16, 64))
    assert "per verified token" in plan.model.describe()


def test_a_batch_one_sweep_is_predicted_from_two_speculative_rows():
    """A synthetic engine: the baseline and k = 2, 3 given; k = 4..7 predicted within its intervals."""
    L = {k: 1 + sum(0.8 ** j for j in range(1, k + 1)) for k in range(1, 8)}
    rows = [(1, 0, None, None, None, _truth(1, 0, 1.0))] + [(1, k, 1, k + 1, L[k], _truth(1, k, L[k])) for k in (2, 3)]
    acc = constant_acceptance(L[7], 7)
    p = eaglekit.plan(type(acc)(acc.per_step, "typed", tuple(L.items())), measured=rows, target=DENSE_LLAMA_8B,
                      gpu="H100-SXM", batches=(1,), max_steps=7)
    for k in range(4, 8):
        cell = p.plans[0].options[k]
        want = _truth(1, k, L[k])
        assert cell.tps.low <= want <= cell.tps.high and abs(cell.tokens_per_s / want - 1) < 0.05, k
    assert p.fit.set_by(0) == "fitted"  # two rows at different k pin the per-step cost


def test_without_speculative_rows_the_prior_prices_drafting_and_says_so():
    p = eaglekit.plan((0.8, 0.7, 0.6), costs=[(1, 1, 7.0), (8, 1, 8.0)], target=DENSE_LLAMA_8B, gpu="H100-SXM",
                      batches=(1, 8))
    d = p.plans[0].options[1]
    assert d.draft.ms > 0.3 and d.overhead_ms > 0.3 and not d.measured  # drafting is not free
    assert "EAGLE-3 drafter sized from" in str(p) and "prior" in str(p)
    assert "no verify was measured" in str(p)  # the decode points alone say nothing of the verify
    drafter = eagle3_drafter(shape_from_config(DENSE_LLAMA_8B))
    assert 0.38e9 < drafter.active_params < 0.46e9
    assert 0.38e9 * 3 < eagle3_drafter(shape_from_config(KIMI_K2_TEXT)).active_params < 1.25e9
    prior = draft_prior(drafter, gpu("H100-SXM"))
    assert 0.6 < prior.mean[0] < 1.3 and 0.8 < prior.mean[2] < 1.8  # about 1 ms per step and per cycle
    assert all(lo < hi for lo, hi in ((o.tps.low, o.tps.high) for o in p.plans[0].options[1:]))


def test_the_fit_never_divides_by_a_zero_width_term():
    prior = draft_prior(None, None)
    assert fit_cycle([], prior).value == pytest.approx(prior.mean)
    same = [Row("a", (2.0, 2.0, 1.0), 20.0, 16.0), Row("b", (2.0, 2.0, 1.0), 20.0, 16.0)]  # collinear rows
    f = fit_cycle(same, prior)
    assert all(v >= 0 for v in f.value) and all(f.cov[i][i] > 0 for i in range(3))
    assert CycleFit.features(4, 0) == (0.0, 0.0, 0.0)


def test_leaving_each_row_out_equals_fitting_the_others():
    """The row-off-the-fit check fits the other rows once per row; from sums it stays linear in the rows, and
    equals fitting the rest from scratch (terms, noise), constrained terms and re-estimated noise included."""
    prior = draft_prior(None, None)
    rows = [Row(f"r{i}", CycleFit.features(b, k, t), target + extra, target)
            for i, (b, k, t, target, extra) in enumerate([(1, 3, 1, 10.0, 4.1), (8, 3, 1, 12.0, 4.9), (32, 3, 1, 20.0, 7.2),
                                                          (1, 5, 1, 10.0, 6.3), (8, 2, 4, 13.0, 3.1), (4, 1, 1, 11.0, 0.2),
                                                          (64, 4, 1, 30.0, 60.0)])]   # the last one far off
    for i, (value, noise) in enumerate(fit_without_each(rows, prior)):
        alone = fit_cycle(rows[:i] + rows[i + 1:], prior)
        assert value == pytest.approx(alone.value, rel=1e-9, abs=1e-12) and noise == pytest.approx(alone.noise, rel=1e-9)
    assert fit_without_each([], prior) == []


def test_ties_go_to_fewer_steps_and_the_schedule_does_not_climb_on_overlaps():
    assert best_steps([100.0, 150.0, 151.0, 151.4]) == 1  # within 1% of the best: fewer steps
    p = eaglekit.plan((0.8, 0.75, 0.7, 0.65, 0.6), costs=[(1, 1, 7.0), (16, 1, 8.0), (64, 1, 12.0)],
                      target=DENSE_LLAMA_8B, gpu="H100-SXM", batches=(1, 2, 4, 8, 16, 32, 64), max_steps=5)
    steps = list(p.best_steps)
    assert steps == sorted(steps, reverse=True)
    for row in p.plans:  # the best's interval, and the k whose speedup intervals overlap it, are reported
        assert all(overlaps(row.options[k], row.best) for k in row.overlapping)
        assert all(overlaps(o, row.best) == (o.steps in row.overlapping) for o in row.options if o is not row.best)


def test_the_plan_names_the_run_that_narrows_it_most():
    p = eaglekit.plan((0.8, 0.75, 0.7), costs=[(1, 1, 7.0), (16, 1, 8.0), (64, 1, 12.0)], target=DENSE_LLAMA_8B,
                      gpu="H100-SXM", batches=(1, 16, 64))
    nxt = p.next_run
    assert nxt is not None and nxt["sentence"] == f"run steps {nxt['steps']} at batch {nxt['batch']}"
    assert nxt["batch"] in (1, 16, 64) and 1 <= nxt["steps"] <= 3 and 0 < nxt["narrows_by"] <= 1
    assert nxt["sentence"] in str(p) and p.to_json()["next_measurement"]["steps"] == nxt["steps"]


def test_steps_past_the_measured_depth_only_when_asked():
    kw = dict(costs=[(1, 1, 7.0), (8, 1, 8.0)], target=DENSE_LLAMA_8B, gpu="H100-SXM", batches=(1,), max_steps=8)
    short = eaglekit.plan((0.8, 0.7, 0.6), **kw)
    assert short.max_steps == 3 and len(short.plans[0].options) == 4 and "--extrapolate" in str(short)
    far = eaglekit.plan((0.8, 0.7, 0.6), extrapolate=True, **kw)
    assert far.max_steps == 8 and far.plans[0].options[8].extrapolated


def test_one_accept_length_at_k_steps_is_a_labelled_constant_acceptance(capsys):
    a = constant_acceptance(3.2, 3)
    assert a.at(3) == pytest.approx(3.2) and len(set(a.per_step)) == 1 and "constant per-step" in a.source
    with pytest.raises(InputError, match="from 1 to 4"):
        constant_acceptance(4.5, 3)
    assert main(["plan", "--accept-length", "3.2", "--steps", "3", "--target", "llama-3.1-8b", "--gpu", "H100-SXM",
                 "--calibrate", "1,1,7", "--batch", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["acceptance"]["accept_length_by_steps"][2] == pytest.approx(3.2)
    assert "constant per-step acceptance" in out["acceptance"]["source"]


def test_a_result_and_its_vllm_per_position_line_agree_or_say_why(tmp_path):
    """One measurement, two bases: the result's simulated accept length by k is what the plan uses, and the
    per-step acceptances (every position) are stated beside it."""
    result = {"steps": 3, "per_step_acceptance": [0.8, 0.7, 0.6], "accept_length_by_steps": [1.78, 2.31, 2.62]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    kw = dict(costs=[(1, 1, 7.0), (8, 1, 8.0)], target=DENSE_LLAMA_8B, gpu="H100-SXM", batches=(1,))
    a = eaglekit.plan(str(path), **kw)
    rates = [L - prev for L, prev in zip(result["accept_length_by_steps"], [1.0] + result["accept_length_by_steps"])]
    b = eaglekit.plan(Acceptance.from_positions(rates), **kw)  # vLLM's per-position line of the same run
    assert [a.acceptance.at(k) for k in (1, 2, 3)] == pytest.approx([b.acceptance.at(k) for k in (1, 2, 3)])
    assert a.best_steps == b.best_steps
    assert "basis" in a.acceptance.source and "differ" in a.acceptance.source  # 2.62 vs 2.568 from every position
    result["vllm_per_position_acceptance"] = {"value": [0.85, 0.5, 0.27]}  # the same run's vLLM line at K = 3
    path.write_text(json.dumps(result))
    c = eaglekit.plan(str(path), **kw)
    assert "vLLM per-position rates (--per-position) give +3.9% at k = 1" in c.acceptance.source


def test_trees_are_priced_from_their_accept_lengths_and_give_sglang_flags():
    trees = {"trees": [{"steps": 3, "topk": 4, "draft_tokens": 8, "accept_length": 3.4}]}
    p = eaglekit.plan((0.6, 0.5, 0.4), costs=[(1, 1, 7.0), (8, 1, 8.0)], target=DENSE_LLAMA_8B, gpu="H100-SXM",
                      batches=(1, 8), trees=trees)
    tree = next(t for t in p.plans[0].trees if t.verified_tokens == 8)
    assert (tree.steps, tree.topk, tree.verified_tokens, tree.accept_length) == (3, 4, 8, 3.4)
    assert p.plans[0].best is tree  # 3.4 tokens per cycle beats the chain's 1.96 at the same steps
    flags = p.engine_config["sglang"]["ranges"][0]["flags"]
    assert "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8" in flags
    with pytest.raises(InputError, match="holds at most"):
        eaglekit.plan((0.6,), costs=[(1, 1, 7.0), (8, 1, 8.0)], trees=[{"steps": 2, "topk": 2, "draft_tokens": 9,
                                                                         "accept_length": 2.0}])


def test_custom_gpu_takes_memory_and_the_table_has_it():
    g = gpu("custom:3.35,989,1979,80")
    assert g.memory_gb == 80 and g.fp8_tflops == 1979
    assert gpu("custom:2,312,0,40").fp8_tflops is None and gpu("H20").memory_gb == 96
    for bad in ("custom:1e400,1,1,1", "custom:3,989,1979,0", "custom:3,989,1979,nan"):
        with pytest.raises(InputError, match="custom GPU"):
            gpu(bad)
    assert CostModel(None, None).per_request_ms == 0.0


def test_page_05s_calculator_and_the_account_price_the_verify_alike():
    """Issue 30: steps 3 and accept length 3.2 gave 91.4 tok/s in the calculator and 73 in the account. The
    calculator's verify is the line through the account's curve at the measured k and at k + 1: within 0.5 ms
    of it out to k = 8, tok/s within 0.5%."""
    from eaglekit.view.calculator import Calculator, numbers

    account = eaglekit.Account.seed()
    calc = Calculator.preset("seed")
    g = account.growing[0]
    for k in range(1, 9):
        for L in (2.0, 3.2, 3.5):
            got = numbers({**calc.values, "steps": k, "accept_length": min(L, k + 1)})
            assert got["verify_now_ms"] == pytest.approx(g.verify_ms[k - 1], abs=0.5)
            assert got["tokens_per_s"] == pytest.approx(g.tokens_per_s(min(L, k + 1), k), rel=0.005)
    assert round(numbers({**calc.values, "steps": 3, "accept_length": 3.2})["tokens_per_s"]) == 73


def test_a_run_deeper_than_the_acceptance_profile_is_priced_as_measured():
    p = eaglekit.plan((0.8, 0.7, 0.6), measured=[(1, 0, None, None, None, 141.4), (1, 5, 1, 6, 3.3, 240.0)],
                      target=DENSE_LLAMA_8B, gpu="H100-SXM", batches=(1, 4))
    one, four = p.plans
    assert len(one.options) == 6 and one.options[5].measured and not one.options[5].extrapolated
    assert one.options[5].tokens_per_s == pytest.approx(240.0) and four.options[5].extrapolated


def test_a_verify_is_anchored_to_the_decode_measured_at_its_batch_size():
    """A forward model that misses a measured decode (here by 2 ms at batch 1: a server's per-forward cost the
    roofline has no term for) would price the verify beside it below the decode; anchored, the verify is the
    measured decode plus what the model adds for the extra tokens, at every measured batch size."""
    rows = [(b, 0, None, None, None, t) for b, t in ((1, 222.47), (4, 566.21), (8, 733.61), (16, 1012.96),
                                                     (32, 1077.55), (64, 1073.69))]
    p = eaglekit.plan(constant_acceptance(2.0, 3), measured=rows, target="qwen3-30b-a3b", gpu="H100-SXM", tp=2,
                      context=1024, batches=(1, 4, 8), max_steps=3)
    for bp in p.plans:
        decode = bp.options[0].verify
        assert decode.measured
        verifies = [o.verify.ms for o in bp.options[1:]]
        assert decode.ms < verifies[0] < verifies[1] < verifies[2]
        model_inc = p.model.ms(bp.batch, 4) - p.model.ms(bp.batch, 1)
        assert verifies[2] == pytest.approx(decode.ms + model_inc, rel=1e-6)
    # the fit's residuals are the terms' own (the anchoring does not hide how far the terms miss)
    rows = {r["row"]: r for r in p.target_fit_json()["rows"]}
    one = rows["forward at batch 1, 1 token(s)"]
    assert one["residual"] == pytest.approx(one["predicted_ms"] / one["ms"] - 1) and one["residual"] < -0.3
    assert [b for b, _ in p.model.misfit] == [1, 4, 8, 16, 32, 64] and p.to_json()["cost_model"]["decode_offsets"]


def test_the_verify_interval_is_capped_by_a_decode_of_as_many_requests():
    """Decode-only rows leave open whether growth with batch size is per request or per token row; the
    interval spans both, but n tokens of one request cost no more than a decode of n requests, so the
    batch-1 verify of 8 tokens is never uncertain past the decode measured at batch 8 (SpecForge #339's
    rows: uncapped, the 95% interval of its 3/3/8 tree ran from 78 to 479 tok/s)."""
    rows = [(b, 0, None, None, None, t) for b, t in ((1, 222.47), (4, 566.21), (8, 733.61), (16, 1012.96),
                                                     (32, 1077.55), (64, 1073.69))]
    rows += [(1, 3, 1, 4, 1.86, 159.78), (1, 3, 3, 4, 1.99, 207.62)]
    p = eaglekit.plan(constant_acceptance(1.86, 3), measured=rows, target="qwen3-30b-a3b", gpu="H100-SXM", tp=2,
                      context=1024, batches=(1,), max_steps=3,
                      trees=[{"steps": 3, "topk": 3, "draft_tokens": 8, "accept_length": 2.20}])
    tree = next(t for t in p.plans[0].trees if t.verified_tokens == 8)
    assert tree.verify.ms < 8 * 1000 / 733.61  # cheaper than the decode of 8 requests
    assert tree.tps.low <= 172.99 <= tree.tps.high  # the published run
    assert tree.tps.high / tree.tps.low < 3


def test_without_runs_the_speedup_falls_with_batch_size_as_sglang_measured():
    """EAGLE-3 paper, Table 3 (SGLang, one H100, Llama-3.1-8B, chain of 3): the speedup falls from 1.81x at
    batch 2 to 1.38x at 64, about a quarter. With no run given, the plan's prior (engine costs per drafted row)
    must fall too, not stay flat or rise as a bare roofline does."""
    p = eaglekit.plan(constant_acceptance(3.0, 3), target=DENSE_LLAMA_8B, gpu="H100-SXM", context=1024,
                      batches=(2, 8, 32, 64), max_steps=3)
    gains = [bp.options[3].speedup for bp in p.plans]
    assert gains == sorted(gains, reverse=True)
    assert 0.6 < gains[-1] / gains[0] < 0.9


def test_the_plan_and_the_account_price_the_seeds_verify_alike(tmp_path):
    """Pages 00, 05 and 08 show the seed: the account (on its 8 GPUs) and the plan's per-token reading of the same
    two forwards give the same verify at every k, and the calculator's line meets them at the measured k and at
    k = 8. The plan's own cells carry that line no further than the measured verify (issue 46): past k = 2 each
    costs at most a decode of k + 1 requests plus the measured excess, and the notes say the line was cut."""
    from eaglekit.core.serving.account import Account

    (tmp_path / "seed.csv").write_text(SEED_RUNS)
    p = eaglekit.plan(None, costs=[(1, 3, 30.0)], measured=[str(tmp_path / "seed.csv")], target="kimi-k25-int4", tp=8,
                      batches=(1,), extrapolate=True)
    account = Account.seed()
    grows = account.growing[0]
    (name, tok), _ = p.readings
    assert name == "per-token"
    assert [o.verify.ms for o in tok.plans[0].options[1:]] == pytest.approx(list(grows.verify_ms), rel=1e-9)
    bounded = [o.verify.ms for o in p.plans[0].options[1:]]
    assert bounded[:2] == pytest.approx(list(grows.verify_ms[:2]), rel=1e-9)   # up to the measured verify: alike
    excess = p.model.excess_ms(3)
    for k, ms in enumerate(bounded[2:], 3):
        assert ms <= p.model.ms(k + 1, 1) + excess + 1e-9 < grows.verify_ms[k - 1]
    assert any(n.startswith("verify extrapolated") and "up to 3 tokens" in n for n in p.notes)
    line = account.growing_scenario
    for k in (2, 3):
        assert 30.0 + (k - 2) * line.verify_growth_ms == pytest.approx(grows.verify_ms[k - 1], abs=0.006)
    assert max(abs(30.0 + (k - 2) * line.verify_growth_ms - grows.verify_ms[k - 1]) for k in range(1, 9)) < 0.5


def test_a_run_whose_accept_length_disagrees_with_the_acceptance_given_is_named():
    runs = [(1, 0, None, None, None, 82.0), (1, 2, 1, 3, 2.0, 60.0)]
    p = eaglekit.plan((0.8, 0.72, 0.66), costs=[(1, 3, 30.0)], measured=runs, target="kimi-k25-int4", tp=8,
                      batches=(1,))
    (w,) = [w for w in p.warnings if w.startswith("acceptance-vs-run")]
    assert "2.00" in w and "2.38" in w and "-16%" in w
    # the run's cell belongs to the drafter that was measured: this drafter's k = 2 is priced from its own profile
    assert not p.plans[0].options[2].measured and p.plans[0].options[2].accept_length == pytest.approx(2.376)
    agree = eaglekit.plan(constant_acceptance(2.0, 2), costs=[(1, 3, 30.0)], measured=runs, target="kimi-k25-int4",
                          tp=8, batches=(1,))
    assert not [w for w in agree.warnings if w.startswith("acceptance-vs-run")]
