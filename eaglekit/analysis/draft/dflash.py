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

A drafter larger than :data:`KEEP_BYTES` in the compute dtype (a Kimi-K2.5-sized one: 3.4 B parameters, 6.8 GB
in bf16) keeps its norms and small projections and reads its large matrices from the checkpoint by range each
time a pass uses them (:class:`~eaglekit.analysis.draft.weights.Weights`), one matrix in memory at a time: memory
is bounded by the largest matrix, never the model. :meth:`DFlashDrafter.forward_many` runs many groups of blocks
through each layer together, so that each matrix is read once for all of them; every group's arithmetic is what
:meth:`DFlashDrafter.forward` does alone, so a held and a read-by-range drafter give the same bits.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from eaglekit.analysis.draft.block import backbone_shapes, read_block_checkpoint, visible
from eaglekit.analysis.draft.load import torch_dtype_of
from eaglekit.analysis.draft.ops import rms_norm
from eaglekit.analysis.draft.rope import Rotary, rotate_half
from eaglekit.analysis.draft.weights import Weights
from eaglekit.core.configs.block import BlockDrafterConfig
from eaglekit.core.errors import ConfigError
from eaglekit.io.reader import Checkpoint

#: bytes of a drafter's tensors (in the compute dtype) held in memory; past them the largest are read from the
#: checkpoint by range when used (as the EAGLE-3 path's experts, heads and embeddings past 1 GiB); half that here,
#: so that a float32 pass (the dump path's default dtype) of a Kimi-sized drafter stays within 3 GB
KEEP_BYTES = 512 << 20


@dataclass(frozen=True, eq=False)
class Context:
    """Context keys and values of one sequence, per layer: (nKV, T, D) each, RoPE'd at positions 0..T-1."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def length(self) -> int:
        return int(self.keys[0].shape[1])


class DFlashDrafter:
    """A DFlash drafter's weights and forward; the target's embedding and ``lm_head`` stay with the caller.

    ``w`` holds the tensors in memory; those named in ``stored`` are read from ``checkpoint`` (the names there)
    each time they are used, and refused at their first read when they hold NaN or Inf (as the held ones are at
    load). :meth:`close` closes the checkpoint when the drafter owns it (``owns_checkpoint``: :meth:`load`)."""

    family = "dflash"
    #: the checkpoint's tensors this variant reads, each with the shape its config implies
    expected = staticmethod(backbone_shapes)
    #: tensors read when the checkpoint has them (None: none)
    optional = None

    def __init__(self, config: BlockDrafterConfig, tensors: Mapping[str, torch.Tensor], *, source: str,
                 device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                 checkpoint: Checkpoint | None = None, stored: Mapping[str, str] | None = None) -> None:
        if config.family != self.family:
            raise ConfigError(f"{source} is a {config.family_name} drafter, not {type(self).__name__}'s "
                              f"{self.family}.")
        if stored and checkpoint is None:
            raise ConfigError(f"{source}: {len(stored)} tensors are to be read from a checkpoint, but none is open.")
        self.config, self.source = config, source
        self.device, self.dtype = torch.device(device), dtype
        self.w = {n: t.to(device=self.device, dtype=dtype) for n, t in tensors.items()}
        self.stored = dict(stored or {})
        self.checkpoint = checkpoint if self.stored else None
        self.owns_checkpoint = False
        self._stream = Weights({}, device=self.device, dtype=dtype, checkpoint=self.checkpoint, source=source)
        self._checked: set[str] = set()
        self.rotary = Rotary(config, config.head_dim, self.device)
        self.layers = tuple(config.layer_attention(i) for i in range(config.num_hidden_layers))
        #: called as ``on_linear(rows, out_features, in_features)`` for every projection (benchmarks count FLOPs)
        self.on_linear: Callable[[int, int, int], None] | None = None

    @classmethod
    def load(cls, location: str | os.PathLike[str] | Checkpoint, *, device: str = "cpu", dtype: str = "float32",
             endpoint: str | None = None, timeout: float | None = None,
             keep_bytes: int | None = None, **options) -> DFlashDrafter:
        """Read a DFlash checkpoint (every tensor's shape checked against its config first). Tensors past
        ``keep_bytes`` in all (default :data:`KEEP_BYTES`) stay in the checkpoint, the largest first, read by
        range when used; the drafter then holds the checkpoint open (:meth:`close`; a caller's
        :class:`Checkpoint` stays the caller's to close, after the drafter's last pass). ``options`` go to the
        variant's constructor (DSpark's ``confidence_threshold``)."""
        ckpt = read_block_checkpoint(location, expected=cls.expected, optional=cls.optional, dtype=dtype,
                                     endpoint=endpoint, timeout=timeout,
                                     keep_bytes=KEEP_BYTES if keep_bytes is None else keep_bytes)
        try:
            model = cls(ckpt.config, ckpt.tensors, source=ckpt.source, device=device,
                        dtype=torch_dtype_of(dtype), checkpoint=ckpt.checkpoint, stored=ckpt.stored, **options)
        except BaseException:
            if ckpt.owns_checkpoint:
                ckpt.checkpoint.close()
            raise
        model.owns_checkpoint = ckpt.owns_checkpoint
        return model

    @property
    def streamed(self) -> bool:
        """Whether some tensors are read from the checkpoint when used (not all held)."""
        return bool(self.stored)

    def close(self) -> None:
        """Close the checkpoint tensors are read from, when this drafter opened it (nothing when all are held)."""
        if self.owns_checkpoint and self.checkpoint is not None:
            self.checkpoint.close()
            self.owns_checkpoint = False

    def __enter__(self) -> DFlashDrafter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pieces --------------------------------------------------------------------------------------------
    def weight(self, name: str) -> torch.Tensor | None:
        """A tensor on the device in the compute dtype: held, or read from the checkpoint now (None: the drafter
        has none of that name, e.g. a bias)."""
        t = self.w.get(name)
        if t is not None:
            return t
        stored = self.stored.get(name)
        if stored is None:
            return None
        t = self._stream.get(stored, check=stored not in self._checked)
        self._checked.add(stored)
        return t

    def _w(self, name: str) -> torch.Tensor:
        t = self.weight(name)
        if t is None:
            raise ConfigError(f"{self.source} lacks {name}.")
        return t

    def _linears(self, xs: Sequence[torch.Tensor], name: str) -> list[torch.Tensor]:
        """One projection applied to each of ``xs``, its weight read once for all of them."""
        w, b = self._w(name + ".weight"), self.weight(name + ".bias")
        if self.on_linear is not None:
            for x in xs:
                self.on_linear(x.numel() // x.shape[-1], int(w.shape[0]), int(w.shape[1]))
        return [F.linear(x, w, b) for x in xs]

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return self._linears([x], name)[0]

    def _split(self, y: torch.Tensor, n: int, norm: str | None) -> torch.Tensor:
        """A projection split into heads, per-head RMSNorm'd: (..., n * D) -> (..., n, D)."""
        y = y.unflatten(-1, (n, self.config.head_dim))
        return y if norm is None else rms_norm(y, self._w(norm), self.config.rms_norm_eps)

    def _heads(self, x: torch.Tensor, name: str, n: int, norm: str | None) -> torch.Tensor:
        """A projection split into heads, per-head RMSNorm'd: (..., H) -> (..., n, D)."""
        return self._split(self._linear(x, name), n, norm)

    def _tables(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE's cos and sin at positions pos (..., T) -> (..., T, 1, D) each."""
        cos, sin = self.rotary.cos_sin(pos.reshape(-1), dtype)                   # (N, D)
        return cos.reshape(*pos.shape, 1, -1), sin.reshape(*pos.shape, 1, -1)

    def _rope(self, x: torch.Tensor, pos: torch.Tensor | None, tables=None) -> torch.Tensor:
        """x (..., T, n, D) rotated at positions pos (..., T) (or at the positions ``tables`` were made for)."""
        cos, sin = self._tables(pos, x.dtype) if tables is None else tables
        return x * cos + rotate_half(x) * sin

    # -- what a variant changes (DFlash2: eaglekit/analysis/draft/dflash2.py) --------------------------------
    def scale_embedding(self, noise: torch.Tensor) -> torch.Tensor:
        """The block's embedding as the layers read it: the authors' newer loop multiplies the target's rows by
        ``input_embedding_scale`` (``_raw_input_embeddings``; 1.0 unless the config says otherwise)."""
        scale = self.config.input_embedding_scale
        return noise if scale == 1.0 else noise * scale

    def before(self, i: int, conv: str, xs: list[torch.Tensor]) -> tuple[list[torch.Tensor], object]:
        """Layer ``i``'s normed input to its attention (``conv`` = ``attention_conv``) or MLP (``mlp_conv``),
        and what :meth:`after` needs: unchanged in DFlash."""
        return xs, None

    def after(self, i: int, conv: str, ys: list[torch.Tensor], state: object) -> list[torch.Tensor]:
        """Layer ``i``'s attention or MLP output before the residual: unchanged in DFlash."""
        return ys

    def propose(self, hidden: torch.Tensor, anchors: torch.Tensor, head) -> torch.Tensor:
        """Greedy drafts of B blocks from their draft slots' final states: hidden (B, S, H), anchors (B,) the
        blocks' slot-0 tokens, ``head`` the target's :class:`~eaglekit.analysis.acceptance.head.TargetHead`
        -> (B, S) int64. DFlash: the argmax of the target's ``lm_head`` (``output_multiplier`` and the softcap of
        the newer ``compute_logits`` keep the argmax)."""
        B, S = hidden.shape[:2]
        return head.next_tokens(hidden.reshape(B * S, -1), normed=True)[0].view(B, S)

    # -- the forward ---------------------------------------------------------------------------------------
    def context(self, features: torch.Tensor) -> Context:
        """Context K/V of every position of one sequence: features (T, n_aux * H_target) -> per layer
        (nKV, T, D). Position t's entries are what the authors' draft cache holds for it."""
        c = self.config
        x = features.to(device=self.device, dtype=self.dtype)
        ctx = rms_norm(self._linear(x, "fc"), self._w("hidden_norm.weight"), c.rms_norm_eps)   # (T, H)
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
        return self.forward_many(ctx, [(noise, starts)])[0]

    def forward_many(self, ctx: Context, groups: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
        """:meth:`forward` of several groups of blocks of one sequence (each its own ``(noise, starts)``, the
        block sizes free to differ), layer by layer: each weight is fetched once for every group (once read
        from the checkpoint, when it is not held). Each group's result is bit for bit its :meth:`forward`."""
        c = self.config
        nH, nKV, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        eps = c.rms_norm_eps
        cpos = torch.arange(ctx.length, device=self.device)                                 # (T,)
        qposes, hs = [], []
        for noise, starts in groups:
            starts = starts.to(self.device)
            qposes.append(starts[:, None] + torch.arange(noise.shape[1], device=self.device)[None, :])  # (B, Q)
            hs.append(self.scale_embedding(noise.to(device=self.device, dtype=self.dtype)))  # (B, Q, H)
        befores = [(cpos[None, :] < qp[:, :1])[:, None, None, None, :] for qp in qposes]  # (B, 1, 1, 1, T)
        tables = [self._tables(qp, self.dtype) for qp in qposes]                           # the same every layer
        for i, (causal, window) in enumerate(self.layers):
            p, a = f"layers.{i}.", f"layers.{i}.self_attn."
            w = self._w(p + "input_layernorm.weight")
            xs, kernels = self.before(i, "attention_conv", [rms_norm(h, w, eps) for h in hs])   # (B, Q, H)
            qs = [self._rope(self._split(q, nH, a + "q_norm.weight"), None, tab)
                  for q, tab in zip(self._linears(xs, a + "q_proj"), tables)]               # (B, Q, nH, D)
            ks = [self._rope(self._split(k, nKV, a + "k_norm.weight"), None, tab)
                  for k, tab in zip(self._linears(xs, a + "k_proj"), tables)]               # (B, Q, nKV, D)
            vs = [self._split(v, nKV, None) for v in self._linears(xs, a + "v_proj")]        # (B, Q, nKV, D)
            del xs
            os_ = [self._attend(ctx, i, q, k, v, qp, cpos, before, causal=causal, window=window)
                   for q, k, v, qp, before in zip(qs, ks, vs, qposes, befores)]              # (B, Q, nH*D)
            del qs, ks, vs
            hs = [h + o for h, o in zip(hs, self.after(i, "attention_conv", self._linears(os_, a + "o_proj"),
                                                         kernels))]
            del os_
            w = self._w(p + "post_attention_layernorm.weight")
            ys, kernels = self.before(i, "mlp_conv", [rms_norm(h, w, eps) for h in hs])
            gates = self._linears(ys, p + "mlp.gate_proj")                                 # (B, Q, I)
            ups = self._linears(ys, p + "mlp.up_proj")
            del ys
            acts = [F.silu(g) * u for g, u in zip(gates, ups)]
            del gates, ups
            hs = [h + d for h, d in zip(hs, self.after(i, "mlp_conv", self._linears(acts, p + "mlp.down_proj"),
                                                         kernels))]
            del acts
        w = self._w("norm.weight")
        return [rms_norm(h, w, eps) for h in hs]                                             # (B, Q, H)

    def _attend(self, ctx: Context, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qpos: torch.Tensor,
                cpos: torch.Tensor, before: torch.Tensor, *, causal: bool, window: int | None) -> torch.Tensor:
        """Layer ``i``'s attention of one group: q (B, Q, nH, D), k/v (B, Q, nKV, D) -> (B, Q, nH * D)."""
        c = self.config
        B, Q = qpos.shape
        nH, nKV, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        g = nH // nKV
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
        return o.reshape(B, nH, Q, D).transpose(1, 2).reshape(B, Q, nH * D)               # (B, Q, nH*D)
