"""Llama attention (grouped-query, RoPE in the halves layout), as EAGLE-3's Llama drafters build it.

Checked against SpecForge ``specforge/modeling/draft/llama3_eagle.py``, SGLang and vLLM ``llama_eagle3.py``
and speculators ``src/speculators/models/eagle3/core.py``: q, k and v project the layer input of width 2H
(embedding half first, then the hidden half); RoPE on the whole head; softmax scale ``1/sqrt(head_dim)``;
``o_proj`` from ``heads x head_dim`` back to H.
"""

from __future__ import annotations

import math

import torch

from eaglekit.analysis.draft.rope import Rotary, apply_rope
from eaglekit.analysis.draft.weights import Weights
from eaglekit.core.configs.config import DrafterConfig
from eaglekit.core.errors import ConfigError

TENSORS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight")


class LlamaAttention:
    """q/k/v/o attention: :meth:`entries` gives one query, key and value per query head."""

    family = "llama"

    @staticmethod
    def tensors(config: DrafterConfig, prefix: str) -> tuple[str, ...]:
        return tuple(prefix + t for t in TENSORS)

    def __init__(self, config: DrafterConfig, weights: Weights, prefix: str) -> None:
        p, src = prefix + "self_attn.", weights.source
        q, k, v = (weights.get(p + f"{n}_proj.weight") for n in "qkv")
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        if q.shape[0] % self.heads or self.heads % self.kv_heads:
            raise ConfigError(f"{src}: {p}q_proj.weight has {q.shape[0]} rows, not a multiple of num_attention_heads "
                              f"{self.heads} (or num_key_value_heads {self.kv_heads} does not divide it).")
        self.head_dim = q.shape[0] // self.heads
        if k.shape[0] != self.kv_heads * self.head_dim or v.shape != k.shape:
            raise ConfigError(f"{src}: {p}k_proj.weight {list(k.shape)} / v_proj.weight {list(v.shape)} do not hold "
                              f"num_key_value_heads {self.kv_heads} x head_dim {self.head_dim} rows.")
        self.in_features = q.shape[1]
        self._qkv_w = torch.cat([q, k, v])                              # (q + k + v rows, 2H)
        self._split = (q.shape[0], k.shape[0], v.shape[0])
        self.o = weights.get(p + "o_proj.weight")                       # (H, nh * hd)
        self.value_dim = self.head_dim
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.rotary = Rotary(config, self.head_dim, weights.device)

    def entries(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Layer input x (T, 2H) at positions ``pos`` -> q, k, v (nh, T, hd), RoPE applied, keys and values
        repeated for every query head."""
        T = x.shape[0]
        nq, nk, _ = self._split
        qkv = x @ self._qkv_w.T                                         # (T, q + k + v)
        q = qkv[:, :nq].reshape(T, self.heads, self.head_dim).transpose(0, 1)
        k = qkv[:, nq:nq + nk].reshape(T, self.kv_heads, self.head_dim).transpose(0, 1)
        v = qkv[:, nq + nk:].reshape(T, self.kv_heads, self.head_dim).transpose(0, 1)
        cos, sin = self.rotary.cos_sin(pos, x.dtype)                    # (T, hd)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, 0)
            v = v.repeat_interleave(self.heads // self.kv_heads, 0)
        return q, k, v

    def output(self, attn: torch.Tensor) -> torch.Tensor:
        """(nh, T, hd) -> (T, H) through o_proj."""
        return attn.transpose(0, 1).reshape(attn.shape[1], -1) @ self.o.T
