"""The DFlash block drafter's forward (z-lab/dflash ``DFlashDraftModel``), for every block of a sequence at once.

Checked against z-lab/dflash ``dflash/model.py`` (``extract_context_feature``, ``Qwen3DFlashAttention``,
``Qwen3DFlashDecoderLayer``, ``DFlashDraftModel.forward``) and, cycle by cycle, against a slow re-implementation
of the authors' decoding loop with KV caches (tests/draft/dflash_reference.py):

* context: ``ctx = hidden_norm(fc(cat(hidden_states[id + 1] for id in target_layer_ids)))``, one row per
  committed position; every layer projects the SAME ctx to keys (``k_norm`` applied, RoPE at the position) and
  values (no norm). Context K/V depend only on their own position, so they are computed once per sequence.
* block: ``[anchor, MASK x (Q - 1)]`` embedded with the target's embedding (the caller's), at positions
  ``start .. start + Q - 1``; per layer q/k/v from ``input_layernorm(h)``, ``q_norm``/``k_norm``, RoPE of the
  DRAFT config; each block query attends to the context keys before ``start`` and to the whole block
  (bidirectional, unless the config makes a layer causal or sliding: :meth:`BlockDrafterConfig.layer_attention`);
  residual, SiLU-gated MLP, residual; the drafter's own final ``norm``. Slots 1..Q-1 then go through the
  target's ``lm_head`` (the caller's) for the Q - 1 drafts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from eaglekit.analysis.draft.block import read_block_checkpoint, visible
from eaglekit.analysis.draft.ops import rms_norm
from eaglekit.analysis.draft.rope import Rotary, rotate_half
from eaglekit.core.configs.block import BlockDrafterConfig
from eaglekit.core.errors import ConfigError
from eaglekit.io.reader import Checkpoint


@dataclass(frozen=True, eq=False)
class Context:
    """Context keys and values of one sequence, per layer: (nKV, T, D) each, RoPE'd at positions 0..T-1."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def length(self) -> int:
        return int(self.keys[0].shape[1])


class DFlashDrafter:
    """A DFlash drafter's weights and forward; the target's embedding and ``lm_head`` stay with the caller."""

    family = "dflash"

    def __init__(self, config: BlockDrafterConfig, tensors: Mapping[str, torch.Tensor], *, source: str,
                 device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> None:
        if config.family != "dflash":
            raise ConfigError(f"{source} is a {config.family_name} drafter, not DFlash.")
        self.config, self.source = config, source
        self.device, self.dtype = torch.device(device), dtype
        self.w = {n: t.to(device=self.device, dtype=dtype) for n, t in tensors.items()}
        self.rotary = Rotary(config, config.head_dim, self.device)
        self.layers = tuple(config.layer_attention(i) for i in range(config.num_hidden_layers))

    @classmethod
    def load(cls, location: str | os.PathLike[str] | Checkpoint, *, device: str = "cpu", dtype: str = "float32",
             endpoint: str | None = None, timeout: float | None = None) -> DFlashDrafter:
        """Read a DFlash checkpoint (every tensor's shape checked against its config first)."""
        ckpt = read_block_checkpoint(location, dtype=dtype, endpoint=endpoint, timeout=timeout)
        return cls(ckpt.config, ckpt.tensors, source=ckpt.source, device=device,
                   dtype=ckpt.tensors["fc.weight"].dtype)

    # -- pieces --------------------------------------------------------------------------------------------
    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    def _heads(self, x: torch.Tensor, name: str, n: int, norm: str | None) -> torch.Tensor:
        """A projection split into heads, per-head RMSNorm'd: (..., H) -> (..., n, D)."""
        y = self._linear(x, name).unflatten(-1, (n, self.config.head_dim))
        return y if norm is None else rms_norm(y, self.w[norm], self.config.rms_norm_eps)

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x (..., T, n, D) rotated at positions pos (..., T)."""
        cos, sin = self.rotary.cos_sin(pos.reshape(-1), x.dtype)                 # (N, D)
        cos, sin = cos.reshape(*pos.shape, 1, -1), sin.reshape(*pos.shape, 1, -1)   # (..., T, 1, D)
        return x * cos + rotate_half(x) * sin

    # -- the forward ---------------------------------------------------------------------------------------
    def context(self, features: torch.Tensor) -> Context:
        """Context K/V of every position of one sequence: features (T, n_aux * H_target) -> per layer
        (nKV, T, D). Position t's entries are what the authors' draft cache holds for it."""
        c = self.config
        x = features.to(device=self.device, dtype=self.dtype)
        ctx = rms_norm(self._linear(x, "fc"), self.w["hidden_norm.weight"], c.rms_norm_eps)    # (T, H)
        pos = torch.arange(ctx.shape[0], device=self.device)
        keys, values = [], []
        for i in range(c.num_hidden_layers):
            p = f"layers.{i}.self_attn."
            k = self._rope(self._heads(ctx, p + "k_proj", c.num_key_value_heads, p + "k_norm.weight"), pos)
            v = self._heads(ctx, p + "v_proj", c.num_key_value_heads, None)                   # (T, nKV, D)
            keys.append(k.transpose(0, 1))                                                    # (nKV, T, D)
            values.append(v.transpose(0, 1))
        return Context(tuple(keys), tuple(values))

    def forward(self, ctx: Context, noise: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """Final hidden states of B blocks of one sequence: ``noise`` (B, Q, H) = the target's embedding of
        ``[anchor, MASK x (Q - 1)]``, block b at positions ``starts[b] .. starts[b] + Q - 1``, seeing context
        positions ``< starts[b]`` -> (B, Q, H), after the drafter's ``norm``."""
        c = self.config
        B, Q, _ = noise.shape
        nH, nKV, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        g = nH // nKV
        starts = starts.to(self.device)
        qpos = starts[:, None] + torch.arange(Q, device=self.device)[None, :]             # (B, Q)
        cpos = torch.arange(ctx.length, device=self.device)                                 # (T,)
        before = (cpos[None, :] < starts[:, None])[:, None, None, None, :]                  # (B, 1, 1, 1, T)
        h = noise.to(device=self.device, dtype=self.dtype)
        for i, (causal, window) in enumerate(self.layers):
            p = f"layers.{i}."
            x = rms_norm(h, self.w[p + "input_layernorm.weight"], c.rms_norm_eps)             # (B, Q, H)
            q = self._rope(self._heads(x, p + "self_attn.q_proj", nH, p + "self_attn.q_norm.weight"), qpos)
            k = self._rope(self._heads(x, p + "self_attn.k_proj", nKV, p + "self_attn.k_norm.weight"), qpos)
            v = self._heads(x, p + "self_attn.v_proj", nKV, None)                              # (B, Q, nKV, D)
            q = q.permute(0, 2, 1, 3).reshape(B, nKV, g, Q, D)                                 # (B, nKV, g, Q, D)
            k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)                                 # (B, nKV, Q, D)
            scale = D ** -0.5
            s_ctx = torch.einsum("bkgqd,ktd->bkgqt", q, ctx.keys[i]) * scale                    # (B, nKV, g, Q, T)
            s_blk = torch.einsum("bkgqd,bksd->bkgqs", q, k) * scale                             # (B, nKV, g, Q, Q)
            see_ctx = before & visible(qpos[:, None, None, :, None], cpos[None, None, None, None, :],
                                       causal=causal, window=window)                            # (B, 1, 1, Q, T)
            see_blk = visible(qpos[:, None, None, :, None], qpos[:, None, None, None, :],
                              causal=causal, window=window)                                     # (B, 1, 1, Q, Q)
            scores = torch.cat([s_ctx.masked_fill(~see_ctx, float("-inf")),
                                s_blk.masked_fill(~see_blk, float("-inf"))], -1).float()        # (B, nKV, g, Q, T+Q)
            probs = torch.softmax(scores, -1).to(self.dtype)
            T = ctx.length
            o = (torch.einsum("bkgqt,ktd->bkgqd", probs[..., :T], ctx.values[i])
                 + torch.einsum("bkgqs,bksd->bkgqd", probs[..., T:], v))                        # (B, nKV, g, Q, D)
            o = o.reshape(B, nH, Q, D).transpose(1, 2).reshape(B, Q, nH * D)                   # (B, Q, nH*D)
            h = h + self._linear(o, p + "self_attn.o_proj")
            y = rms_norm(h, self.w[p + "post_attention_layernorm.weight"], c.rms_norm_eps)
            gate, up = self._linear(y, p + "mlp.gate_proj"), self._linear(y, p + "mlp.up_proj")  # (B, Q, I)
            h = h + self._linear(F.silu(gate) * up, p + "mlp.down_proj")
        return rms_norm(h, self.w["norm.weight"], c.rms_norm_eps)                              # (B, Q, H)
