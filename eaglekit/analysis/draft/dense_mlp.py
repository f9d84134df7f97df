"""The dense SiLU-gated MLP (``down(silu(gate(x)) * up(x))``) of Llama and DeepSeek dense layers."""

from __future__ import annotations

import torch

from eaglekit.analysis.draft.ops import gated
from eaglekit.analysis.draft.weights import Weights
from eaglekit.core.configs.config import DrafterConfig
from eaglekit.core.errors import ConfigError

TENSORS = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")


class DenseMLP:
    family = "dense"

    @staticmethod
    def tensors(config: DrafterConfig, prefix: str) -> tuple[str, ...]:
        return tuple(prefix + t for t in TENSORS)

    def __init__(self, config: DrafterConfig, weights: Weights, prefix: str) -> None:
        self.gate_up, self.down = load_gated(weights, prefix + "mlp.", config.hidden_size)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return gated(x, self.gate_up, self.down)


def load_gated(weights: Weights, prefix: str, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(gate and up stacked (2I, H), down (H, I)) of one gated MLP, shapes checked."""
    gate, up, down = (weights.get(f"{prefix}{n}_proj.weight") for n in ("gate", "up", "down"))
    if gate.shape != up.shape or gate.shape[1] != hidden or tuple(down.shape) != (hidden, gate.shape[0]):
        raise ConfigError(f"{weights.source}: {prefix}gate_proj {list(gate.shape)}, up_proj {list(up.shape)} and "
                          f"down_proj {list(down.shape)} are not one gated MLP of hidden_size {hidden}.")
    return torch.cat([gate, up]), down
