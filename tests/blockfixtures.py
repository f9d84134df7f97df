"""Tiny block-drafter checkpoints (DFlash, DFlash2, DSpark), a matching target and an EAGLE-3 drafter for tests.

A plain module: import the writers (and the ``block_ckpts`` fixture) where needed::

    from blockfixtures import block_ckpts, write_dflash  # noqa: F401

Each writer saves ``config.json`` and ``model.safetensors`` whose tensor names and shapes follow the authors'
module trees (docs/block-drafters.md): random small float32 tensors from a fixed seed, so every run writes the
same bytes. Sizes: hidden 32, 4 query heads and 2 KV heads of 8, MLP 64, vocabulary 128; the target has 6
layers, hidden 32, vocabulary 128.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

H, HEADS, KV, HEAD_DIM, INTER, VOCAB = 32, 4, 2, 8, 64, 128
TARGET_LAYERS = 6
MASK = 120

TARGET_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H, "num_hidden_layers": TARGET_LAYERS,
    "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HEAD_DIM, "intermediate_size": INTER,
    "vocab_size": VOCAB, "rope_theta": 1000000, "max_position_embeddings": 4096,
}
_QWEN3_BODY = {
    "model_type": "qwen3", "hidden_size": H, "intermediate_size": INTER, "head_dim": HEAD_DIM,
    "num_attention_heads": HEADS, "num_key_value_heads": KV, "num_hidden_layers": 2, "attention_bias": False,
    "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 1000000, "rope_scaling": None,
    "max_position_embeddings": 4096, "tie_word_embeddings": False, "vocab_size": VOCAB,
}
#: z-lab's DFlash layout: block_size at the top level, the rest in dflash_config
DFLASH_CONFIG = {
    "architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"}, **_QWEN3_BODY,
    "block_size": 8, "dflash_config": {"mask_token_id": MASK, "target_layer_ids": [1, 3]},
    "num_target_layers": TARGET_LAYERS, "layer_types": ["full_attention"] * 2,
}
#: DFlash2 (GQA): every DFlash key inside dflash_config, plus the selector and the dynamic convolutions
DFLASH2_CONFIG = {
    "architectures": ["DFlash2DraftModel"], **_QWEN3_BODY, "is_causal": False,
    "dflash_config": {"block_size": 8, "conv_group_size": 8, "conv_kernel_size": 2, "final_logit_softcapping": 20.0,
                      "mask_token_id": MASK, "output_multiplier": 0.25, "selector_rank": 8, "selector_top_k": 4,
                      "target_layer_ids": [1, 3], "attention_mode": "gqa"},
    "layer_types": ["sliding_attention"] * 2, "sliding_window": 64, "use_sliding_window": True,
    "num_target_layers": TARGET_LAYERS,
}
#: DeepSpec's DSpark: every key at the top level, a gated Markov head and a confidence head reading it
DSPARK_CONFIG = {
    "architectures": ["Qwen3DSparkModel"], **_QWEN3_BODY, "num_target_layers": TARGET_LAYERS, "block_size": 7,
    "mask_token_id": MASK, "target_layer_ids": [1, 3], "num_anchors": 1, "enable_confidence_head": True,
    "confidence_head_with_markov": True, "markov_rank": 8, "markov_head_type": "gated",
}
#: an EAGLE-3 drafter of the same widths (full vocabulary: no d2t/t2d)
EAGLE3_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H, "intermediate_size": INTER,
    "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HEAD_DIM, "num_hidden_layers": 1,
    "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "hidden_act": "silu", "rms_norm_eps": 1e-6,
    "rope_theta": 1000000, "max_position_embeddings": 4096, "target_hidden_size": H,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]},
}


def _layer(i: int) -> dict[str, tuple[int, ...]]:
    p = f"layers.{i}."
    return {p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
            p + "self_attn.q_proj.weight": (HEADS * HEAD_DIM, H), p + "self_attn.k_proj.weight": (KV * HEAD_DIM, H),
            p + "self_attn.v_proj.weight": (KV * HEAD_DIM, H), p + "self_attn.o_proj.weight": (H, HEADS * HEAD_DIM),
            p + "self_attn.q_norm.weight": (HEAD_DIM,), p + "self_attn.k_norm.weight": (HEAD_DIM,),
            p + "mlp.gate_proj.weight": (INTER, H), p + "mlp.up_proj.weight": (INTER, H),
            p + "mlp.down_proj.weight": (H, INTER)}


def dflash_shapes(n_aux: int = 2, layers: int = 2) -> dict[str, tuple[int, ...]]:
    out = {"fc.weight": (H, n_aux * H), "hidden_norm.weight": (H,), "norm.weight": (H,)}
    for i in range(layers):
        out.update(_layer(i))
    return out


def dflash2_shapes() -> dict[str, tuple[int, ...]]:
    out = dflash_shapes()
    for i in range(2):
        for conv in ("attention_conv", "mlp_conv"):
            out[f"layers.{i}.{conv}.base_kernel"] = (2, 2, H)
            out[f"layers.{i}.{conv}.kernel_projection.weight"] = (2 * 2 * (H // 8), H)
    out["candidate_selector.hidden_projection.weight"] = (8, H)
    out["candidate_selector.predecessor_codebook.weight"] = (VOCAB, 8)  # saved as an nn.Embedding
    out["candidate_selector.successor_codebook"] = (VOCAB, 8)
    out["embed_tokens.weight"] = (VOCAB, H)  # DFlash2 checkpoints may carry it
    return out


def dspark_shapes() -> dict[str, tuple[int, ...]]:
    out = dflash_shapes()
    out.update({"markov_head.markov_w1.weight": (VOCAB, 8), "markov_head.markov_w2.weight": (VOCAB, 8),
                "markov_head.gate_proj.weight": (8, H + 8), "markov_head.gate_proj.bias": (8,),
                "confidence_head.proj.weight": (1, H + 8), "confidence_head.proj.bias": (1,),
                "embed_tokens.weight": (VOCAB, H), "lm_head.weight": (VOCAB, H)})
    return out


def eagle3_shapes() -> dict[str, tuple[int, ...]]:
    m = "midlayer."
    return {"fc.weight": (H, 3 * H), "norm.weight": (H,), "lm_head.weight": (VOCAB, H),
            m + "hidden_norm.weight": (H,), m + "input_layernorm.weight": (H,),
            m + "post_attention_layernorm.weight": (H,),
            m + "self_attn.q_proj.weight": (HEADS * HEAD_DIM, 2 * H), m + "self_attn.k_proj.weight": (KV * HEAD_DIM, 2 * H),
            m + "self_attn.v_proj.weight": (KV * HEAD_DIM, 2 * H), m + "self_attn.o_proj.weight": (H, HEADS * HEAD_DIM),
            m + "mlp.gate_proj.weight": (INTER, H), m + "mlp.up_proj.weight": (INTER, H),
            m + "mlp.down_proj.weight": (H, INTER)}


def target_shapes() -> dict[str, tuple[int, ...]]:
    return {"model.embed_tokens.weight": (VOCAB, H), "lm_head.weight": (VOCAB, H), "model.norm.weight": (H,)}


def write_checkpoint(folder: Path, config: Mapping | None, shapes: Mapping[str, tuple[int, ...]], *,
                     seed: int = 0) -> Path:
    """``folder`` with config.json (unless None) and model.safetensors holding ``shapes`` (seeded float32)."""
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.02).astype(np.float32) for name, shape in sorted(shapes.items())}
    save_file(tensors, str(folder / "model.safetensors"))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def edited(config: Mapping, **changes) -> dict:
    """A deep copy of ``config`` with ``changes``; a key ``dflash_config__x`` sets ``dflash_config["x"]``."""
    out = copy.deepcopy(dict(config))
    for key, value in changes.items():
        if key.startswith("dflash_config__"):
            out["dflash_config"][key.removeprefix("dflash_config__")] = value
        else:
            out[key] = value
    return out


def write_dflash(folder: Path, **changes) -> Path:
    return write_checkpoint(folder, edited(DFLASH_CONFIG, **changes), dflash_shapes(), seed=1)


def write_dflash2(folder: Path, **changes) -> Path:
    return write_checkpoint(folder, edited(DFLASH2_CONFIG, **changes), dflash2_shapes(), seed=2)


def write_dspark(folder: Path, **changes) -> Path:
    return write_checkpoint(folder, edited(DSPARK_CONFIG, **changes), dspark_shapes(), seed=3)


def write_eagle3(folder: Path) -> Path:
    return write_checkpoint(folder, EAGLE3_CONFIG, eagle3_shapes(), seed=4)


def write_target(folder: Path, **changes) -> Path:
    return write_checkpoint(folder, {**TARGET_CONFIG, **changes}, target_shapes(), seed=5)


@pytest.fixture(scope="module")
def block_ckpts(tmp_path_factory) -> dict[str, Path]:
    """One folder per kind: dflash, dflash2, dspark, eagle3, target (written once per module)."""
    root = tmp_path_factory.mktemp("block")
    return {"dflash": write_dflash(root / "dflash"), "dflash2": write_dflash2(root / "dflash2"),
            "dspark": write_dspark(root / "dspark"), "eagle3": write_eagle3(root / "eagle3"),
            "target": write_target(root / "target")}
