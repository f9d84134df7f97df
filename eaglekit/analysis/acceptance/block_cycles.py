"""One prompt's cycles of a block drafter at one K, and the authors' walk over them (shared by the DFlash loop,
:mod:`.block`, and DeepSpec's DSpark loop, :mod:`.block_dspark`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: attention scores computed per batched pass of blocks (floats)
SCORE_FLOATS = 1 << 24


@dataclass(frozen=True)
class PromptCycles:
    """One prompt's cycles at one K: tokens each cycle produced, and per draft slot j the blocks where drafts
    1..j-1 matched and slot j had a target token to compare (``conditioned``) and where slot j matched too."""

    cycles: tuple[int, ...]
    generated: int
    matches: np.ndarray       # (G,) leading matching drafts of the block at each continuation offset
    conditioned: np.ndarray   # (K,)
    accepted: np.ndarray      # (K,)
    #: the context length at which its first cycle starts (the prompt and the prefill token)
    origin: int = 0

    def rows(self, request: int, steps: int) -> list[tuple[int, int, int, int]]:
        """``(request, position, accepted, drafted)`` of each cycle (:class:`~.positions.CycleLog`): the cycle at
        offset ``i`` starts at context length ``origin + i`` and compares ``min(K, generated - i - 1)`` drafts."""
        out, i = [], 0
        for produced in self.cycles:
            out.append((request, self.origin + i, produced - 1, min(steps, self.generated - i - 1)))
            i += produced
        return out


def walk_cycles(matches: np.ndarray, generated: int) -> tuple[int, ...]:
    """The authors' loop over one continuation: at offset ``i`` (the anchor is the ``i``-th token after the
    prompt) the cycle produces ``min(matches[i] + 1, generated - i)`` tokens (the bonus included, the budget and
    the stop token cutting it), and the next cycle starts there. ``generated`` excludes the prefill token."""
    out, i = [], 0
    while i < generated:
        produced = min(int(matches[i]) + 1, generated - i)
        out.append(produced)
        i += produced
    return tuple(out)


def block_sizes(generated: int, max_new_tokens: int, steps: int) -> np.ndarray:
    """The block at each continuation offset: ``K + 1``, shrunk at the end to ``max_new_tokens - i``."""
    return np.minimum(steps + 1, max_new_tokens - np.arange(generated))
