"""The drafter's output head: final norm, ``lm_head`` over the draft vocabulary, and the draft-to-target map.

A full-vocabulary drafter (Kimi's: 163,840 rows, no d2t/t2d) has a head of 2.3 GB in bf16; when
:mod:`.weights` leaves it in the checkpoint, the head is streamed in row blocks and reduced as it goes (the
argmax, the top k with their log-probabilities through a running log-sum-exp), so logits of every row are
never held at once. A drafter with a reduced vocabulary maps draft row ``i`` to target id ``i + d2t[i]``. A row holding NaN or
Inf is refused, naming it (in memory at load, streamed as each block is read).
"""

from __future__ import annotations

import torch

from eaglekit.analysis.draft.checks import check_rows_finite
from eaglekit.analysis.draft.ops import rms_norm
from eaglekit.analysis.draft.weights import Weights


class DraftHead:
    """``lm_head(norm(g))`` and what chains and trees need of it."""

    def __init__(self, weights: Weights, *, norm: torch.Tensor | None, eps: float, d2t: torch.Tensor | None) -> None:
        self.weights, self.norm, self.eps = weights, norm, eps
        self.rows = int(weights.shape("lm_head.weight")[0])
        self.weight = weights.get("lm_head.weight") if weights.kept("lm_head.weight") else None   # (N, H)
        self._checked: set[int] = set()   # first rows of the streamed blocks already checked
        if self.weight is not None:  # a streamed head is checked block by block as it is read (:meth:`_blocks`)
            check_rows_finite(self.weight, "lm_head.weight", weights.source)
        offsets = torch.zeros(self.rows, dtype=torch.int64) if d2t is None else d2t.to(torch.int64).cpu()
        #: target id of every draft row (i + d2t[i])
        self.draft_to_target = (torch.arange(self.rows) + offsets).to(weights.device)

    def final(self, g: torch.Tensor) -> torch.Tensor:
        """The head's input: ``norm(g)`` (the final norm skipped when the drafter has none)."""
        return rms_norm(g, self.norm, self.eps) if self.norm is not None else g

    def _blocks(self):
        if self.weight is not None:
            yield 0, self.weight
        else:
            for r0, block in self.weights.blocks("lm_head.weight"):
                if r0 not in self._checked:  # each block once, the first time it streams
                    check_rows_finite(block, "lm_head.weight", self.weights.source, first_row=r0)
                    self._checked.add(r0)
                yield r0, block

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """Every draft row's logit: (T, H) -> (T, N)."""
        if self.weight is not None:
            return out @ self.weight.T
        return torch.cat([out @ block.T for _, block in self._blocks()], -1)

    def argmax(self, out: torch.Tensor) -> torch.Tensor:
        """The best draft row of each position: (T, H) -> (T,) (the first of equal logits, as torch.argmax)."""
        if self.weight is not None:
            return (out @ self.weight.T).argmax(-1)
        best_v = best_i = None
        for r0, block in self._blocks():
            v, i = (out @ block.T).max(-1)
            if best_v is None:
                best_v, best_i = v, i + r0
            else:
                better = v > best_v
                best_v, best_i = torch.where(better, v, best_v), torch.where(better, i + r0, best_i)
        return best_i

    def top(self, out: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The k best draft rows of each position and their log-probabilities: (T, k) each. Ranked on the
        logits (the order of log_softmax without its rounding ties); k = 1 is the chain's argmax."""
        if self.weight is not None:
            logits = out @ self.weight.T
            idx = logits.argmax(-1, keepdim=True) if k == 1 else torch.topk(logits, k, dim=-1).indices
            return idx, torch.log_softmax(logits.float(), -1).gather(-1, idx)
        vals = idx = lse = None
        for r0, block in self._blocks():
            lg = (out @ block.T).float()                                    # (T, b)
            bl = torch.logsumexp(lg, -1)
            bv, bi = torch.topk(lg, min(k, lg.shape[1]), dim=-1)
            if vals is None:
                vals, idx, lse = bv, bi + r0, bl
            else:
                lse = torch.logaddexp(lse, bl)
                cv, ci = torch.cat([vals, bv], -1), torch.cat([idx, bi + r0], -1)
                order = torch.topk(cv, k, dim=-1).indices
                vals, idx = cv.gather(-1, order), ci.gather(-1, order)
        return idx, vals - lse[:, None]
