"""Small EAGLE-3 drafters of every attention and MLP family, written as real safetensors checkpoints.

Tensor names as the exporters write them (vLLM / SGLang / TorchSpec / Model-Optimizer): the decoder layer under
``midlayer.`` (TorchSpec and SpecForge native) or ``layers.0.`` (vLLM and Model-Optimizer exports); MLA
attention ``q_a_proj -> q_a_layernorm -> q_b_proj`` (a plain ``q_proj`` when ``q_lora_rank`` is null),
``kv_a_proj_with_mqa``, ``kv_a_layernorm``, ``kv_b_proj``, ``o_proj``; a MoE MLP as TorchSpec saves it
(router ``mlp.gate.weight`` and ``mlp.gate.e_score_correction_bias``, fused ``mlp.experts.gate_up_proj``
[E, H, 2I] and ``mlp.experts.down_proj`` [E, I, H], ``mlp.shared_experts.{gate,up,down}_proj``) or per expert
(``mlp.experts.{i}.{gate,up,down}_proj.weight``, transformers' DeepseekV3MoE names).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from eaglekit.core.tokens.vocab import build_vocab_map

H, HEADS, INTER, VOCAB, DRAFT = 32, 2, 48, 96, 40
Q_LORA, KV_LORA, NOPE, ROPE, V = 16, 8, 8, 4, 8
EXPERTS, TOP_K, MOE_I = 4, 2, 12


def _w(*shape, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 0.05).bfloat16()


def mla_config(*, q_lora: int | None = Q_LORA, moe: bool = False, draft_vocab: int = DRAFT, **extra) -> dict:
    cfg = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "kimi_k2", "hidden_size": H,
           "intermediate_size": INTER, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
           "num_hidden_layers": 1, "vocab_size": VOCAB, "draft_vocab_size": draft_vocab, "q_lora_rank": q_lora,
           "kv_lora_rank": KV_LORA, "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE, "v_head_dim": V,
           "rms_norm_eps": 1e-5, "rope_theta": 50000.0, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5], "use_aux_hidden_state": True,
                            "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True,
                            "use_mtp_layernorm": False}}
    if moe:
        cfg.update(use_moe=True, n_routed_experts=EXPERTS, num_experts_per_tok=TOP_K, moe_intermediate_size=MOE_I,
                   n_shared_experts=1, n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.827,
                   scoring_func="sigmoid")
    return {**cfg, **extra}


def llama_config(*, draft_vocab: int = DRAFT, head_dim: int = 16) -> dict:
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
            "intermediate_size": INTER, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
            "head_dim": head_dim, "num_hidden_layers": 1, "vocab_size": VOCAB, "draft_vocab_size": draft_vocab,
            "rms_norm_eps": 1e-5, "rope_theta": 50000.0, "torch_dtype": "bfloat16",
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5], "use_aux_hidden_state": True}}


def drafter_tensors(cfg: dict, *, seed: int = 0, layout: str = "midlayer", fused_experts: bool = True,
                    maps: bool | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of the drafter ``cfg`` describes (see the module docstring); ``maps``: write d2t/t2d
    (default: only for a reduced draft vocabulary)."""
    h, heads, p = cfg["hidden_size"], cfg["num_attention_heads"], "midlayer."
    out = {"fc.weight": _w(h, 3 * h, seed=seed), "norm.weight": _w(h, seed=seed + 1) + 1,
           "lm_head.weight": _w(cfg["draft_vocab_size"], h, seed=seed + 2)}
    for i, n in enumerate(("hidden_norm", "input_layernorm", "post_attention_layernorm")):
        out[f"{p}{n}.weight"] = _w(h, seed=seed + 3 + i) + 1
    a = p + "self_attn."
    if "kv_lora_rank" in cfg:
        q_lora, kv_lora = cfg["q_lora_rank"], cfg["kv_lora_rank"]
        nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        if q_lora is None:
            out[a + "q_proj.weight"] = _w(heads * (nope + rope), 2 * h, seed=seed + 10)
        else:
            out[a + "q_a_proj.weight"] = _w(q_lora, 2 * h, seed=seed + 10)
            out[a + "q_a_layernorm.weight"] = _w(q_lora, seed=seed + 11) + 1
            out[a + "q_b_proj.weight"] = _w(heads * (nope + rope), q_lora, seed=seed + 12)
        out[a + "kv_a_proj_with_mqa.weight"] = _w(kv_lora + rope, 2 * h, seed=seed + 13)
        out[a + "kv_a_layernorm.weight"] = _w(kv_lora, seed=seed + 14) + 1
        out[a + "kv_b_proj.weight"] = _w(heads * (nope + v), kv_lora, seed=seed + 15)
        out[a + "o_proj.weight"] = _w(h, heads * v, seed=seed + 16)
    else:
        hd = cfg["head_dim"]
        for i, n in enumerate("qkv"):
            out[a + f"{n}_proj.weight"] = _w(heads * hd, 2 * h, seed=seed + 10 + i)
        out[a + "o_proj.weight"] = _w(h, heads * hd, seed=seed + 16)
    m = p + "mlp."
    if cfg.get("use_moe"):
        e, mi = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
        out[m + "gate.weight"] = _w(e, h, seed=seed + 20)
        out[m + "gate.e_score_correction_bias"] = torch.zeros(e, dtype=torch.float32)
        if fused_experts:
            out[m + "experts.gate_up_proj"] = _w(e, h, 2 * mi, seed=seed + 21)
            out[m + "experts.down_proj"] = _w(e, mi, h, seed=seed + 22)
        else:
            for i in range(e):
                out[m + f"experts.{i}.gate_proj.weight"] = _w(mi, h, seed=seed + 30 + 3 * i)
                out[m + f"experts.{i}.up_proj.weight"] = _w(mi, h, seed=seed + 31 + 3 * i)
                out[m + f"experts.{i}.down_proj.weight"] = _w(h, mi, seed=seed + 32 + 3 * i)
        shared = mi * cfg.get("n_shared_experts", 1)
        out[m + "shared_experts.gate_proj.weight"] = _w(shared, h, seed=seed + 23)
        out[m + "shared_experts.up_proj.weight"] = _w(shared, h, seed=seed + 24)
        out[m + "shared_experts.down_proj.weight"] = _w(h, shared, seed=seed + 25)
    else:
        i = cfg["intermediate_size"]
        out[m + "gate_proj.weight"] = _w(i, h, seed=seed + 20)
        out[m + "up_proj.weight"] = _w(i, h, seed=seed + 21)
        out[m + "down_proj.weight"] = _w(h, i, seed=seed + 22)
    if maps if maps is not None else cfg["draft_vocab_size"] < cfg["vocab_size"]:
        ids = torch.Generator().manual_seed(seed + 99)
        chosen = torch.randperm(cfg["vocab_size"], generator=ids)[:cfg["draft_vocab_size"]].numpy()
        d2t, t2d = build_vocab_map(chosen, cfg["vocab_size"])
        out["d2t"], out["t2d"] = torch.from_numpy(d2t), torch.from_numpy(t2d)
    if layout == "layers.0":
        out = {k.replace("midlayer.", "layers.0.", 1): v for k, v in out.items()}
    return out


def write_drafter(folder: Path, cfg: dict, **kw) -> Path:
    """A drafter folder: model.safetensors and config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in drafter_tensors(cfg, **kw).items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder
