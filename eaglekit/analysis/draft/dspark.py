"""The DSpark block drafter: DFlash's backbone, a Markov head that lets each slot's draft depend on the previous
one, and a confidence head that can cut the proposal short.

Checked against deepseek-ai/DeepSpec (``deepspec/modeling/dspark/qwen3/modeling.py`` ``Qwen3DSparkModel``,
``deepspec/modeling/dspark/markov_head.py``, ``deepspec/eval/dspark/draft_ops.py`` ``forward_dspark_draft_block``
and ``build_dspark_proposal``) and SpecForge ``specforge/modeling/draft/dspark.py`` (``DSparkDraftModel``), and,
cycle by cycle, against a slow re-implementation of DeepSpec's loop (tests/draft/dspark_reference.py):

* backbone: DFlash's forward; DeepSpec's attention is always bidirectional with no mask (``is_causal=False``, no
  ``attention_mask``), whatever ``layer_types`` say;
* embedding and head: the drafter's own ``embed_tokens`` and ``lm_head`` when the checkpoint has them (DeepSpec
  keeps frozen copies of the target's), else the target's (SpecForge);
* draft slots: every slot of the block when the config's ``anchor_drafts`` (DeepSpec's label shift: slot 0
  predicts ``start + 1``), else slots 1.. (SpecForge's ``_sample_draft_tokens``, z-lab's convention);
* Markov head, greedy, from ``prev`` = the anchor: ``draft_j = argmax(lm_head(h_j) + bias_j)``, ``prev = draft_j``;
  ``bias = markov_w2(markov_w1[prev])`` (vanilla), ``markov_w2(sigmoid(gate_proj([h_j, w1[prev]])) * w1[prev])``
  (gated), or a GRU-like state over the slots (rnn: ``joint_proj([s, w1[prev], h_j])`` -> gate, candidate,
  output; ``s = g s + (1 - g) tanh(candidate)``, ``bias = markov_w2(tanh(output))``);
* confidence head: ``proj([h_j, w1[prev_j]])`` (or ``proj(h_j)``), ``prev_j`` = the anchor then the drafts; with
  ``confidence_threshold`` > 0 the proposal ends before the first slot whose sigmoid is below it (0: never).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from eaglekit.analysis.draft.dflash import DFlashDrafter
from eaglekit.core.configs.block import BlockDrafterConfig
from eaglekit.core.configs.block_shapes import TARGET_COPIES, expected_tensors
from eaglekit.core.errors import ConfigError, InputError

MARKOV_HEADS = ("vanilla", "gated", "rnn")


def dspark_shapes(c: BlockDrafterConfig) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every tensor a DSpark drafter reads, with the shape its config implies."""
    return expected_tensors(c)


def own_copies(c: BlockDrafterConfig) -> dict[str, tuple[tuple[int, ...], str]]:
    """The embedding and ``lm_head`` a DSpark checkpoint may own (DeepSpec's), read when present."""
    if c.vocab_size is None:
        return {}
    why = f"vocab_size {c.vocab_size} x hidden_size {c.hidden_size}"
    return {name: ((c.vocab_size, c.hidden_size), why) for name in TARGET_COPIES}


class DSparkDrafter(DFlashDrafter):
    """A DSpark drafter: :class:`DFlashDrafter`'s backbone, its Markov and confidence heads."""

    family = "dspark"
    expected = staticmethod(dspark_shapes)
    optional = staticmethod(own_copies)

    def __init__(self, config: BlockDrafterConfig, tensors: Mapping[str, torch.Tensor], *,
                 confidence_threshold: float = 0.0, **kw) -> None:
        source = kw.get("source", config.source)
        if config.markov_rank and config.markov_head_type not in MARKOV_HEADS:
            raise ConfigError(f"{source}: {config.key('markov_head_type')} must be one of "
                              f"{', '.join(MARKOV_HEADS)} when markov_rank is {config.markov_rank}, got "
                              f"{config.markov_head_type!r}.")
        if config.confidence_head_with_markov and config.enable_confidence_head and not config.markov_rank:
            raise ConfigError(f"{source}: confidence_head_with_markov needs a Markov head (markov_rank > 0).")
        if (isinstance(confidence_threshold, bool) or not isinstance(confidence_threshold, (int, float))
                or not 0.0 <= confidence_threshold <= 1.0):
            raise InputError(f"confidence_threshold must be a number from 0 to 1, got {confidence_threshold!r}.")
        if confidence_threshold > 0 and not config.enable_confidence_head:
            raise InputError(f"{source} has no confidence head (enable_confidence_head is false): a "
                             "confidence_threshold cannot cut its proposals; leave it at 0.")
        super().__init__(config, tensors, **kw)
        self.confidence_threshold = float(confidence_threshold)
        self.layers = tuple((False, None) for _ in range(config.num_hidden_layers))   # DeepSpec: no mask at all

    @property
    def draft_slots(self) -> slice:
        """The block slots that draft: all (DeepSpec's label shift) or 1.. (SpecForge's ``DSparkDraftModel``)."""
        return slice(0, None) if self.config.anchor_drafts else slice(1, None)

    def rows(self, ids: torch.Tensor, parts) -> torch.Tensor:
        """The block's embedding (..., H): the drafter's own ``embed_tokens`` when it has one, else the target's."""
        own = self.weight("embed_tokens.weight")
        if own is None:
            return parts.rows(ids, device=self.device, dtype=self.dtype)
        return own[ids.to(self.device)]

    def base_logits(self, hidden: torch.Tensor, head) -> torch.Tensor:
        """``lm_head(h)``: (n, H) -> (n, V), the drafter's own head when it has one, else the target's."""
        own = self.weight("lm_head.weight")
        return head.logits(hidden, normed=True) if own is None else F.linear(hidden.to(self.dtype), own).float()

    def _bias(self, prev: torch.Tensor, h: torch.Tensor, state: torch.Tensor | None):
        """The Markov head's logit bias for one slot: prev (B,), h (B, H) -> ((B, V), the rnn state)."""
        w1, w2 = self._w("markov_head.markov_w1.weight"), self._w("markov_head.markov_w2.weight")   # (V, r) each
        e = w1[prev]                                                                              # (B, r)
        kind = self.config.markov_head_type
        if kind == "gated":
            gate = torch.sigmoid(self._linear(torch.cat([h, e], -1), "markov_head.gate_proj"))    # (B, r)
            return F.linear(gate * e, w2), None
        if kind == "rnn":
            z = self._linear(torch.cat([state, e, h], -1), "markov_head.joint_proj")              # (B, 3r)
            g, cand, out = z.chunk(3, dim=-1)
            g = torch.sigmoid(g)
            state = g * state + (1.0 - g) * torch.tanh(cand)
            return F.linear(torch.tanh(out), w2), state
        return F.linear(e, w2), None

    def propose(self, hidden: torch.Tensor, anchors: torch.Tensor, head) -> torch.Tensor:
        """Greedy drafts of B blocks from their draft slots: hidden (B, S, H), anchors (B,) -> (B, S) int64
        (DeepSpec's ``sample_draft_tokens`` at temperature 0)."""
        B, S, H = hidden.shape
        hidden = hidden.to(self.dtype)
        out = torch.empty(B, S, dtype=torch.int64)
        step = max(1, head.chunk() // max(1, S))
        for b0 in range(0, B, step):
            h = hidden[b0:b0 + step]                                                             # (b, S, H)
            logits = self.base_logits(h.reshape(-1, H), head).view(h.shape[0], S, -1)            # (b, S, V)
            if not self.config.markov_rank:
                out[b0:b0 + step] = logits.argmax(-1).cpu()
                continue
            prev = anchors[b0:b0 + step].to(self.device, torch.int64)                            # (b,)
            state = torch.zeros(h.shape[0], self.config.markov_rank, device=self.device, dtype=self.dtype)
            for j in range(S):
                bias, state = self._bias(prev, h[:, j], state)
                prev = torch.argmax(logits[:, j] + bias.float(), -1)                             # (b,)
                out[b0:b0 + step, j] = prev.cpu()
        return out

    def proposal_lengths(self, hidden: torch.Tensor, anchors: torch.Tensor, drafts: torch.Tensor) -> torch.Tensor:
        """How many of each block's drafts are proposed (B,): all, or up to the first slot whose confidence is
        below ``confidence_threshold`` (DeepSpec's ``_confident_prefix_length``)."""
        B, S, _ = hidden.shape
        if self.confidence_threshold <= 0 or not self.config.enable_confidence_head:
            return torch.full((B,), S, dtype=torch.int64)
        feats = hidden.to(self.dtype)                                                            # (B, S, H)
        if self.config.confidence_head_with_markov:
            prev = torch.cat([anchors[:, None], drafts[:, :-1]], 1).to(self.device)               # (B, S)
            feats = torch.cat([feats, self._w("markov_head.markov_w1.weight")[prev]], -1)          # (B, S, H+r)
        below = torch.sigmoid(self._linear(feats, "confidence_head.proj")[..., 0].float()) < self.confidence_threshold
        first = torch.where(below.any(-1), below.float().argmax(-1), torch.full((B,), S, device=below.device))
        return first.to(torch.int64).cpu()                                                       # (B,)
