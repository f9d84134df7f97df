"""Published target configs the account and the tests price: the fields the cost model reads, as the
models' own config.json files give them (moonshotai/Kimi-K2-Instruct: FP8 e4m3 weights in 128 x 128 blocks;
moonshotai/Kimi-K2.5: the same kimi_k2 language model under ``text_config``, compressed-tensors INT4
experts in groups of 32 with attention, shared experts and lm_head left in bf16; Llama-3.1-8B for a dense
target; Qwen/Qwen3-30B-A3B for a mixture of experts without shared experts)."""

from __future__ import annotations

from typing import Any

from eaglekit.core.errors import InputError

__all__ = ["DENSE_LLAMA_8B", "KIMI_K2_FP8", "KIMI_K2_TEXT", "KIMI_K25_INT4", "PUBLISHED", "QWEN3_30B_A3B", "published"]

KIMI_K2_TEXT: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 64,
    "num_key_value_heads": 64, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 384, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 1, "vocab_size": 163840, "tie_word_embeddings": False,
}
KIMI_K2_FP8: dict[str, Any] = {
    **KIMI_K2_TEXT,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]},
}
KIMI_K25_INT4: dict[str, Any] = {
    "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "text_config": KIMI_K2_TEXT,
    "quantization_config": {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
    },
}
DENSE_LLAMA_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "torch_dtype": "bfloat16",
}

QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

#: Short names for the configs above: name -> (label, config).
PUBLISHED: dict[str, tuple[str, dict[str, Any]]] = {
    "kimi-k25-int4": ("K2.5, INT4 experts", KIMI_K25_INT4),
    "kimi-k2-fp8": ("K2, FP8", KIMI_K2_FP8),
    "llama-3.1-8b": ("Llama-3.1-8B, bf16", DENSE_LLAMA_8B),
    "qwen3-30b-a3b": ("Qwen3-30B-A3B, bf16", QWEN3_30B_A3B),
}


def published(name: str) -> tuple[str, dict[str, Any]]:
    """(label, config) of a published target by short name (see :data:`PUBLISHED`)."""
    if name not in PUBLISHED:
        raise InputError(f"unknown published target {name!r}: choose one of {', '.join(PUBLISHED)}, or give a "
                         "config.json")
    return PUBLISHED[name]
