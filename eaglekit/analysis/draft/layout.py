"""The two layouts of a drafter's decoder layer, and the input embedding's rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import torch

from eaglekit.analysis.draft.weights import Weights

Layout = Literal["specforge", "speculators"]
#: decoder-layer prefix per layout (SpecForge and TorchSpec ``midlayer.``; speculators, vLLM and
#: Model-Optimizer exports ``layers.0.``)
LAYER_PREFIX: Mapping[Layout, str] = {"specforge": "midlayer.", "speculators": "layers.0."}
#: the frame's own tensors in the decoder layer (norms); the families name theirs
FRAME_TENSORS = ("hidden_norm.weight", "input_layernorm.weight", "post_attention_layernorm.weight")

class Embedding:
    """The input embedding's rows: a tensor in memory, or rows read from a checkpoint when asked."""

    def __init__(self, table: torch.Tensor | Weights, name: str = "embed_tokens.weight") -> None:
        self.table, self.name = table, name
        self.shape = tuple(table.shape) if isinstance(table, torch.Tensor) else table.shape(name)

    def __call__(self, ids: torch.Tensor, *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if isinstance(self.table, torch.Tensor):
            return self.table[ids.to(self.table.device)].to(device=device, dtype=dtype)
        return self.table.rows(self.name, ids).to(device=device, dtype=dtype)
