"""Weight similarity of two drafters in one streamed pass: byte ranges in, float64 grid sums out.

For every tensor both drafters hold (names normalised as in :mod:`eaglekit.names`), the tensor is
viewed as a matrix (``[N]`` -> ``[N, 1]``, more dims folded into columns) and cut into a grid of at
most ``grid`` cells by even splits (the first ``n % g`` cells one longer, as ``numpy.array_split``).
Each cell keeps four float64 sums, ``a*a``, ``b*b``, ``a*b`` and ``(a-b)^2``, from which
:mod:`eaglekit.similarity_report` derives cosine, ``||a-b||/||a||`` and ``||b||/||a||`` per cell,
per row band and per tensor.

Streaming: rows are contiguous in row-major order, so a block of rows is one byte range
(:meth:`~eaglekit.reader.Checkpoint.read_bytes`). Blocks of at most ``chunk_bytes`` per side are read
by two threads one block ahead of the compute, then converted to float32 ``BLOCK_ELEMENTS`` at a time
so the four products stay in cache; per-row cell sums are float32, everything above is float64. Peak
memory is a few chunks, never a whole tensor. Nothing but the compared tensors' bytes (and d2t) is read.

Meaningful alignment (DOMAIN.md): lm_head rows are paired by target token ``i + d2t[i]`` over the
shared draft vocabulary (:func:`eaglekit.vocab.align_rows`); fc.weight's three column blocks
(low/mid/high aux hidden states) and the embedding/hidden halves of q/k/v's 2H input are reported as
parts of their own; integer and bool buffers (d2t, t2d) are compared by equality.
"""

from __future__ import annotations

import fnmatch
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .errors import InputError
from .inventory import Inventory, TensorEntry
from .names import normalized
from .reader import Checkpoint, open_checkpoint
from .similarity_report import BufferComparison, LmHeadAlignment, Mismatch, SimilarityReport, TensorSimilarity
from .tensors import NUMPY_DTYPES

Device = Literal["cpu", "cuda", "auto"]
DEFAULT_GRID = (64, 64)
#: Bytes per side per read: one range request; at most two blocks per side are held at once.
CHUNK_BYTES = 16 * 1024 * 1024
#: Elements per side converted to float32 at a time (2 MiB): the products then stay in cache.
BLOCK_ELEMENTS = 1 << 19
FLOAT_DTYPES = frozenset({"BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2"})
QKV = tuple(f"midlayer.self_attn.{p}_proj.weight" for p in "qkv")


def similarity(a: str | os.PathLike[str] | Checkpoint, b: str | os.PathLike[str] | Checkpoint, *,
               tensors: str | Sequence[str] | None = None, grid: tuple[int, int] = DEFAULT_GRID,
               device: Device = "cpu", progress: bool = True, endpoint: str | None = None,
               token: str | bool | None = None, chunk_bytes: int = CHUNK_BYTES,
               threads: int | None = None) -> SimilarityReport:
    """Compare the weights of drafter ``b`` against drafter ``a``, wherever each lives.

    ``tensors``: names or glob patterns (``"midlayer.mlp.*"``) of normalised tensor names; default
    all. ``grid``: (rows, cols) of the block grid, at most; ``device``: where the products run
    ("auto": cuda when available); ``threads``: torch intra-op threads while computing (default:
    torch's). Only the compared tensors' bytes are read, by range; ``progress`` shows a tqdm bar of
    bytes done and the rate.
    """
    grid = _check_grid(grid)
    if not isinstance(chunk_bytes, int) or chunk_bytes < 1024:
        raise InputError(f"chunk_bytes must be an integer of at least 1024, got {chunk_bytes!r}.")
    patterns = [tensors] if isinstance(tensors, str) else list(tensors) if tensors is not None else None
    started = time.perf_counter()
    with _opened(a, endpoint, token) as ca, _opened(b, endpoint, token) as cb:
        d2t = (_read_d2t(ca), _read_d2t(cb))
        plan = _plan(ca.inventory, cb.inventory, patterns=patterns, grid=grid, d2t=d2t)
        with _torch_threads(threads):
            results, read = _run(ca, cb, plan, device=_device(device), chunk_bytes=chunk_bytes, progress=progress)
        buffers = [_compare_buffer(ca, cb, ta, tb, key, d2t, chunk_bytes, read) for key, ta, tb in plan.buffers]
        d2t_bytes = [inv["d2t"].nbytes if v is not None else 0
                     for inv, v in ((_alias(ca.inventory), d2t[0]), (_alias(cb.inventory), d2t[1]))]
        return SimilarityReport(
            a=ca.inventory.source, b=cb.inventory.source, grid=grid, tensors=tuple(results),
            buffers=tuple(buffers), only_a=tuple(plan.only_a), only_b=tuple(plan.only_b),
            mismatched=tuple(plan.mismatched), lm_head_alignment=plan.alignment,
            bytes_read=(read[0] + d2t_bytes[0], read[1] + d2t_bytes[1]),
            seconds=time.perf_counter() - started)


def split_edges(n: int, parts: int) -> np.ndarray:
    """Edges of ``parts`` even slices of ``range(n)``, longer slices first: (10, 4) -> [0, 3, 6, 8, 10]."""
    q, r = divmod(n, parts)
    sizes = np.full(parts, q, dtype=np.int64)
    sizes[:r] += 1
    return np.concatenate([[0], np.cumsum(sizes)])  # (parts + 1,)


def matrix_shape(shape: Sequence[int]) -> tuple[int, int]:
    """The matrix a tensor is viewed as: [] -> [1, 1], [N] -> [N, 1], [N, ...] -> [N, prod(rest)]."""
    if len(shape) == 0:
        return 1, 1
    return int(shape[0]), int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1


# -- planning (pure) ----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Part:
    name: str
    cols: tuple[int, int]
    row_edges: np.ndarray  # (gr + 1,)
    col_edges: np.ndarray  # (gc + 1,), relative to cols[0]


@dataclass(frozen=True, eq=False)
class _Job:
    key: str
    a: TensorEntry
    b: TensorEntry
    rows: int  # rows compared (shared lm_head rows when aligned)
    width: int
    parts: tuple[_Part, ...]
    rows_a: np.ndarray | None = None  # (rows,) row of A for each compared position; None: identity
    rows_b: np.ndarray | None = None


@dataclass
class _Plan:
    jobs: list[_Job]
    buffers: list[tuple[str, TensorEntry, TensorEntry]]
    only_a: list[str]
    only_b: list[str]
    mismatched: list[Mismatch]
    alignment: LmHeadAlignment | None


def _plan(inv_a: Inventory, inv_b: Inventory, *, patterns: list[str] | None, grid: tuple[int, int],
          d2t: tuple[np.ndarray | None, np.ndarray | None]) -> _Plan:
    na, nb = normalized(inv_a.names), normalized(inv_b.names)
    keys = sorted(set(na) | set(nb))
    if patterns is not None:
        keys = [k for k in keys if any(fnmatch.fnmatchcase(k, p) or fnmatch.fnmatchcase(na.get(k, nb.get(k)), p)
                                       for p in patterns)]
        if not keys:
            raise InputError(f"no tensor matches {', '.join(map(repr, patterns))}; names are normalised "
                             f"(midlayer.*), e.g. {', '.join(sorted(na)[:3])}.")
    aux = (_aux_ids(inv_a.config), _aux_ids(inv_b.config))
    plan = _Plan([], [], [], [], [], None)
    for key in keys:
        if key not in nb or key not in na:
            (plan.only_a if key in na else plan.only_b).append(key)
            continue
        ta, tb = inv_a[na[key]], inv_b[nb[key]]
        fa, fb = ta.dtype in FLOAT_DTYPES, tb.dtype in FLOAT_DTYPES
        if not (fa and fb):
            if ta.dtype != tb.dtype or ta.dtype not in NUMPY_DTYPES:
                plan.mismatched.append(Mismatch(key, f"dtype {ta.dtype} vs {tb.dtype}: floats are compared by "
                                                     "cosine, integer/bool buffers by equality of equal dtypes"))
            elif ta.shape != tb.shape:
                plan.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)}"))
            else:
                plan.buffers.append((key, ta, tb))
        elif ta.parameters == 0 or tb.parameters == 0:
            plan.mismatched.append(Mismatch(key, "empty tensor: nothing to compare"))
        elif key == "lm_head.weight":
            _plan_lm_head(plan, key, ta, tb, d2t, grid)
        elif ta.shape != tb.shape:
            plan.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)}"))
        else:
            rows, width = matrix_shape(ta.shape)
            plan.jobs.append(_Job(key, ta, tb, rows, width, _parts(key, rows, width, grid, aux)))
    return plan


def _plan_lm_head(plan: _Plan, key: str, ta: TensorEntry, tb: TensorEntry, d2t, grid) -> None:
    from .vocab import align_rows

    (ra, wa), (rb, wb) = matrix_shape(ta.shape), matrix_shape(tb.shape)
    if wa != wb:
        plan.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)}: hidden sizes differ"))
        return
    for side, rows, v in (("A", ra, d2t[0]), ("B", rb, d2t[1])):
        if v is not None and v.shape[0] != rows:
            plan.mismatched.append(Mismatch(key, f"{side}'s d2t has {v.shape[0]} entries but its lm_head has "
                                                 f"{rows} rows; rows cannot be paired by token"))
            return
    if d2t[0] is None and d2t[1] is None:
        if ra != rb:
            plan.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)} and no d2t to pair "
                                                 "rows by token"))
            return
        plan.alignment = LmHeadAlignment(ra, ra, rb, "row index")
        plan.jobs.append(_Job(key, ta, tb, ra, wa, _parts(key, ra, wa, grid, (None, None))))
        return
    # A side without d2t predicts the full vocabulary: its row i is target token i.
    rows_a, rows_b = align_rows(d2t[0] if d2t[0] is not None else np.zeros(ra, np.int64),
                                d2t[1] if d2t[1] is not None else np.zeros(rb, np.int64))  # (K,), (K,)
    plan.alignment = LmHeadAlignment(int(rows_a.size), ra, rb, "target token")
    if rows_a.size == 0:
        plan.mismatched.append(Mismatch(key, "the two draft vocabularies share no target token"))
        return
    parts = _parts(key, int(rows_a.size), wa, grid, (None, None))
    plan.jobs.append(_Job(key, ta, tb, int(rows_a.size), wa, parts, rows_a, rows_b))


def _parts(key: str, rows: int, width: int, grid: tuple[int, int], aux) -> tuple[_Part, ...]:
    """fc.weight -> low/mid/high column blocks; q/k/v -> embed/hidden halves; otherwise the whole."""
    if key == "fc.weight" and width % 3 == 0 and width >= 3:
        labels = []
        for i, pos in enumerate(("low", "mid", "high")):
            ids = [ids[i] for ids in aux if ids is not None and len(ids) == 3]
            layer = "" if not ids else f": aux layer {ids[0]}" if len(set(ids)) == 1 else f": aux layer {ids[0]} vs {ids[1]}"
            labels.append(f"{pos}{layer}")
        spans = [(i * width // 3, (i + 1) * width // 3) for i in range(3)]
    elif key in QKV and width % 2 == 0 and width >= 2:
        labels, spans = ["embed", "hidden"], [(0, width // 2), (width // 2, width)]
    else:
        return (_Part(key, (0, width), split_edges(rows, min(grid[0], rows)), split_edges(width, min(grid[1], width))),)
    return tuple(_Part(f"{key}[{label}]", (c0, c1), split_edges(rows, min(grid[0], rows)),
                       split_edges(c1 - c0, min(grid[1], c1 - c0))) for label, (c0, c1) in zip(labels, spans))


def _aux_ids(config) -> list[int] | None:
    """eagle_config.eagle_aux_hidden_state_layer_ids (SpecForge) or the top-level key (speculators)."""
    if not config:
        return None
    nested = config.get("eagle_config")
    ids = (nested.get("eagle_aux_hidden_state_layer_ids") if isinstance(nested, dict) else None) \
        or config.get("eagle_aux_hidden_state_layer_ids")
    return list(ids) if isinstance(ids, list) else None


# -- streaming -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Block:
    pos: int  # first compared position (grid row order)
    span_a: tuple[int, int]  # rows of A read (one byte range)
    span_b: tuple[int, int]
    sel_a: np.ndarray | None  # rows picked from the span (aligned lm_head), in position order
    sel_b: np.ndarray | None


def _blocks(job: _Job, chunk_bytes: int) -> Iterator[_Block]:
    row_bytes = job.width * max(job.a.nbytes // max(job.a.parameters, 1), job.b.nbytes // max(job.b.parameters, 1))
    m = max(1, chunk_bytes // max(row_bytes, 1))
    if job.rows_a is None:
        for k0 in range(0, job.rows, m):
            k1 = min(job.rows, k0 + m)
            yield _Block(k0, (k0, k1), (k0, k1), None, None)
        return
    k0 = 0
    while k0 < job.rows:  # greedy: extend while both sides' row spans fit one chunk
        k1 = max(k0 + 1, min(_span_end(job.rows_a, k0, m), _span_end(job.rows_b, k0, m)))
        sa, sb = job.rows_a[k0:k1], job.rows_b[k0:k1]
        yield _Block(k0, (int(sa.min()), int(sa.max()) + 1), (int(sb.min()), int(sb.max()) + 1),
                     sa - sa.min(), sb - sb.min())
        k0 = k1


def _span_end(rows: np.ndarray, k0: int, m: int) -> int:
    seg = rows[k0:k0 + m]
    span = np.maximum.accumulate(seg) - np.minimum.accumulate(seg)  # (len,)
    over = np.flatnonzero(span >= m)
    return k0 + int(over[0] if over.size else seg.size)


def _run(ca: Checkpoint, cb: Checkpoint, plan: _Plan, *, device: str, chunk_bytes: int,
         progress: bool) -> tuple[list[TensorSimilarity], list[int]]:
    from tqdm.auto import tqdm

    from .tensors import torch_dtype

    total = sum((s.span_a[1] - s.span_a[0]) * _row_bytes(j.a, j.width) + (s.span_b[1] - s.span_b[0])
                * _row_bytes(j.b, j.width) for j in plan.jobs for s in _blocks(j, chunk_bytes))
    read = [0, 0]
    results: list[TensorSimilarity] = []
    accs: dict[int, _Accumulator] = {}
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="similarity",
              disable=not progress, leave=False) as bar:
        for job, blk, da, db in _prefetch(ca, cb, plan.jobs, chunk_bytes):
            acc = accs.get(id(job))
            if acc is None:
                for done in accs.values():
                    results.extend(done.finish())
                accs = {id(job): (acc := _Accumulator(job, device))}
            xa = _rows(da, torch_dtype(job.a.dtype), job.width, blk.sel_a)
            xb = _rows(db, torch_dtype(job.b.dtype), job.width, blk.sel_b)
            acc.add(xa, xb, blk.pos)
            read[0] += len(da)
            read[1] += len(db)
            bar.update(len(da) + len(db))
        for done in accs.values():
            results.extend(done.finish())
    return results, read


def _row_bytes(t: TensorEntry, width: int) -> int:
    return width * (t.nbytes // max(t.parameters, 1))


def _rows(data: bytes, dtype, width: int, sel: np.ndarray | None):
    import torch

    with warnings.catch_warnings():  # read-only bytes: only ever copied from, never written
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        x = torch.frombuffer(data, dtype=dtype).view(-1, width)  # (span rows, width)
    return x if sel is None else x[torch.from_numpy(sel)]  # (positions, width)


def _prefetch(ca: Checkpoint, cb: Checkpoint, jobs: list[_Job], chunk_bytes: int):
    """Yield (job, block, bytes A, bytes B), reading the next block in two threads meanwhile.

    At most one read per source is in flight (two workers, one block ahead), so sources that are
    not thread-safe are safe; the same checkpoint on both sides is serialised by a lock."""
    tasks = ((job, blk) for job in jobs for blk in _blocks(job, chunk_bytes))
    locks = {id(ca.source): threading.Lock(), id(cb.source): threading.Lock()}

    def read(ckpt: Checkpoint, t: TensorEntry, span: tuple[int, int], width: int) -> bytes:
        rb = _row_bytes(t, width)
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

    def __init__(self, job: _Job, device: str) -> None:
        import torch

        self.job, self.device = job, device
        self.rows_per_block = max(1, (BLOCK_ELEMENTS if device == "cpu" else 1 << 24) // job.width)
        m, widest = self.rows_per_block, max(p.cols[1] - p.cols[0] for p in job.parts)
        self.x = torch.empty(2, m, job.width, dtype=torch.float32, device=device)  # (2, m, W): a, b
        self.scratch = torch.empty(4 * m * widest, dtype=torch.float32, device=device)
        self.sums, self.cells, self.runs = [], [], []
        for p in job.parts:
            gr, gc = len(p.row_edges) - 1, len(p.col_edges) - 1
            self.sums.append(torch.zeros(gr, gc, 4, dtype=torch.float64, device=device))
            cell_of_row = np.repeat(np.arange(gr), np.diff(p.row_edges))  # (rows,)
            self.cells.append(torch.from_numpy(cell_of_row).to(device))
            self.runs.append(_runs(p.col_edges))

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


def _runs(edges: np.ndarray) -> list[tuple[int, int, int]]:
    """Consecutive cells of equal width as (start column, cells, width): at most two for even splits."""
    widths = np.diff(edges)
    out: list[tuple[int, int, int]] = []
    for j, w in enumerate(widths):
        if out and out[-1][2] == w:
            out[-1] = (out[-1][0], out[-1][1] + 1, int(w))
        else:
            out.append((int(edges[j]), 1, int(w)))
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


def _alias(inv: Inventory) -> dict[str, TensorEntry]:
    return {k: inv[v] for k, v in normalized(inv.names).items()}


def _read_d2t(ckpt: Checkpoint) -> np.ndarray | None:
    t = _alias(ckpt.inventory).get("d2t")
    if t is None or t.dtype not in ("I64", "I32", "U32", "I16", "U64") or len(t.shape) != 1:
        return None
    return np.asarray(ckpt.read_numpy(t.name), dtype=np.int64)  # (draft vocab,)


def _check_grid(grid: Any) -> tuple[int, int]:
    ok = isinstance(grid, (tuple, list)) and len(grid) == 2 and all(
        isinstance(g, (int, np.integer)) and not isinstance(g, bool) and g >= 1 for g in grid)
    if not ok:
        raise InputError(f"grid must be two positive integers (rows, cols), e.g. (64, 64); got {grid!r}.")
    return int(grid[0]), int(grid[1])


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
def _torch_threads(threads: int | None):
    import torch

    if threads is None:
        yield
        return
    if not isinstance(threads, int) or threads < 1:
        raise InputError(f"threads must be a positive integer, got {threads!r}.")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def _opened(location, endpoint, token) -> Iterator[Checkpoint]:
    if isinstance(location, Checkpoint):
        yield location
        return
    with open_checkpoint(location, endpoint=endpoint, token=token) as ckpt:
        yield ckpt
