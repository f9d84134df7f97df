"""Whether a batch size fits: the target's weights, its KV cache at the context and the drafter, per GPU, against
the GPU's memory.

Per GPU (tensor-parallel degree ``tp``): every weight the target holds (all routed experts, the embedding) / tp;
the KV cache of B requests at the context (an MLA latent cache is replicated on every rank, a GQA cache split
over min(tp, key-value heads)); the drafter's weights / tp and its own KV cache. Engines reserve a fraction of
memory for these and keep the rest for activations and graphs: :data:`USABLE` is vLLM's default
``gpu_memory_utilization`` default is 0.9 and SGLang sets ``mem_fraction_static`` near it; 0.95 here, an optimistic bound (a batch that fails it cannot run; one that passes may still need a lower context).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from eaglekit.core.serving.costmodel import ModelShape

__all__ = ["USABLE", "Capacity", "capacity"]

USABLE = 0.95


def _kv_per_gpu(shape: ModelShape, batch: int, context: int, tp: int) -> float:
    kv = shape.kv_bytes(batch, context)
    return kv if shape.kv_heads is None else kv / min(tp, max(shape.kv_heads, 1))


@dataclass(frozen=True)
class Capacity:
    """Bytes per GPU: fixed (weights) and per request (KV cache), against the usable memory."""

    weights_gb: float  # target + drafter weights per GPU
    kv_gb_per_request: float  # target + drafter KV cache per request per GPU at the context
    usable_gb: float  # memory_gb x USABLE
    memory_gb: float

    def need_gb(self, batch: int) -> float:
        return self.weights_gb + batch * self.kv_gb_per_request

    def fits(self, batch: int) -> bool:
        return self.need_gb(batch) <= self.usable_gb

    @property
    def largest_batch(self) -> int:
        """The largest batch size that fits (0: not even the weights)."""
        if self.weights_gb > self.usable_gb:
            return 0
        if self.kv_gb_per_request <= 0:
            return 1 << 30
        return int(math.floor((self.usable_gb - self.weights_gb) / self.kv_gb_per_request + 1e-9))

    def sentence(self) -> str:
        largest = self.largest_batch
        head = (f"per GPU {self.weights_gb:.1f} GB of weights (target and drafter) + {self.kv_gb_per_request * 1000:.1f} "
                f"MB of KV cache per request against {self.usable_gb:.1f} GB usable ({USABLE:.0%} of "
                f"{self.memory_gb:g} GB)")
        if largest == 0:
            return head + ": the weights alone do not fit; add GPUs"
        return head + f": at most {largest} concurrent requests at this context"

    def to_json(self) -> dict[str, Any]:
        return {"weights_gb_per_gpu": self.weights_gb, "kv_gb_per_request_per_gpu": self.kv_gb_per_request,
                "usable_gb_per_gpu": self.usable_gb, "memory_gb_per_gpu": self.memory_gb,
                "largest_batch": self.largest_batch}


def capacity(target: ModelShape, drafter: ModelShape | None, *, memory_gb: float, tp: int,
             context: int) -> Capacity:
    """The memory one GPU needs for the target (and drafter) at ``context`` tokens (see the module)."""
    weights = target.resident_bytes() / tp
    kv = _kv_per_gpu(target, 1, context, tp)
    if drafter is not None:
        weights += drafter.always_bytes / tp
        kv += _kv_per_gpu(drafter, 1, context, tp)
    return Capacity(weights / 1e9, kv / 1e9, memory_gb * USABLE, memory_gb)
