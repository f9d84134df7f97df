"""Measure a DSpark drafter's cycles as DeepSpec's own loop runs them, along the target's greedy continuation.

The loop is deepseek-ai/DeepSpec ``deepspec/eval/base_evaluator.py`` ``generate_decoding_sample`` with the DSpark
proposal of ``deepspec/eval/dspark/draft_ops.py`` at temperature 0:

* no cycle when the prefill token is a stop token; cycles run while ``start < max_length`` (``max_length`` =
  prompt + ``max_new_tokens``), every one with the full block (no shrinking: the last cycle may verify past the
  budget, so the target's continuation is taken ``steps + 1`` tokens further than the budget);
* a cycle at ``start`` proposes ``K`` drafts (cut by the confidence head when a threshold is given), the target
  verifies ``[anchor, drafts]``, the leading matching drafts are accepted;
* it records accepted + 1 (the bonus), except a cycle whose accepted drafts hold a stop token: it records the
  drafts up to that token and the loop ends; a bonus that is a stop token ends the loop after recording;
* DeepSpec's figure is pooled: ``acceptance_length_sum / proposal_count`` over every cycle of every prompt.

As for DFlash (:mod:`.block`), each block depends only on the context before its anchor, so every offset's block
is drafted in one batched pass and the loop is walked over the matches afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from eaglekit.analysis.acceptance.block_cycles import SCORE_FLOATS, PromptCycles
from eaglekit.analysis.acceptance.block_target import TargetParts
from eaglekit.analysis.draft.dspark import DSparkDrafter

LOOP = ("DeepSpec's greedy loop (deepspec/eval/base_evaluator.py generate_decoding_sample): full blocks to the end, "
        "each cycle records accepted + 1, a cycle that accepts a stop token records the drafts up to it")


def walk_deepspec(matches: np.ndarray, *, budget: int, stop_at: int | None) -> tuple[int, ...]:
    """DeepSpec's loop over one continuation: at offset ``i`` (the anchor is the continuation's ``i``-th token, the
    prefill token being 0) the cycle accepts ``matches[i]`` drafts; ``stop_at`` is the offset of the first stop
    token (None: none), ``budget`` = ``max_new_tokens`` (cycles start at offsets below it)."""
    out, i = [], 0
    if stop_at == 0:
        return ()
    while i < budget:
        m = int(matches[i])
        if stop_at is not None and i < stop_at <= i + m:
            out.append(stop_at - i)                  # the stop token is an accepted draft: no bonus
            break
        out.append(m + 1)
        i += m + 1
        if stop_at is not None and i >= stop_at:     # the bonus is the stop token
            break
    return tuple(out)


def first_stop(tokens: torch.Tensor, prompt_len: int, stop_ids: Sequence[int]) -> int | None:
    """The offset in the continuation (prefill token = 0) of its first stop token, or None."""
    if not stop_ids:
        return None
    hit = torch.isin(tokens[prompt_len:], torch.as_tensor(list(stop_ids), dtype=tokens.dtype)).nonzero()
    return int(hit[0, 0]) if hit.numel() else None


@torch.no_grad()
def dspark_cycles(drafter: DSparkDrafter, parts: TargetParts, tokens: torch.Tensor, features: torch.Tensor,
                  prompt_len: int, *, max_new_tokens: int, steps: Sequence[int],
                  stop_ids: Sequence[int]) -> list[PromptCycles]:
    """Each K of ``steps``: draft the block at every offset a cycle may start from and walk DeepSpec's loop.
    tokens (T,) = prompt + the target's greedy continuation, at least ``max_new_tokens + max(steps) + 1`` long
    unless it ends at a stop token; features (T, n_aux * H). K drafts run a block of K slots when the anchor
    drafts (DeepSpec), else K + 1 (the anchor and K masks)."""
    tokens = tokens.to(torch.int64).cpu()
    T, N = int(tokens.shape[0]), int(prompt_len)
    stop_at = first_stop(tokens, N, stop_ids)
    offsets_all = np.arange(min(max_new_tokens, T - N, T - N if stop_at is None else stop_at + 1))
    ctx = drafter.context(features)
    c = drafter.config
    out = []
    for k in steps:
        Q = k if c.anchor_drafts else k + 1
        matches = np.zeros(len(offsets_all), np.int64)
        conditioned, accepted = np.zeros(k, np.int64), np.zeros(k, np.int64)
        chunk = max(1, SCORE_FLOATS // max(1, c.num_attention_heads * Q * (T + Q)))
        for s in range(0, len(offsets_all), chunk):
            starts = torch.as_tensor(N + offsets_all[s:s + chunk])                            # (B,)
            block = torch.full((len(starts), Q), c.mask_token_id, dtype=torch.int64)
            block[:, 0] = tokens[starts]                                                       # (B, Q)
            hidden = drafter.forward(ctx, drafter.rows(block, parts), starts)[:, drafter.draft_slots]  # (B, k, H)
            drafts = drafter.propose(hidden, tokens[starts], parts.head)                       # (B, k)
            proposed = drafter.proposal_lengths(hidden, tokens[starts], drafts)                # (B,)
            idx = starts[:, None] + torch.arange(1, k + 1)[None, :]                            # (B, k)
            j = torch.arange(1, k + 1)[None, :]
            avail = (idx <= T - 1) & (j <= proposed[:, None])
            expected = torch.where(avail, tokens[idx.clamp(max=T - 1)], torch.full_like(idx, -1))
            m = torch.cumprod((drafts == expected).to(torch.int64), 1).sum(1)                  # (B,)
            matches[s:s + len(starts)] = m.numpy()
            conditioned += ((m[:, None] >= j - 1) & avail).sum(0).numpy()
            accepted += ((m[:, None] >= j) & avail).sum(0).numpy()
        cycles = walk_deepspec(matches, budget=max_new_tokens, stop_at=stop_at)
        out.append(PromptCycles(cycles, sum(cycles), matches, conditioned, accepted, N + 1))
    return out
