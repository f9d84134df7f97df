"""Where a drafter's tensors come from: memory, or a checkpoint read by range when they are large.

A Kimi-sized drafter does not fit the memory a CPU measurement should take: 384 experts of 2048 are about
11 GB in bf16, a 163,840-row ``lm_head`` or embedding 2.3 GB each. :class:`Weights` hands every family the
same three ways in: a whole tensor (:meth:`get`), the rows of a matrix (:meth:`rows`, an embedding lookup
reads only those rows) and a matrix in row blocks (:meth:`blocks`, the streamed head). What is below
``budget`` bytes is read once and kept; what is above it is read from the checkpoint each time it is used,
so memory stays bounded by the largest block, never the model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from eaglekit.analysis.draft.checks import check_finite
from eaglekit.core.checkpoint.tensors import to_torch, torch_dtype
from eaglekit.core.errors import ConfigError
from eaglekit.io.reader import Checkpoint

#: bytes above which a tensor stays in the checkpoint and is read by range when used
KEEP_BYTES = 256 << 20
#: bytes of one streamed block
BLOCK_BYTES = 64 << 20


class Weights:
    """A drafter's tensors by name, on ``device`` in ``dtype``; kept, or read from ``checkpoint`` when used."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], *, device: torch.device, dtype: torch.dtype,
                 checkpoint: Checkpoint | None = None, source: str = "drafter") -> None:
        self._tensors, self._ckpt = dict(tensors), checkpoint
        self.device, self.dtype, self.source = device, dtype, source

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint tensors not kept are read from (None: all kept)."""
        return self._ckpt

    def __contains__(self, name: str) -> bool:
        return name in self._tensors or (self._ckpt is not None and name in self._ckpt.inventory)

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self._tensors:
            return tuple(self._tensors[name].shape)
        return tuple(self._ckpt.inventory[name].shape)

    def kept(self, name: str) -> bool:
        """Whether ``name`` is in memory (else it is read from the checkpoint each time)."""
        return name in self._tensors

    def get(self, name: str, *, check: bool = False) -> torch.Tensor:
        """The whole tensor on the device (autograd kept for in-memory float32 tensors: training). One read
        from the checkpoint goes straight into the tensor's buffer (no copy of the bytes); ``check``: refuse
        NaN or Inf in what was read (:func:`check_finite`, on the stored values, before the dtype changes)."""
        if name in self._tensors:
            return self._tensors[name].to(device=self.device, dtype=self.dtype)
        if self._ckpt is None or name not in self._ckpt.inventory:
            raise ConfigError(f"{self.source} lacks {name}.")
        info = self._ckpt.inventory[name]
        raw = torch.empty(info.nbytes, dtype=torch.uint8)
        if info.nbytes:
            self._ckpt.read_into(name, 0, memoryview(raw.numpy()))
        t = raw.view(torch_dtype(info.dtype)).reshape(tuple(int(d) for d in info.shape))
        if check:
            check_finite(t, name, self.source)
        return t.to(device=self.device, dtype=self.dtype)

    def rows(self, name: str, index: torch.Tensor) -> torch.Tensor:
        """Slices ``index`` along the first dimension: (len(index), *shape[1:]) (an embedding's rows, a fused
        expert tensor's experts). From the checkpoint only those slices are read."""
        if name in self._tensors:
            return self._tensors[name][index.to(self._tensors[name].device)].to(device=self.device, dtype=self.dtype)
        info = self._ckpt.inventory[name]
        inner = tuple(int(d) for d in info.shape[1:])
        row_bytes = info.nbytes // max(1, int(info.shape[0]))
        unique, inverse = torch.unique(index.cpu(), return_inverse=True)
        got = torch.stack([to_torch(self._ckpt.read_bytes(name, int(r) * row_bytes, row_bytes), info.dtype, inner,
                                    name=name) for r in unique.tolist()])
        return got[inverse].to(device=self.device, dtype=self.dtype)

    def blocks(self, name: str) -> Iterator[tuple[int, torch.Tensor]]:
        """(first row, rows) blocks of a matrix, each at most BLOCK_BYTES, read from the checkpoint when the
        matrix is not kept (one block in memory at a time)."""
        if name in self._tensors:
            yield 0, self.get(name)
            return
        info = self._ckpt.inventory[name]
        n, cols = int(info.shape[0]), int(info.shape[1])
        row_bytes = info.nbytes // n
        step = max(1, BLOCK_BYTES // max(1, row_bytes))
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            data = self._ckpt.read_bytes(name, r0 * row_bytes, (r1 - r0) * row_bytes)
            yield r0, to_torch(data, info.dtype, (r1 - r0, cols), name=name).to(device=self.device, dtype=self.dtype)
