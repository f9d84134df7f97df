"""The EAGLE-3 frame every drafter family shares: features -> fc, the one decoder layer, chains, the cache.

Checked against SpecForge ``specforge/modeling/draft/llama3_eagle.py``, SGLang and vLLM ``llama_eagle3.py`` /
``deepseek_eagle3.py``, speculators ``src/speculators/models/eagle3/core.py`` and TorchSpec's draft models
(docs/acceptance.md):

* target features: ``f_t`` = the aux hidden states at position ``t`` concatenated in list order;
  ``h_t = fc(f_t)``, after ``fc_norm.{i}`` (one RMSNorm per aux layer) and/or ``input_norm`` (one over
  the concatenation, speculators' ``norm_before_fc``) when the checkpoint carries them;
* the one decoder layer: ``e = embed(x_{t+1})``; attention input ``x = concat(input_layernorm(e),
  hidden_norm(h))`` (embedding half first, width 2H); ``y = h + attention(x)`` (the raw ``h``, or the
  normed one with ``norm_before_residual``); ``g = y + mlp(post_attention_layernorm(y))``;
  ``logits = lm_head(norm(g))`` (``norm`` skipped when the checkpoint has none); the draft token is the
  argmax mapped through d2t (target id ``i + d2t[i]``); ``g`` is the next chain step's ``h``;
* positions: entry ``(f_t, x_{t+1})`` sits at position ``t``; chain step ``j`` from base ``t`` at ``t + j - 1``;
* attention: chain step ``j`` from base ``t`` sees the prefix entries ``0..t`` (from target features)
  and its own chain's earlier steps, never another base's chain.

Only the attention (:mod:`.llama_attention`, :mod:`.mla_attention`) and the MLP (:mod:`.dense_mlp`,
:mod:`.moe_mlp`) change between families (:mod:`.families`). :meth:`DraftModel.draft` computes step ``j``
for every base at once (one pass per step, the training-time-test mask); :meth:`DraftModel.draft_loop`
drafts base by base, step by step, with a KV cache, the way a serving engine does (the benchmark's naive
way; the two agree exactly).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from eaglekit.analysis.draft import load as loading
from eaglekit.analysis.draft.families import attention_family, mlp_family
from eaglekit.analysis.draft.head import DraftHead
from eaglekit.analysis.draft.layout import FRAME_TENSORS, LAYER_PREFIX, Embedding, Layout  # noqa: F401
from eaglekit.analysis.draft.ops import rms_norm
from eaglekit.analysis.draft.rope import with_rotary_base
from eaglekit.analysis.draft.weights import Weights
from eaglekit.core.configs.config import DrafterConfig, normalize_config
from eaglekit.core.configs.layers import AuxConvention, default_aux_layers
from eaglekit.core.configs.rotary import RotaryBase
from eaglekit.core.errors import ConfigError, InputError
from eaglekit.io.reader import Checkpoint

#: query rows per attention block in the all-positions pass (bounds the [heads, block, T] scores)
ATTN_BLOCK = 64


@dataclass(frozen=True)
class DraftOutput:
    """Chain drafts for every base position from ``start`` on: ``tokens[j - 1, t - start]`` is step
    ``j``'s draft (a TARGET id) from base ``t``; ``logits[j - 1]`` [T - start, draft_vocab] when asked for."""

    tokens: torch.Tensor            # (K, T - start) int64, target ids
    logits: tuple[torch.Tensor, ...] | None = None


class DraftModel:
    """An EAGLE-3 drafter's weights on a device, ready to draft: Llama or MLA attention, a dense or a MoE MLP.

    Build with :meth:`load` (any location the kit reads) or :meth:`from_tensors`."""

    def __init__(self, config: DrafterConfig, tensors: Mapping[str, torch.Tensor], *, layout: Layout,
                 embed: torch.Tensor | Embedding, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, source: str = "drafter",
                 checkpoint: Checkpoint | None = None) -> None:
        self.config, self.layout, self.source = config, layout, source
        self.device, self.dtype = torch.device(device), dtype
        self._checkpoint = checkpoint
        p = LAYER_PREFIX[layout]
        weights = Weights({k: v for k, v in tensors.items() if k != "d2t"}, device=self.device, dtype=dtype,
                          checkpoint=checkpoint, source=source)
        self.fc = weights.get("fc.weight")                              # (H, n_aux * Ht)
        self.hidden_size = self.fc.shape[0]
        ht = config.target_hidden_size
        if self.fc.shape[1] % ht:
            raise ConfigError(f"{source}: fc.weight is {list(self.fc.shape)}, not a multiple of the target hidden "
                              f"size {ht} that the config gives.")
        self.target_hidden_size, self.n_aux = ht, self.fc.shape[1] // ht
        self.fc_norms = [weights.get(f"fc_norm.{i}.weight") for i in range(self.n_aux)] \
            if "fc_norm.0.weight" in weights else None
        self.input_norm = weights.get("input_norm.weight") if "input_norm.weight" in weights else None
        names = set(tensors) | (set(checkpoint.inventory.names) if checkpoint is not None else set())
        #: the attention and MLP families (:mod:`.families`)
        self.attention = attention_family(config, names, p)(config, weights, p)
        self.mlp = mlp_family(config, names, p)(config, weights, p)
        if self.attention.in_features != 2 * self.hidden_size:
            raise ConfigError(f"{source}: the attention reads inputs of width {self.attention.in_features}, but an "
                              f"EAGLE-3 layer feeds embedding and hidden state side by side (2 x hidden_size "
                              f"{self.hidden_size}).")
        self.hidden_norm = weights.get(p + "hidden_norm.weight")
        self.input_layernorm = weights.get(p + "input_layernorm.weight")
        self.post_norm = weights.get(p + "post_attention_layernorm.weight")
        self.eps = config.rms_norm_eps or 1e-6
        self.norm_before_residual = config.norm_before_residual
        self.head = DraftHead(weights, norm=weights.get("norm.weight") if "norm.weight" in weights else None,
                              eps=self.eps, d2t=tensors.get("d2t"))
        self.draft_to_target = self.head.draft_to_target
        self.embed = embed if isinstance(embed, Embedding) else Embedding(embed)
        if len(self.embed.shape) != 2 or self.embed.shape[1] != self.hidden_size:
            raise InputError(f"the embedding is {list(self.embed.shape)} but the drafter's hidden size is "
                             f"{self.hidden_size}: it is not this drafter's target.")
        #: what the engines make of a missing or all-zero d2t (set by :meth:`load`); empty when the map is sound
        self.vocab_notes: tuple[str, ...] = ()
        #: the config as its file says (:attr:`config` may hold another rotary base: :meth:`load` rotary_base)
        self.written_config = config

    # -- loading -------------------------------------------------------------------------------------
    @classmethod
    def load(cls, location: str | os.PathLike[str] | Checkpoint, *, embed: torch.Tensor | None = None,
             embeddings: str | os.PathLike[str] | None = None, device: str = "cpu",
             dtype: str | torch.dtype = "float32", endpoint: str | None = None, timeout: float | None = None,
             rotary_base: RotaryBase = "config") -> DraftModel:
        """Read a drafter's weights with the kit's reader (local, Hub, HTTP, SSH): :func:`.load.read_drafter`.

        ``rotary_base``: the base of the rotary table: ``"config"`` (rope_theta: vLLM, SGLang, transformers),
        ``"torchspec"`` (what TorchSpec trains this config on) or a number (:func:`.rope.with_rotary_base`).

        The input embedding comes from the drafter's own ``embed_tokens.weight`` when it has one, else
        ``embed`` (a tensor, e.g. a loaded target's), else the target checkpoint at ``embeddings``. Routed
        experts and a head or embedding too large to keep are read by range when used: the model then
        holds the checkpoint open (:meth:`close`)."""
        parts = loading.read_drafter(location, embed=embed, embeddings=embeddings, dtype=dtype, endpoint=endpoint,
                                     timeout=timeout)
        written = parts.config
        try:
            parts.config = with_rotary_base(parts.config, rotary_base)
            model = cls(parts.config, parts.tensors, layout=parts.layout, embed=parts.embed, device=device,
                        dtype=parts.dtype, source=parts.source, checkpoint=parts.checkpoint)
        except BaseException:
            parts.close()
            raise
        model.vocab_notes = parts.notes
        model.written_config = written
        return model

    @classmethod
    def from_tensors(cls, config: Mapping[str, Any] | DrafterConfig, tensors: Mapping[str, torch.Tensor], *,
                     embed: torch.Tensor | None = None, device: str = "cpu",
                     dtype: str | torch.dtype = "float32") -> DraftModel:
        """A drafter from in-memory tensors (tests, training); same checks as :meth:`load`."""
        cfg = config if isinstance(config, DrafterConfig) else normalize_config(config)
        layout = loading.check_layout(cfg, set(tensors), where="drafter")
        if embed is None:
            embed = tensors.get("embed_tokens.weight")
        if embed is None:
            raise InputError("drafter has no embed_tokens.weight; pass embed=.")
        return cls(cfg, tensors, layout=layout, embed=embed, device=device, dtype=loading.torch_dtype_of(dtype))

    # -- what the rest of the kit reads ----------------------------------------------------------------
    @property
    def lm_head(self) -> torch.Tensor:
        """The head's weight (N, H) when it is in memory; its shape is :attr:`draft_rows`."""
        if self.head.weight is None:
            raise InputError(f"{self.source}'s lm_head is read from the checkpoint in blocks (too large to keep).")
        return self.head.weight

    @property
    def draft_rows(self) -> int:
        return self.head.rows

    @property
    def full_vocabulary(self) -> bool:
        """A drafter whose head covers the whole target vocabulary (no d2t/t2d: draft row i is target id i)."""
        return self.head.rows == self.config.vocab_size

    @property
    def families(self) -> tuple[str, str]:
        """(attention family, MLP family), e.g. ("mla", "moe")."""
        return self.attention.family, self.mlp.family

    def close(self) -> None:
        """Close the checkpoint that large tensors are read from (nothing to do when all are in memory)."""
        if self._checkpoint is not None:
            self._checkpoint.close()
            self._checkpoint = None

    def __enter__(self) -> DraftModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def embedding(self) -> torch.Tensor:
        """The whole input embedding (V, H) when it is in memory."""
        if not isinstance(self.embed.table, torch.Tensor):
            raise InputError(f"{self.source}'s embedding is read by rows from its checkpoint.")
        return self.embed.table

    # -- the aux features ----------------------------------------------------------------------------
    def aux_indices(self, convention: AuxConvention, num_layers: int) -> tuple[int, ...]:
        """The ``output_hidden_states`` indices this drafter reads under ``convention`` for an
        ``num_layers``-layer target."""
        ids = self.config.aux_layer_ids or default_aux_layers(num_layers, convention=convention)
        if len(ids) != self.n_aux:
            raise ConfigError(f"{self.source}: the config lists {len(ids)} aux layer ids but fc.weight reads "
                              f"{self.n_aux} hidden states ({list(self.fc.shape)}).")
        idx = loading.hidden_state_indices(ids, convention)
        if max(idx) > num_layers or min(idx) < 0:
            raise InputError(f"{self.source}: aux layer ids {list(ids)} ({convention}) name hidden states "
                             f"{list(idx)}, outside 0..{num_layers} of a {num_layers}-layer target.")
        return idx

    def project(self, aux: torch.Tensor) -> torch.Tensor:
        """``h = fc(f)``: aux [n_aux, T, Ht] (in the config's layer order) -> [T, H]."""
        if aux.ndim != 3 or aux.shape[0] != self.n_aux or aux.shape[2] != self.target_hidden_size:
            raise InputError(f"{self.source} reads {self.n_aux} hidden states of size {self.target_hidden_size}, "
                             f"got features of shape {list(aux.shape)}: hidden-size mismatch with this target.")
        aux = aux.to(device=self.device, dtype=self.dtype)
        if self.fc_norms is not None:
            aux = torch.stack([rms_norm(aux[i], self.fc_norms[i], self.eps) for i in range(self.n_aux)])
        f = aux.permute(1, 0, 2).reshape(aux.shape[1], -1)             # (T, n_aux*Ht)
        if self.input_norm is not None:
            f = rms_norm(f, self.input_norm, self.eps)
        return f @ self.fc.T                                            # (T, H)

    # -- the decoder layer, in pieces ------------------------------------------------------------------
    def entries(self, h: torch.Tensor, ids: torch.Tensor, pos: torch.Tensor):
        """Layer input for entries (h, token) at ``pos``: q, k (nh, T, dq) and v (nh, T, dv), one per query head."""
        e = self.embed(ids, device=self.device, dtype=self.dtype)      # (T, H)
        # input_layernorm always: the engines ignore eagle_config.use_input_layernorm_in_first_layer
        x = torch.cat([rms_norm(e, self.input_layernorm, self.eps), rms_norm(h, self.hidden_norm, self.eps)], -1)
        return self.attention.entries(x, pos)

    def finish(self, h: torch.Tensor, attn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """attention output (nh, T, dv) -> (g, out): residual, MLP, and the head's input ``norm(g)``."""
        residual = rms_norm(h, self.hidden_norm, self.eps) if self.norm_before_residual else h
        y = residual + self.attention.output(attn)
        g = y + self.mlp(rms_norm(y, self.post_norm, self.eps))        # (T, H)
        return g, self.head.final(g)

    def targets_of(self, out: torch.Tensor) -> torch.Tensor:
        """The best draft row of each head input ``norm(g)``, as target ids."""
        return self.draft_to_target[self.head.argmax(out)]

    # -- drafting ------------------------------------------------------------------------------------
    @torch.no_grad()
    def draft(self, h: torch.Tensor, next_ids: torch.Tensor, steps: int, *, start: int = 0,
              return_logits: bool = False) -> DraftOutput:
        """Chain drafts of ``steps`` tokens from every base position at once.

        ``h`` [T, H] is :meth:`project` of the target features at positions 0..T-1 and ``next_ids`` [T]
        the tokens that follow them (``x_{t+1}``). Step ``j`` is one pass over all T bases with the
        training-time-test mask: the prefix causally, plus each base's own earlier chain entries.
        ``start``: draft from bases start..T-1 only (a long prompt's positions still serve as prefix);
        results are then indexed from ``start``."""
        return self.chain(h, next_ids, steps, start=start, return_logits=return_logits)

    def chain(self, h: torch.Tensor, next_ids: torch.Tensor, steps: int, *, start: int = 0,
              return_logits: bool = False) -> DraftOutput:
        """:meth:`draft` with autograd left on (training-time test trains through it)."""
        q, k1, v1, h, ids, pos = self.prefix(h, next_ids, start=start)
        n = pos.shape[0]
        chain_k: list[torch.Tensor] = []
        chain_v: list[torch.Tensor] = []
        tokens, logits_out = [], []
        for j in range(1, steps + 1):
            if j > 1:
                q, kj, vj = self.entries(h, ids, pos + (j - 1))
                chain_k.append(kj)
                chain_v.append(vj)
            h, out = self.finish(h, self.attend(q, k1, v1, pos, chain_k, chain_v))
            if return_logits:
                logits = self.head.logits(out)
                ids = self.draft_to_target[logits.argmax(-1)]
                logits_out.append(logits)
            else:
                ids = self.targets_of(out)
            tokens.append(ids)
        return DraftOutput(torch.stack(tokens) if tokens else torch.empty(0, n, dtype=torch.int64),
                           tuple(logits_out) if return_logits else None)

    def prefix(self, h: torch.Tensor, next_ids: torch.Tensor, *, start: int = 0):
        """The entries of every position 0..T-1 as keys and values (nh, T, d), and the queries (nh, n, d),
        features (n, H), tokens (n,) and positions (n,) of the bases start..T-1 drafted from (they still
        attend to every earlier entry): step 1 of every chain and the first pass of every tree."""
        T = h.shape[0]
        if not 0 <= start < max(T, 1):
            raise InputError(f"start {start} is outside the {T} positions.")
        h = h.to(device=self.device, dtype=self.dtype)
        ids = next_ids.to(self.device)
        q, k1, v1 = self.entries(h, ids, torch.arange(T, device=self.device))
        return q[:, start:], k1, v1, h[start:], ids[start:], torch.arange(start, T, device=self.device)

    def attend(self, q: torch.Tensor, k1: torch.Tensor, v1: torch.Tensor, pos: torch.Tensor,
               own_k: list[torch.Tensor], own_v: list[torch.Tensor], *, rows_per_base: int = 1) -> torch.Tensor:
        """The all-positions attention: query rows q (nh, R, dq), ``rows_per_base`` consecutive rows per base
        (1 for a chain; a tree's k frontier nodes), row r at position ``pos[r]``, attend to the prefix keys
        k1/v1 (nh, T, d) up to their position and to their own entries own_k/own_v [(nh, R, d), ...] (their
        chain's or tree's earlier entries, the row itself last). Blocks of ATTN_BLOCK bases."""
        scale = self.attention.scale
        n = q.shape[1] // rows_per_base
        attn = q.new_empty(q.shape[0], q.shape[1], v1.shape[2])
        for b0 in range(0, n, ATTN_BLOCK):
            r0, r1 = b0 * rows_per_base, min(n, b0 + ATTN_BLOCK) * rows_per_base
            a1 = int(pos[r1 - 1]) + 1                                   # prefix keys 0..a1-1 suffice
            qb = q[:, r0:r1]                                            # (nh, B, dq)
            s = (qb @ k1[:, :a1].transpose(1, 2)) * scale               # (nh, B, a1): prefix keys
            causal = torch.arange(a1, device=self.device)[None, :] <= pos[r0:r1, None]
            s = s.masked_fill(~causal, float("-inf"))
            own = [(qb * ck[:, r0:r1]).sum(-1, keepdim=True) * scale for ck in own_k]  # (nh, B, 1) each
            p = torch.softmax(torch.cat([s, *own], -1).float(), -1).to(self.dtype)
            out = p[..., :a1] @ v1[:, :a1]                              # (nh, B, dv)
            for i, cv in enumerate(own_v):
                out = out + p[..., a1 + i:a1 + i + 1] * cv[:, r0:r1]
            attn[:, r0:r1] = out
        return attn

    @torch.no_grad()
    def draft_loop(self, h: torch.Tensor, next_ids: torch.Tensor, steps: int,
                   bases: torch.Tensor | None = None) -> torch.Tensor:
        """The naive way, as a serving engine drafts: base by base, step by step, each step one
        token attending to the prefix's cached keys and its chain's. Returns (K, len(bases)) target ids."""
        T = h.shape[0]
        h = h.to(device=self.device, dtype=self.dtype)
        ids = next_ids.to(self.device)
        bases = torch.arange(T) if bases is None else bases
        scale = self.attention.scale
        _, k1, v1 = self.entries(h, ids, torch.arange(T, device=self.device))
        out = torch.empty(steps, len(bases), dtype=torch.int64, device=self.device)
        for col, t in enumerate(bases.tolist()):
            keys, vals = k1[:, :t], v1[:, :t]
            hh, tok = h[t:t + 1], ids[t:t + 1]
            for j in range(1, steps + 1):
                q, kj, vj = self.entries(hh, tok, torch.tensor([t + j - 1], device=self.device))
                keys = torch.cat([keys, kj], 1)
                vals = torch.cat([vals, vj], 1)
                p = torch.softmax(((q @ keys.transpose(1, 2)) * scale).float(), -1).to(self.dtype)
                hh, fin = self.finish(hh, p @ vals)
                tok = self.targets_of(fin)
                out[j - 1, col] = tok[0]
        return out

