"""The draft step's prior sized from the drafter's own layer: MLA projections, the experts a MoE row routes to, an
MTP / NextN layer of the target (issue 38, issue 39 section 3)."""

from __future__ import annotations

import pytest

import eaglekit
from eaglekit.core.errors import InputError
from eaglekit.core.serving.costmodel import drafter_shape, gpu, mtp_drafter, shape_from_config
from eaglekit.core.serving.cyclefit import draft_prior, eagle3_drafter
from eaglekit.core.serving.published import published

H, HEADS = 7168, 64


def _mla_moe_tensors(experts: int, inter: int = 2048):
    """(name, dtype, parameters, nbytes) of a Kimi-sized MLA + MoE EAGLE-3 layer, bf16."""
    def t(name, *shape):
        n = 1
        for d in shape:
            n *= d
        return (name, "BF16", n, 2 * n)

    out = [t("fc.weight", H, 3 * H), t("midlayer.self_attn.q_a_proj.weight", 1536, 2 * H),
           t("midlayer.self_attn.q_b_proj.weight", HEADS * 192, 1536),
           t("midlayer.self_attn.kv_a_proj_with_mqa.weight", 512 + 64, 2 * H),
           t("midlayer.self_attn.kv_b_proj.weight", HEADS * 256, 512), t("midlayer.self_attn.o_proj.weight", H, HEADS * 128),
           t("midlayer.mlp.gate.weight", experts, H), t("lm_head.weight", 32000, H),
           t("midlayer.mlp.shared_experts.down_proj.weight", H, inter), ("d2t", "I64", 32000, 256000)]
    for e in range(experts):
        out += [t(f"midlayer.mlp.experts.{e}.{w}.weight", inter, H) for w in ("gate_proj", "up_proj", "down_proj")]
    return out


CFG = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "n_routed_experts": 384, "num_experts_per_tok": 8}


def test_a_moe_drafter_reads_the_experts_a_row_routes_to_not_all():
    s = drafter_shape(HEADS, HEADS, 128, 1, _mla_moe_tensors(384), name="mla-moe", config=CFG)
    assert s.experts == 384 and s.experts_per_token == 8 and s.moe_layers == 1
    assert s.expert_bytes == pytest.approx(3 * 2048 * H * 2)
    all_experts = 384 * s.expert_bytes
    assert s.weight_bytes(1) < 0.2 * (s.always_bytes + all_experts)  # not 11 GB per step
    assert s.kv_heads is None and s.kv_bytes_per_token == pytest.approx((512 + 64) * 2.0)  # the MLA latent
    p = draft_prior(s, gpu("H200"), tp=8)
    dense = drafter_shape(HEADS, HEADS, 128, 1, [x for x in _mla_moe_tensors(0)], name="dense", config={})
    q = draft_prior(dense, gpu("H200"), tp=8)
    assert p.mean[0] > q.mean[0]  # more kernels and bytes than the dense layer, but far less than every expert
    assert p.mean[0] < q.mean[0] + 384 * s.expert_bytes / 8 / 1e9 / (4.8 * 0.6) / 4
    assert p.mean[1] > q.mean[1]  # each further row routes to experts the others did not
    assert "reading" in p.source and "GB / 8" in p.source


def test_an_mtp_layer_is_one_moe_layer_of_the_target():
    raw = published("kimi-k2-fp8")[1]
    m = mtp_drafter(raw)
    target = shape_from_config(raw)
    assert m.layers == 1 and m.moe_layers == 1 and m.experts == target.experts
    assert m.expert_bytes == pytest.approx(target.expert_bytes)
    assert m.weight_bytes(1) < target.weight_bytes(1) / 10  # one layer and the head, not 61 layers
    eagle = eagle3_drafter(target)
    assert draft_prior(m, gpu("H200"), tp=8).mean[1] > draft_prior(eagle, gpu("H200"), tp=8).mean[1]
    p = eaglekit.plan((0.8, 0.7), target="kimi-k2-fp8", gpu="H200", tp=8, drafter="mtp", batches=(1,))
    assert p.fit.prior.source.startswith("prior from MTP layer of K2, FP8 on H200 x 8")
    with pytest.raises(InputError, match="--drafter mtp"):
        eaglekit.plan((0.8,), costs=[(1, 1, 10.0), (1, 2, 12.0)], drafter="mtp", batches=(1,))
