"""Accept length from the hidden states a training pipeline already wrote (no target run, no GPU).

``measure_dump(drafter, DIR, target_head=LOCATION)`` reads a SpecForge, speculators or Model-Optimizer
dump file by file (:mod:`eaglekit.io.dumps`), gets the target's greedy next tokens from each sample's
final hidden state through the target's own final norm and ``lm_head`` (read by range:
:mod:`~eaglekit.analysis.acceptance.head`), drafts every position with the drafter, and counts chains
inside greedy-consistent assistant spans (:mod:`~eaglekit.analysis.acceptance.spans`). The counts of
every file are kept apart and summed at the end in file order, so a run spread over a Dask cluster
(``scheduler``) gives exactly the single-process figures.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass
from typing import Any

import numpy as np
import torch

from eaglekit.analysis.draft import (
    DraftModel,
    hidden_state_indices,
    trained_convention,
)
from eaglekit.analysis.acceptance.dump_result import (
    DumpAcceptance,
    conventions,
    ratio_interval,
)
from eaglekit.analysis.acceptance.head import read_target_head
from eaglekit.analysis.acceptance.head import text_config as _text_config
from eaglekit.analysis.acceptance.measure import (
    AcceptanceResult,
    SampleStats,
    summarise,
    with_cached,
)
from eaglekit.analysis.acceptance.notes import collapse_note
from eaglekit.analysis.acceptance.tree import TreeConfig, check_attention, tree_configs, tree_sample_stats
from eaglekit.analysis.acceptance.trees import TreeAcceptance, summarise_tree
from eaglekit.analysis.acceptance.span_estimate import Request, estimate_requests
from eaglekit.analysis.acceptance.spans import greedy_spans, requests, span_stats
from eaglekit.core.configs.config import normalize_config
from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.configs.layers import default_aux_layers
from eaglekit.core.redact import shown
from eaglekit.core.records import register
from eaglekit.core.safejson import loads
from eaglekit.io.cache import cached_call
from eaglekit.io.dumps.detect import open_training_dump, read_sample
from eaglekit.io.dumps.files import MAX_POSITIONS, DumpFolder
from eaglekit.io.dumps.modelopt import RULES as _MODELOPT_RULES
from eaglekit.io.dumps.modelopt import hidden_state_indices as modelopt_indices
from eaglekit.io.dumps.record import DumpRecord, FinalNorm
from eaglekit.io.reader import load_config
from eaglekit.io.scheduler import dask_client

#: Most decoder layers a target config may declare (the largest models have about 100).
MAX_LAYERS = 1 << 16
#: Longest --loss-masks line read: ``"false, "`` (7 bytes) per position of the longest sample, and room for
#: the file name.
MAX_MASK_LINE = 8 * MAX_POSITIONS + (64 << 10)
#: Files per task sent to a Dask worker: one, so that any number of workers share even a small dump.
FILES_PER_TASK = 1


@dataclass(frozen=True)
class DumpTask:
    """What one worker needs to measure some files of a dump: names and options only (the weights are
    read by the worker itself, once per process)."""

    path: str
    format: str
    files: tuple[tuple[int, str], ...]   # (index in the dump, file name): only this task's, not the dump's list
    drafter: str
    head: str
    embeddings: str | None
    endpoint: str | None
    device: str
    dtype: str
    steps: int
    temperature: float
    normed: bool
    all_positions: bool
    masks: dict[str, tuple[int, ...]] | None = None
    timeout: float | None = None   # seconds per remote request (the caller's --timeout)
    trees: tuple[TreeConfig, ...] = ()   # tree drafts measured beside the chain
    tree_attention: str = "ancestors"
    version: str = ""   # the writer's version (Model-Optimizer's 2025 or 2026 layout)


@dataclass(frozen=True)
class FileStats:
    """One file's counts: its spans' statistics, assistant and consistent tokens, non-finite rows."""

    index: int
    name: str
    spans: tuple[SampleStats, ...]
    assistant: int
    consistent: int
    positions: int
    nonfinite_rows: int = 0
    masked_by: str = "loss_mask"
    trees: tuple = ()   # per tree configuration of the task: its spans' (SampleStats, left_first) counts
    requests: tuple[tuple[int, int], ...] = ()   # its assistant turns: (prefill token, last generated token)

    @property
    def skipped(self) -> bool:
        return self.nonfinite_rows > 0


#: Weights loaded in this process, by task options: a worker reads the drafter and the head once per run.
_LOADED: dict[tuple, Any] = {}


def _weights(task: DumpTask):
    key = (task.drafter, task.head, task.embeddings, task.endpoint, task.device, task.dtype)
    if key not in _LOADED:
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[task.dtype]
        cfg = normalize_config(load_config(task.drafter, kind="drafter", endpoint=task.endpoint, timeout=task.timeout),
                               source=str(task.drafter))
        # the head's declared shape is compared with the drafter's before a byte of it is read
        head = read_target_head(task.head, device=task.device, dtype=dtype, endpoint=task.endpoint,
                                timeout=task.timeout, vocab_size=cfg.vocab_size, hidden_size=cfg.target_hidden_size)
        try:
            model = DraftModel.load(task.drafter, embeddings=task.embeddings or task.head, device=task.device,
                                    dtype=task.dtype, endpoint=task.endpoint, timeout=task.timeout)
            _check_fit(model, head)
        except BaseException:
            head.close()
            raise
        for _, old in _LOADED.values():
            old.close()   # a streamed head's checkpoint
        _LOADED.clear()
        _LOADED[key] = (model, head)
    return _LOADED[key]


def _check_fit(model, head) -> None:
    if head.vocab_size != model.config.vocab_size:
        raise VocabMapError(f"vocabulary mismatch: the target head {shown(head.source)} has {head.vocab_size} rows but "
                            f"the drafter's config says the target vocabulary has {model.config.vocab_size} tokens; "
                            "give the head of the drafter's target.")
    if head.hidden_size != model.target_hidden_size:
        raise InputError(f"hidden-size mismatch: the target head {shown(head.source)} is {head.hidden_size} wide, the "
                         f"drafter reads target hidden states of size {model.target_hidden_size}.")


def _check_record(rec: DumpRecord, model, head, where: str, dump_format: str = "", version: str = "") -> None:
    H = rec.hidden_size
    if H != model.target_hidden_size:
        raise InputError(f"{shown(where)}: hidden size {H} is another target's: the drafter reads hidden states of "
                         f"size {model.target_hidden_size}.")
    if rec.aux.shape[1] != model.n_aux * H:
        width = (f"{shown(where)}: aux hidden states are {rec.aux.shape[1]} wide = {rec.aux.shape[1] // H} layers x "
                 f"{H}, but the drafter's fc reads {model.n_aux} x {H}")
        raise InputError(width + (_modelopt_layers(model, head, version or "2025") if dump_format == "modelopt" else
                                  ": shapes inconsistent with the drafter (another layer count)."))
    if rec.length and (int(rec.input_ids.min()) < 0 or int(rec.input_ids.max()) >= head.vocab_size):
        bad = int(rec.input_ids.max()) if int(rec.input_ids.max()) >= head.vocab_size else int(rec.input_ids.min())
        raise VocabMapError(f"{shown(where)}: token id {bad} is outside the target's vocabulary "
                            f"(0..{head.vocab_size - 1}): the dump is from another tokenizer.")


def _modelopt_layers(model, head, version: str = "2025") -> str:
    """Why a Model-Optimizer dump holds another layer count: its writer's rule, what it stored, what the drafter reads."""
    L = head.num_hidden_layers
    rule = _MODELOPT_RULES[version]
    if not L:
        return f". Model-Optimizer's writer stores {rule}; the target head does not say L."
    stored = list(modelopt_indices(L, version))
    convention = trained_convention(model.config, model.layout)
    try:
        wanted = f"{list(model.aux_indices(convention, L))} ({convention} of its aux ids)"
    except InputError:
        wanted = f"{model.n_aux} layers"
    return (f". Model-Optimizer's compute_hidden_states_hf ({version} layout) stores {rule}: for this {L}-layer target "
            f"output_hidden_states {stored} ({len(stored)} layer{'s' * (len(stored) != 1)}), while the drafter "
            f"needs {wanted}. Dump the layers the drafter reads (eaglekit dump-hidden --for-drafter), or measure "
            "with --target.")


def run_task(task: DumpTask, hook: Callable[[int], None] | None = None) -> list[FileStats]:
    """Measure the files ``task.files`` (in this process or on a Dask worker)."""
    model, head = _weights(task)
    out = []
    columns = model.draft_to_target.cpu()
    for i, name in task.files:
        if hook is not None:
            hook(i)
        rec = read_sample(task.path, task.format, name)
        where = os.path.join(task.path, rec.name)
        _check_record(rec, model, head, where, task.format, task.version)
        T, H = rec.length, rec.hidden_size
        finite = torch.isfinite(rec.aux).all(-1) & torch.isfinite(rec.final).all(-1)      # (T,)
        bad = int((~finite).sum())
        if bad:
            out.append(FileStats(i, rec.name, (), 0, 0, T, bad))
            continue
        target_ids, probs = head.next_tokens(rec.final, normed=task.normed, temperature=task.temperature,
                                             columns=columns)
        assistant, by = _assistant(rec, task)
        spans, n_asst, n_ok = greedy_spans(rec.input_ids, target_ids, assistant)
        turns = tuple(requests(rec.input_ids, target_ids, assistant))
        aux = rec.aux.reshape(T, model.n_aux, H).permute(1, 0, 2)                        # (n_aux, T, H)
        stats = span_stats(model, aux, rec.input_ids, target_ids, spans, steps=task.steps,
                           temperature=task.temperature, target_probs=probs, assistant=assistant)
        trees = ()
        if task.trees:
            got = tree_sample_stats(model, aux, rec.input_ids, target_ids, None, task.trees,
                                    attention=task.tree_attention, spans=spans)
            trees = tuple(tuple(got[c]) for c in task.trees)
        out.append(FileStats(i, rec.name, tuple(stats), n_asst, n_ok, T, 0, by, trees, turns))
    return out


def _assistant(rec: DumpRecord, task: DumpTask):
    T = rec.length
    if task.all_positions:
        return torch.ones(T, dtype=torch.bool), "all positions"
    if task.masks is not None:
        if rec.name not in task.masks:
            raise InputError(f"--loss-masks has no line for {shown(rec.name)}; give every sample's mask "
                             "(or drop --loss-masks).")
        m = torch.tensor(task.masks[rec.name], dtype=torch.bool)
        if m.shape != (T,):
            raise InputError(f"--loss-masks gives {m.shape[0]} values for {shown(rec.name)}, which has {T} tokens.")
        return m, "--loss-masks"
    if rec.loss_mask is not None:
        return rec.loss_mask, "loss_mask"
    return torch.ones(T, dtype=torch.bool), "all positions (the format stores no loss mask)"


# -- running the tasks ---------------------------------------------------------------------------------
def _run(tasks: list[DumpTask], scheduler: Any, progress: bool | None, total_files: int, hook, *,
         timeout: float | None = None) -> tuple[list[FileStats], str]:
    from tqdm.auto import tqdm

    results: list[FileStats] = []
    # progress None: a bar on a terminal only (tqdm's own test), so a failing run still prints one line
    bar = tqdm(total=total_files, desc="acceptance (dump)", unit="file", leave=False,
               disable=None if progress is None else not progress)
    positions = 0

    def done(stats: list[FileStats]) -> None:
        nonlocal positions
        results.extend(stats)
        positions += sum(s.positions for s in stats)
        bar.update(len(stats))
        bar.set_postfix(positions=positions, refresh=False)

    try:
        with bar:
            if scheduler is None:
                for t in tasks:
                    done(run_task(t, hook))
                where = "this process"
            else:
                where = _run_dask(tasks, scheduler, hook, done, timeout=timeout)
    finally:
        # The weights stay loaded across one run's tasks only: a notebook would otherwise keep a 1T target's
        # lm_head (2.3 GB for Kimi-K2) after the result is back. Workers in other processes keep theirs.
        _LOADED.clear()
    return sorted(results, key=lambda s: s.index), where


def _run_dask(tasks: list[DumpTask], scheduler: Any, hook, done, *, timeout: float | None = None) -> str:
    """Submit every task to a Dask cluster; a lost worker's tasks are run again by Dask (counts are per
    file, so a re-run changes nothing)."""
    from distributed import KilledWorker, as_completed  # heavy: only on a cluster

    with dask_client(scheduler, timeout=timeout) as client:
        run = uuid.uuid4().hex[:12]
        futures = {client.submit(run_task, t, hook, key=f"eaglekit-acceptance-{run}-{k}", pure=False): t
                   for k, t in enumerate(tasks)}
        for fut in as_completed(futures):
            try:
                done(fut.result())
            except KilledWorker as e:   # Dask retried it on other workers already; they died too
                names = ", ".join(name for _, name in futures[fut].files)
                raise InputError(f"Dask workers died on every try of {shown(names)} (out of memory? each worker "
                                 "holds the drafter, the target head and one sample): give workers more memory.") from e
        workers = len(client.scheduler_info().get("workers", {}))
    named = f" at {shown(scheduler)}" if isinstance(scheduler, str) and scheduler != "local" else ""
    return f"a Dask cluster{named} ({workers} worker{'s' * (workers != 1)})"


# -- the measurement -------------------------------------------------------------------------------------
register(DumpAcceptance)


def measure_dump(drafter: str | os.PathLike[str], hidden_states: str | os.PathLike[str], *, target_head: str,
                 dump_format: str | None = None, steps: int = 5, temperature: float = 0.0,
                 aux_layers: Sequence[int] | None = None, final_norm: FinalNorm | None = None,
                 all_positions: bool = False, loss_masks: str | os.PathLike[str] | None = None,
                 limit: int | None = None, sample: int | None = None, seed: int = 0, scheduler: Any = None,
                 device: str = "cpu", dtype: str = "float32", embeddings: str | None = None,
                 endpoint: str | None = None, timeout: float | None = None, progress: bool | None = None,
                 hook: Callable[[int], None] | None = None, trees=None, tree_attention: str = "ancestors",
                 cache: bool | str = True, cache_dir=None):
    """Measure ``drafter`` on a training pipeline's hidden-state dump folder ``hidden_states``.

    ``target_head``: the target checkpoint its final norm and ``lm_head`` are read from (by range).
    ``aux_layers``: the layer ids the dump's aux hidden states hold, in the drafter's convention
    (default: the drafter's config; reported). ``final_norm``: where the dump's final hidden state sits
    (default: what the format's writer does). ``limit`` / ``sample`` + ``seed``: the first N files, or N
    files drawn at random (with a 95% interval). ``scheduler``: a Dask address or ``distributed.Client``.
    ``trees`` (``"S:K:N,..."`` or configurations): tree drafts too, in the same spans; the result is then a
    :class:`~eaglekit.analysis.acceptance.trees.TreeAcceptance` holding this one (greedy only).
    ``cache``/``cache_dir``: the result cache, as for ``measure_acceptance`` (local files only; a run on a Dask
    ``scheduler`` or with a ``hook`` is measured and not cached).
    """
    options = dict(dump_format=dump_format, steps=steps, temperature=temperature, aux_layers=aux_layers,
                   final_norm=final_norm, all_positions=all_positions, loss_masks=loss_masks, limit=limit,
                   sample=sample, seed=seed, scheduler=scheduler, device=device, dtype=dtype, embeddings=embeddings,
                   endpoint=endpoint, timeout=timeout, progress=progress, hook=hook, trees=trees,
                   tree_attention=tree_attention)

    def parts(store):
        digest = {name: None if options[name] is None else store.location_digest(options[name])
                  for name in ("embeddings", "loss_masks")}
        configs = [list(astuple(c)) for c in tree_configs(trees)] if trees is not None else None
        return {"names": [str(drafter), str(hidden_states), str(target_head)],  # the answer shows them
                "drafter": store.location_digest(drafter), "hidden_states": store.location_digest(hidden_states),
                "target_head": store.location_digest(target_head), **digest, "trees": configs,
                "aux_layers": None if aux_layers is None else list(aux_layers),
                **{k: v for k, v in options.items() if k not in {"embeddings", "loss_masks", "trees", "aux_layers",
                                                                  "endpoint", "timeout", "progress", "hook",
                                                                  "scheduler"}}}
    return cached_call("dump", DUMP_CODE_VERSION, None if scheduler is not None or hook is not None else parts,
                       lambda: _measure_dump(drafter, hidden_states, target_head=target_head, **options),
                       cache=cache, cache_dir=cache_dir, stamp=with_cached)


#: the version of the dump-reading code a cached answer was computed by (bump with any change to what it computes)
DUMP_CODE_VERSION = 2   # 2: results keep their spans' cycle positions (cycle_log)


def _measure_dump(drafter, hidden_states, *, target_head, dump_format, steps, temperature, aux_layers, final_norm,
                  all_positions, loss_masks, limit, sample, seed, scheduler, device, dtype, embeddings, endpoint,
                  timeout, progress, hook, trees, tree_attention):
    """The measurement itself (:func:`measure_dump`, uncached)."""
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= 64:
        raise InputError(f"steps must be an integer from 1 to 64, got {steps!r}.")
    if not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise InputError(f"temperature must be >= 0, got {temperature!r}.")
    if final_norm not in (None, "before-norm", "after-norm"):
        raise InputError(f"final norm must be 'before-norm' or 'after-norm', got {final_norm!r}.")
    if limit is not None and sample is not None:
        raise InputError("give --limit N (the first N files) or --sample N (N at random), not both.")
    for name, v in (("limit", limit), ("sample", sample)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise InputError(f"--{name} must be a positive integer, got {v!r}.")
    if dtype not in ("float32", "bfloat16"):
        raise InputError(f"dtype must be float32 or bfloat16, got {dtype!r}.")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 1 << 32:
        raise InputError(f"--seed must be a whole number from 0 to {(1 << 32) - 1}, got {seed!r}.")
    configs = tree_configs(trees) if trees is not None else ()
    if configs:
        check_attention(tree_attention)
        if temperature > 0:
            raise InputError("tree drafts on a training pipeline's dump are measured greedy: the engines' tree sampling "
                             "needs the target's full distributions (use --target), or drop --temperature.")
    dump = open_training_dump(hidden_states, format=dump_format)
    norm = final_norm or dump.final_norm
    masks = _read_masks(loss_masks) if loss_masks is not None else None

    cfg = normalize_config(load_config(drafter, kind="drafter", endpoint=endpoint, timeout=timeout), source=str(drafter))
    convention = trained_convention(cfg)
    if aux_layers is not None and cfg.aux_layer_ids and len(aux_layers) != len(cfg.aux_layer_ids):
        raise InputError(f"--aux-layers names {len(aux_layers)} layers but the drafter reads {len(cfg.aux_layer_ids)} "
                         f"({list(cfg.aux_layer_ids)}); give one id per aux hidden state in the dump.")
    num_layers = _text_config(load_config(target_head, endpoint=endpoint, timeout=timeout)).get("num_hidden_layers")
    num_layers = num_layers if isinstance(num_layers, int) and not isinstance(num_layers, bool) \
        and 0 < num_layers <= MAX_LAYERS else None
    if aux_layers is not None:
        _check_aux_layers(aux_layers, convention, num_layers, target_head)
    n = len(dump)
    if sample is not None:
        chosen = sorted(np.random.default_rng(seed).choice(n, min(sample, n), replace=False).tolist())
    else:
        chosen = list(range(min(limit, n) if limit is not None else n))
    tasks = []
    for k in range(0, len(chosen), FILES_PER_TASK):
        files = tuple((i, dump.files[i]) for i in chosen[k:k + FILES_PER_TASK])
        own = None if masks is None else {n: masks[n] for _, n in files if n in masks}   # this task's masks only
        tasks.append(DumpTask(dump.path, dump.format, files, str(drafter), str(target_head),
                              None if embeddings is None else str(embeddings), endpoint, device, dtype, steps,
                              float(temperature), norm == "after-norm", all_positions, own, timeout, configs,
                              tree_attention, dump.version))
    files, where = _run(tasks, scheduler, progress, len(chosen), hook, timeout=timeout)

    ids = tuple(aux_layers) if aux_layers is not None else (cfg.aux_layer_ids or (
        default_aux_layers(num_layers, convention=convention) if num_layers else ()))
    notes = _notes(dump, files, ids, cfg.aux_layer_ids, aux_layers is not None, convention, num_layers, norm,
                   final_norm is not None, all_positions, masks is not None)
    result = _result(dump, files, str(drafter), str(target_head), steps, float(temperature), ids, convention, norm,
                     notes, where, n, sample is not None)
    if not configs:
        return result
    measured = [f for f in files if not f.skipped]
    return TreeAcceptance(result, tree_attention, tuple(
        summarise_tree(c, [x for f in measured for x in f.trees[k]], seed=seed) for k, c in enumerate(configs)))


def _check_aux_layers(ids: Sequence[int], convention, num_layers: int | None, target_head) -> None:
    """--aux-layers: whole numbers naming layers the target has (0..L-1, in either convention)."""
    limit = num_layers if num_layers is not None else MAX_LAYERS
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise InputError(f"--aux-layers: {shown(str(i)[:40])} is not a layer id (a whole number >= 0).")
    bad = [i for i in ids if i >= limit]
    if bad:
        whose = f"the target {shown(str(target_head))} has {num_layers} layers" if num_layers is not None else \
            f"no target has more than {MAX_LAYERS:,} layers"
        raise InputError(f"--aux-layers names layer {shown(str(bad[0])[:40])}, but {whose} (ids 0..{limit - 1} in "
                         f"the drafter's {convention} convention); give the layers the dump holds.")


def _read_masks(path) -> dict[str, tuple[int, ...]]:
    """--loss-masks: JSON lines ``{"file": NAME, "loss_mask": [0, 1, ...]}`` (or ``"assistant_start": P``
    with ``"length": T``), read through the dump guards (size-checked, bounded JSON)."""
    p = os.path.expanduser(os.fspath(path))
    folder = DumpFolder(os.path.dirname(p) or ".")
    raw = folder.read_small(os.path.basename(p), 256 * 1024 * 1024)
    if raw is None:
        raise InputError(f"--loss-masks {shown(p)}: no such file.")
    out: dict[str, tuple[int, ...]] = {}
    for k, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_MASK_LINE:  # before parsing: a 250 MB line would become ~83M objects
            raise InputError(f"{shown(p)} line {k} is {len(line):,} bytes, more than a loss mask of "
                             f"{MAX_POSITIONS:,} positions takes ({MAX_MASK_LINE:,}); refusing it.")
        obj = loads(line, what=f"{p} line {k}", error=InputError)
        if not isinstance(obj, dict) or not isinstance(obj.get("file"), str):
            raise InputError(f"{shown(p)} line {k}: expected an object with \"file\" and \"loss_mask\".")
        mask = obj.get("loss_mask")
        start, length = obj.get("assistant_start"), obj.get("length")
        if mask is None and start is not None:
            if not (type(start) is int and type(length) is int and 0 <= start <= length <= MAX_POSITIONS):
                raise InputError(f"{shown(p)} line {k}: \"assistant_start\" and \"length\" must be whole numbers with "
                                 f"0 <= assistant_start <= length <= {MAX_POSITIONS:,}.")
            mask = [0] * start + [1] * (length - start)
        if isinstance(mask, list) and len(mask) > MAX_POSITIONS:
            raise InputError(f"{shown(p)} line {k}: a loss mask of {len(mask):,} positions, more than any sample holds "
                             f"({MAX_POSITIONS:,}).")
        if not isinstance(mask, list) or not all(v in (0, 1, True, False) for v in mask):
            raise InputError(f"{shown(p)} line {k}: \"loss_mask\" must be a list of 0/1.")
        out[obj["file"]] = tuple(int(v) for v in mask)
    return out


def _notes(dump, files, ids, config_ids, given, convention, num_layers, norm, norm_given, all_positions,
           masks_given) -> list[str]:
    notes = []
    skipped = [f for f in files if f.skipped]
    if skipped:
        rows = sum(f.nonfinite_rows for f in skipped)
        notes.append(f"{len(skipped)} of {len(files)} samples skipped: {rows} positions hold NaN/Inf hidden states "
                     "(SpecForge skips such samples too).")
    if given and config_ids and tuple(ids) != tuple(config_ids):
        notes.append(f"the dump's aux layers are {list(ids)} ({convention}) but the drafter was trained on "
                     f"{list(config_ids)}: this measures the drafter on other features than it expects.")
    if dump.format == "modelopt" and num_layers:
        written = modelopt_indices(num_layers, dump.version or "2025")
        wanted = tuple(i + (1 if convention == "outputs" else 0) for i in ids)
        if tuple(written) != wanted:
            notes.append(f"Model-Optimizer's writer stores output_hidden_states {list(written)} for a {num_layers}-layer "
                         f"target, the drafter reads {list(wanted)}: check that this dump was written for it.")
    if not given:
        notes.append("the dump does not record its aux layer ids: assumed to be the drafter's own (--aux-layers to say).")
    if not norm_given:
        notes.append(f"final hidden state taken as {norm} ({dump.writer}'s writer; --final-norm to override).")
    if not all_positions and not masks_given and not dump.has_loss_mask:
        notes.append(f"{dump.format} dumps store no loss mask: every position counts as assistant text "
                     "(--loss-masks FILE to select the assistant tokens).")
    return notes


def _result(dump, files: list[FileStats], drafter: str, head: str, steps: int, temperature: float, ids, convention,
            norm, notes, where, total_files: int, sampled: bool) -> DumpAcceptance:
    measured = [f for f in files if not f.skipped]
    if not measured:
        raise InputError(f"{shown(dump.path)}: every sample read holds NaN/Inf hidden states "
                         f"({sum(f.nonfinite_rows for f in files)} positions); nothing to measure.")
    spans = [s for f in measured for s in f.spans]
    if not spans:
        raise InputError(f"{shown(dump.path)}: no assistant token follows the target's greedy choice (coverage 0%), so "
                         "no cycle can be evaluated; is --target-head this dump's target, and --final-norm right?")
    # per-step acceptance (and at temperature > 0 the expected acceptance) over every compared position
    main = summarise(spans, steps=steps, groups=[f.index for f in measured for _ in f.spans], unit="samples")
    # the accept length: --target's cycle simulation over each assistant turn, what the text cannot show completed
    est = estimate_requests(_requests(measured), steps)
    expected = (estimate_requests(_requests(measured), steps, soft=True).interval.value
                if main["expected_accept_length"] is not None else None)
    counts = est.request_counts
    generated = sum(g for g, _ in counts)
    cycles = sum(c for _, c in counts)
    exact = all(float(c).is_integer() for _, c in counts)
    asst = sum(f.assistant for f in measured)
    ok = sum(f.consistent for f in measured)
    conditioned = tuple(int(x) for x in np.sum([s.conditioned for s in spans], axis=0))
    notes = notes + _span_notes(spans, est, steps)
    result = AcceptanceResult(
        drafter=drafter, target=head, source="hidden-states", steps=steps, temperature=temperature,
        prompts=len(counts), generated_tokens=generated, cycles=int(round(cycles)) if exact else cycles,
        accept_length=est.interval.value, per_step_acceptance=main["per_step_acceptance"],
        accept_length_by_steps=tuple(i.value for i in est.by_steps), aux_convention=convention,
        aux_indices=hidden_state_indices(ids, convention) if ids else (),
        accept_length_by_convention={convention: est.interval.value},
        per_prompt_accept_length=tuple(g / c if c else None for g, c in counts),
        expected_acceptance=main["expected_acceptance"],
        expected_accept_length=expected, accept_length_interval=est.interval,
        prompt_counts=counts, accept_length_by_steps_interval=est.by_steps,
        positions=sum(f.positions for f in measured), notes=tuple(notes + _collapse(main, conditioned)),
        estimator=est.estimator, cycle_log=main["cycle_log"])
    conv = conventions(counts, est.per_position, steps=steps, per_step=main["per_step_acceptance"])
    interval = ratio_interval(list(counts), population=total_files) if sampled else None
    return DumpAcceptance(result=result, dump=dump.path, format=dump.format, writer=dump.writer, final_norm=norm,
                          aux_layers=tuple(ids), files_total=total_files, files_read=len(files),
                          files_skipped=len(files) - len(measured),
                          nonfinite_rows=sum(f.nonfinite_rows for f in files), assistant_tokens=asst,
                          consistent_tokens=ok, spans=len(spans), sampled=sampled, interval=interval,
                          where=where, masked_by=measured[0].masked_by, **conv)


def _requests(measured: Sequence[FileStats]) -> list[Request]:
    """Every sample's assistant turns as requests, each with the spans inside it."""
    out = []
    for f in measured:
        for start, end in f.requests:
            out.append(Request(f.index, start, end, tuple(s for s in f.spans if start <= s.base + 1 <= end)))
    return out


def _span_notes(spans: Sequence[SampleStats], est, steps: int) -> list[str]:
    """Say how the text's departures from the target's choice were handled (nothing on greedy text)."""
    cut = sum(1 for s in spans if s.open_end)
    after = sum(1 for s in spans if s.open_start)
    if not est.completed_share:
        return []
    out = [f"{cut} of {len(spans)} spans stop where the text departs from the target's choice inside an assistant "
           f"turn, {after} start right after a departure: the accept length is {est.estimator}; "
           f"{est.completed_share:.0%} of the draft acceptances at K = {steps} were completed that way. Each assistant "
           "turn is one request."]
    if est.unmeasured_steps:
        out.append(f"no position could compare draft step{'s' * (len(est.unmeasured_steps) > 1)} "
                   f"{', '.join(map(str, est.unmeasured_steps))} (every span is shorter): counted as rejected, so the "
                   "accept length is a lower bound.")
    return out


def _collapse(main: dict, conditioned: Sequence[int]) -> list[str]:
    """The collapse note ``measure_acceptance`` gives, for the dump path too (none from a handful of positions)."""
    note = collapse_note(main["per_step_acceptance"], counts=conditioned)
    return [note] if note else []
