"""The small tensor operations every drafter family shares: RMSNorm and SiLU-gated projections."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as Llama and DeepSeek compute it: in float32, scaled, cast back."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def gated(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """``down(silu(gate(x)) * up(x))`` with gate and up stacked in one matrix (2I, H): (T, H) -> (T, H)."""
    gate, up = (x @ gate_up.T).chunk(2, -1)                            # (T, I) each
    return (F.silu(gate) * up) @ down.T
