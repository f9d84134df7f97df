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
