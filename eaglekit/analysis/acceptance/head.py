"""The target's next tokens from its last hidden state: final norm and ``lm_head``, read by range.

A dump holds the target's last hidden state at every position (before or after the final norm, per
format); the target's greedy next token there is ``argmax(lm_head(norm(h)))`` and its sampling
distribution ``softmax(lm_head(norm(h)) / T)``. :func:`read_target_head` fetches exactly the two
tensors (and the config) from the target checkpoint, local or remote: about 2.3 GB for Kimi-K2's
``lm_head`` [163840, 7168] in bf16, nothing of its 1T other parameters. A local head larger than
:data:`KEEP_HEAD` bytes in the compute dtype is not held at all: it stays in the checkpoint (kept open) and
every pass streams it in row blocks, reducing as it goes (the argmax; at a temperature, a running log-sum-exp
and the columns asked for), so a Kimi-sized dump is measured in bounded memory. Wrapped checkpoints
(``language_model.*``, ``model.language_model.*``) are found by suffix; a target with tied
embeddings uses its input embedding as the head.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from eaglekit.core.errors import ConfigError, InputError, VocabMapError
from eaglekit.core.redact import shown
from eaglekit.io.reader import Checkpoint, open_checkpoint
from eaglekit.analysis.draft.checks import check_declared, check_finite  # noqa: F401  (used here and re-exported)
from eaglekit.analysis.draft.weights import Weights

#: Logits computed per matmul: positions x vocabulary bounded to this many floats (256 MB in float32).
LOGIT_FLOATS = 1 << 26
#: Bytes of ``lm_head`` (in the compute dtype) above which it is streamed from the checkpoint, not held.
KEEP_HEAD = 1 << 30
_HEADS = ("lm_head.weight", "language_model.lm_head.weight", "model.lm_head.weight")
_NORMS = ("model.norm.weight", "language_model.model.norm.weight", "model.language_model.norm.weight",
          "norm.weight", "transformer.ln_f.weight")
_EMBEDS = ("model.embed_tokens.weight", "language_model.model.embed_tokens.weight",
           "model.language_model.embed_tokens.weight", "embed_tokens.weight")


@dataclass(frozen=True, eq=False)
class TargetHead:
    """A target's final norm (None: not applied) and ``lm_head`` [V, H], on a device: held (``lm_head``), or
    streamed in row blocks from the checkpoint ``stream`` holds open (``lm_head`` None; :meth:`close` it)."""

    lm_head: torch.Tensor | None          # (V, H); None: streamed
    norm: torch.Tensor | None             # (H,)
    eps: float
    num_hidden_layers: int | None
    source: str
    names: tuple[str, ...] = ()
    layer_norm: bool = False              # LayerNorm (mean removed, then a bias) instead of RMSNorm
    norm_bias: torch.Tensor | None = None  # (H,): LayerNorm's bias, where the checkpoint has one
    stream: Weights | None = None         # where a streamed head's blocks come from
    shape: tuple[int, int] = (0, 0)
    owns_checkpoint: bool = False         # the stream's checkpoint was opened for this head (close() closes it)
    spool: str | None = None              # a remote head's private local copy (close() deletes it)

    @property
    def vocab_size(self) -> int:
        return int(self.lm_head.shape[0]) if self.lm_head is not None else self.shape[0]

    @property
    def hidden_size(self) -> int:
        return int(self.lm_head.shape[1]) if self.lm_head is not None else self.shape[1]

    @property
    def streamed(self) -> bool:
        return self.lm_head is None

    def close(self) -> None:
        """Close the checkpoint a streamed head opened (a held head has nothing open; a caller's checkpoint is
        left to the caller)."""
        if self.owns_checkpoint and self.stream is not None and self.stream.checkpoint is not None:
            self.stream.checkpoint.close()
        if self.spool is not None:
            from eaglekit.io.spool import remove_spool

            remove_spool(self.spool)

    def _final(self, final: torch.Tensor, *, normed: bool, dtype: torch.dtype, device) -> torch.Tensor:
        x = final.to(device=device, dtype=dtype)
        if normed:
            return x
        if self.norm is None:
            raise InputError(f"{self.source} has no final norm weight, but the dump's final hidden state is "
                             "before the norm; give the target checkpoint that holds model.norm.weight.")
        x32 = x.float()
        if self.layer_norm:
            bias = None if self.norm_bias is None else self.norm_bias.float()
            return F.layer_norm(x32, (x32.shape[-1],), self.norm.float(), bias, self.eps).to(x.dtype)
        return self.norm * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def _blocks(self) -> Iterator[tuple[int, torch.Tensor]]:
        """(first row, rows) of ``lm_head``: the whole when held, else one checked block at a time."""
        if self.lm_head is not None:
            yield 0, self.lm_head
            return
        name = self.names[0]
        for r0, block in self.stream.blocks(name):
            check_finite(block, f"{name} (rows {r0}-{r0 + block.shape[0] - 1})", self.source)
            yield r0, block

    def logits(self, final: torch.Tensor, *, normed: bool) -> torch.Tensor:
        """``lm_head(norm(final))`` for final [n, H] (``normed``: the dump's state is already post-norm)."""
        if self.lm_head is not None:
            x = self._final(final, normed=normed, dtype=self.lm_head.dtype, device=self.lm_head.device)
            return F.linear(x, self.lm_head).float()                         # (n, V), as transformers computes it
        x = self._final(final, normed=normed, dtype=self.stream.dtype, device=self.stream.device)
        return torch.cat([F.linear(x, block).float() for _, block in self._blocks()], -1)

    def chunk(self) -> int:
        return max(1, LOGIT_FLOATS // self.vocab_size)

    @torch.no_grad()
    def next_tokens(self, final: torch.Tensor, *, normed: bool, temperature: float = 0.0,
                    columns: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Greedy next token at every position of ``final`` [T, H] -> (T,) int64; at temperature > 0 also
        the target's probabilities on ``columns`` (the draft vocabulary's target ids) -> (T, len(columns)),
        computed chunk by chunk so that memory holds one chunk of full logits (a streamed head: one block's)."""
        if self.lm_head is None:
            return self._streamed_next_tokens(final, normed=normed, temperature=temperature, columns=columns)
        T = final.shape[0]
        ids = torch.empty(T, dtype=torch.int64)
        probs = None if temperature <= 0 else torch.empty(T, len(columns), dtype=torch.float32)
        step = self.chunk()
        for s in range(0, T, step):
            logits = self.logits(final[s:s + step], normed=normed)            # (n, V)
            ids[s:s + step] = logits.argmax(-1).cpu()
            if probs is not None:
                probs[s:s + step] = torch.softmax(logits / temperature, -1)[:, columns.to(logits.device)].cpu()
        return ids, probs

    def _streamed_next_tokens(self, final: torch.Tensor, *, normed: bool, temperature: float,
                              columns: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As :meth:`next_tokens`, the head read once per pass in row blocks: greedy takes every position in
        one pass (the first of equal logits wins, as torch.argmax); a temperature adds a running log-sum-exp
        of logits / T and gathers the columns' logits as their rows pass, positions in chunks."""
        T = final.shape[0]
        ids = torch.empty(T, dtype=torch.int64)
        probs = None if temperature <= 0 else torch.empty(T, len(columns), dtype=torch.float32)
        step = T if probs is None else max(1, LOGIT_FLOATS // max(1, len(columns)))
        cols = None if columns is None else columns.to(torch.int64).cpu()
        for s in range(0, T, step):
            x = self._final(final[s:s + step], normed=normed, dtype=self.stream.dtype, device=self.stream.device)
            best_v = best_i = lse = picked = None
            if probs is not None:
                picked = torch.empty(x.shape[0], len(cols), dtype=torch.float32)
            for r0, block in self._blocks():
                lg = F.linear(x, block).float()                                   # (n, rows of the block)
                v, i = lg.max(-1)
                if best_v is None:
                    best_v, best_i = v, i + r0
                else:
                    better = v > best_v
                    best_v, best_i = torch.where(better, v, best_v), torch.where(better, i + r0, best_i)
                if picked is not None:
                    scaled = lg / temperature
                    bl = torch.logsumexp(scaled, -1)
                    lse = bl if lse is None else torch.logaddexp(lse, bl)
                    here = (cols >= r0) & (cols < r0 + block.shape[0])
                    if bool(here.any()):
                        picked[:, here] = scaled[:, (cols[here] - r0).to(scaled.device)].cpu()
            ids[s:s + step] = best_i.cpu()
            if probs is not None:
                probs[s:s + step] = torch.exp(picked - lse.cpu()[:, None])
        return ids, probs


def _find(ckpt: Checkpoint, exact: tuple[str, ...], suffix: str) -> str | None:
    names = ckpt.inventory.names
    hit = next((n for n in exact if n in ckpt.inventory), None)
    if hit is None:
        cands = sorted((n for n in names if n.endswith(suffix) and ".layers." not in n
                        and "mtp" not in n and "vision" not in n), key=len)
        hit = cands[0] if cands else None
    return hit


def _is_layer_norm(cfg: dict[str, Any], *, has_bias: bool) -> bool:
    """Whether the final norm is a LayerNorm (GPT-2, GPT-NeoX, OPT, Falcon, Phi: ``layer_norm_epsilon`` /
    ``layer_norm_eps``, a bias beside the weight) rather than an RMSNorm (Llama, Qwen, DeepSeek, Kimi:
    ``rms_norm_eps``, no bias)."""
    if "rms_norm_eps" in cfg:
        return False
    return has_bias or "layer_norm_epsilon" in cfg or "layer_norm_eps" in cfg


def text_config(config: dict[str, Any] | None) -> dict[str, Any]:
    """The language model's part of a config (``text_config`` of multimodal wrappers), or the config."""
    if not isinstance(config, dict):
        return {}
    inner = config.get("text_config") or config.get("language_config")
    return inner if isinstance(inner, dict) else config


def read_target_head(location: str | os.PathLike[str] | Checkpoint, *, device: str = "cpu",
                     dtype: torch.dtype = torch.float32, endpoint: str | None = None, timeout: float | None = None,
                     vocab_size: int | None = None, hidden_size: int | None = None) -> TargetHead:
    """Read a target's ``lm_head`` and final norm by range (only those tensors' bytes) from any
    location the kit reads. ``vocab_size`` / ``hidden_size`` (the drafter's target's): the header's shape
    is compared with them before a byte of the head is read. A head, norm or bias holding NaN or Inf is
    refused (:func:`check_finite`; a streamed head's blocks as they are read). A local head past
    :data:`KEEP_HEAD` bytes is streamed (the result holds the checkpoint open until :meth:`TargetHead.close`); a
    remote one that large is first copied once to a private local file (:mod:`eaglekit.io.spool`, deleted by
    :meth:`TargetHead.close`) and streamed from there, as re-reading it over the network for every sample would
    cost far more; a smaller one is read once and held."""
    owned = not isinstance(location, Checkpoint)   # a caller's checkpoint stays theirs to close
    ckpt = open_checkpoint(location, endpoint=endpoint, timeout=timeout) if owned else location
    keep_open, spool, local = False, None, None
    try:
        where = ckpt.inventory.source
        cfg = text_config(ckpt.inventory.config)
        head = _find(ckpt, _HEADS, "lm_head.weight")
        if head is None and cfg.get("tie_word_embeddings"):
            head = _find(ckpt, _EMBEDS, "embed_tokens.weight")
        if head is None:
            raise InputError(f"{shown(where)} holds no lm_head.weight (nor tied embeddings): give the target model's "
                             "checkpoint for --target-head.")
        check_declared(ckpt, head, (vocab_size, hidden_size), "the target head")
        norm_name = _find(ckpt, _NORMS, "norm.weight")
        head_shape = tuple(int(d) for d in ckpt.inventory[head].shape)
        if len(head_shape) != 2:
            raise InputError(f"{shown(where)}: {head} is {list(head_shape)}; a head is a [vocab, hidden] matrix.")
        if norm_name is not None and tuple(ckpt.inventory[norm_name].shape) != (head_shape[1],):
            norm_name = None  # another width: not this head's final norm
        # streamed from a local file (the page cache serves each pass); a remote head is first copied once to a
        # private local file (eaglekit/io/spool.py), as re-reading it over the network for every pass would cost more
        streamed = head_shape[0] * head_shape[1] * torch.empty((), dtype=dtype).element_size() > KEEP_HEAD
        local = ckpt
        if streamed and ckpt.source.kind != "local":
            from eaglekit.io.spool import spool_tensor

            spool, local = spool_tensor(ckpt, head)
        lm_head = None
        if not streamed:
            lm_head = ckpt.read_tensor(head)
            check_finite(lm_head, head, where)
            lm_head = lm_head.to(device=device, dtype=dtype)
        norm = ckpt.read_tensor(norm_name) if norm_name else None
        if norm is not None:
            check_finite(norm, norm_name, where)
            norm = norm.to(device=device, dtype=dtype)
        if norm is not None and norm.shape != (head_shape[1],):
            norm = None
        bias_name = norm_name[:-len("weight")] + "bias" if norm is not None else None
        layer_norm = norm is not None and _is_layer_norm(cfg, has_bias=bias_name in ckpt.inventory)
        bias = ckpt.read_tensor(bias_name).to(device=device, dtype=dtype) if layer_norm and bias_name in ckpt.inventory \
            else None
        if bias is not None and bias.shape != norm.shape:
            raise ConfigError(f"{shown(where)}: {bias_name} is {list(bias.shape)}, expected {list(norm.shape)}.")
        if bias is not None:
            check_finite(bias, bias_name, where)
        eps = cfg.get("rms_norm_eps") or cfg.get("layer_norm_epsilon") or cfg.get("layer_norm_eps") or \
            cfg.get("norm_epsilon") or (1e-5 if layer_norm else 1e-6)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
            raise ConfigError(f"{shown(where)}: the final norm's epsilon in config.json is {eps!r}; expected a small "
                              "positive number (rms_norm_eps or layer_norm_epsilon, such as 1e-6).")
        layers = cfg.get("num_hidden_layers", cfg.get("n_layer"))
        stream = Weights({}, device=torch.device(device), dtype=dtype, checkpoint=local, source=where) if streamed \
            else None
        out = TargetHead(lm_head, norm, float(eps), layers if isinstance(layers, int) else None, where,
                         tuple(n for n in (head, norm_name, bias_name if bias is not None else None) if n),
                         layer_norm=layer_norm, norm_bias=bias, stream=stream, shape=head_shape,
                         owns_checkpoint=streamed and (owned or spool is not None),
                         spool=None if spool is None else str(spool))
        keep_open = streamed and spool is None   # the streamed head reads from it until closed (a copy: from that)
        spool = None   # the head owns it now
        return out
    finally:
        if owned and not keep_open:
            ckpt.close()
        if spool is not None:   # refused after the copy: nothing keeps it
            local.close()
            from eaglekit.io.spool import remove_spool

            remove_spool(spool)
