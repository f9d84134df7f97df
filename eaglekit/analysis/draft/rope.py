"""Rotary position tables for the drafter families, from transformers' own initialisers.

Two layouts of the rotated dimensions:

* ``"halves"`` (Llama, GPT-NeoX): dimension ``i`` pairs with ``i + d/2``; transformers ``rotate_half``.
* ``"pairs"`` (DeepSeek MLA): dimension ``2i`` pairs with ``2i + 1``. transformers'
  ``apply_rotary_pos_emb_interleave`` (modeling_deepseek_v3.py) first moves the even dimensions to the
  first half and the odd ones to the second, then rotates halves; vLLM's ``DeepseekScalingRotaryEmbedding``
  (``is_neox_style=False``) rotates the pairs in place. Queries and keys are permuted alike, so their dot
  products, and so the attention, are the same either way; eaglekit permutes (:func:`pairs_to_halves`).

YaRN acts twice: its inverse frequencies and its ``attention_factor`` (``mscale / mscale_all_dim`` as
``0.1 ln(factor) + 1`` each; transformers ``_compute_yarn_parameters``, vLLM ``yarn_get_mscale``), which
scales cos and sin, come from here; the MLA softmax scale's own ``mscale_all_dim`` factor is the MLA
attention's business (:mod:`.mla_attention`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Mapping
from typing import Any

import torch

from eaglekit.core.configs.config import DrafterConfig
from eaglekit.core.configs.rotary import RotaryBase, rope_kind, rope_scaling_problem, rotary_base
from eaglekit.core.errors import ConfigError, InputError


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (..., T, d) in the halves layout with tables (T, d)."""
    return x * cos + rotate_half(x) * sin


def pairs_to_halves(x: torch.Tensor) -> torch.Tensor:
    """DeepSeek's interleaved pairs (0,1), (2,3), ... to the halves layout: (..., d) -> (..., d)."""
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], d // 2, 2).transpose(-1, -2).reshape(*x.shape[:-1], d)


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """DeepSeek's YaRN magnitude scale: ``0.1 * mscale * ln(factor) + 1`` for ``factor > 1``, else 1."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


class Rotary:
    """Inverse frequencies and the attention factor of one rotary table of ``dim`` dimensions."""

    def __init__(self, config: DrafterConfig, dim: int, device: torch.device) -> None:
        self.dim = dim
        inv, self.scale = rope_tables(config, dim)
        self.inv_freq = inv.to(device)

    def cos_sin(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(T, dim) tables at positions ``pos`` (halves layout), scaled by the attention factor."""
        freqs = pos.to(self.inv_freq.dtype)[:, None] * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], -1)
        return (emb.cos() * self.scale).to(dtype), (emb.sin() * self.scale).to(dtype)


def check_rope(config: DrafterConfig, dim: int | None = None) -> None:
    """Refuse rotary settings no table can be built from (core/configs/rotary.py), before any maths: one line
    naming the key and what to write."""
    params = getattr(config, "rope_parameters", None)   # a block drafter's config has rope_scaling alone
    for scaling in (config.rope_scaling, params):
        problem = rope_scaling_problem(scaling, theta=config.rope_theta)
        if problem:
            raise ConfigError(f"{config.source}: {problem}.")
    if dim is not None and rope_kind(config.rope_scaling or params) == "longrope":
        for key in ("short_factor", "long_factor"):
            got = len((config.rope_scaling or params)[key])
            if got != dim // 2:
                raise ConfigError(f"{config.source}: rope_scaling (longrope) {key} has {got} numbers, but {dim} "
                                  f"rotary dimensions turn {dim // 2} frequencies: one number per frequency.")


def with_rotary_base(config: DrafterConfig, choice: RotaryBase) -> DrafterConfig:
    """``config`` with its rotary table on another base: ``"config"`` (rope_theta, as vLLM, SGLang and
    transformers build it: unchanged), ``"torchspec"`` (what TorchSpec's training code uses for it) or a
    number (core/configs/rotary.py)."""
    if choice == "config":
        return config
    if not (choice == "torchspec" or (isinstance(choice, (int, float)) and not isinstance(choice, bool))):
        raise InputError(f"rotary base must be 'config', 'torchspec' or a positive number, got {choice!r}.")
    base = rotary_base(choice, config.attention, config.rope_theta, config.rope_scaling or config.rope_parameters)
    if not math.isfinite(base) or base <= 0:
        raise InputError(f"rotary base must be 'config', 'torchspec' or a positive number, got {choice!r}.")
    params = None if config.rope_parameters is None else {**config.rope_parameters, "rope_theta": base}
    return replace(config, rope_theta=base, rope_parameters=params)


def rope_tables(config: DrafterConfig, dim: int) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention scaling for ``dim`` rotary dimensions, from transformers' RoPE
    initialisers (default, llama3, yarn, ... whatever the drafter's config names), on ``config.rope_theta``
    (:func:`with_rotary_base` moves it); the settings are checked first (:func:`check_rope`)."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    check_rope(config, dim)
    raw = config.raw.get("transformer_layer_config", config.raw) if config.format == "speculators" else config.raw
    kwargs: dict[str, Any] = {"hidden_size": config.hidden_size, "num_attention_heads": config.num_attention_heads,
                              "head_dim": dim,
                              "max_position_embeddings": config.max_position_embeddings or 2048}
    if isinstance(raw, Mapping) and isinstance(raw.get("rope_parameters"), Mapping):
        kwargs["rope_parameters"] = dict(raw["rope_parameters"])
        if config.rope_theta is not None:
            kwargs["rope_parameters"]["rope_theta"] = config.rope_theta
    else:
        kwargs["rope_theta"] = config.rope_theta or 10000.0
        kwargs["rope_scaling"] = dict(config.rope_scaling) if config.rope_scaling else None
    cfg = LlamaConfig(**kwargs)
    rope_type = (cfg.rope_parameters or {}).get("rope_type", "default")
    if rope_type == "default":
        theta = cfg.rope_parameters["rope_theta"]
        inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        return inv, 1.0
    try:
        inv, scale = ROPE_INIT_FUNCTIONS[rope_type](cfg, "cpu")
    except KeyError as e:
        raise ConfigError(f"{config.source}: RoPE type {rope_type!r} is unknown to this transformers.") from e
    return inv.float(), float(scale)
