"""DeepSeek Multi-head Latent Attention (MLA), as the Kimi EAGLE-3 drafters build it.

Checked against transformers ``models/deepseek_v3/modeling_deepseek_v3.py`` (``DeepseekV3Attention``,
``apply_rotary_pos_emb_interleave``, ``yarn_get_mscale``), vLLM ``model_executor/models/deepseek_v2.py``
(``DeepseekV2MLAAttention``) and ``deepseek_eagle3.py`` (the drafter: the same attention reading the EAGLE-3
layer input of width 2H) and SpecForge's ``DeepseekV3ForCausalLMEagle3`` (docs/acceptance.md):

* queries: ``q_b_proj(q_a_layernorm(q_a_proj(x)))``, or ``q_proj(x)`` when ``q_lora_rank`` is null;
  per head ``qk_nope_head_dim`` plain dimensions then ``qk_rope_head_dim`` rotary ones;
* keys and values: ``kv_a_proj_with_mqa(x)`` = the ``kv_lora_rank`` latent, then one ``qk_rope_head_dim``
  rotary key shared by every head; ``kv_b_proj(kv_a_layernorm(latent))`` = per head ``qk_nope_head_dim``
  key dimensions then ``v_head_dim`` value dimensions;
* rotary on the rope dimensions only, DeepSeek's interleaved pairs (``rope_interleave``, default true);
  a ``qk_rope_head_dim`` of 0, or ``mla_use_nope: true`` (Kimi-K3, Kimi-Linear: the 64 rope slots are kept
  but never turned; TensorRT-LLM's K3 MLA), is NoPE MLA, scaled by ``qk ** -0.5`` alone;
* softmax scale ``(qk_nope_head_dim + qk_rope_head_dim) ** -0.5``, times ``yarn_get_mscale(factor,
  mscale_all_dim) ** 2`` when the rotary scaling is YaRN with ``mscale_all_dim`` (YaRN acts twice: here
  and on the rotary tables, :mod:`.rope`);
* ``o_proj`` from ``heads x v_head_dim`` back to H.

Keys are expanded to one per head (the latent is not kept): the all-positions pass needs per-head keys
anyway, and a drafter has one layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from eaglekit.analysis.draft.ops import rms_norm
from eaglekit.analysis.draft.rope import Rotary, apply_rope, check_rope, pairs_to_halves, yarn_mscale
from eaglekit.analysis.draft.weights import Weights
from eaglekit.core.configs.config import DrafterConfig
from eaglekit.core.errors import ConfigError

REQUIRED_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


class MLAAttention:
    family = "mla"

    @staticmethod
    def tensors(config: DrafterConfig, prefix: str) -> tuple[str, ...]:
        p = prefix + "self_attn."
        q = ("q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight") if config.mla.get("q_lora_rank") \
            else ("q_proj.weight",)
        return tuple(p + n for n in (*q, "kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight", "kv_b_proj.weight",
                                     "o_proj.weight"))

    def __init__(self, config: DrafterConfig, weights: Weights, prefix: str) -> None:
        p, src, m = prefix + "self_attn.", weights.source, config.mla
        check_rope(config)  # before any maths: the YaRN factor also scales the softmax (softmax_mscale)
        missing = [k for k in REQUIRED_KEYS if not isinstance(m.get(k), int)]
        if missing:
            raise ConfigError(f"{src}: an MLA drafter config needs {', '.join(missing)} (the latent and head "
                              "dimensions of its attention).")
        self.heads = config.num_attention_heads
        rank, self.nope, self.rope, self.value_dim = (int(m[k]) for k in REQUIRED_KEYS)
        q_rank = m.get("q_lora_rank")
        if self.rope % 2:
            raise ConfigError(f"{src}: qk_rope_head_dim is {self.rope}, odd: rotary embedding turns pairs of "
                              "dimensions.")
        qk = self.nope + self.rope
        has_qa, has_q = p + "q_a_proj.weight" in weights, p + "q_proj.weight" in weights
        if q_rank is None and has_qa:
            raise ConfigError(f"{src}: {p}q_a_proj.weight is present but q_lora_rank is null (a null rank means one "
                              "plain q_proj): the config and the checkpoint disagree.")
        if q_rank is not None and not has_qa:
            raise ConfigError(f"{src}: q_lora_rank is {q_rank} but {p}q_a_proj.weight is missing"
                              + (f" ({p}q_proj.weight is there: set q_lora_rank to null)." if has_q else "."))
        if q_rank is not None:
            self.q_a = weights.get(p + "q_a_proj.weight")                   # (q_rank, 2H)
            self.q_a_norm = weights.get(p + "q_a_layernorm.weight")         # (q_rank,)
            self.q_b = weights.get(p + "q_b_proj.weight")                   # (nh * qk, q_rank)
            self.in_features = self.q_a.shape[1]
            _expect(src, p + "q_a_proj.weight", self.q_a, (q_rank, None), "q_lora_rank")
            _expect(src, p + "q_a_layernorm.weight", self.q_a_norm, (q_rank,), "q_lora_rank")
            _expect(src, p + "q_b_proj.weight", self.q_b, (self.heads * qk, q_rank),
                    "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim), q_lora_rank")
            self.q = None
        else:
            self.q = weights.get(p + "q_proj.weight")                       # (nh * qk, 2H)
            self.in_features = self.q.shape[1]
            _expect(src, p + "q_proj.weight", self.q, (self.heads * qk, None),
                    "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)")
        self.kv_a = weights.get(p + "kv_a_proj_with_mqa.weight")            # (rank + rope, 2H)
        _expect(src, p + "kv_a_proj_with_mqa.weight", self.kv_a, (rank + self.rope, self.in_features),
                "kv_lora_rank + qk_rope_head_dim, the query projection's input width")
        self.kv_a_norm = weights.get(p + "kv_a_layernorm.weight")           # (rank,)
        _expect(src, p + "kv_a_layernorm.weight", self.kv_a_norm, (rank,), "kv_lora_rank")
        self.kv_b = weights.get(p + "kv_b_proj.weight")                     # (nh * (nope + v), rank)
        _expect(src, p + "kv_b_proj.weight", self.kv_b, (self.heads * (self.nope + self.value_dim), rank),
                "num_attention_heads x (qk_nope_head_dim + v_head_dim), kv_lora_rank")
        self.o = weights.get(p + "o_proj.weight")                           # (H, nh * v)
        _expect(src, p + "o_proj.weight", self.o, (config.hidden_size, self.heads * self.value_dim),
                "hidden_size, num_attention_heads x v_head_dim")
        self.rank = rank
        self.eps = config.rms_norm_eps or 1e-6
        self.interleaved = config.raw.get("rope_interleave", True) is not False
        #: Kimi-K3's ``mla_use_nope``: the rope dimensions are there but never turned, no YaRN factor on the scale
        self.nope_only = config.raw.get("mla_use_nope") is True
        self.rotary = Rotary(config, self.rope, weights.device) if self.rope and not self.nope_only else None
        self.scale = qk ** -0.5 * (1.0 if self.nope_only else softmax_mscale(config.rope_scaling) ** 2)

    def entries(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Layer input x (T, 2H) at positions ``pos`` -> q, k (nh, T, nope + rope), v (nh, T, v_head_dim)."""
        T, nh = x.shape[0], self.heads
        if self.q is None:
            q = rms_norm(x @ self.q_a.T, self.q_a_norm, self.eps) @ self.q_b.T
        else:
            q = x @ self.q.T                                                # (T, nh * qk)
        q = q.reshape(T, nh, self.nope + self.rope).transpose(0, 1)         # (nh, T, qk)
        ckv = x @ self.kv_a.T                                               # (T, rank + rope)
        latent, k_rot = ckv[:, :self.rank], ckv[:, self.rank:]
        kv = (rms_norm(latent, self.kv_a_norm, self.eps) @ self.kv_b.T).reshape(T, nh, -1).transpose(0, 1)
        k_nope, v = kv[..., :self.nope], kv[..., self.nope:]                # (nh, T, nope), (nh, T, v)
        if self.rotary is None:  # NoPE: the rope slots pass through unturned
            return q, torch.cat([k_nope, k_rot[None].expand(nh, T, self.rope)], -1), v
        q_nope, q_rot = q[..., :self.nope], q[..., self.nope:]
        if self.interleaved:
            q_rot, k_rot = pairs_to_halves(q_rot), pairs_to_halves(k_rot)
        cos, sin = self.rotary.cos_sin(pos, x.dtype)                        # (T, rope)
        q_rot, k_rot = apply_rope(q_rot, cos, sin), apply_rope(k_rot, cos, sin)
        q = torch.cat([q_nope, q_rot], -1)
        k = torch.cat([k_nope, k_rot[None].expand(nh, T, self.rope)], -1)   # the rotary key is every head's
        return q, k, v

    def output(self, attn: torch.Tensor) -> torch.Tensor:
        """(nh, T, v_head_dim) -> (T, H) through o_proj."""
        return attn.transpose(0, 1).reshape(attn.shape[1], -1) @ self.o.T


def softmax_mscale(rope_scaling: Mapping[str, Any] | None) -> float:
    """The YaRN factor on MLA's softmax scale (squared by the caller): ``yarn_get_mscale(factor,
    mscale_all_dim)`` when the scaling has ``mscale_all_dim``, else 1 (transformers DeepseekV3Attention)."""
    if not isinstance(rope_scaling, Mapping):
        return 1.0
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    all_dim = rope_scaling.get("mscale_all_dim")
    factor = rope_scaling.get("factor")
    if kind != "yarn" or not all_dim or not isinstance(factor, (int, float)):
        return 1.0
    return yarn_mscale(float(factor), float(all_dim))


def _expect(src: str, name: str, t: torch.Tensor, shape: tuple, keys: str) -> None:
    want = tuple(t.shape[i] if s is None else s for i, s in enumerate(shape))
    if tuple(t.shape) != want:
        shown = "x".join("*" if s is None else str(s) for s in shape)
        raise ConfigError(f"{src}: {name} is {list(t.shape)}, but the config's {keys} make it [{shown}]: the "
                          "checkpoint and config.json disagree.")
