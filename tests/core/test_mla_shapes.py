"""The tensors an MLA drafter's layer must hold, at Kimi-K2.5's size (TorchSpec's kimi_k25_eagle3_moe config)."""

import json
from pathlib import Path

from eaglekit.core.configs.config import normalize_config
from eaglekit.core.configs.mla_shapes import mla_layer_problems, mla_layer_shapes

FIXTURE = Path(__file__).parent.parent / "fixtures" / "configs" / "torchspec_kimi_k25_eagle3_moe.json"


def test_kimi_moe_drafter_shapes():
    cfg = normalize_config(json.loads(FIXTURE.read_text()))
    want = {name: shape for name, (shape, _) in mla_layer_shapes(cfg).items()}
    a, m = "midlayer.self_attn.", "midlayer.mlp."
    assert want[a + "q_a_proj.weight"] == (1536, 14336) and want[a + "q_b_proj.weight"] == (12288, 1536)
    assert want[a + "kv_a_proj_with_mqa.weight"] == (576, 14336) and want[a + "kv_b_proj.weight"] == (16384, 512)
    assert want[a + "o_proj.weight"] == (7168, 8192) and want[m + "gate.weight"] == (384, 7168)
    assert want[m + "experts.gate_up_proj"] == (384, 7168, 4096) and want[m + "experts.down_proj"] == (384, 2048, 7168)
    assert want[m + "shared_experts.down_proj.weight"] == (7168, 2048)
    assert mla_layer_problems(cfg, want) == []
    per_expert = mla_layer_shapes(cfg, ["midlayer.mlp.experts.0.gate_proj.weight"])
    assert len([n for n in per_expert if ".experts." in n]) == 3 * 384


def test_llama_drafters_have_no_mla_shapes():
    llama = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "intermediate_size": 128,
             "num_attention_heads": 2, "vocab_size": 100, "draft_vocab_size": 50}
    assert mla_layer_shapes(normalize_config(llama)) == {}


def test_router_bias_follows_the_topk_method():
    raw = json.loads(FIXTURE.read_text())
    greedy = normalize_config({**raw, "topk_method": "greedy", "scoring_func": "softmax"})
    assert "midlayer.mlp.gate.e_score_correction_bias" not in mla_layer_shapes(greedy)
    cfg = normalize_config(raw)
    shapes = {name: shape for name, (shape, _) in mla_layer_shapes(cfg).items()}
    assert mla_layer_problems(cfg, {**shapes, "midlayer.mlp.gate.bias": (384,)}) == []  # SpecForge's folded centering
    assert mla_layer_problems(cfg, {**shapes, "midlayer.mlp.gate.bias": (7,)}) == [
        "midlayer.mlp.gate.bias is [7], but the config gives [384] (n_routed_experts)"]
    assert mla_layer_problems(cfg, {**shapes, "midlayer.mlp.router.weight": (384, 7168)}) == [
        "midlayer.mlp.router.weight is in the checkpoint but use_moe is true: the MLP is a router, routed experts "
        "and shared experts"]
