"""The DFlash2 block drafter (``DFlash2DraftModel``): DFlash's forward with grouped dynamic causal convolutions
around each layer's attention and MLP, and a candidate selector that walks the block's top-k candidates.

Checked against z-lab/dflash ``dflash/model.py`` at commit 10129599 (``_grouped_dynamic_convolve``,
``GroupedDynamicCausalConv``, ``Qwen3DFlashDecoderLayer.forward``, ``CandidateSelector.select``,
``DFlash2DraftModel.propose``, ``DFlashDraftModel.compute_logits``, ``dflash_generate``) and, cycle by cycle, against
a slow re-implementation of that loop (tests/draft/dflash2_reference.py). TorchSpec
``torchspec/models/draft/dflash2.py`` and vLLM ``qwen3_dflash2.py`` read the same tensors.

* Each layer: ``x, k = attention_conv.prepare(input_layernorm(h))``; ``a = attention_conv.finish(self_attn(x), k)``
  (``self_attn`` ends with ``o_proj``); ``h += a``; the MLP the same way with ``mlp_conv``. ``prepare(x)`` projects
  ``x`` to per-slot kernels ``kernel_projection(x)`` viewed (Q, 2, kernel, G) with G = H / ``conv_group_size``,
  convolves ``x`` with the first and hands the second to ``finish``. The convolution is causal over the block's
  slots only (zeros before slot 0; context features bypass it): ``out[t] = sum_o (base[o] + dyn[t, o]) *
  x[t - o]``, ``base`` per channel, ``dyn`` per group of ``conv_group_size`` consecutive channels.
* The block's embedding is the target's, times ``input_embedding_scale``.
* Drafts (greedy): ``logits = lm_head(h) * output_multiplier``, then ``tanh(logits / cap) * cap`` with
  ``final_logit_softcapping``; ``topk(logits, selector_top_k, sorted=False)`` gives per slot the candidates and
  their unary scores; from ``pred`` = the anchor, slot by slot: ``score = unary + <predecessor_codebook[pred] *
  hidden_projection(h), successor_codebook[candidate]>``, ``pred`` = the candidate of the first highest score.

Only GQA attention (``attention_mode`` ``gqa``) is run; an MLA DFlash2 is refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from eaglekit.analysis.draft.dflash import DFlashDrafter
from eaglekit.core.configs.block import BlockDrafterConfig
from eaglekit.core.configs.block_shapes import expected_tensors
from eaglekit.core.errors import ConfigError, InputError


def dflash2_shapes(c: BlockDrafterConfig) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every tensor a GQA DFlash2 reads, with the shape its config implies (the codebooks without ``.weight``)."""
    return expected_tensors(c)


def grouped_causal_conv(x: torch.Tensor, dynamic: torch.Tensor, base: torch.Tensor, group_size: int) -> torch.Tensor:
    """The authors' ``_grouped_dynamic_convolve``: x (B, Q, H), dynamic (B, Q, kernel, G), base (kernel, H) ->
    (B, Q, H), causal over Q (zeros before slot 0), the dynamic kernel shared by each group's channels."""
    B, Q, H = x.shape
    G = H // group_size
    blocks = x.view(B, Q, G, group_size)                                                  # (B, Q, G, gs)
    dynamic = dynamic.reshape(B, Q, base.shape[0], G, 1)                                  # (B, Q, k, G, 1)
    out = torch.zeros_like(blocks)
    for o in range(base.shape[0]):
        values = blocks if o == 0 else F.pad(blocks[:, :-o], (0, 0, 0, 0, o, 0))         # x[t - o]
        out = out + base[o].view(1, 1, G, group_size).to(x.dtype) * values
        out = torch.addcmul(out, dynamic[:, :, o], values)
    return out.view(B, Q, H)


class DFlash2Drafter(DFlashDrafter):
    """A GQA DFlash2 drafter: :class:`DFlashDrafter`'s frame, its convolutions and its candidate selector."""

    family = "dflash2"
    expected = staticmethod(dflash2_shapes)

    def __init__(self, config: BlockDrafterConfig, tensors: Mapping[str, torch.Tensor], **kw) -> None:
        source = kw.get("source", config.source)
        if config.attention_mode == "mla":
            raise InputError(f"{source} is an MLA DFlash2 drafter (dflash_config.attention_mode \"mla\"); eaglekit "
                             "runs GQA DFlash2 drafters only, so its accept length is not measured.")
        for key in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
            if getattr(config, key) is None:
                raise ConfigError(f"{source}: dflash_config.{key} is missing; a DFlash2 drafter's config gives it.")
        if config.hidden_size % config.conv_group_size:
            raise ConfigError(f"{source}: conv_group_size {config.conv_group_size} does not divide hidden_size "
                              f"{config.hidden_size}.")
        if config.vocab_size is None:
            raise ConfigError(f"{source}: vocab_size is missing; the selector's codebooks have one row per token.")
        if config.selector_top_k > config.vocab_size:
            raise ConfigError(f"{source}: {config.key('selector_top_k')} {config.selector_top_k} is more than the "
                              f"vocabulary ({config.vocab_size} tokens).")
        super().__init__(config, tensors, **kw)

    def before(self, i: int, conv: str, xs: list[torch.Tensor]) -> tuple[list[torch.Tensor], object]:
        """``GroupedDynamicCausalConv.prepare`` of layer ``i``'s ``conv`` on each group's (B, Q, H) input."""
        c = self.config
        k, G = c.conv_kernel_size, c.hidden_size // c.conv_group_size
        base = self._w(f"layers.{i}.{conv}.base_kernel")                                  # (2, k, H)
        dyns = [d.view(*x.shape[:-1], 2, k, G)
                for d, x in zip(self._linears(xs, f"layers.{i}.{conv}.kernel_projection"), xs)]  # (B, Q, 2, k, G)
        out = [grouped_causal_conv(x, d[..., 0, :, :], base[0], c.conv_group_size) for x, d in zip(xs, dyns)]
        return out, [d[..., 1, :, :] for d in dyns]

    def after(self, i: int, conv: str, ys: list[torch.Tensor], state: object) -> list[torch.Tensor]:
        """``GroupedDynamicCausalConv.finish``: the second kernel, from :meth:`before`'s input."""
        base = self._w(f"layers.{i}.{conv}.base_kernel")
        return [grouped_causal_conv(y, d, base[1], self.config.conv_group_size) for y, d in zip(ys, state)]

    def logits(self, hidden: torch.Tensor, head) -> torch.Tensor:
        """The authors' ``compute_logits``: (n, H) -> (n, V), the target's ``lm_head`` times ``output_multiplier``,
        then softcapped with ``final_logit_softcapping`` when the config sets one."""
        c = self.config
        logits = head.logits(hidden, normed=True) * c.output_multiplier                  # (n, V)
        if c.final_logit_softcapping is not None and c.final_logit_softcapping > 0:
            cap = c.final_logit_softcapping
            logits = torch.tanh(logits / cap) * cap
        return logits

    def propose(self, hidden: torch.Tensor, anchors: torch.Tensor, head) -> torch.Tensor:
        """``CandidateSelector.select`` at temperature 0: hidden (B, S, H), anchors (B,) -> (B, S) int64."""
        c = self.config
        B, S, H = hidden.shape
        flat = hidden.reshape(B * S, H)
        unary, cand = [], []
        step = head.chunk()
        for s in range(0, B * S, step):
            u, i = torch.topk(self.logits(flat[s:s + step], head), c.selector_top_k, dim=-1, sorted=False)
            unary.append(u)
            cand.append(i)
        unary = torch.cat(unary).view(B, S, -1).to(self.device)                           # (B, S, k)
        cand = torch.cat(cand).view(B, S, -1).to(self.device)                             # (B, S, k)
        proj = self._linear(hidden.to(self.dtype), "candidate_selector.hidden_projection")   # (B, S, r)
        before = self._w("candidate_selector.predecessor_codebook")                       # (V, r)
        after = self._w("candidate_selector.successor_codebook")                          # (V, r)
        pred = anchors.to(self.device, torch.int64)                                       # (B,)
        path = []
        for p in range(S):
            pair = torch.einsum("br,bkr->bk", before[pred] * proj[:, p], after[cand[:, p]])  # (B, k)
            index = torch.argmax(unary[:, p].to(pair.dtype) + pair, dim=-1)               # (B,)
            pred = cand[:, p].gather(-1, index[:, None])[:, 0]
            path.append(pred)
        return torch.stack(path, 1).cpu()                                                 # (B, S)
