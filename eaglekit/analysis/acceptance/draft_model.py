"""The EAGLE-3 draft forward pass in torch, for Llama-style drafters in both layouts eaglekit reads.

Checked against SpecForge ``specforge/modeling/draft/llama3_eagle.py``, SGLang and vLLM
``llama_eagle3.py`` and speculators ``src/speculators/models/eagle3/core.py`` (see docs/acceptance.md):

* target features: ``f_t`` = the aux hidden states at position ``t`` concatenated in list order;
  ``h_t = fc(f_t)``, after ``fc_norm.{i}`` (one RMSNorm per aux layer) and/or ``input_norm`` (one over
  the concatenation, speculators' ``norm_before_fc``) when the checkpoint carries them;
* the one decoder layer: ``e = embed(x_{t+1})``; attention input ``concat(input_layernorm(e),
  hidden_norm(h))`` (embedding half first); ``y = h + o_proj(attn)`` (the raw ``h``, or the normed one
  with ``norm_before_residual``); ``g = y + mlp(post_attention_layernorm(y))``;
  ``logits = lm_head(norm(g))`` (``norm`` skipped when the checkpoint has none); the draft token is the
  argmax mapped through d2t (target id ``i + d2t[i]``); ``g`` is the next chain step's ``h``;
* positions: entry ``(f_t, x_{t+1})`` sits at position ``t``; chain step ``j`` from base ``t`` at ``t + j - 1``;
* attention: chain step ``j`` from base ``t`` sees the prefix entries ``0..t`` (from target features)
  and its own chain's earlier steps, never another base's chain.

:meth:`DraftModel.draft` computes step ``j`` for every base at once (one pass per step, the
training-time-test mask); :meth:`DraftModel.draft_loop` drafts base by base, step by step, the way a
serving engine does (the benchmark's naive way; the two agree exactly).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from eaglekit.core.configs.config import DrafterConfig, normalize_config, require_llama_attention
from eaglekit.core.errors import ConfigError, InputError, VocabMapError
from eaglekit.core.configs.layers import AuxConvention, default_aux_layers
from eaglekit.core.tokens.vocab import check_vocab_map, require_valid, unreadable_d2t
from eaglekit.io.drafter import read_maps
from eaglekit.io.reader import Checkpoint, open_checkpoint
from eaglekit.analysis.acceptance.head import check_declared, check_finite

Layout = Literal["specforge", "speculators"]
#: decoder-layer prefix per layout (SpecForge ``midlayer.``; speculators and vLLM ``layers.0.``)
LAYER_PREFIX: Mapping[Layout, str] = {"specforge": "midlayer.", "speculators": "layers.0."}
LAYER_TENSORS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                 "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                 "hidden_norm.weight", "input_layernorm.weight", "post_attention_layernorm.weight")
#: where a target checkpoint keeps its input embedding (Llama, DeepseekV3, multimodal wrappers)
EMBED_NAMES = ("model.embed_tokens.weight", "embed_tokens.weight", "model.language_model.embed_tokens.weight",
               "language_model.model.embed_tokens.weight", "transformer.wte.weight")
#: query rows per attention block in the all-positions pass (bounds the [heads, block, T] scores)
ATTN_BLOCK = 64


def trained_convention(config: DrafterConfig) -> AuxConvention:
    """What the drafter's aux ids meant when it was trained: SpecForge captures the OUTPUTS of the
    configured layers (specforge/algorithms/model_providers.py); speculators' data come from vLLM, which
    captures the INPUTS of the listed layers."""
    return "outputs" if config.format == "specforge" else "inputs"


def hidden_state_indices(aux_ids, convention: AuxConvention) -> tuple[int, ...]:
    """Hugging Face ``output_hidden_states`` indices for aux ids: output of layer i = index i + 1;
    input of layer i = index i."""
    if convention not in ("inputs", "outputs"):
        raise InputError(f"aux convention must be 'inputs' or 'outputs', got {convention!r}.")
    return tuple(int(i) + (1 if convention == "outputs" else 0) for i in aux_ids)


def engine_reading(d2t, t2d, *, vocab_size: int, draft_vocab_size: int, where: str) -> tuple[str, ...]:
    """Check a drafter's map before drafting with it. A map that is broken beyond what an engine would
    serve is refused (:class:`VocabMapError`); a MISSING d2t, or an ALL-ZERO one, is what engines serve as
    the identity (SGLang ``d2t + arange``, vLLM's offsets: draft id i read as target id i, ids 0..N-1 only;
    NeMo Automodel #2447): it is measured that way, with a note saying so."""
    d2t_np = None if d2t is None else d2t.numpy() if hasattr(d2t, "numpy") else d2t
    if d2t_np is None and draft_vocab_size < vocab_size:
        return (f"{where} has no d2t: engines read draft id i as target id i, so it can propose only target ids "
                f"0..{draft_vocab_size - 1}; measured as the engine would serve it (fix: eaglekit export --vocab-map).",)
    if d2t_np is None:
        return ()
    if t2d is None:  # nothing to check it against: it must at least point at target ids an engine can read
        bad = unreadable_d2t(d2t_np, vocab_size=vocab_size)
        if bad:
            raise VocabMapError(f"{where}: {bad}; an engine could not map its draft ids to target ids.")
        return ()
    c = check_vocab_map(d2t_np, t2d, vocab_size=vocab_size, draft_vocab_size=draft_vocab_size, name=f"of {where}")
    if c.identity and set(c.rules) <= {"identity-needs-full-vocab", "t2d-matches-d2t", "t2d-count"}:
        return (f"{where}'s d2t is all zeros: engines read draft id i as target id i, so it can propose only target "
                f"ids 0..{draft_vocab_size - 1}; measured as the engine would serve it (fix: eaglekit export "
                "--vocab-map).",)
    require_valid(c)
    return ()


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as Llama computes it: in float32, scaled, cast back."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


@dataclass(frozen=True)
class DraftOutput:
    """Chain drafts for every base position from ``start`` on: ``tokens[j - 1, t - start]`` is step
    ``j``'s draft (a TARGET id) from base ``t``; ``logits[j - 1]`` [T - start, draft_vocab] when asked for."""

    tokens: torch.Tensor            # (K, T - start) int64, target ids
    logits: tuple[torch.Tensor, ...] | None = None


class DraftModel:
    """An EAGLE-3 drafter's weights on a device, ready to draft (Llama-style; MLA drafters refused).

    Build with :meth:`load` (any location the kit reads) or :meth:`from_tensors`."""

    def __init__(self, config: DrafterConfig, tensors: Mapping[str, torch.Tensor], *, layout: Layout,
                 embed: torch.Tensor, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                 source: str = "drafter") -> None:
        self.config, self.layout, self.source = config, layout, source
        self.device, self.dtype = torch.device(device), dtype
        p = LAYER_PREFIX[layout]

        def w(name: str) -> torch.Tensor:
            return tensors[name].to(device=self.device, dtype=dtype)

        self.fc = w("fc.weight")                                        # (H, n_aux * Ht)
        self.hidden_size = self.fc.shape[0]
        ht = config.target_hidden_size
        if self.fc.shape[1] % ht:
            raise ConfigError(f"{source}: fc.weight is {list(self.fc.shape)}, not a multiple of the target hidden "
                              f"size {ht} that the config gives.")
        self.target_hidden_size, self.n_aux = ht, self.fc.shape[1] // ht
        self.fc_norms = [w(f"fc_norm.{i}.weight") for i in range(self.n_aux)] if "fc_norm.0.weight" in tensors else None
        self.input_norm = w("input_norm.weight") if "input_norm.weight" in tensors else None
        # one matmul for q/k/v and one for gate/up; q, k, v, gate and up are views into them (no copies)
        q, k, v = (w(p + f"self_attn.{n}_proj.weight") for n in "qkv")
        self._qkv_w = torch.cat([q, k, v])                              # (q + k + v rows, 2H)
        self.q, self.k, self.v = self._qkv_w.split([q.shape[0], k.shape[0], v.shape[0]])
        self.o = w(p + "self_attn.o_proj.weight")
        gate, up = w(p + "mlp.gate_proj.weight"), w(p + "mlp.up_proj.weight")
        if gate.shape != up.shape:
            raise ConfigError(f"{source}: mlp gate_proj {list(gate.shape)} and up_proj {list(up.shape)} differ.")
        self._gate_up_w = torch.cat([gate, up])                         # (2I, H)
        self.gate, self.up = self._gate_up_w.chunk(2)
        self.down = w(p + "mlp.down_proj.weight")
        del q, k, v, gate, up
        self.hidden_norm = w(p + "hidden_norm.weight")
        self.input_layernorm = w(p + "input_layernorm.weight")
        self.post_norm = w(p + "post_attention_layernorm.weight")
        self.norm = w("norm.weight") if "norm.weight" in tensors else None
        self.lm_head = w("lm_head.weight")                              # (N, H)
        self.embed = embed.to(device=self.device, dtype=dtype)          # (V, H)
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = self.q.shape[0] // self.heads
        self.eps = config.rms_norm_eps or 1e-6
        self.norm_before_residual = config.norm_before_residual
        #: what the engines make of a missing or all-zero d2t (set by :meth:`load`); empty when the map is sound
        self.vocab_notes: tuple[str, ...] = ()
        d2t = tensors.get("d2t")
        n = self.lm_head.shape[0]
        offsets = torch.zeros(n, dtype=torch.int64) if d2t is None else d2t.to(torch.int64).cpu()
        #: target id of every draft row (i + d2t[i])
        self.draft_to_target = (torch.arange(n) + offsets).to(self.device)
        self._inv_freq, self._rope_scale = _rope(config, self.head_dim)
        self._inv_freq = self._inv_freq.to(self.device)

    # -- loading -------------------------------------------------------------------------------------
    @classmethod
    def load(cls, location: str | os.PathLike[str] | Checkpoint, *, embed: torch.Tensor | None = None,
             embeddings: str | os.PathLike[str] | None = None, device: str = "cpu",
             dtype: str | torch.dtype = "float32", endpoint: str | None = None, timeout: float | None = None) -> DraftModel:
        """Read a drafter's weights with the kit's reader (local, Hub, HTTP, SSH).

        The input embedding comes from the drafter's own ``embed_tokens.weight`` when it has one, else
        ``embed`` (a tensor, e.g. a loaded target's), else the target checkpoint at ``embeddings``
        (only its embedding tensor is read)."""
        torch_dtype = _dtype(dtype)
        ckpt = location if isinstance(location, Checkpoint) else open_checkpoint(location, endpoint=endpoint, timeout=timeout)
        try:
            where = ckpt.inventory.source
            if ckpt.inventory.config is None:
                raise ConfigError(f"{where} has no config.json: the draft forward needs the drafter's config.")
            config = normalize_config(ckpt.inventory.config, source=f"{where}/config.json")
            names = set(ckpt.inventory.names)
            layout = check_layout(config, names, where=where)
            used = {"fc.weight", "input_norm.weight", "norm.weight", "lm_head.weight",
                    *(LAYER_PREFIX[layout] + t for t in LAYER_TENSORS)}
            # only what the forward uses (a speculators checkpoint may also carry the verifier's head)
            wanted = [n for n in names if n in used or n.startswith("fc_norm.")]
            tensors = {n: ckpt.read_tensor(n) for n in wanted}
            own = next((n for n in ("embed_tokens.weight", "model.embed_tokens.weight") if n in names), None)
            if own is not None:
                embed = ckpt.read_tensor(own)
            d2t, t2d = read_maps(ckpt)  # bounded by the vocabulary the config declares
            if d2t is not None:
                tensors["d2t"] = torch.from_numpy(np.array(d2t, dtype=np.int64))  # a writable copy (a few KiB)
            notes = engine_reading(d2t, t2d,
                                   vocab_size=config.vocab_size, draft_vocab_size=tensors["lm_head.weight"].shape[0],
                                   where=where)
        finally:
            if not isinstance(location, Checkpoint):
                ckpt.close()
        if embed is None and embeddings is not None:
            embed = read_embeddings(embeddings, endpoint=endpoint, timeout=timeout,
                                    expect=(config.vocab_size, config.hidden_size))
        if embed is None:
            raise InputError(f"{where} has no embed_tokens.weight (drafters take the target's frozen embedding): "
                             "give the target (--target) or a checkpoint that holds its embedding (--embeddings).")
        if embed.ndim != 2 or embed.shape[1] != config.hidden_size:
            raise InputError(f"the embedding is {list(embed.shape)} but the drafter's hidden size is "
                             f"{config.hidden_size}: it is not this drafter's target.")
        if embed.shape[0] != config.vocab_size:
            raise VocabMapError(f"vocabulary mismatch: the embedding has {embed.shape[0]} rows but {where}'s config "
                                f"says the target vocabulary has {config.vocab_size} tokens.")
        model = cls(config, tensors, layout=layout, embed=embed, device=device, dtype=torch_dtype, source=where)
        model.vocab_notes = notes
        return model

    @classmethod
    def from_tensors(cls, config: Mapping[str, Any] | DrafterConfig, tensors: Mapping[str, torch.Tensor], *,
                     embed: torch.Tensor | None = None, device: str = "cpu",
                     dtype: str | torch.dtype = "float32") -> DraftModel:
        """A drafter from in-memory tensors (tests, training); same checks as :meth:`load`."""
        cfg = config if isinstance(config, DrafterConfig) else normalize_config(config)
        layout = check_layout(cfg, set(tensors), where="drafter")
        if embed is None:
            embed = tensors.get("embed_tokens.weight")
        if embed is None:
            raise InputError("drafter has no embed_tokens.weight; pass embed=.")
        return cls(cfg, tensors, layout=layout, embed=embed, device=device, dtype=_dtype(dtype))

    # -- the aux features ----------------------------------------------------------------------------
    def aux_indices(self, convention: AuxConvention, num_layers: int) -> tuple[int, ...]:
        """The ``output_hidden_states`` indices this drafter reads under ``convention`` for an
        ``num_layers``-layer target."""
        ids = self.config.aux_layer_ids or default_aux_layers(num_layers, convention=convention)
        if len(ids) != self.n_aux:
            raise ConfigError(f"{self.source}: the config lists {len(ids)} aux layer ids but fc.weight reads "
                              f"{self.n_aux} hidden states ({list(self.fc.shape)}).")
        idx = hidden_state_indices(ids, convention)
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
            aux = torch.stack([_rms_norm(aux[i], self.fc_norms[i], self.eps) for i in range(self.n_aux)])
        f = aux.permute(1, 0, 2).reshape(aux.shape[1], -1)             # (T, n_aux*Ht)
        if self.input_norm is not None:
            f = _rms_norm(f, self.input_norm, self.eps)
        return f @ self.fc.T                                            # (T, H)

    # -- the decoder layer, in pieces ------------------------------------------------------------------
    def _qkv(self, h: torch.Tensor, ids: torch.Tensor, pos: torch.Tensor):
        """Layer input for entries (h, token): q (nh, T, hd), k/v (nkv, T, hd) with RoPE at ``pos``."""
        e = self.embed[ids]                                             # (T, H)
        x = torch.cat([_rms_norm(e, self.input_layernorm, self.eps), _rms_norm(h, self.hidden_norm, self.eps)], -1)
        T = x.shape[0]
        nq, nk = self.q.shape[0], self.k.shape[0]
        qkv = x @ self._qkv_w.T                                         # (T, q + k + v)
        q = qkv[:, :nq].reshape(T, self.heads, self.head_dim).transpose(0, 1)
        k = qkv[:, nq:nq + nk].reshape(T, self.kv_heads, self.head_dim).transpose(0, 1)
        v = qkv[:, nq + nk:].reshape(T, self.kv_heads, self.head_dim).transpose(0, 1)
        cos, sin = self._cos_sin(pos)                                   # (T, hd)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        return q, k, v

    def _finish(self, h: torch.Tensor, attn: torch.Tensor):
        """attention output (nh, T, hd) -> (g, logits): residual, MLP, final norm, lm_head."""
        T = attn.shape[1]
        residual = _rms_norm(h, self.hidden_norm, self.eps) if self.norm_before_residual else h
        y = residual + attn.transpose(0, 1).reshape(T, -1) @ self.o.T
        z = _rms_norm(y, self.post_norm, self.eps)
        gate, up = (z @ self._gate_up_w.T).chunk(2, -1)                  # (T, I) each
        g = y + (F.silu(gate) * up) @ self.down.T                       # (T, H)
        out = _rms_norm(g, self.norm, self.eps) if self.norm is not None else g
        return g, out @ self.lm_head.T                                  # (T, N)

    def _cos_sin(self, pos: torch.Tensor):
        freqs = pos.to(self._inv_freq.dtype)[:, None] * self._inv_freq[None, :]
        emb = torch.cat([freqs, freqs], -1)
        return (emb.cos() * self._rope_scale).to(self.dtype), (emb.sin() * self._rope_scale).to(self.dtype)

    def _expand(self, kv: torch.Tensor) -> torch.Tensor:
        return kv if self.kv_heads == self.heads else kv.repeat_interleave(self.heads // self.kv_heads, 0)

    def targets_of(self, logits: torch.Tensor) -> torch.Tensor:
        """argmax over draft rows, as target ids."""
        return self.draft_to_target[logits.argmax(-1)]

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
                q, kj, vj = self._qkv(h, ids, pos + (j - 1))
                chain_k.append(self._expand(kj))
                chain_v.append(self._expand(vj))
            h, logits = self._finish(h, self.attend(q, k1, v1, pos, chain_k, chain_v))
            ids = self.targets_of(logits)
            tokens.append(ids)
            if return_logits:
                logits_out.append(logits)
        return DraftOutput(torch.stack(tokens) if tokens else torch.empty(0, n, dtype=torch.int64),
                           tuple(logits_out) if return_logits else None)

    def prefix(self, h: torch.Tensor, next_ids: torch.Tensor, *, start: int = 0):
        """The entries of every position 0..T-1 as keys and values (nh, T, hd), and the queries (nh, n, hd),
        features (n, H), tokens (n,) and positions (n,) of the bases start..T-1 drafted from (they still
        attend to every earlier entry): step 1 of every chain and the first pass of every tree."""
        T = h.shape[0]
        if not 0 <= start < max(T, 1):
            raise InputError(f"start {start} is outside the {T} positions.")
        h = h.to(device=self.device, dtype=self.dtype)
        ids = next_ids.to(self.device)
        q, k1, v1 = self._qkv(h, ids, torch.arange(T, device=self.device))
        k1, v1 = self._expand(k1), self._expand(v1)                     # (nh, T, hd): the prefix entries
        return q[:, start:], k1, v1, h[start:], ids[start:], torch.arange(start, T, device=self.device)

    def attend(self, q: torch.Tensor, k1: torch.Tensor, v1: torch.Tensor, pos: torch.Tensor,
               own_k: list[torch.Tensor], own_v: list[torch.Tensor], *, rows_per_base: int = 1) -> torch.Tensor:
        """The all-positions attention: query rows q (nh, R, hd), ``rows_per_base`` consecutive rows per base
        (1 for a chain; a tree's k frontier nodes), row r at position ``pos[r]``, attend to the prefix keys
        k1/v1 (nh, T, hd) up to their position and to their own entries own_k/own_v [(nh, R, hd), ...] (their
        chain's or tree's earlier entries, the row itself last). Blocks of ATTN_BLOCK bases."""
        scale = 1.0 / math.sqrt(self.head_dim)
        n = q.shape[1] // rows_per_base
        attn = torch.empty_like(q)
        for b0 in range(0, n, ATTN_BLOCK):
            r0, r1 = b0 * rows_per_base, min(n, b0 + ATTN_BLOCK) * rows_per_base
            a1 = int(pos[r1 - 1]) + 1                                   # prefix keys 0..a1-1 suffice
            qb = q[:, r0:r1]                                            # (nh, B, hd)
            s = (qb @ k1[:, :a1].transpose(1, 2)) * scale               # (nh, B, a1): prefix keys
            causal = torch.arange(a1, device=self.device)[None, :] <= pos[r0:r1, None]
            s = s.masked_fill(~causal, float("-inf"))
            own = [(qb * ck[:, r0:r1]).sum(-1, keepdim=True) * scale for ck in own_k]  # (nh, B, 1) each
            p = torch.softmax(torch.cat([s, *own], -1).float(), -1).to(self.dtype)
            out = p[..., :a1] @ v1[:, :a1]                              # (nh, B, hd)
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
        scale = 1.0 / math.sqrt(self.head_dim)
        _, k1, v1 = self._qkv(h, ids, torch.arange(T, device=self.device))
        k1, v1 = self._expand(k1), self._expand(v1)
        out = torch.empty(steps, len(bases), dtype=torch.int64, device=self.device)
        for col, t in enumerate(bases.tolist()):
            keys, vals = k1[:, :t], v1[:, :t]
            hh, tok = h[t:t + 1], ids[t:t + 1]
            for j in range(1, steps + 1):
                q, kj, vj = self._qkv(hh, tok, torch.tensor([t + j - 1], device=self.device))
                keys = torch.cat([keys, self._expand(kj)], 1)
                vals = torch.cat([vals, self._expand(vj)], 1)
                p = torch.softmax(((q @ keys.transpose(1, 2)) * scale).float(), -1).to(self.dtype)
                hh, logits = self._finish(hh, p @ vals)
                tok = self.targets_of(logits)
                out[j - 1, col] = tok[0]
        return out


def check_layout(config: DrafterConfig, names: set[str], *, where: str) -> Layout:
    """Refuse what the draft forward cannot run faithfully; return the checkpoint's layout."""
    require_llama_attention(config, where, "eaglekit's draft forward covers")
    if "lm_head.weight" not in names:
        raise ConfigError(f"{where} has no lm_head.weight: serving engines would leave the head random (accept "
                          "length about 1). Ask the publisher for the head, or take it from the drafter it was "
                          "trained from.")
    if "fc.weight" not in names:
        raise ConfigError(f"{where} has no fc.weight: not an EAGLE-3 drafter checkpoint.")
    layouts = [lay for lay, p in LAYER_PREFIX.items() if f"{p}self_attn.q_proj.weight" in names]
    if not layouts:
        raise ConfigError(f"{where} has neither midlayer.* (SpecForge) nor layers.0.* (speculators) decoder "
                          "tensors; the draft forward reads those two layouts.")
    if any(n.startswith(("layers.1.", "midlayer.1")) for n in names) or config.num_hidden_layers > 1:
        raise ConfigError(f"{where} has more than one decoder layer; eaglekit drafts with single-layer "
                          "EAGLE-3 drafters only.")
    layout = layouts[0]
    missing = [LAYER_PREFIX[layout] + n for n in LAYER_TENSORS if LAYER_PREFIX[layout] + n not in names]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}.")
    return layout


def read_embeddings(location: str | os.PathLike[str], *, endpoint: str | None = None, timeout: float | None = None,
                    expect: tuple[int | None, int | None] = (None, None)) -> torch.Tensor:
    """A target checkpoint's input embedding, read by range (only that tensor's bytes); its declared shape
    is compared with ``expect`` (vocabulary, width) before it is read, and NaN or Inf in it is refused."""
    with open_checkpoint(location, endpoint=endpoint, timeout=timeout) as ckpt:
        name = next((n for n in EMBED_NAMES if n in ckpt.inventory), None)
        if name is None:
            name = next((n for n in ckpt.inventory.names if n.endswith("embed_tokens.weight")), None)
        if name is None:
            raise InputError(f"{ckpt.inventory.source} holds no embed_tokens.weight; give the target model's "
                             "checkpoint for --embeddings.")
        check_declared(ckpt, name, expect, "the embedding of")
        embed = ckpt.read_tensor(name)
        check_finite(embed, name, ckpt.inventory.source)
        return embed


def _dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in table:
        raise InputError(f"dtype must be float32 or bfloat16, got {dtype!r}.")
    return table[dtype]


def _rope(config: DrafterConfig, head_dim: int) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention scaling, from transformers' own RoPE initialisers (default,
    llama3, yarn, ... whatever the drafter's config names)."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    raw = config.raw.get("transformer_layer_config", config.raw) if config.format == "speculators" else config.raw
    kwargs: dict[str, Any] = {"hidden_size": config.hidden_size, "num_attention_heads": config.num_attention_heads,
                              "head_dim": head_dim,
                              "max_position_embeddings": config.max_position_embeddings or 2048}
    if isinstance(raw, Mapping) and isinstance(raw.get("rope_parameters"), Mapping):
        kwargs["rope_parameters"] = dict(raw["rope_parameters"])
    else:
        kwargs["rope_theta"] = config.rope_theta or 10000.0
        kwargs["rope_scaling"] = dict(config.rope_scaling) if config.rope_scaling else None
    cfg = LlamaConfig(**kwargs)
    rope_type = (cfg.rope_parameters or {}).get("rope_type", "default")
    if rope_type == "default":
        theta = cfg.rope_parameters["rope_theta"]
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        return inv, 1.0
    try:
        inv, scale = ROPE_INIT_FUNCTIONS[rope_type](cfg, "cpu")
    except KeyError as e:
        raise ConfigError(f"{config.source}: RoPE type {rope_type!r} is unknown to this transformers.") from e
    return inv.float(), float(scale)
