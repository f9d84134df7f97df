"""The demo drafters' specification: sizes, labels and config builders, shared by the demo world
(:mod:`eaglekit.demo.world`) and its Hub shelf (:mod:`eaglekit.demo.shelf`)."""

from __future__ import annotations

from typing import Any

DEMO_VERSION = 4
LABEL = "SYNTHETIC demo data (random weights), Kimi-K2 EAGLE-3 layout scaled 1/16; not a real model"

H, I, HEADS, HEAD_DIM, VOCAB, DRAFT_VOCAB, LAYERS = 448, 1152, 4, 128, 10240, 2000, 61
AUX_IDS = [2, 30, 58]
FT_SHARED = 1800        # K2 draft tokens the fine-tune keeps; the other 200 are new
SCRATCH_SHARED = 1500   # K2 draft tokens the scratch drafter's data also ranks top-2000


def specforge_config(*, hidden=H, inter=I, heads=HEADS, vocab=VOCAB, draft_vocab=DRAFT_VOCAB,
                     max_pos=131072) -> dict[str, Any]:
    """A SpecForge/SGLang drafter config shaped like SpecForge configs/kimi-k2-eagle3.json."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX_IDS, "use_aux_hidden_state": True},
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 163584, "eos_token_id": 163585,
        "head_dim": HEAD_DIM, "hidden_act": "silu", "hidden_size": hidden, "initializer_range": 0.02,
        "intermediate_size": inter, "max_position_embeddings": max_pos, "model_type": "kimi_k2",
        "num_attention_heads": heads, "num_hidden_layers": 1, "num_key_value_heads": heads,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.53.2", "use_cache": True,
        "vocab_size": vocab, "draft_vocab_size": draft_vocab, "eaglekit_demo": LABEL,
    }


def speculators_config(base: dict[str, Any]) -> dict[str, Any]:
    """The same drafter in the vllm-project/speculators format (src/speculators/config.py)."""
    layer = {k: base[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                   "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps",
                                   "max_position_embeddings", "rope_theta", "rope_scaling", "hidden_act",
                                   "attention_bias", "num_hidden_layers")}
    return {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.2.0",
        "draft_vocab_size": base["draft_vocab_size"], "norm_before_residual": False,
        "target_hidden_size": None, "eagle_aux_hidden_state_layer_ids": AUX_IDS,
        "transformer_layer_config": {"model_type": "llama", **layer},
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": "moonshotai/Kimi-K2-Instruct", "architectures": ["DeepseekV3ForCausalLM"]},
        },
        "torch_dtype": "bfloat16", "transformers_version": "4.53.2", "eaglekit_demo": LABEL,
    }
