"""What a MoE drafter's missing config keys mean to each program that reads them (pure: a config in, a table out).

A TorchSpec MoE drafter's exported config is its raw training config (``tools/convert_to_hf.py`` copies it), so a
key left out of training stays out of the export, and each reader fills it its own way:

* transformers ``DeepseekV3Config`` (``models/deepseek_v3/configuration_deepseek_v3.py``): ``n_group`` 8,
  ``topk_group`` 4, ``norm_topk_prob`` true, ``routed_scaling_factor`` 2.5, ``n_shared_experts`` 1,
  ``n_routed_experts`` 256, ``num_experts_per_tok`` 8, ``moe_intermediate_size`` 2048; it has no
  ``scoring_func`` or ``topk_method`` (its router is always sigmoid with the bias-corrected group top-k).
* TorchSpec (lightseekorg/TorchSpec ``torchspec/models/draft/moe.py``, ``DeepseekV3MoEBlock``): builds the
  config with ``DeepseekV3Config``, so the values above; never reads ``scoring_func`` (``router_logits.sigmoid()``)
  nor ``topk_method`` (always ``e_score_correction_bias`` for the choice).
* vLLM (vllm-project/vllm ``vllm/model_executor/models/deepseek_v2.py``, ``DeepseekV2MoE``): the
  ``DeepseekV3Config`` values for the keys that class has, ``getattr(config, "scoring_func", "softmax")`` and
  ``getattr(config, "topk_method", None) == "noaux_tc"`` for the correction bias: a config without them is routed
  by softmax, without the bias. Its EAGLE-3 MLA drafter (``deepseek_eagle3.py``) builds a dense MLP and reads
  none of these keys.
* SGLang: its MLA drafters (``deepseek_eagle3.py``, ``kimi_k25_eagle3.py``) build a dense MLP: no MoE key is read.

eaglekit measures as TorchSpec trains (core/configs/config.py ``MOE_DEFAULTS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The readers of a MoE drafter's config, as the table shows them.
READERS = ("transformers DeepseekV3Config", "TorchSpec", "vLLM DeepseekV2MoE", "SGLang")
_NOT_A_KEY = "not a key (always {})"
#: key -> value each reader uses when the key is missing (see the module docstring for the sources)
MISSING: Mapping[str, Mapping[str, Any]] = {
    "n_group": {"transformers DeepseekV3Config": 8, "TorchSpec": 8, "vLLM DeepseekV2MoE": 8},
    "topk_group": {"transformers DeepseekV3Config": 4, "TorchSpec": 4, "vLLM DeepseekV2MoE": 4},
    "norm_topk_prob": {"transformers DeepseekV3Config": True, "TorchSpec": True, "vLLM DeepseekV2MoE": True},
    "routed_scaling_factor": {"transformers DeepseekV3Config": 2.5, "TorchSpec": 2.5, "vLLM DeepseekV2MoE": 2.5},
    "n_shared_experts": {"transformers DeepseekV3Config": 1, "TorchSpec": 1, "vLLM DeepseekV2MoE": 1},
    "n_routed_experts": {"transformers DeepseekV3Config": 256, "TorchSpec": 256, "vLLM DeepseekV2MoE": 256},
    "num_experts_per_tok": {"transformers DeepseekV3Config": 8, "TorchSpec": 8, "vLLM DeepseekV2MoE": 8},
    "moe_intermediate_size": {"transformers DeepseekV3Config": 2048, "TorchSpec": 2048, "vLLM DeepseekV2MoE": 2048},
    "scoring_func": {"transformers DeepseekV3Config": _NOT_A_KEY.format("sigmoid"),
                     "TorchSpec": "never read (always sigmoid)", "vLLM DeepseekV2MoE": "softmax"},
    "topk_method": {"transformers DeepseekV3Config": _NOT_A_KEY.format("bias-corrected noaux_tc"),
                    "TorchSpec": "never read (always noaux_tc, bias-corrected)",
                    "vLLM DeepseekV2MoE": "none (no correction bias: plain grouped top-k)"},
}
SGLANG = "not read (its MLA drafter builds a dense MLP)"


def missing_moe_keys(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """For a MoE drafter's raw config (``use_moe`` true), each MoE key it leaves out -> the value each reader
    (:data:`READERS`) fills in. Empty for a dense drafter or a config that names every key."""
    if raw.get("use_moe") is not True:
        return {}
    return {k: {**v, "SGLang": SGLANG} for k, v in MISSING.items() if raw.get(k) is None}


def readers_disagree(values: Mapping[str, Any]) -> bool:
    """Whether the readers that route by the key (all but SGLang's dense drafter) fill it differently, as routing
    goes: TorchSpec's sigmoid and vLLM's softmax differ; "always sigmoid" and "never read (always sigmoid)" do not."""
    def routing(v: Any) -> Any:
        if isinstance(v, str):
            for word in ("sigmoid", "softmax", "noaux_tc", "none"):
                if word in v:
                    return word
        return v
    seen = {routing(v) for r, v in values.items() if r != "SGLang"}
    return len(seen) > 1


def missing_words(raw: Mapping[str, Any]) -> str | None:
    """The missing keys and what each reader makes of them, one sentence; None when nothing is missing."""
    table = missing_moe_keys(raw)
    if not table:
        return None
    parts = []
    for key, values in table.items():
        shown = "; ".join(f"{r}: {v}" for r, v in values.items() if r != "SGLang")
        parts.append(f"{key} ({'READERS DIFFER: ' if readers_disagree(values) else ''}{shown})")
    return "the config leaves out " + ", ".join(parts) + f"; SGLang: {SGLANG}"


__all__ = ["MISSING", "READERS", "missing_moe_keys", "missing_words", "readers_disagree"]
