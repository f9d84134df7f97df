"""Target drift: how far target B's weights moved from target A's, where an EAGLE-3 drafter looks first.

    report = drift("hf://moonshotai/Kimi-K2-Instruct", "hf://moonshotai/Kimi-K2.5",
                   drafter="hf://AQ-MedAI/Kimi-K2-Instruct-eagle3", budget="4GB")

Weights are read by row block and dequantised on the fly (:mod:`eaglekit.analysis.drift.dequant`: FP8 block,
compressed-tensors pack-quantised INT, bf16/fp16/fp32), paired by aligned name and grouped into the
strata of the drift map (:mod:`eaglekit.analysis.drift.plan`). Two modes:

* **sampled** (the default for remote locations): random units under a byte ``budget``, every figure
  with a confidence interval (:mod:`eaglekit.analysis.drift.stats`);
* **full** (the default for local ones): every unit. On a Dask distributed cluster (``scheduler``: an
  address, a ``distributed.Client``, ``"local"`` for a LocalCluster on this machine) each task names
  the two locations and its units; the worker opens the locations itself and reads its byte ranges
  through eaglekit's sources, so no weight bytes travel through the scheduler. ``"inline"`` runs the
  same tasks in this process. Per-unit sums are computed by the same function either way and combined in
  unit order, so a cluster gives bit-identical figures; a task lost with its worker is re-run by Dask.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from eaglekit.analysis.drift.dequant import QuantWeight, Scratch, quant_weights, read_row_set, read_rows
from eaglekit.analysis.drift.plan import (DRAFT_LM_HEAD, EMBEDDING, MIN_UNITS, TASK_BYTES, UNIT_BYTES, Pair, DriftPlan,
                                          make_plan, pair_weights, sample, tasks)
from eaglekit.analysis.drift.report import DriftFigure, DriftReport, Feed
from eaglekit.analysis.drift.stats import Stratum, sample_estimate, unit_sums
from eaglekit.core.errors import HeaderError, InputError
from eaglekit.io.inventory import TensorEntry
from eaglekit.io.location import parse_location
from eaglekit.io.sources import open_source
from eaglekit.io.reader import Checkpoint, opened
from eaglekit.analysis.drift.hidden import hidden_drift
from eaglekit.io.drafter import read_map
from eaglekit.core.configs.config import normalize_config, normalize_target, target_fit
from eaglekit.core.errors import EaglekitError
from eaglekit.core.tokens.vocab import target_ids
from eaglekit.io.scheduler import dask_client

#: Sampled-mode budget when none is given: a laptop maps two 1 TB targets by reading this much.
DEFAULT_BUDGET = 4 << 30
#: Full mode runs inline (no cluster) below this many stored bytes (both sides), unless told otherwise.
INLINE_BELOW = 1 << 30
#: Relative row change above which a row counts as moved (bf16 re-rounding stays well below).
MOVED_TOL = 1e-3
#: Units of a full pass: no sampling to serve, so fewer, larger blocks (still read CHUNK_BYTES at a time).
FULL_UNIT_BYTES = 4 << 20
#: Rows are read and compared in pieces of about this many stored bytes per side (they stay in cache).
CHUNK_BYTES = 256 << 10
#: Threads reading units of a remote target inline (range requests wait on the network, not the CPU).
REMOTE_READERS = 8
#: Task size when threads share the units: small, so all of them stay busy.
SAMPLED_TASK_BYTES = 4 << 20
_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def parse_size(value: str | int | float) -> int:
    """``"4GB"`` -> 4e9, ``"512MiB"`` -> 536870912; numbers are bytes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = float(value)
    else:
        import re

        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
        if not m or m.group(2).lower() not in _UNITS:
            raise InputError(f"budget {value!r} is not a size; write e.g. 4GB, 512MiB or 1000000.")
        n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not n > 0:
        raise InputError(f"budget must be positive, got {value!r}.")
    return int(n)


def drift(a: str | os.PathLike[str] | Checkpoint, b: str | os.PathLike[str] | Checkpoint, *,
          drafter: str | os.PathLike[str] | Checkpoint | None = None, tokenizer: Any = None,
          full: bool | None = None, budget: str | int | None = None, scheduler: Any = None, seed: int = 0,
          confidence: float = 0.95, tol: float = MOVED_TOL, hidden: tuple[Any, Any] | None = None,
          unit_bytes: int | None = None, task_bytes: int = TASK_BYTES, progress: bool = True,
          endpoint: str | None = None, timeout: float | None = None, security: Any = None,
          _task_hook: Callable[[int], None] | None = None) -> DriftReport:
    """How far target ``b`` moved from target ``a``: the drafter's view first, then a per-layer map.

    ``drafter`` (a location): its d2t picks the lm_head rows of its draft vocabulary and its aux layer
    ids the layers that feed it, per engine. ``tokenizer`` (anything with ``convert_ids_to_tokens`` or
    ``decode``) turns moved embedding rows into text. ``full``: every byte (default: full for local
    locations, sampled for remote ones); ``budget``: bytes read in sampled mode (default 4 GB);
    ``scheduler`` (full mode): ``"inline"``, ``"local"`` (a LocalCluster), an address or a Client
    (default: inline below 1 GiB of weights, else a LocalCluster); an address is checked and connected to
    by :func:`eaglekit.io.scheduler.connect_scheduler` (a scheduler can run code here: see docs/drift.md),
    ``security`` (a ``distributed.Security``) for a ``tls://`` one. ``seed`` fixes the sample;
    ``confidence`` the intervals; ``tol`` the relative change that makes a row count as moved.
    ``hidden``: two hidden-state dumps of the same prompts (A's, B's): cosine and linear CKA per layer
    (:func:`~eaglekit.analysis.drift.hidden.hidden_drift`). ``unit_bytes``: stored bytes per side in
    one block of rows (default: 4 MiB in full mode; 256 KiB when sampling, smaller when the budget could
    not otherwise give every stratum its minimum of units); ``task_bytes``: per full-mode task.
    Workers open the locations themselves: a Checkpoint passed in is re-opened there by its location.
    """
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be between 0 and 1, got {confidence!r}.")
    if not tol > 0:
        raise InputError(f"tol must be positive, got {tol!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a whole number, 0 or more, got {seed!r}.")
    if full is False and scheduler is not None:
        raise InputError("a scheduler runs full passes, and this one is sampled (a budget, or full mode "
                         "turned off): drop the scheduler, or the budget.")
    if full and budget is not None:
        raise InputError("a budget applies to sampled passes, and this one is full (every byte): drop the "
                         "budget, or full mode.")
    started = time.perf_counter()
    with opened(a, endpoint=endpoint, timeout=timeout) as ca, opened(b, endpoint=endpoint, timeout=timeout) as cb:
        wa = quant_weights(ca.inventory, read_shape=lambda t: tuple(ca.read_numpy(t.name).tolist()))
        wb = quant_weights(cb.inventory, read_shape=lambda t: tuple(cb.read_numpy(t.name).tolist()))
        draft_rows, aux, misfit, readings = _drafter_facts(drafter, endpoint, ca.inventory.config, timeout=timeout)
        pairs, only_a, only_b, mismatched = pair_weights(wa, wb, draft_rows=draft_rows)
        if not pairs:
            raise InputError(f"{ca.inventory.source} and {cb.inventory.source} share no weight of the same shape; "
                             "are they two versions of one model?")
        remote = ca.source.kind != "local" or cb.source.kind != "local"
        full = (scheduler is not None or not remote) if full is None else bool(full)
        limit = None if full else parse_size(budget) if budget is not None else DEFAULT_BUDGET
        if unit_bytes is None:
            unit_bytes = FULL_UNIT_BYTES if full else _unit_bytes(pairs, limit)
        plan = make_plan(pairs, only_a, only_b, mismatched, unit_bytes=unit_bytes)
        total = float(plan.nbytes.sum())
        if full:
            chosen, mode = dict(plan.strata), "full"
        else:
            chosen, mode = sample(plan, limit, np.random.default_rng(seed)), "sampled"
        order = np.unique(np.concatenate(list(chosen.values())))  # every unit is in one stratum
        run_on = _scheduler_choice(scheduler, full, total)
        locs = (_location_of(ca), _location_of(cb))
        values, moved_rows, skipped, where = _execute(plan, order, locs, endpoint, tol, run_on, progress, _task_hook,
                                             readers=REMOTE_READERS if remote and run_on == "inline" else 1,
                                             task_bytes=task_bytes, security=security, timeout=timeout)
    read = (plan.read_bytes(order, "a"), plan.read_bytes(order, "b"))
    strata = {s: Stratum(len(plan.strata[s]), values[np.searchsorted(order, chosen[s])]) for s in plan.strata}
    states = None
    if hidden is not None:

        states = hidden_drift(*hidden, progress=progress)
    return _report(plan, strata, chosen, moved_rows, aux, tokenizer, confidence, ca.inventory.source,
                   cb.inventory.source, mode, limit, where, read, (ca, cb), time.perf_counter() - started,
                   tol, states, misfit, skipped, readings)


def _unit_bytes(pairs: list[Pair], budget: int) -> int:
    """Units small enough that half the budget gives every stratum MIN_UNITS of them (1 KiB..256 KiB)."""
    strata = len({p.stratum for p in pairs})
    return int(min(UNIT_BYTES, max(1024, budget / (4 * strata * MIN_UNITS))))


# -- running units -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskSpec:
    """What a worker needs: the two locations, its units (index, pair, rows) and the moved tolerance."""

    index: int
    locations: tuple[str, str]
    endpoint: str | None
    pairs: dict[int, Pair]
    units: tuple[tuple[int, int, int, int], ...]  # (unit index, pair index, r0, r1)
    tol: float
    timeout: float | None = None  # seconds per remote request (the caller's --timeout)


#: Sources a Dask worker process keeps open across tasks: (location, endpoint, thread) -> Source.
_SOURCES: dict[tuple[str, str | None, int], Any] = {}
_SOURCES_LOCK = threading.Lock()


def _source(location: str, endpoint: str | None, cache: dict | None = None, timeout: float | None = None):
    """This thread's source for a location, opened once and reused across tasks (sources need not be
    thread-safe: each thread gets its own). ``cache``: where to keep it (default: the process's)."""
    cache = _SOURCES if cache is None else cache
    key = (location, endpoint, threading.get_ident())
    with _SOURCES_LOCK:
        found = cache.get(key)
    if found is None:
        found = open_source(parse_location(location), endpoint=endpoint, timeout=timeout)[0]
        with _SOURCES_LOCK:
            cache[key] = found
    return found


def _reader(source) -> Callable[[TensorEntry, int, int], bytes]:
    def read(t: TensorEntry, start: int, length: int) -> bytes:
        data = source.read(t.file, t.offset + start, length).data
        if len(data) != length:
            raise HeaderError(f"{source.display}: tensor {t.name!r} is truncated: read {len(data)} of {length} bytes.")
        return data
    return read


_SCRATCH = threading.local()


def _rows(read, w: QuantWeight, pair: Pair, r0: int, r1: int, key: str) -> np.ndarray:
    """Rows r0..r1 of one side, in this thread's scratch buffer ``key`` (a fresh array for row sets)."""
    if pair.rows is None:
        scratch = getattr(_SCRATCH, "buffers", None)
        if scratch is None:
            scratch = _SCRATCH.buffers = Scratch()
        return read_rows(read, w, r0, r1, scratch=scratch, key=key)
    return read_row_set(read, w, np.asarray(pair.rows[r0:r1], dtype=np.int64))


def run_task(spec: TaskSpec, hook: Callable[[int], None] | None = None, cache: dict | None = None
             ) -> tuple[int, np.ndarray, dict[int, np.ndarray], dict[int, int]]:
    """Per-unit sums (n, 6) of one task's units, the rows that moved in row-tracking pairs, and the rows
    skipped as not finite (NaN/Inf after dequantisation) per pair."""
    if hook is not None:
        hook(spec.index)
    ra, rb = (_reader(_source(loc, spec.endpoint, cache, spec.timeout)) for loc in spec.locations)
    out = np.zeros((len(spec.units), 6))
    moved: dict[int, list[np.ndarray]] = {}
    skipped: dict[int, int] = {}
    for k, (_, p, r0, r1) in enumerate(spec.units):
        pair = spec.pairs[p]
        step = max(1, int(CHUNK_BYTES // max(1.0, pair.row_bytes / 2)))
        for c0 in range(r0, r1, step):  # cache-sized pieces of the unit: the sums add up
            c1 = min(r1, c0 + step)
            xa = _rows(ra, pair.a, pair, c0, c1, "a")  # (rows, cols) float32, ours to overwrite
            xb = _rows(rb, pair.b, pair, c0, c1, "b")
            sums, mask, bad = unit_sums(xa, xb, tol=spec.tol, overwrite=True)
            out[k] += sums
            if bad:
                skipped[p] = skipped.get(p, 0) + bad
            if pair.track_rows and mask.any():
                ids = np.flatnonzero(mask) + c0
                moved.setdefault(p, []).append(np.asarray(pair.rows, dtype=np.int64)[ids] if pair.rows is not None
                                               else ids)
    return spec.index, out, {p: np.concatenate(v) for p, v in moved.items()}, skipped


def _location_of(ckpt: Checkpoint) -> str:
    return ckpt.location.raw


def _scheduler_choice(scheduler: Any, full: bool, total: float) -> Any:
    if not full:
        return "inline"
    if scheduler is None:
        return "inline" if total < INLINE_BELOW else "local"
    return scheduler


#: Bytes of work from which a progress bar shows (decided by size, not elapsed time; see ``_execute``).
PROGRESS_BYTES = 256 * 1024 * 1024


def _execute(plan: DriftPlan, order: np.ndarray, locs: tuple[str, str], endpoint: str | None, tol: float, run_on: Any,
             progress: bool, hook, readers: int = 1, task_bytes: int = TASK_BYTES, security: Any = None,
             timeout: float | None = None) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, int], str]:
    """Run the units ``order`` as tasks (inline, in ``readers`` threads, or on Dask); per-unit sums in
    ``order``'s order, moved rows by pair, rows skipped as not finite by pair, and where it ran."""
    from tqdm.auto import tqdm

    specs = []
    task_bytes = task_bytes if readers == 1 else min(task_bytes, SAMPLED_TASK_BYTES)
    for i, idx in enumerate(tasks(plan, order, task_bytes=task_bytes)):
        units = tuple(zip(idx.tolist(), plan.pair[idx].tolist(), plan.r0[idx].tolist(), plan.r1[idx].tolist()))
        used = {p for _, p, _, _ in units}
        specs.append(TaskSpec(i, locs, endpoint, {p: plan.pairs[p] for p in used}, units, tol, timeout))
    results: list[Any] = [None] * len(specs)
    total = float(plan.nbytes[order].sum())
    # shown by the size of the work, never after a delay: the same run renders the same way on any machine
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="drift",
               disable=not progress or total < PROGRESS_BYTES, leave=False)
    with bar:
        if isinstance(run_on, str) and run_on == "inline":
            where = "this process" + (f" ({readers} reading threads)" if readers > 1 else "")
            cache: dict = {}
            pool = None
            try:
                pool = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="eaglekit-drift") \
                    if readers > 1 else None
                done = pool.map(lambda s: run_task(s, hook, cache), specs) if pool else \
                    (run_task(s, hook, cache) for s in specs)
                for s, res in zip(specs, done):
                    results[s.index] = res
                    bar.update(float(sum(plan.nbytes[u] for u, *_ in s.units)))
            finally:
                if pool is not None:
                    pool.shutdown(cancel_futures=True)
                for src in cache.values():
                    src.close()
        else:
            where = _run_dask(specs, run_on, hook, results, lambda s: bar.update(
                float(sum(plan.nbytes[u] for u, *_ in s.units))), security=security, timeout=timeout)
    values = np.zeros((len(order), 6))
    pos = {int(u): k for k, u in enumerate(order)}
    moved: dict[int, list[np.ndarray]] = {}
    skipped: dict[int, int] = {}
    for s, (_, out, mv, bad) in zip(specs, results):
        for k, (u, *_) in enumerate(s.units):
            values[pos[u]] = out[k]
        for p, ids in mv.items():
            moved.setdefault(p, []).append(ids)
        for p, n in bad.items():
            skipped[p] = skipped.get(p, 0) + n
    return values, {p: np.sort(np.concatenate(v)) for p, v in moved.items()}, skipped, where


def _run_dask(specs: list[TaskSpec], run_on: Any, hook, results: list, done: Callable[[TaskSpec], None], *,
              security: Any = None, timeout: float | None = None) -> str:
    """Submit every task to a Dask cluster; collect results as they finish (a lost worker's are re-run).
    An address is connected to only through :func:`eaglekit.io.scheduler.dask_client` (checked, under one deadline)."""
    from distributed import as_completed  # heavy: only on a cluster

    with dask_client(run_on, security=security, timeout=timeout, workers=4, memory_limit="2GiB") as client:
        run = uuid.uuid4().hex[:12]
        futures = {client.submit(run_task, s, hook, key=f"eaglekit-drift-{run}-{s.index}", pure=False): s
                   for s in specs}
        for fut in as_completed(futures):
            s = futures[fut]
            results[s.index] = fut.result()
            done(s)
        workers = len(client.scheduler_info().get("workers", {}))
    # The scheduler's address only when the user named it: a Client's or a local cluster's address
    # (inproc://, a loopback or LAN port) means nothing on a rendered page or another machine.
    named = f" at {run_on}" if isinstance(run_on, str) and run_on != "local" else ""
    return f"a Dask cluster{named} ({workers} worker{'s' * (workers != 1)})"


# -- the drafter's facts, the report ------------------------------------------------------------------------
def _drafter_facts(drafter, endpoint, target_config, *, timeout: float | None = None) -> tuple[
        np.ndarray | None, tuple[int, ...] | None, tuple[str, ...], tuple]:
    """The target ids of the drafter's draft rows (i + d2t[i]), its aux layer ids, how it does not
    fit the targets (hidden or vocabulary size; empty when it fits or either config is missing) and what
    each engine release feeds it (:func:`_readings`). A
    drafter of another vocabulary drafts ids of another tokenizer: neither its rows nor its aux ids
    (meant for another target) are returned. d2t is read bounded, as compat reads it."""
    if drafter is None:
        return None, None, (), ()

    with opened(drafter, endpoint=endpoint, timeout=timeout) as cd:
        cfg = None
        if cd.inventory.config is not None:
            cfg = normalize_config(cd.inventory.config, source=f"{cd.inventory.source}/config.json")
        misfit: tuple[str, ...] = ()
        if cfg is not None and target_config is not None:
            try:
                target = normalize_target(target_config)
            except EaglekitError:  # a target without a readable config: nothing to compare against
                target = None
            if target is not None:
                misfit = tuple(f"{what} {mine:,} vs the targets' {theirs:,}"
                               for what, mine, theirs in target_fit(cfg.target_hidden_size, cfg.vocab_size, target)
                               if mine is not None and mine != theirs)
        if any(m.startswith("vocab") for m in misfit):
            return None, None, misfit, ()
        d2t = read_map(cd, "d2t")
        ids = target_ids(d2t) if d2t is not None else None
    aux = cfg.aux_layer_ids if cfg is not None else None
    return ids, aux, misfit, _readings(cfg, target_config) if aux else ()


def _readings(cfg, target_config) -> tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]:
    """(engine release, ids, outputs they select) for each reading of the drafter's aux ids, as
    ``eaglekit check`` names them: SGLang before and since #25454 (read by the target's model code), vLLM."""
    try:
        target = normalize_target(target_config) if target_config is not None else None
    except EaglekitError:
        target = None
    view = cfg.aux_view(target.num_hidden_layers if target is not None else None,
                        architecture=target.architecture if target is not None else None)
    return tuple((e.name, tuple(e.ids), tuple(e.outputs_of)) for e in view.engines
                 if e.ids is not None and e.outputs_of is not None)


def _report(plan: DriftPlan, strata: dict[str, Stratum], chosen, moved_rows, aux, tokenizer, confidence, src_a, src_b,
            mode, limit, where, read, ckpts, seconds, tol, states=None, misfit=(), skipped=None,
            readings=()) -> DriftReport:
    def figure(name: str, names: Sequence[str], layer=None, comp=None) -> DriftFigure:
        parts = [strata[s] for s in names]
        cos, rel, frac = sample_estimate(parts, confidence=confidence)
        firsts = np.concatenate([plan.strata[s] for s in names])
        firsts = firsts[plan.r0[firsts] == 0]  # one unit per pair starts at row 0
        rows = sum(plan.pairs[i].n_rows for i in plan.pair[firsts].tolist())
        return DriftFigure(name, layer, comp, cos, rel, frac, sum(p.sampled for p in parts),
                           sum(p.total for p in parts), rows)

    by_stratum: dict[str, tuple[int | None, str]] = {}
    for p in plan.pairs:
        by_stratum[p.stratum] = (p.layer, p.component)
    rows = [figure(s, [s], *by_stratum[s]) for s in sorted(plan.strata, key=lambda s: _order(by_stratum[s]))]
    whole = figure("whole target", [s for s in plan.strata if s != DRAFT_LM_HEAD])

    def moved_of(name: str) -> tuple[int, ...]:
        ids = [moved_rows[i] for i, p in enumerate(plan.pairs) if p.stratum == name and i in moved_rows]
        return tuple(int(x) for x in np.unique(np.concatenate(ids))) if ids else ()

    emb = next((r for r in rows if r.name == EMBEDDING), None)
    draft = next((r for r in rows if r.name == DRAFT_LM_HEAD), None)
    emb_moved = moved_of(EMBEDDING)
    decoded = _decode(tokenizer, emb_moved[:50]) if tokenizer is not None and emb_moved else None
    feeds = _feeds(readings, by_stratum, figure)
    return DriftReport(
        a=src_a, b=src_b, mode=mode, confidence=confidence, budget=limit, where=where, tol=tol,
        strata=tuple(rows), whole=whole, embedding=emb, embedding_moved=emb_moved, embedding_decoded=decoded,
        draft_lm_head=draft, draft_moved=moved_of(DRAFT_LM_HEAD), feeds=feeds, aux_ids=aux,
        only_a=plan.only_a, only_b=plan.only_b, mismatched=plan.mismatched, bytes_read=read,
        bytes_total=(float(ckpts[0].inventory.total_bytes), float(ckpts[1].inventory.total_bytes)), seconds=seconds,
        hidden=states, drafter_misfit=misfit,
        not_finite=tuple((plan.pairs[p].key, n) for p, n in sorted((skipped or {}).items())))


def _order(key: tuple[int | None, str]) -> tuple:
    layer, comp = key
    head = {EMBEDDING: 0, DRAFT_LM_HEAD: 1, "lm_head": 2}.get(comp, 3)
    return (head, -1 if layer is None else layer, comp)


def _feeds(readings, by_stratum, figure) -> tuple[Feed, ...]:
    """The drift of the layers each engine release feeds the drafter (``readings`` from :func:`_readings`)."""
    layers = sorted({l for l, _ in by_stratum.values() if l is not None})
    out = []
    for engine, ids, outs in readings:
        for i, layer in zip(ids, outs):
            if layer < 0 or layer not in layers:
                out.append(Feed(engine, i, layer, None, None))
                continue
            # weight matrices only: a norm's weights sit near 1 and would outweigh matrices of a thin model
            own = [s for s, (l, c) in by_stratum.items() if l == layer and c != "norms"]
            upto = [s for s, (l, c) in by_stratum.items() if l is not None and l <= layer and c != "norms"]
            out.append(Feed(engine, i, layer, figure(f"layer {layer}", own, layer), figure(f"layers 0..{layer}", upto)))
    return tuple(out)


def _decode(tokenizer, ids: Sequence[int]) -> tuple[str, ...]:
    try:
        if hasattr(tokenizer, "convert_ids_to_tokens"):
            return tuple(str(t) for t in tokenizer.convert_ids_to_tokens(list(ids)))
        return tuple(str(tokenizer.decode([i])) for i in ids)
    except Exception as e:  # a user's tokenizer: say which failed, keep the figures
        raise InputError(f"the tokenizer could not decode token ids ({type(e).__name__}: {e}); pass one that "
                         "matches the targets' vocabulary, or none.") from e
