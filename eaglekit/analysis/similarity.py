"""Weight similarity of two drafters in one streamed pass: byte ranges in, float64 grid sums out.

:mod:`eaglekit.similarity_plan` decides what is compared (tensors paired by normalised name, fc and
q/k/v split into meaningful parts, lm_head rows paired by target token) and cuts each tensor into a
grid. This module streams the bytes and accumulates, per grid cell, four float64 sums ``a*a``, ``b*b``,
``a*b`` and ``(a-b)^2``, from which :mod:`eaglekit.similarity_report` derives cosine, ``||a-b||/||a||``
and ``||b||/||a||`` per cell, per row band and per tensor.

Streaming: rows are contiguous in row-major order, so a block of rows is one byte range
(:meth:`~eaglekit.reader.Checkpoint.read_bytes`). Blocks of at most ``chunk_bytes`` per side are read
by two threads one block ahead of the compute, then converted to float32 ``BLOCK_ELEMENTS`` at a time
so the four products stay in cache; per-row cell sums are float32 (exact products of bf16 inputs),
everything above is float64. Peak memory is a few chunks, never a whole tensor; nothing but the
compared tensors' bytes (and d2t when lm_head is compared) is read. Integer and bool buffers (d2t,
t2d) are compared by equality.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Literal

import numpy as np

from eaglekit.core.errors import InputError
from eaglekit.io.inventory import TensorEntry
from eaglekit.core.names import find
from eaglekit.io.reader import Checkpoint, opened
from eaglekit.analysis.similarity_plan import Job, Plan, blocks, check_grid, column_runs, plan, row_bytes, select
from eaglekit.analysis.similarity_report import BufferComparison, SimilarityReport, TensorSimilarity
from eaglekit.core.tensors import NUMPY_DTYPES

Device = Literal["cpu", "cuda", "auto"]
DEFAULT_GRID = (64, 64)
#: Bytes per side per read from a remote source: one range request; at most two are held per side.
CHUNK_BYTES = 16 * 1024 * 1024
#: Bytes per side per read from a local file: small reads reuse freed memory (no page faults).
LOCAL_CHUNK_BYTES = 2 * 1024 * 1024
#: Elements per side converted to float32 at a time (2 MiB): the products then stay in cache.
BLOCK_ELEMENTS = 1 << 19


def similarity(a: str | os.PathLike[str] | Checkpoint, b: str | os.PathLike[str] | Checkpoint, *,
               tensors: str | Sequence[str] | None = None, grid: tuple[int, int] = DEFAULT_GRID,
               device: Device = "cpu", progress: bool = True, endpoint: str | None = None,
               token: str | bool | None = None, chunk_bytes: int | None = None,
               threads: int | None = None) -> SimilarityReport:
    """Compare the weights of drafter ``b`` against drafter ``a``, wherever each lives.

    ``tensors``: names or glob patterns (``"midlayer.mlp.*"``) of normalised tensor names; default
    all. ``grid``: (rows, cols) of the block grid, at most; ``device``: where the products run
    ("auto": cuda when available). Only the compared tensors' bytes are read, by range, in requests
    of ``chunk_bytes`` per side (default: :data:`LOCAL_CHUNK_BYTES` for a local folder,
    :data:`CHUNK_BYTES` for a remote one); ``progress`` shows a tqdm bar of bytes done and the rate.
    ``threads``: torch intra-op threads while computing; the default leaves one core to the two
    reading threads (``torch.get_num_threads() - 1``, at least 1): on a busy 2-core machine, two
    OpenMP threads plus a reader stall each other at every barrier.
    """
    grid = check_grid(grid)
    if chunk_bytes is not None and (not isinstance(chunk_bytes, int) or chunk_bytes < 1024):
        raise InputError(f"chunk_bytes must be an integer of at least 1024, got {chunk_bytes!r}.")
    patterns = [tensors] if isinstance(tensors, str) else list(tensors) if tensors is not None else None
    started = time.perf_counter()
    with opened(a, endpoint=endpoint, token=token) as ca, opened(b, endpoint=endpoint, token=token) as cb:
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
            bytes_read=(read[0] + d2t_bytes[0], read[1] + d2t_bytes[1]),
            seconds=time.perf_counter() - started)


# -- streaming -----------------------------------------------------------------------------------------
def _run(ca: Checkpoint, cb: Checkpoint, todo: Plan, *, device: str, chunk_bytes: int,
         progress: bool) -> tuple[list[TensorSimilarity], list[int]]:
    from tqdm.auto import tqdm

    from eaglekit.core.tensors import torch_dtype

    total = sum((s.span_a[1] - s.span_a[0]) * row_bytes(j.a, j.width) + (s.span_b[1] - s.span_b[0])
                * row_bytes(j.b, j.width) for j in todo.jobs for s in blocks(j, chunk_bytes))
    read = [0, 0]
    results: list[TensorSimilarity] = []
    acc: _Accumulator | None = None
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="similarity",
              disable=not progress, leave=False, delay=0.5) as bar:  # a blink-fast run shows no bar
        for job, blk, da, db in _prefetch(ca, cb, todo.jobs, chunk_bytes):
            if acc is None or acc.job is not job:  # blocks arrive job by job
                if acc is not None:
                    results.extend(acc.finish())
                acc = _Accumulator(job, device)
            xa = _rows(da, torch_dtype(job.a.dtype), job.width, blk.sel_a)
            xb = _rows(db, torch_dtype(job.b.dtype), job.width, blk.sel_b)
            acc.add(xa, xb, blk.pos)
            read[0] += len(da)
            read[1] += len(db)
            bar.update(len(da) + len(db))
            del da, db, xa, xb  # before the next block arrives: at most two blocks per side alive
    if acc is not None:
        results.extend(acc.finish())
    return results, read


def _rows(data: bytes, dtype, width: int, sel: np.ndarray | None):
    import torch

    with warnings.catch_warnings():  # read-only bytes: only ever copied from, never written
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        x = torch.frombuffer(data, dtype=dtype).view(-1, width)  # (span rows, width)
    return x if sel is None else x[torch.from_numpy(sel)]  # (positions, width)


def _prefetch(ca: Checkpoint, cb: Checkpoint, jobs: list[Job], chunk_bytes: int):
    """Yield (job, block, bytes A, bytes B), reading the next block in two threads meanwhile.

    At most one read per source is in flight (two workers, one block ahead), so sources that are
    not thread-safe are safe; the same checkpoint on both sides is serialised by a lock."""
    tasks = ((job, blk) for job in jobs for blk in blocks(job, chunk_bytes))
    locks = {id(ca.source): threading.Lock(), id(cb.source): threading.Lock()}

    def read(ckpt: Checkpoint, t: TensorEntry, span: tuple[int, int], width: int) -> bytes:
        rb = row_bytes(t, width)
        with locks[id(ckpt.source)]:
            return ckpt.read_bytes(t.name, span[0] * rb, (span[1] - span[0]) * rb)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="eaglekit-read") as pool:
        pending: deque = deque()

        def submit(task) -> None:
            job, blk = task
            pending.append((job, blk, pool.submit(read, ca, job.a, blk.span_a, job.width),
                            pool.submit(read, cb, job.b, blk.span_b, job.width)))

        first = next(tasks, None)
        if first is not None:
            submit(first)
        while pending:
            job, blk, fa, fb = pending.popleft()
            nxt = next(tasks, None)
            if nxt is not None:
                submit(nxt)
            yield job, blk, fa.result(), fb.result()


class _Accumulator:
    """The float64 cell sums of one job's parts, fed blocks of rows in compared-position order."""

    def __init__(self, job: Job, device: str) -> None:
        import torch

        self.job, self.device = job, device
        self.rows_per_block = max(1, (BLOCK_ELEMENTS if device == "cpu" else 1 << 24) // job.width)
        m, widest = self.rows_per_block, max(p.cols[1] - p.cols[0] for p in job.parts)
        self.x = torch.empty(2, m, job.width, dtype=torch.float32, device=device)  # (2, m, W): a, b
        self.scratch = torch.empty(4 * m * widest, dtype=torch.float32, device=device)
        self.sums, self.cells, self.runs = [], [], []
        for p in job.parts:
            gr, gc = len(p.row_edges) - 1, len(p.col_edges) - 1
            self.sums.append(torch.zeros(gr, gc, 4, dtype=torch.float64, device=device))  # aa, bb, ab, dd
            cell_of_row = np.repeat(np.arange(gr), np.diff(p.row_edges))  # (rows,)
            self.cells.append(torch.from_numpy(cell_of_row).to(device))
            self.runs.append(column_runs(p.col_edges))

    def add(self, xa, xb, pos: int) -> None:
        """Rows ``xa``, ``xb`` (n, width) in their stored dtype, at compared positions pos..pos+n."""
        import torch

        for i in range(0, xa.shape[0], self.rows_per_block):
            m = min(self.rows_per_block, xa.shape[0] - i)
            x = self.x[:, :m]
            x[0].copy_(xa[i:i + m])
            x[1].copy_(xb[i:i + m])
            for part, sums, cells, runs in zip(self.job.parts, self.sums, self.cells, self.runs):
                c0, c1 = part.cols
                xs = x[:, :, c0:c1]  # (2, m, w)
                p = self.scratch[:4 * m * (c1 - c0)].view(4, m, c1 - c0)  # aa, bb, ab, dd
                torch.mul(xs, xs, out=p[0:2])
                torch.mul(xs[0], xs[1], out=p[2])
                torch.sub(xs[0], xs[1], out=p[3])
                p[3].square_()
                per_row = torch.cat([p[..., s:s + n * w].unflatten(-1, (n, w)).sum(-1) for s, n, w in runs], -1)
                sums.index_add_(0, cells[pos + i:pos + i + m], per_row.permute(1, 2, 0).double())  # (m, gc, 4)

    def finish(self) -> list[TensorSimilarity]:
        job = self.job
        return [TensorSimilarity(
            name=p.name, tensor=job.key, shape_a=job.a.shape, shape_b=job.b.shape, rows_compared=job.rows,
            cols=p.cols, row_edges=tuple(int(e) for e in p.row_edges), col_edges=tuple(int(e) for e in p.col_edges),
            sums=s.cpu().numpy(), aligned=job.rows_a is not None) for p, s in zip(job.parts, self.sums)]


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
    return np.asarray(ckpt.read_numpy(t.name), dtype=np.int64)  # (draft vocab,)


def _device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise InputError(f"device must be 'cpu', 'cuda' or 'auto'; got {device!r}.")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("device='cuda' but torch sees no CUDA device; use device='cpu' or 'auto'.")
    return device


@contextmanager
def _torch_threads(threads: int | None, device: str):
    import torch

    before = torch.get_num_threads()
    if threads is None:
        threads = max(1, before - 1) if device == "cpu" else before
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise InputError(f"threads must be a positive integer, got {threads!r}.")
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


