"""The target's cost model: distinct experts, bytes from config and header, the roofline, calibration and fits."""

from __future__ import annotations

import pytest

from eaglekit.core.serving.costmodel import (
    GPUS,
    CostModel,
    Point,
    calibrate,
    distinct_experts,
    estimate_model,
    fit_model,
    gpu,
    shape_from_config,
)
from eaglekit.core.errors import InputError
from eaglekit.core.serving.published import DENSE_LLAMA_8B, KIMI_K2_FP8, KIMI_K25_INT4

SEED = (Point(1, 1, 12.2), Point(1, 3, 30.0))


def test_distinct_experts_under_uniform_routing_matches_the_issue_figures():
    counts = {n: distinct_experts(n, experts=384, per_token=8) for n in (1, 3, 5, 6)}
    assert counts[1] == pytest.approx(8.0)
    assert round(counts[3], 1) == 23.5 and round(counts[5]) == 38 and round(counts[6]) == 46
    assert distinct_experts(10_000, experts=384, per_token=8) == pytest.approx(384.0)  # every expert, eventually
    assert distinct_experts(7, experts=0, per_token=0) == 0.0


def test_kimi_k2_fp8_verify_of_three_tokens_reads_about_2_3x_a_decode_step():
    s = shape_from_config(KIMI_K2_FP8)
    assert s.experts == 384 and s.experts_per_token == 8 and s.moe_layers == 60 and s.compute == "fp8"
    assert s.expert_params == 3 * 7168 * 2048
    assert s.expert_bytes == pytest.approx(3 * 7168 * 2048 * (1 + 4 / 16384))  # e4m3 + fp32 block scales
    lm_head = 163840 * 7168 * 2.0
    without_head = (s.weight_bytes(3) - lm_head) / (s.weight_bytes(1) - lm_head)
    assert round(without_head, 2) in (2.34, 2.35)  # the issue's 2.35x (lm_head left out)
    assert s.weight_bytes(3) / s.weight_bytes(1) == pytest.approx(2.24, abs=0.01)  # lm_head read once per forward
    k25 = shape_from_config(KIMI_K25_INT4)
    assert k25.compute == "bf16" and k25.expert_bytes == pytest.approx(3 * 7168 * 2048 * (0.5 + 2 / 32))
    assert k25.weight_bytes(3) / k25.weight_bytes(1) == pytest.approx(1.71, abs=0.01)  # INT4 experts, bf16 attention


def test_a_dense_target_is_the_special_case_without_experts():
    s = shape_from_config(DENSE_LLAMA_8B)
    assert s.dense and s.experts == 0 and s.weight_bytes(1) == s.weight_bytes(64)
    assert s.kv_heads == 8 and s.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2
    m = estimate_model(s, "H100-SXM", tp=1, context=0)
    assert m.ms(1, 1) == pytest.approx(s.weight_bytes(1) / 1e9 / 3.35)  # memory-bound: bytes / bandwidth


def test_estimate_is_the_roofline_and_grows_with_batch_and_context():
    s = shape_from_config(KIMI_K2_FP8)
    m = estimate_model(s, "H200", tp=8, context=4096)
    mem, comp = m.features(1, 1)
    assert m.ms(1, 1) == pytest.approx(max(mem, comp)) and m.kind == "estimate"
    assert m.ms(64, 1) > m.ms(1, 1) and estimate_model(s, "H200", tp=8, context=65536).ms(8, 1) > m.ms(8, 1)
    assert m.ms(1, 3) / m.ms(1, 1) == pytest.approx(
        (s.weight_bytes(3) / 8 + s.kv_bytes(1, 4096)) / (s.weight_bytes(1) / 8 + s.kv_bytes(1, 4096)))
    # at a large batch the decode step already touches most experts: an extra token costs compute, not bytes
    assert m.ms(256, 2) / m.ms(256, 1) > 1.0 and s.distinct_experts(256) > 0.99 * 384


@pytest.mark.parametrize("config", [KIMI_K25_INT4, KIMI_K2_FP8], ids=["k25-int4", "k2-fp8"])
def test_two_seed_points_calibrate_exactly_and_the_verify_grows_with_k(config):
    base = CostModel(shape_from_config(config), None, tp=8, context=4096)
    m = calibrate(base, SEED)
    assert m.kind == "calibrated" and m.fixed_ms >= 0 and m.mem >= 0 and m.compute >= 0
    assert m.ms(1, 1) == pytest.approx(12.2) and m.ms(1, 3) == pytest.approx(30.0)
    verify = [m.ms(1, k + 1) for k in range(1, 9)]
    assert all(b > a for a, b in zip(verify, verify[1:]))  # never the constant 30 ms


def test_one_point_becomes_a_fixed_cost_or_scales_a_roofline_it_beats():
    m = estimate_model(shape_from_config(KIMI_K2_FP8), "H20", tp=8)
    one = calibrate(m, [Point(1, 1, 12.2)])
    assert one.ms(1, 1) == pytest.approx(12.2) and one.fixed_ms == pytest.approx(12.2 - m.ms(1, 1))
    assert one.ms(1, 3) - one.ms(1, 1) == pytest.approx(m.ms(1, 3) - m.ms(1, 1))  # bytes of the extra experts
    fast = calibrate(m, [Point(1, 1, m.ms(1, 1) / 2)])  # faster than the table allows: scaled, not negative
    assert fast.fixed_ms == 0 and fast.ms(1, 3) / fast.ms(1, 1) == pytest.approx(m.ms(1, 3) / m.ms(1, 1))


def test_fit_recovers_a_known_linear_model_and_needs_two_pairs():
    base = estimate_model(shape_from_config(KIMI_K2_FP8), "H100-SXM", tp=8, context=2048)
    truth = [(b, n, 3.0 + 2.5 * base.features(b, n)[0] + 1.5 * base.features(b, n)[1])
             for b in (1, 8, 64) for n in (1, 2, 4)]
    fitted = fit_model(base, [Point(*t) for t in truth])
    assert (fitted.fixed_ms, fitted.mem, fitted.compute) == pytest.approx((3.0, 2.5, 1.5), rel=1e-6)
    with pytest.raises(InputError, match="two or more"):
        fit_model(base, [Point(1, 1, 12.2), Point(1, 1, 12.4)])


def test_without_a_shape_the_fit_is_fixed_plus_per_token():
    m = fit_model(CostModel(None, None), [Point(1, 1, 10.0), Point(4, 1, 16.0), Point(1, 5, 18.0)])
    assert (m.fixed_ms, m.compute) == pytest.approx((8.0, 2.0))


def test_gpu_table_custom_entries_and_unknown_names():
    assert gpu("h200") is GPUS["H200"] and GPUS["H100-SXM"].hbm_tb_s == 3.35
    assert GPUS["A100-SXM"].tflops("fp8") == GPUS["A100-SXM"].bf16_tflops  # no FP8 tensor cores
    c = gpu("custom:2.5,500,1000")
    assert (c.hbm_tb_s, c.bf16_tflops, c.fp8_tflops) == (2.5, 500.0, 1000.0)
    with pytest.raises(InputError, match="unknown GPU 'H300'.*H100-SXM"):
        gpu("H300")
    with pytest.raises(InputError, match="custom GPU"):
        gpu("custom:fast")


def test_bad_configs_and_points_say_what_is_missing():
    with pytest.raises(InputError, match="num_experts_per_tok"):
        shape_from_config({**KIMI_K2_FP8, "num_experts_per_tok": None})
    with pytest.raises(InputError, match="layer count"):
        shape_from_config({"hidden_size": 8})
    with pytest.raises(InputError, match="positive number of milliseconds"):
        Point(1, 1, -3.0)
    with pytest.raises(InputError, match="tokens per request"):
        Point(1, 0, 3.0)


@pytest.mark.parametrize("quant, says", [
    ({"quant_method": "fp8", "weight_block_size": [0, 128]}, "weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": ["128", "128"]}, "weight_block_size"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 0}}}},
     "group_size"),
])
def test_quantisation_settings_that_make_no_sense_are_one_error(quant, says):
    from eaglekit.core.serving.costmodel import _bytes_per_param
    from eaglekit.core.errors import InputError

    with pytest.raises(InputError, match=says):
        _bytes_per_param(quant, "model.layers.3.mlp.experts.0.up_proj")


def test_per_channel_int4_counts_no_group_scales():
    from eaglekit.core.serving.costmodel import _bytes_per_param

    per_channel = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": -1}}}}
    assert _bytes_per_param(per_channel, "model.layers.3.mlp.experts.0.up_proj") == (0.5, "bf16")
