"""Weight similarity of two drafters in one streamed pass: byte ranges in, float64 grid sums out.

:mod:`eaglekit.analysis.similarity.plan` decides what is compared (tensors paired by normalised name, fc and
q/k/v split into meaningful parts, lm_head rows paired by target token) and cuts each tensor into a
grid. This module streams the bytes and accumulates, per grid cell, the float64 sums ``a*a``, ``b*b``,
``a*b`` and ``(a-b)^2``, from which :mod:`eaglekit.analysis.similarity.report` derives cosine, ``||a-b||/||a||``
and ``||b||/||a||`` per cell, per row band and per tensor.

Streaming: rows are contiguous in row-major order, so a block of rows is one byte range. Local files are
memory-mapped (no copy through ``read()``, no reader thread: the page cache is the buffer); remote blocks
are fetched by :class:`eaglekit.io.pipeline.RangePipeline` into preallocated buffers, several ranges in
flight. Compute runs in one thread, ``BLOCK_ELEMENTS`` per side at a time so everything stays in cache:
two conversions to float32 (torch), then four fused sum-of-products passes (``numpy.einsum``: ``a.a``,
``b.b``, ``a.b``, and ``d.d`` after one subtraction ``d = a - b``, exact for bf16 inputs) giving per-row,
per-cell float32 partial sums of at most a cell's width of exact bf16 products; rows are summed into
cells in float64. Peak memory is a few blocks, never a
whole tensor; nothing but the compared tensors' bytes (and d2t when lm_head is compared) is read.
Integer and bool buffers (d2t, t2d) are compared by equality.
"""


from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Literal

import numpy as np

from eaglekit.core.errors import HeaderError, InputError
from eaglekit.io.inventory import TensorEntry
from eaglekit.core.checkpoint.names import find
from eaglekit.io.pipeline import RangePipeline
from eaglekit.io.reader import Checkpoint, opened
from eaglekit.analysis.similarity.plan import Job, ComparisonPlan, blocks, check_grid, column_runs, plan, row_bytes, select
from eaglekit.analysis.similarity.report import BufferComparison, SimilarityReport, TensorSimilarity
from eaglekit.core.checkpoint.tensors import NUMPY_DTYPES
from eaglekit.core.checkpoint.tensors import torch_dtype
from eaglekit.io.drafter import read_map

Device = Literal["cpu", "cuda", "auto"]
DEFAULT_GRID = (64, 64)
#: Bytes per side per range request to a remote source; several are in flight (see RangePipeline).
CHUNK_BYTES = 8 * 1024 * 1024
#: Bytes per side per block of a local (memory-mapped) file: rows handed to the compute at once.
LOCAL_CHUNK_BYTES = 16 * 1024 * 1024
#: Elements per side converted to float32 at a time (4 MiB): the conversions and products stay in the
#: last-level cache, and the per-block Python overhead is small against the work.
BLOCK_ELEMENTS = 1 << 20
#: Seconds between the interpreter's GIL hand-offs while remote reads run beside the compute.
REMOTE_SWITCH_INTERVAL = 0.0002


def similarity(a: str | os.PathLike[str] | Checkpoint, b: str | os.PathLike[str] | Checkpoint, *,
               tensors: str | Sequence[str] | None = None, grid: tuple[int, int] = DEFAULT_GRID,
               device: Device = "cpu", progress: bool | None = None, endpoint: str | None = None, timeout: float | None = None,
               token: str | bool | None = None, chunk_bytes: int | None = None,
               threads: int | None = None) -> SimilarityReport:
    """Compare the weights of drafter ``b`` against drafter ``a``, wherever each lives.

    ``tensors``: names or glob patterns (``"midlayer.mlp.*"``) of normalised tensor names; default
    all. ``grid``: (rows, cols) of the block grid, at most; ``device``: where the products run
    ("auto": cuda when available). Only the compared tensors' bytes are read, by range, in blocks
    of ``chunk_bytes`` per side (default: :data:`LOCAL_CHUNK_BYTES` for a local file, which is
    memory-mapped, :data:`CHUNK_BYTES` per request for a remote one); ``progress`` shows a tqdm bar of
    bytes done and the rate (default None: when the comparison reads at least :data:`PROGRESS_BYTES`,
    decided by size, never by elapsed time). ``threads``: torch intra-op threads while computing, default 1: the
    compute is a few cache-resident passes per block, and a second OpenMP thread measured slower on a
    2-core machine (benchmarks/RESULTS.md).
    """
    grid = check_grid(grid)
    if chunk_bytes is not None and (not isinstance(chunk_bytes, int) or chunk_bytes < 1024):
        raise InputError(f"chunk_bytes must be an integer of at least 1024, got {chunk_bytes!r}.")
    patterns = [tensors] if isinstance(tensors, str) else list(tensors) if tensors is not None else None
    started = time.perf_counter()
    with opened(a, endpoint=endpoint, timeout=timeout, token=token) as ca, opened(b, endpoint=endpoint, timeout=timeout, token=token) as cb:
        keys = select(ca.inventory, cb.inventory, patterns)
        need_d2t = "lm_head.weight" in keys or "d2t" in keys  # read d2t only when it is used
        d2t = (_read_d2t(ca), _read_d2t(cb)) if need_d2t else (None, None)
        todo = plan(ca.inventory, cb.inventory, keys=keys, grid=grid, d2t=d2t)
        if chunk_bytes is None:
            local = ca.source.kind == "local" and cb.source.kind == "local"
            chunk_bytes = LOCAL_CHUNK_BYTES if local else CHUNK_BYTES
        device = _device(device)
        with _torch_threads(threads, device):
            results, read = _run(ca, cb, todo, device=device, chunk_bytes=chunk_bytes, progress=progress)
        buffers = [_compare_buffer(ca, cb, ta, tb, key, d2t, chunk_bytes, read) for key, ta, tb in todo.buffers]
        d2t_bytes = [find(c.inventory, "d2t").nbytes if v is not None else 0 for c, v in ((ca, d2t[0]), (cb, d2t[1]))]
        return SimilarityReport(
            a=ca.inventory.source, b=cb.inventory.source, grid=grid, tensors=tuple(results),
            buffers=tuple(buffers), only_a=tuple(todo.only_a), only_b=tuple(todo.only_b),
            mismatched=tuple(todo.mismatched), lm_head_alignment=todo.alignment,
            incomparable=tuple(todo.incomparable),
            bytes_read=(read[0] + d2t_bytes[0], read[1] + d2t_bytes[1]),
            seconds=time.perf_counter() - started)


# -- streaming -----------------------------------------------------------------------------------------
#: Bytes to read (both sides) from which ``progress=None`` shows a bar: decided by the work, not by elapsed
#: time, so one comparison always renders the same way (the small demo never shows a bar, a real drafter does).
PROGRESS_BYTES = 256 * 1024 * 1024


def _run(ca: Checkpoint, cb: Checkpoint, todo: ComparisonPlan, *, device: str, chunk_bytes: int,
         progress: bool | None) -> tuple[list[TensorSimilarity], list[int]]:
    from tqdm.auto import tqdm


    work = [(job, blk) for job in todo.jobs for blk in blocks(job, chunk_bytes)]
    total = sum(_span_bytes(job.a, job.width, blk.span_a) + _span_bytes(job.b, job.width, blk.span_b)
                for job, blk in work)
    read = [0, 0]
    results: list[TensorSimilarity] = []
    acc: _Accumulator | None = None
    scratch = _Scratch(max((job.width for job in todo.jobs), default=1),
                       max((sum(len(p.col_edges) - 1 for p in job.parts) for job in todo.jobs), default=1))
    side_a = _views(ca, [(job.a, blk.span_a, job.width) for job, blk in work], chunk_bytes)
    side_b = _views(cb, [(job.b, blk.span_b, job.width) for job, blk in work], chunk_bytes)
    show = total >= PROGRESS_BYTES if progress is None else progress
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="similarity",
              disable=not show, leave=False) as bar, _closing(side_a, side_b):
        for (job, blk), da, db in zip(work, side_a, side_b):
            if acc is None or acc.job is not job:  # blocks arrive job by job
                if acc is not None:
                    results.extend(acc.finish())
                acc = _Accumulator(job, device, scratch)
            xa = _rows(da, torch_dtype(job.a.dtype), job.width)
            xb = _rows(db, torch_dtype(job.b.dtype), job.width)
            acc.add(xa, xb, blk.pos, blk.sel_a, blk.sel_b)
            read[0] += len(da)
            read[1] += len(db)
            bar.update(len(da) + len(db))
            del da, db, xa, xb  # the views' buffers are reused for the next blocks
    if acc is not None:
        results.extend(acc.finish())
    return results, read


@contextmanager
def _closing(*sides):
    """Unmap files and stop reader threads however the loop ends (a truncated file, Ctrl-C). While reader
    threads run (a remote side), the interpreter's switch interval is shortened: each compute call
    releases the GIL, and getting it back from a reader thread busy in Python otherwise costs up to the
    default 5 ms per call (measured: a third of a remote comparison's time)."""
    remote = any(isinstance(side, RangePipeline) for side in sides)
    before = sys.getswitchinterval()
    if remote:
        sys.setswitchinterval(min(before, REMOTE_SWITCH_INTERVAL))
    try:
        yield
    finally:
        if remote:
            sys.setswitchinterval(before)
        for side in sides:
            side.close()


def _span_bytes(t: TensorEntry, width: int, span: tuple[int, int]) -> int:
    return (span[1] - span[0]) * row_bytes(t, width)


def _rows(data, dtype, width: int):
    import torch

    with warnings.catch_warnings():  # read-only bytes (a mapped file): only ever copied from, never written
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.frombuffer(data, dtype=dtype).view(-1, width)  # (span rows, width)


def _views(ckpt: Checkpoint, reads: list[tuple[TensorEntry, tuple[int, int], int]], chunk_bytes: int):
    """The bytes of each (tensor, row span, width) in order, as buffers valid until the next one is taken.

    A local file is memory-mapped and sliced (zero copy); any other source streams through a
    :class:`RangePipeline` of preallocated buffers (several ranges in flight where the source allows)."""
    ranges = [(t.name, span[0] * row_bytes(t, width), _span_bytes(t, width, span)) for t, span, width in reads]
    if ckpt.source.kind == "local":
        return _Mapped(ckpt, ranges)
    return RangePipeline(ckpt, ranges, piece_bytes=chunk_bytes)


class _Mapped:
    """Tensor byte ranges of a local checkpoint as slices of read-only memory maps (one map per file)."""

    def __init__(self, ckpt: Checkpoint, ranges: list[tuple[str, int, int]]) -> None:
        self.ckpt, self.ranges, self.maps = ckpt, ranges, {}

    def __iter__(self):
        for name, start, length in self.ranges:
            t = self.ckpt.inventory[name]
            mm = self.maps.get(t.file)
            if mm is None:
                mm = self.maps[t.file] = self.ckpt.source.map(t.file)
            begin = t.offset + start
            if begin + length > len(mm):
                raise HeaderError(f"{self.ckpt.inventory.source}: tensor {name!r} is truncated: the file ends at "
                                  f"byte {len(mm)} but the tensor's bytes run to {begin + length} (the file is "
                                  "shorter than its header says).")
            yield memoryview(mm)[begin:begin + length]

    def close(self) -> None:
        for mm in self.maps.values():
            try:
                mm.close()
            except BufferError:  # a view is still referenced somewhere: the map closes when it is freed
                pass
        self.maps.clear()


class _Scratch:
    """Compute buffers shared by every job of one comparison: allocated once, so no multi-MiB block is
    freed mid-run (glibc would then raise its mmap threshold and keep later buffers in the heap)."""

    def __init__(self, widest: int, most_cells: int) -> None:
        import torch

        n = max(BLOCK_ELEMENTS, widest)  # one row at least
        self.a = torch.empty(n, dtype=torch.float32)  # side A's rows as float32
        self.b = torch.empty(n, dtype=torch.float32)
        self.per_row = np.empty(4 * max(BLOCK_ELEMENTS // 8, most_cells), np.float32)  # (4, m, cells) flat
        self.size, self.gather = n, {}

    def gathered(self, side: int, dtype):
        """A buffer of the stored dtype for aligned lm_head rows of one side."""
        import torch

        if (side, dtype) not in self.gather:
            self.gather[side, dtype] = torch.empty(self.size, dtype=dtype)
        return self.gather[side, dtype]


class _Accumulator:
    """The cell sums of one job's parts, fed blocks of rows in compared-position order.

    Per compute block of ``m`` rows: both sides are converted into float32 buffers, then for every run
    of equal-width grid columns four ``einsum`` passes give per-row, per-cell sums of ``a*a``, ``b*b``,
    ``a*b`` and (after ``a -= b``) ``d*d`` in float32 (a cell's width of products); rows are added into their grid
    cells in float64 with ``np.add.reduceat``."""

    def __init__(self, job: Job, device: str, scratch: _Scratch) -> None:
        self.job, self.device, self.scratch = job, device, scratch
        w = job.width
        # Every part's column runs over the whole width: (first column, cells, width, first cell overall).
        self.runs, cell = [], 0
        for p in job.parts:
            for c0, n, cw in column_runs(p.col_edges):
                self.runs.append((p.cols[0] + c0, n, cw, cell))
                cell += n
        self.cells = cell
        # Rows per compute block: BLOCK_ELEMENTS per side, and per-row cell sums (4 x m x cells) of at
        # most an eighth of that, so narrow tensors (norms: width 1) do not get huge partial-sum buffers.
        self.m = max(1, min(BLOCK_ELEMENTS // w, BLOCK_ELEMENTS // (8 * self.cells)))
        self.xa = scratch.a[:self.m * w].view(self.m, w)  # (m, W) float32, shared by every job
        self.xb = scratch.b[:self.m * w].view(self.m, w)
        self.na, self.nb = self.xa.numpy(), self.xb.numpy()
        edges = job.parts[0].row_edges  # every part shares the rows
        self.cell_of_row = np.repeat(np.arange(len(edges) - 1), np.diff(edges))  # (rows,)
        self.sums = np.zeros((len(edges) - 1, self.cells, 4), np.float64)  # (gr, cells, aa|bb|ab|dd)
        self.per_row = scratch.per_row[:4 * self.m * self.cells].reshape(4, self.m, self.cells)  # (4, m, cells)
        self.wide = np.empty((4, min(self.m, len(edges) - 1) + 1, self.cells), np.float64)  # per grid row

    def add(self, xa, xb, pos: int, sel_a: np.ndarray | None = None, sel_b: np.ndarray | None = None) -> None:
        """Rows ``xa``, ``xb`` (span rows, width) in their stored dtype; compared positions pos..pos+n are
        rows ``sel_a``/``sel_b`` of them (aligned lm_head), or all rows in order when those are None."""
        count = xa.shape[0] if sel_a is None else len(sel_a)
        for i in range(0, count, self.m):
            k = min(self.m, count - i)
            a, b, out = self.na[:k], self.nb[:k], self.per_row[:, :k]
            ra, rb = self._pick(xa, sel_a, i, k, 0), self._pick(xb, sel_b, i, k, 1)
            if self.device != "cpu":
                self._add_on_device(ra, rb, out)
                self._into_cells(out, pos + i, k)
                continue
            self.xa[:k].copy_(ra)
            self.xb[:k].copy_(rb)
            for c0, n, cw, cell in self.runs:
                va = a[:, c0:c0 + n * cw].reshape(k, n, cw)  # (k, n cells, cell width): a view
                vb = b[:, c0:c0 + n * cw].reshape(k, n, cw)
                np.einsum("ijk,ijk->ij", va, va, out=out[0, :, cell:cell + n])
                np.einsum("ijk,ijk->ij", vb, vb, out=out[1, :, cell:cell + n])
                np.einsum("ijk,ijk->ij", va, vb, out=out[2, :, cell:cell + n])
            np.subtract(a, b, out=a)  # d = a - b, exact for bf16 inputs
            for c0, n, cw, cell in self.runs:
                vd = a[:, c0:c0 + n * cw].reshape(k, n, cw)
                np.einsum("ijk,ijk->ij", vd, vd, out=out[3, :, cell:cell + n])
            self._into_cells(out, pos + i, k)

    def _pick(self, x, sel: np.ndarray | None, i: int, k: int, side: int):
        """Rows i..i+k of the compared positions: a slice, or gathered into a reused buffer (no allocation)."""
        import torch

        if sel is None:
            return x[i:i + k]
        buf = self.scratch.gathered(side, x.dtype)[:self.m * x.shape[1]].view(self.m, x.shape[1])
        return torch.index_select(x, 0, torch.from_numpy(sel[i:i + k]), out=buf[:k])

    def _add_on_device(self, xa, xb, out: np.ndarray) -> None:
        """The same per-row cell sums computed with torch on an accelerator (``device="cuda"``)."""
        import torch

        a = xa.to(self.device, non_blocking=True).float()  # (k, W)
        b = xb.to(self.device, non_blocking=True).float()
        parts = []
        for x, y in ((a, a), (b, b), (a, b), (a - b, a - b)):
            parts.append(torch.cat([(x[:, c0:c0 + n * cw].unflatten(-1, (n, cw)) * y[:, c0:c0 + n * cw].unflatten(
                -1, (n, cw))).sum(-1) for c0, n, cw, _ in self.runs], -1))
        out[...] = torch.stack(parts).cpu().numpy()  # (4, k, cells)

    def _into_cells(self, out: np.ndarray, first: int, k: int) -> None:
        rows = self.cell_of_row[first:first + k]  # (k,) grid row of each row, non-decreasing
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])  # first row of each grid row in the block
        sums = np.add.reduceat(out, starts, axis=1, dtype=np.float64, out=self.wide[:, :len(starts)])  # (4, grid rows here, cells)
        self.sums[rows[starts]] += sums.transpose(1, 2, 0)

    def finish(self) -> list[TensorSimilarity]:
        job, out, first = self.job, [], 0
        for p in job.parts:
            gc = len(p.col_edges) - 1
            sums = self.sums[:, first:first + gc].copy()  # (gr, gc, 4): aa, bb, ab, dd
            first += gc
            out.append(TensorSimilarity(
                name=p.name, tensor=job.key, shape_a=job.a.shape, shape_b=job.b.shape, rows_compared=job.rows,
                cols=p.cols, row_edges=tuple(int(e) for e in p.row_edges),
                col_edges=tuple(int(e) for e in p.col_edges), sums=sums, aligned=job.rows_a is not None))
        return out


# -- buffers, helpers ---------------------------------------------------------------------------------
def _compare_buffer(ca: Checkpoint, cb: Checkpoint, ta: TensorEntry, tb: TensorEntry, key: str, d2t,
                    chunk_bytes: int, read: list[int]) -> BufferComparison:
    """Equality of an integer/bool buffer, streamed (d2t reuses the values already read)."""
    if key == "d2t" and d2t[0] is not None and d2t[1] is not None:
        differing = int(np.count_nonzero(d2t[0] != d2t[1]))
    else:
        dt, step = NUMPY_DTYPES[ta.dtype], chunk_bytes - chunk_bytes % 8
        differing = 0
        for da, db in zip(ca.iter_bytes(ta.name, chunk_bytes=step), cb.iter_bytes(tb.name, chunk_bytes=step)):
            differing += int(np.count_nonzero(np.frombuffer(da, dt) != np.frombuffer(db, dt)))
            read[0] += len(da)
            read[1] += len(db)
    return BufferComparison(key, ta.dtype, ta.shape, differing == 0, differing)


def _read_d2t(ckpt: Checkpoint) -> np.ndarray | None:
    t = find(ckpt.inventory, "d2t")
    if t is None or t.dtype not in ("I64", "I32", "U32", "I16", "U64") or len(t.shape) != 1:
        return None

    return np.asarray(read_map(ckpt, "d2t"), dtype=np.int64)  # (draft vocab,)


def _device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise InputError(f"device must be 'cpu', 'cuda' or 'auto'; got {device!r}.")
    if device == "cuda" and not torch.cuda.is_available():
        why = ("this installation of torch is CPU-only" if torch.version.cuda is None
               else "torch finds no CUDA GPU on this machine")
        raise InputError(f"cannot compute on a GPU: {why}. Compute on the CPU instead (--device cpu, "
                         "device='cpu'), or use --device auto to take a GPU only when there is one.")
    return device


@contextmanager
def _torch_threads(threads: int | None, device: str):
    import torch

    before = torch.get_num_threads()
    if threads is None:
        threads = 1 if device == "cpu" else before
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise InputError(f"threads must be a positive integer, got {threads!r}.")
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


