"""Tensor-name normalisation across EAGLE-3 layouts, and the roles of an EAGLE-3 drafter's tensors.

SpecForge/SGLang name the single decoder layer ``midlayer.*``; vllm-project/speculators and vLLM name
it ``layers.0.*`` (docs/domain.md, "Checkpoint layout"). Comparisons key tensors by the SpecForge spelling.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

_PREFIXES = (
    (re.compile(r"^model\.layers\.0\."), "midlayer."),
    (re.compile(r"^layers\.0\."), "midlayer."),
    (re.compile(r"^model\.(?=(embed_tokens|norm|fc|lm_head)\b)"), ""),
)

Role = Literal["trainable", "frozen-embedding", "vocab-map", "other"]


def normalize_name(name: str) -> str:
    """``layers.0.self_attn.q_proj.weight`` -> ``midlayer.self_attn.q_proj.weight``; others unchanged."""
    for pattern, repl in _PREFIXES:
        name = pattern.sub(repl, name, count=1)
    return name


def normalized(names: Iterable[str]) -> dict[str, str]:
    """Map each normalised name to the original one (first spelling wins)."""
    out: dict[str, str] = {}
    for n in names:
        out.setdefault(normalize_name(n), n)
    return out


def find(inventory, key: str):
    """The tensor of ``inventory`` whose normalised name is ``key`` (e.g. "d2t", "midlayer.mlp..."), or None."""
    for t in inventory.tensors:
        if normalize_name(t.name) == key:
            return t
    return None


def role(name: str) -> Role:
    """What a tensor is for: the embedding is frozen (taken from the target), d2t/t2d are buffers."""
    n = normalize_name(name)
    if n in ("d2t", "t2d"):
        return "vocab-map"
    if n.startswith("embed_tokens."):
        return "frozen-embedding"
    if n.endswith((".weight", ".bias")):
        return "trainable"
    return "other"


#: What each tensor of a drafter is part of, for warm starts and similarity: ``fc`` (fc, fc_norm, the
#: input_norm before fc), ``attention`` (midlayer.self_attn.*), ``mlp`` (midlayer.mlp.*), ``norms`` (the layer's
#: hidden_norm / input_layernorm / post_attention_layernorm and the final norm), ``lm_head``, ``vocab map``
#: (d2t, t2d), ``embedding`` (embed_tokens, frozen).
Family = Literal["fc", "attention", "mlp", "norms", "lm_head", "vocab map", "embedding", "other"]
FAMILIES: tuple[Family, ...] = ("fc", "attention", "mlp", "norms", "lm_head", "vocab map", "embedding", "other")
#: Projections only DeepSeek MLA attention has (vLLM, SGLang, TorchSpec and Model-Optimizer exports); a plain
#: ``q_proj`` is MLA's too when ``q_lora_rank`` is null, so kv_a_proj_with_mqa / kv_b_proj decide.
MLA_ATTENTION = ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj")
LLAMA_ATTENTION = ("k_proj", "v_proj")
AttentionKind = Literal["llama", "mla"]
MlpKind = Literal["dense", "moe"]


def family(name: str) -> Family:
    """The family of one tensor (its name in any layout: ``layers.0.`` or ``midlayer.``)."""
    n = normalize_name(name)
    if n in ("d2t", "t2d"):
        return "vocab map"
    if n.startswith("embed_tokens."):
        return "embedding"
    if n.startswith(("fc.", "fc_norm.", "input_norm.")):
        return "fc"
    if n.startswith("lm_head."):
        return "lm_head"
    if n.startswith("midlayer.self_attn."):
        return "attention"
    if n.startswith("midlayer.mlp."):
        return "mlp"
    if n.startswith(("norm.", "midlayer.hidden_norm.", "midlayer.input_layernorm.",
                     "midlayer.post_attention_layernorm.")):
        return "norms"
    return "other"


def attention_kind(names: Iterable[str]) -> AttentionKind | None:
    """``"mla"`` (q_a/kv_a/kv_b projections), ``"llama"`` (q/k/v_proj) or None (no attention tensors)."""
    parts = {normalize_name(n).split(".")[2] for n in names
             if normalize_name(n).startswith("midlayer.self_attn.") and normalize_name(n).count(".") >= 3}
    if parts & set(MLA_ATTENTION):
        return "mla"
    if parts & set(LLAMA_ATTENTION) or "q_proj" in parts:
        return "llama"
    return None


def mlp_kind(names: Iterable[str]) -> MlpKind | None:
    """``"moe"`` (a router ``mlp.gate`` and experts), ``"dense"`` (gate/up/down_proj) or None (no MLP)."""
    parts = {normalize_name(n).split(".")[2] for n in names
             if normalize_name(n).startswith("midlayer.mlp.") and normalize_name(n).count(".") >= 3}
    if parts & {"gate", "experts", "shared_experts"}:
        return "moe"
    if parts & {"gate_proj", "up_proj", "down_proj", "gate_up_proj"}:
        return "dense"
    return None


def attention_words(kind: AttentionKind | None) -> str:
    """The attention kind in words, naming its projections."""
    return {"mla": "MLA (q_a/q_b, kv_a_proj_with_mqa/kv_b_proj)", "llama": "Llama (q/k/v/o_proj)",
            None: "none"}[kind]


def mlp_words(kind: MlpKind | None) -> str:
    """The MLP kind in words."""
    return {"moe": "MoE (router mlp.gate, routed and shared experts)", "dense": "dense (gate/up/down_proj)",
            None: "none"}[kind]


def expert_layout(names: Iterable[str]) -> Literal["fused", "per-expert"] | None:
    """How a MoE MLP stores its routed experts: ``"fused"`` (TorchSpec: ``mlp.experts.gate_up_proj``
    [E, H, 2I] and ``mlp.experts.down_proj`` [E, I, H], stored input-major) or ``"per-expert"``
    (transformers' DeepseekV3MoE: ``mlp.experts.{i}.{gate,up,down}_proj.weight``); None without experts."""
    experts = [normalize_name(n) for n in names if normalize_name(n).startswith("midlayer.mlp.experts.")]
    if any(n.split(".")[3].isdigit() for n in experts if n.count(".") >= 4):
        return "per-expert"
    return "fused" if experts else None
