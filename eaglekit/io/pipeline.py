"""Many byte ranges of a remote checkpoint, several in flight, into a ring of preallocated buffers.

A range request costs a round trip before its first byte; one request at a time leaves the link idle
for that long per block, which at 20-50 ms of latency is most of the time. :class:`RangePipeline` keeps
up to ``max_depth`` requests in flight (threads, each one :meth:`Checkpoint.read_into`, so each is one
``range_get`` with all its checks, writing straight into a ring buffer) and hands the ranges back in order. The depth is sized to the
latency actually met: it starts at 2 and grows by one each time the consumer has to wait for data,
so a fast link stays at 2 buffers and a slow one fills the bandwidth-delay product.

The ranges requested are exactly the ones given, each once: no range is split, merged or read ahead
past what was asked (tested against a request log). Memory: ``max_depth + 1`` buffers of the largest
range (anonymous memory maps), allocated once; a range's view is valid until the next one is taken. Sources that cannot serve
concurrent requests (SSH/SFTP) get one request in flight.
"""

from __future__ import annotations

import mmap
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from eaglekit.io.reader import Checkpoint

#: Requests in flight at most per pipeline (per file side), and bytes in flight at most: the depth's
#: ceiling is the smaller of MAX_DEPTH and IN_FLIGHT_BYTES over the largest range. 3 x 8 MiB blocks
#: (similarity.CHUNK_BYTES) cover 20 ms of latency at 1.2 GB/s per side (50 ms at 0.5 GB/s) in 4 buffers
#: (32 MiB) per side, which keeps a remote comparison near 236 MiB in all (benchmarks/RESULTS.md): more
#: in flight would hide 50 ms fully only past the 256 MiB budget.
MAX_DEPTH = 8
IN_FLIGHT_BYTES = 24 * 1024 * 1024
#: Requests in flight at first; the depth then grows while the consumer waits. Starting at one measured
#: no better (benchmarks/RESULTS.md, issue 25), and one or two at most per side measured slower.
START_DEPTH = 2
#: Sources whose client is safe to use from several threads at once.
CONCURRENT_KINDS = frozenset({"http", "hub"})


class RangePipeline:
    """Iterate the bytes of ``ranges`` ((tensor name, start, length) within the tensor), in order.

    Each item is a memoryview into a reused buffer: use it (or copy it) before taking the next.
    ``piece_bytes`` sizes the buffers when every range is smaller (the usual case: blocks of rows)."""

    def __init__(self, ckpt: Checkpoint, ranges: Sequence[tuple[str, int, int]], *, piece_bytes: int = 0,
                 max_depth: int | None = None) -> None:
        self.ckpt, self.ranges = ckpt, list(ranges)
        concurrent = ckpt.source.kind in CONCURRENT_KINDS
        self.size = max([piece_bytes, *(length for _, _, length in self.ranges)]) if self.ranges else 0
        if max_depth is None:
            max_depth = min(MAX_DEPTH, IN_FLIGHT_BYTES // max(self.size, 1))
        self.max_depth = max(1, max_depth if concurrent else 1)
        self.depth = min(START_DEPTH, self.max_depth)
        self.buffers: list[mmap.mmap] = []
        self.waits = 0  # times the consumer found its next range not yet arrived (the depth grew each time)
        self.allocated = 0  # buffers allocated (each of ``size`` bytes), at most max_depth + 1
        self._pool: ThreadPoolExecutor | None = None

    def __iter__(self) -> Iterator[memoryview]:
        if not self.ranges:
            return
        self._pool = ThreadPoolExecutor(max_workers=self.max_depth, thread_name_prefix="eaglekit-range")
        pending: deque[tuple[int, Future]] = deque()
        todo = iter(enumerate(self.ranges))
        try:
            for _ in range(self.depth):
                self._submit(next(todo, None), pending)
            while pending:
                k, future = pending.popleft()
                if not future.done() and self.depth < self.max_depth:
                    self.waits += 1  # the link is the bottleneck: one more request in flight from now on
                    self.depth += 1
                    self._submit(next(todo, None), pending)
                n = future.result()
                # Buffer k is handed out now; the one handed out before it is free again for the next request.
                self._submit(next(todo, None), pending)
                yield memoryview(self.buffers[k % (self.max_depth + 1)])[:n]
        finally:
            for _, future in pending:
                future.cancel()
            self.close()

    def _submit(self, item: tuple[int, tuple[str, int, int]] | None, pending: deque) -> None:
        if item is None:
            return
        k, (name, start, length) = item
        slot = k % (self.max_depth + 1)
        while len(self.buffers) <= slot:  # allocated when first needed: a fast link never needs them all
            # Anonymous maps, not malloc: returned to the system at close, and never left in the heap
            # for glibc to keep (its moving mmap threshold would otherwise serve them from the heap).
            self.buffers.append(mmap.mmap(-1, max(self.size, 1)))
            self.allocated += 1
        pending.append((k, self._pool.submit(self._fetch, slot, name, start, length)))

    def _fetch(self, slot: int, name: str, start: int, length: int) -> int:
        return self.ckpt.read_into(name, start, memoryview(self.buffers[slot])[:length])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for buffer in self.buffers:
            try:
                buffer.close()
            except BufferError:  # a view is still held somewhere: the map goes when it is freed
                pass
        self.buffers = []
