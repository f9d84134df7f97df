"""The target's side of a block drafter's measurement: its input embedding and ``lm_head``, which a DFlash drafter
drafts through and does not own (SGLang ``models/dflash.py``: "DFlash uses the target model's embedding/lm_head").

From a loaded transformers model (``--target``), or read by range from a target checkpoint (``--hidden-states``
with the dump's local target folder or ``--embeddings``): a head past :data:`~eaglekit.analysis.acceptance.head.KEEP_HEAD`
bytes is streamed in row blocks, an embedding past a quarter of a billion values read by rows when used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from eaglekit.analysis.acceptance.head import TargetHead, read_target_head
from eaglekit.analysis.draft.layout import Embedding
from eaglekit.analysis.draft.load import read_embeddings


@dataclass(frozen=True, eq=False)
class TargetParts:
    """The target's input embedding and ``lm_head`` a block drafter drafts through (it owns neither)."""

    embed: torch.Tensor | Embedding      # (V, H)
    head: TargetHead                     # lm_head (held or streamed); the drafter's own ``norm`` comes first

    @property
    def vocab_size(self) -> int:
        return int(self.embed.shape[0])

    def rows(self, ids: torch.Tensor, *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """Embedding rows of ``ids`` (...,) -> (..., H)."""
        if isinstance(self.embed, torch.Tensor):
            return self.embed[ids.to(self.embed.device)].to(device=device, dtype=dtype)
        flat = self.embed(ids.reshape(-1), device=device, dtype=dtype)
        return flat.reshape(*ids.shape, -1)

    def close(self) -> None:
        self.head.close()


def target_parts_from_model(model, *, name: str) -> TargetParts:
    """The embedding and ``lm_head`` of a loaded transformers causal LM (tied heads included)."""
    embed = model.get_input_embeddings().weight.detach().float().cpu()                 # (V, H)
    out = model.get_output_embeddings()
    head = (out.weight if out is not None else model.get_input_embeddings().weight).detach().float().cpu()
    return TargetParts(embed, TargetHead(head, None, 1e-6, None, name))


def target_parts_from_checkpoint(location: str | os.PathLike[str], *, vocab_size: int, hidden_size: int,
                                 endpoint: str | None = None, timeout: float | None = None) -> TargetParts:
    """The embedding and ``lm_head`` of a target checkpoint read by range (a large head streamed in blocks)."""
    embed = read_embeddings(location, endpoint=endpoint, timeout=timeout, expect=(vocab_size, hidden_size),
                            rows_past=1 << 28)
    head = read_target_head(location, endpoint=endpoint, timeout=timeout, vocab_size=vocab_size,
                            hidden_size=hidden_size)
    return TargetParts(embed if isinstance(embed, Embedding) else embed.float(), head)


