"""The warm-start checkpoint: write a drafter that a trainer or an engine loads, from another one.

:func:`export` reads a drafter (any location) and writes a new folder with ``model.safetensors`` and
``config.json``:

* layout converted: SpecForge names (``midlayer.*``, ``LlamaForCausalLMEagle3`` config) or speculators
  names (``layers.0.*``, ``Eagle3Speculator`` config with every field speculators writes);
* lm_head rows re-aligned to a new vocabulary map by target token: row j of the new head is the old
  row that predicted the same target token, or, for a token the old drafter never had, the target's
  lm_head row for it (read by byte range); d2t/t2d are the new map's;
* embed_tokens taken from the target when asked;
* aux ids rewritten for an engine (``engine="vllm"``, ``"sglang"`` or a release, ``"sglang==0.5.9"``) so
  that its newest known release (or the one named) feeds the tensors
  training used; the config's ``eaglekit_export`` block says how its ids are meant and records the
  provenance in words.

MLA drafters (``Eagle3DeepseekV2ForCausalLM`` and its aliases, dense or MoE MLP) export too, in their own
layout only: tensors keep their MLA/MoE names under ``midlayer.`` (TorchSpec's native layout, which SGLang
loads and vLLM maps to ``layers.0.`` itself), and the config is the source's own with the draft vocabulary
size, the aux ids and the ``eaglekit_export`` block rewritten (an architecture name neither engine registers,
SpecForge's ``DeepseekV3ForCausalLMEagle3``, becomes ``Eagle3DeepseekV2ForCausalLM``). The speculators format
has no MLA layer config, so ``format="speculators"`` refuses an MLA drafter. A full-vocabulary drafter (no
d2t/t2d) stays one unless ``vocab_map`` is given: then its lm_head rows are picked by target token (row t of
a full head drafts token t), which is how a reduced-vocabulary drafter is cut from a full one.

Streamed: tensor bytes go from the source to the new file chunk by chunk (lm_head in runs of rows),
never a whole drafter in memory. Writes only into ``out``: the files are built in a temporary folder
beside it and renamed into place at the end, so an error leaves nothing behind. ``out`` must be a new or
empty folder (not ``.``/``..``, the current folder or one above it, nor a symbolic link); ``force``
replaces only an earlier export (a folder holding just its config.json, with the ``eaglekit_export``
block, and model.safetensors).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eaglekit.core.checkpoint.header import encode_header
from eaglekit.core.checkpoint.names import normalize_name
from eaglekit.core.checkpoint.tensors import to_torch, torch_dtype
from eaglekit.core.configs.aux_view import layer_names
from eaglekit.analysis.compat.check import ENGINE_ARCHITECTURES, MLA_ENGINE_ARCHITECTURE
from eaglekit.core.configs.config import AUX_IDS_KEY, DrafterConfig, normalize_config
from eaglekit.core.configs.engine_readings import (
    LAST_KNOWN_OLD,
    ids_selecting,
    parse_engine,
)
from eaglekit.core.configs.layers import READER_CONVENTION, check_engine, layout_of
from eaglekit.core.errors import ConfigError, InputError, VocabMapError
from eaglekit.core.render import format_bytes, kv_html, kv_text
from eaglekit.core.safejson import loads
from eaglekit.core.tokens.vocab import check_vocab_map, target_ids
from eaglekit.io.drafter import (
    embedding_of,
    lm_head_of,
    open_target,
    read_map,
    target_rows,
)
from eaglekit.io.reader import open_checkpoint, opened
from eaglekit.io.tokens.vocabmap import read_map_file

ExportFormat = Literal["specforge", "speculators"]
FORMATS: tuple[ExportFormat, ...] = ("specforge", "speculators")
#: Rows of lm_head read per request when re-aligning (bounds memory: 4096 x hidden x 2 bytes).
RUN_ROWS = 4096
#: Every top-level field speculators' Eagle3SpeculatorConfig writes (its pydantic fields plus the
#: PretrainedConfig ones), checked against vllm-project/speculators src/speculators/models/eagle3/config.py
#: and src/speculators/config.py.
SPECULATORS_EAGLE3_FIELDS = (
    "architectures", "speculators_model_type", "speculators_version", "speculators_config",
    "transformer_layer_config", "draft_vocab_size", "norm_before_residual", "target_hidden_size",
    "eagle_aux_hidden_state_layer_ids", "norm_before_fc", "fc_norm", "norm_output", "embed_requires_grad",
    "dtype", "transformers_version",
)
#: The proposal method fields speculators writes (speculators/proposals/greedy.py).
GREEDY_PROPOSAL_FIELDS = ("proposal_type", "speculative_tokens", "verifier_accept_k", "accept_tolerance")
#: The layout version the speculators config follows.
SPECULATORS_LAYOUT_VERSION = "0.9.0"


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export` wrote."""

    out: Path
    format: ExportFormat
    source: str
    tensors: int
    nbytes: int
    aux_layer_ids: tuple[int, ...] | None
    aux_ids_read_as: str
    engine: str | None
    rows_kept: int | None = None
    rows_from_target: int | None = None
    embed_from_target: bool = False
    note: str = ""
    config: dict = field(default_factory=dict, repr=False)
    aux_note: str = ""  # what the written ids mean per engine release, and any assumption made

    def to_json(self) -> dict:
        return {"out": str(self.out), "format": self.format, "source": self.source, "tensors": self.tensors,
                "bytes": self.nbytes, "aux_layer_ids": None if self.aux_layer_ids is None else list(self.aux_layer_ids),
                "aux_ids_read_as": self.aux_ids_read_as, "engine": self.engine, "rows_kept": self.rows_kept,
                "rows_from_target": self.rows_from_target, "embed_from_target": self.embed_from_target,
                "aux_note": self.aux_note, "note": self.note}

    def _pairs(self) -> list[tuple[str, Any]]:
        pairs = [("written to", str(self.out)), ("format", self.format), ("from", self.source),
                 ("tensors", f"{self.tensors} ({format_bytes(self.nbytes)})"),
                 ("aux ids", f"{None if self.aux_layer_ids is None else list(self.aux_layer_ids)} "
                             + ("(meaning ambiguous, as in the source)" if self.aux_ids_read_as == "ambiguous" else
                                f"(read as {self.aux_ids_read_as}" + (f", for {self.engine})" if self.engine else ")")))]
        if self.aux_note:
            pairs.append(("aux ids mean", self.aux_note))
        if self.rows_kept is not None:
            pairs.append(("lm_head rows", f"{self.rows_kept} carried by target token, {self.rows_from_target} from "
                                          "the target's lm_head"))
        if self.embed_from_target:
            pairs.append(("embed_tokens", "the target's"))
        pairs.append(("note", self.note))
        return pairs

    def __str__(self) -> str:
        return kv_text(self._pairs(), title=f"Exported warm-start drafter: {self.out}")

    def _repr_html_(self) -> str:
        return kv_html(self._pairs(), caption=f"Exported warm-start drafter: {self.out}")


def export(drafter, out: str | os.PathLike[str], *, target=None, vocab_map=None, format: ExportFormat = "specforge",
           engine: str | None = None, embed_from_target: bool = False, force: bool = False,
           endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None, progress: bool | None = None) -> ExportResult:
    """Write a warm-start drafter from ``drafter`` into the folder ``out`` (see the module docstring).

    ``vocab_map``: a safetensors file holding d2t/t2d (what SpecForge's vocab mapping or speculators'
    build_vocab_mapping writes) or another drafter's location. ``target``: the target's location, needed
    for rows of new tokens and for ``embed_from_target``. ``engine``: rewrite aux ids for it.
    """

    if format not in FORMATS:
        raise InputError(f"Unknown export format {format!r}: expected one of {', '.join(FORMATS)}.")
    check_engine(engine)
    out = Path(out).expanduser()
    _check_out(out, force, [drafter, target])
    if embed_from_target and target is None:
        raise InputError("--embed-from-target needs --target T: the target's embedding is copied from there.")

    with opened(drafter, endpoint=endpoint, timeout=timeout, token=token) as ck:
        if ck.inventory.config is None:
            raise ConfigError(f"{ck.location.raw} has no config.json: export needs the drafter's config.")
        cfg = normalize_config(ck.inventory.config, source=f"{ck.location.raw}/config.json").for_layout(
            layout_of(ck.inventory.names))  # the layout rule check and acceptance apply: one reading everywhere
        if cfg.attention == "mla" and format == "speculators":
            raise InputError(f"{ck.location.raw} is an MLA drafter ({cfg.architecture}): the speculators format has no "
                             "MLA layer config (its transformer_layer_config is a Llama or Qwen3 layer). Export it with "
                             "--format specforge: midlayer.* names, which SGLang loads and vLLM maps to layers.0.* "
                             "itself.")
        tck = None
        try:
            if target is not None:
                tck, _ = open_target(target, endpoint=endpoint, timeout=timeout, token=token)
            old = _maps(ck)
            plan = None
            new = old
            if vocab_map is not None:
                new = _load_map(vocab_map, cfg, endpoint=endpoint, timeout=timeout, token=token)
                plan = _row_plan(old if old is not None or not cfg.full_vocabulary else _identity(cfg), new)
                if any(src == "target" for src, _ in plan) or embed_from_target:
                    _need_target_rows(tck, target, cfg, plan, embed_from_target)
            elif embed_from_target:
                _need_target_rows(tck, target, cfg, [], embed_from_target)
            architecture = _target_architecture(cfg, tck)
            ids, read_as, aux_note = _aux_ids(cfg, engine, architecture)
            return _write(ck, tck, cfg, out, format=format, plan=plan, new_map=new, ids=ids, read_as=read_as,
                          aux_note=aux_note,
                          engine=engine, embed_from_target=embed_from_target, force=force, progress=progress,
                          vocab_map=vocab_map, target=target)
        finally:
            if tck is not None:
                tck.close()


#: The files an export holds; a folder with exactly these, whose config carries ``eaglekit_export``, is an
#: earlier export (the only kind of non-empty folder ``force`` replaces).
EXPORT_FILES = frozenset({"config.json", "model.safetensors"})


def _check_out(out: Path, force: bool, sources: list) -> None:
    if out.name in ("", ".", ".."):
        raise InputError(f"--out {out} names a folder by '.' or '..'; give the new folder's own name, e.g. "
                         f"--out {out}/exported.")
    if out.is_symlink():
        raise InputError(f"{out} is a symbolic link; give the real folder's path or a new folder for the export.")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file; give a folder for the exported drafter.")
    if not out.parent.is_dir():
        raise InputError(f"{out.parent} does not exist: create it, or give --out inside an existing folder.")
    resolved = out.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise InputError(f"{out} is the current folder or one above it; give a new folder for the export.")
    for src in sources:
        if isinstance(src, (str, os.PathLike)) and "://" not in str(src) and os.path.exists(src):
            folder = Path(src).resolve()
            folder = folder if folder.is_dir() else folder.parent
            if resolved == folder or folder in resolved.parents or resolved in folder.parents:
                raise InputError(f"{out} is, holds or sits inside the input folder {folder}; eaglekit never writes into "
                                 "a model's folder: give another --out.")
    if out.exists() and any(out.iterdir()):
        if not is_export(out):
            raise InputError(f"{out} is not empty and is not an earlier eaglekit export; eaglekit replaces only its own "
                             "exports: give an empty or new folder.")
        if not force:
            raise InputError(f"{out} is not empty (an earlier eaglekit export); give an empty or new folder, or --force "
                             "to replace it.")


def is_export(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier export and nothing else: only :data:`EXPORT_FILES`, plain files,
    and a config.json with the ``eaglekit_export`` block export writes."""
    try:
        entries = list(folder.iterdir())
        if not entries or {e.name for e in entries} - EXPORT_FILES or \
                any(e.is_symlink() or not e.is_file() for e in entries):
            return False
        config = folder / "config.json"
        if not config.is_file() or config.stat().st_size > 1 << 20:
            return False
        data = loads(config.read_bytes(), what=str(config), error=ConfigError)
    except (OSError, ConfigError):
        return False
    return isinstance(data, dict) and isinstance(data.get("eaglekit_export"), dict)


def _maps(ck):
    """d2t and t2d by byte range, bounded by compat's map limit; None when the checkpoint has no d2t."""

    d2t = read_map(ck, "d2t")
    return None if d2t is None else (d2t, read_map(ck, "t2d"))


def _load_map(location, cfg: DrafterConfig, *, endpoint, timeout, token):

    if isinstance(location, (str, os.PathLike)) and str(location).endswith(".pt"):
        maps = read_map_file(location)  # SpecForge's torch.save({"d2t", "t2d"}), weights_only
    else:
        with open_checkpoint(location, endpoint=endpoint, timeout=timeout, token=token) as mk:
            maps = _maps(mk)
    if maps is None or maps[1] is None:
        raise VocabMapError(f"{location} holds no d2t and t2d tensors: give the vocabulary map file a trainer wrote "
                            "(d2t int64 [N], t2d bool [vocab]) or a drafter that has them.")
    d2t, t2d = maps
    if t2d.shape[0] != cfg.vocab_size:
        raise VocabMapError(f"{location} maps a vocabulary of {t2d.shape[0]:,} tokens but the drafter's target has "
                            f"{cfg.vocab_size:,}: it belongs to another tokenizer.")
    check = check_vocab_map(d2t, t2d, vocab_size=cfg.vocab_size, name=str(location))
    if not check.valid:
        raise VocabMapError(f"The vocabulary map {location} is invalid: {check.problems[0]}.")
    return d2t, t2d


def _identity(cfg: DrafterConfig):
    """The map of a full-vocabulary drafter (no d2t/t2d): draft id i is target id i over the vocabulary."""
    import numpy as np

    return np.zeros(cfg.vocab_size, np.int64), np.ones(cfg.vocab_size, np.bool_)


def _row_plan(old, new) -> list[tuple[str, int]]:
    """For each row of the new lm_head: ("old", row) carrying the old row of the same target token, or
    ("target", token) when the old drafter never had that token."""
    import numpy as np


    if old is None:
        raise VocabMapError("The drafter has no d2t: its lm_head rows cannot be matched to target tokens. Export "
                            "without --vocab-map, or fix the drafter's map first (eaglekit check).")
    old_t, new_t = target_ids(old[0]), target_ids(new[0])
    pos = np.searchsorted(old_t, new_t)  # old_t strictly increasing (a valid map)
    pos_c = np.minimum(pos, old_t.size - 1)
    hit = old_t[pos_c] == new_t
    return [("old", int(p)) if h else ("target", int(t)) for p, h, t in zip(pos_c, hit, new_t)]


def _need_target_rows(tck, target, cfg, plan, embed_from_target) -> None:
    """Refuse, before writing, an export whose new lm_head rows or embedding the target cannot give."""
    new_rows = sum(1 for s, _ in plan if s == "target")
    if new_rows:
        if target is None:
            raise InputError(f"{new_rows} tokens of the new vocabulary map are new to the drafter and their lm_head "
                             "rows are initialised from the target's lm_head: give --target T (a location with the "
                             "target's weights).")
        target_rows(tck, target, cfg, "lm_head", need=f"to initialise the {new_rows} tokens new to the drafter from")
    if embed_from_target:
        target_rows(tck, target, cfg, "embedding", need="to take the embedding from")


def _target_architecture(cfg: DrafterConfig, tck) -> str | None:
    """The target's architecture name (its config when given, else the one the drafter declares)."""
    archs = (tck.inventory.config or {}).get("architectures") if tck is not None else None
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return cfg.declared_target_architectures[0] if cfg.declared_target_architectures else None


def _aux_ids(cfg: DrafterConfig, engine: str | None,
             architecture: str | None) -> tuple[tuple[int, ...] | None, str, str]:
    """(ids to write, how they are meant, what they mean per engine release in words).

    Without an engine the ids stay as the trainer wrote them. With one, they are rewritten so that the
    engine's newest known release feeds the tensors training used (core/configs/aux_view.py); where the
    config leaves training ambiguous, the outputs of the ids as written are assumed (SpecForge's Hugging
    Face backend, and its SGLang backend up to 0.5.10) and the note says so; where no one id list serves
    two releases of the engine, the note says which ids the older one needs."""
    read_as = READER_CONVENTION[cfg.trained_by]
    if cfg.aux_layer_ids is None:
        return None, READER_CONVENTION[parse_engine(engine).engine] if engine else read_as, (
            "No aux ids: every engine release captures its default, the inputs of [2, L//2, L-3].")
    view = cfg.aux_view(None, engines=(engine or "sglang",), architecture=architecture)
    training = view.training
    trained = training.candidates[0].outputs_of
    parts = []
    if training.ambiguous:
        parts.append(f"The source config leaves its training ambiguous: {training.describe()}; the first was "
                     f"assumed (settle it with eaglekit acceptance --aux-convention outputs / inputs, or ask the "
                     f"publisher).")
    if engine is None:
        if training.ambiguous:  # kept as written, and not declared: the export stays as ambiguous as its source
            parts[0] = f"The source config leaves its training ambiguous: {training.describe()}; kept as written."
            return cfg.aux_layer_ids, "ambiguous", " ".join(parts)
        return cfg.aux_layer_ids, read_as, " ".join(parts)
    newest, *older = view.readings(parse_engine(engine).engine)
    ids = ids_selecting(newest.rule, trained, None)
    if ids is None:
        raise InputError(f"No aux ids make {newest.name} feed the outputs of layers {layer_names(trained)}, the tensors "
                         f"{cfg.source} was trained on; export for another engine or release (--engine "
                         f"{'sglang==' + LAST_KNOWN_OLD['sglang'] if newest.engine == 'sglang' else 'sglang'}).")
    parts.append(f"Written so that {newest.name} ({newest.releases}) feeds the outputs of layers {layer_names(trained)}.")
    for r in older:
        theirs = ids_selecting(r.rule, trained, None)
        if theirs != ids:
            parts.append(f"No one id list means the same under {newest.name} and {r.name} ({r.releases}): for the "
                         f"latter write {_show_ids(theirs)} (eaglekit export --engine {r.spec}).")
    return ids, "outputs" if tuple(ids) == tuple(trained) else "inputs", " ".join(parts)


def _show_ids(ids) -> str:
    return "no ids work" if ids is None else str(list(ids))


def _out_name(name: str, format: ExportFormat) -> str:
    n = normalize_name(name)
    return n.replace("midlayer.", "layers.0.", 1) if format == "speculators" and n.startswith("midlayer.") else n


def _write(ck, tck, cfg: DrafterConfig, out: Path, *, format, plan, new_map, ids, read_as, aux_note, engine,
           embed_from_target, force, progress, vocab_map, target) -> ExportResult:
    import numpy as np
    from tqdm.auto import tqdm


    jobs: dict[str, tuple[str, tuple[int, ...], Any]] = {}  # out name -> (dtype, shape, bytes iterator factory)
    for t in ck.inventory:
        n = normalize_name(t.name)
        if n in ("d2t", "t2d") or (n.startswith("embed_tokens.") and embed_from_target):
            continue
        if n == "lm_head.weight" and plan is not None:
            shape = (len(plan), t.shape[1])
            jobs[_out_name(n, format)] = (t.dtype, shape, lambda t=t: _lm_head_rows(ck, tck, t, plan))
        else:
            jobs[_out_name(n, format)] = (t.dtype, t.shape, lambda t=t: ck.iter_bytes(t.name))
    if embed_from_target:
        emb = embedding_of(tck.inventory)
        jobs["embed_tokens.weight"] = (emb.dtype, emb.shape, lambda: tck.iter_bytes(emb.name))
    if new_map is not None:
        d2t = np.ascontiguousarray(new_map[0], dtype="<i8")
        t2d = np.ascontiguousarray(new_map[1], dtype=np.bool_)
        jobs["d2t"] = ("I64", d2t.shape, lambda: iter([d2t.tobytes()]))
        jobs["t2d"] = ("BOOL", t2d.shape, lambda: iter([t2d.tobytes()]))

    kept = None if plan is None else sum(1 for s, _ in plan if s == "old")
    from_target = None if plan is None else len(plan) - kept
    draft_vocab = cfg.draft_vocab_size if plan is None else len(plan)
    note = _note(ck.location.raw, cfg, format, ids, read_as, aux_note, engine, kept, from_target, vocab_map,
                 embed_from_target, target)
    provenance = {"source": ck.location.raw, "source_format": cfg.format, "trained_by": cfg.trained_by,
                  "aux_ids_read_as": None if read_as == "ambiguous" else read_as, "engine": engine,
                  "aux_note": aux_note,
                  "aux_ids_source": None if cfg.aux_layer_ids is None else list(cfg.aux_layer_ids),
                  "vocab_map": None if vocab_map is None else str(vocab_map), "rows_kept": kept,
                  "rows_from_target": from_target, "embed_from_target": embed_from_target,
                  "target": None if target is None else str(target), "note": note}
    if cfg.attention == "mla":
        config = _mla_config(cfg, ids, draft_vocab, provenance)
    else:
        config = (_speculators_config if format == "speculators" else _specforge_config)(cfg, ids, draft_vocab,
                                                                                         provenance, tck)
    header, offsets = encode_header({k: (d, s) for k, (d, s, _) in jobs.items()},
                                    metadata={"format": "pt", "eaglekit_export": note})
    total = max((end for _, end in offsets.values()), default=0)
    tmp = _make_folder(out)
    try:
        with open(tmp / "model.safetensors", "wb") as f, \
                tqdm(total=total, unit="B", unit_scale=True, desc="export", leave=False,
                     disable=(total < 64 << 20) if progress is None else not progress) as bar:
            f.write(header)
            for name, (_, _, chunks) in jobs.items():
                written = 0
                for chunk in chunks():
                    f.write(chunk)
                    written += len(chunk)
                    bar.update(len(chunk))
                begin, end = offsets[name]
                if written != end - begin:
                    raise ConfigError(f"export of {name} wrote {written} bytes, expected {end - begin}.")
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        _put_in_place(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"Cannot write the export into {out}: {e.strerror or e}; give --out in a folder you can "
                         "write to, with room for the drafter.") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportResult(out, format, ck.location.raw, len(jobs), total, ids, read_as, engine, kept, from_target,
                        embed_from_target, provenance["note"], config, aux_note)


def _make_folder(out: Path) -> Path:
    """A new hidden folder beside ``out`` with the permissions a new folder gets (0o777 less the umask)."""
    for _ in range(100):
        tmp = out.parent / f".{out.name}.eaglekit-export-{secrets.token_hex(4)}"
        try:
            tmp.mkdir()  # mode 0o777, less the umask
            return tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise InputError(f"Cannot create a folder in {out.parent}: {e.strerror or e}; give --out in a folder you "
                             "can write to.") from None
    raise InputError(f"Cannot create a temporary folder in {out.parent}; remove its .{out.name}.eaglekit-export-* "
                     "folders and try again.")


def _put_in_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` (empty, or an earlier export checked by
    :func:`_check_out`) is moved aside first and removed only once the new one is in place."""
    if not out.exists():
        os.replace(tmp, out)
        return
    if not any(out.iterdir()):
        out.rmdir()
        os.replace(tmp, out)
        return
    old = out.parent / f".{out.name}.eaglekit-replaced-{secrets.token_hex(4)}"
    os.replace(out, old)
    try:
        os.replace(tmp, out)
    except OSError:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _lm_head_rows(ck, tck, t, plan) -> Iterator[bytes]:
    """The new lm_head, row runs at a time: consecutive old rows in one read, target rows in another."""
    row = t.nbytes // t.shape[0]
    head = lm_head_of(tck.inventory) if tck is not None else None
    i = 0
    while i < len(plan):
        src, start = plan[i]
        j = i + 1
        while j < len(plan) and j - i < RUN_ROWS and plan[j][0] == src and plan[j][1] == start + (j - i):
            j += 1
        count = j - i
        if src == "old":
            yield ck.read_bytes(t.name, start * row, count * row)
        else:
            yield _cast_rows(tck.read_bytes(head.name, start * (head.nbytes // head.shape[0]),
                                            count * (head.nbytes // head.shape[0])), head.dtype, t.dtype,
                             (count, head.shape[1]))
        i = j


def _cast_rows(data: bytes, src_dtype: str, dst_dtype: str, shape) -> bytes:
    if src_dtype == dst_dtype:
        return data
    import torch


    x = to_torch(data, src_dtype, shape).to(torch_dtype(dst_dtype))  # (rows, H)
    return x.contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def _layer_fields(cfg: DrafterConfig) -> dict[str, Any]:
    raw_layer = cfg.raw.get("transformer_layer_config") if cfg.format == "speculators" else cfg.raw
    raw_layer = raw_layer if isinstance(raw_layer, dict) else {}
    fields = {
        "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim, "num_hidden_layers": cfg.num_hidden_layers, "vocab_size": cfg.vocab_size,
        "max_position_embeddings": cfg.max_position_embeddings, "rms_norm_eps": cfg.rms_norm_eps,
        "hidden_act": cfg.hidden_act, "rope_theta": cfg.rope_theta, "rope_scaling": cfg.rope_scaling,
        "attention_bias": raw_layer.get("attention_bias", False), "mlp_bias": raw_layer.get("mlp_bias", False),
        "tie_word_embeddings": False,
    }
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if key in raw_layer:
            fields[key] = raw_layer[key]
    return fields


def _specforge_config(cfg: DrafterConfig, ids, draft_vocab: int, provenance: dict, tck) -> dict:
    out = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", **_layer_fields(cfg),
           "draft_vocab_size": draft_vocab,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": None if ids is None else list(ids),
                            "use_aux_hidden_state": cfg.use_aux_hidden_state}}
    if cfg.target_hidden_size != cfg.hidden_size:
        out["target_hidden_size"] = cfg.target_hidden_size
    for flag in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
        if getattr(cfg, flag):
            out[flag] = True  # read by the engines that support the option
    out["torch_dtype"] = cfg.torch_dtype or "bfloat16"
    out.update(_labels(cfg))
    out["eaglekit_export"] = provenance
    return out


def _speculators_config(cfg: DrafterConfig, ids, draft_vocab: int, provenance: dict, tck) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    layer = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], **_layer_fields(cfg)}
    layer["rope_parameters"] = dict(cfg.rope_parameters or {"rope_theta": cfg.rope_theta, "rope_type": "default"})
    verifier_archs = list(cfg.declared_target_architectures)
    name = cfg.declared_target
    if tck is not None and tck.inventory.config:
        archs = tck.inventory.config.get("architectures")
        verifier_archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else verifier_archs
        name = name or provenance["target"]
    try:
        tf_version = version("transformers")
    except PackageNotFoundError:
        tf_version = None
    out = {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
        "speculators_version": SPECULATORS_LAYOUT_VERSION,
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1,
                                  "accept_tolerance": 0.0}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": name, "architectures": verifier_archs},
        },
        "transformer_layer_config": layer, "draft_vocab_size": draft_vocab,
        "norm_before_residual": cfg.norm_before_residual,
        "target_hidden_size": cfg.target_hidden_size if cfg.target_hidden_size != cfg.hidden_size else None,
        "eagle_aux_hidden_state_layer_ids": None if ids is None else list(ids),
        "norm_before_fc": cfg.norm_before_fc, "fc_norm": cfg.fc_norm, "norm_output": cfg.norm_output,
        "embed_requires_grad": False, "dtype": cfg.torch_dtype or "bfloat16", "transformers_version": tf_version,
        **_labels(cfg), "eaglekit_export": provenance,
    }
    return out


def _mla_config(cfg: DrafterConfig, ids, draft_vocab: int, provenance: dict) -> dict:
    """An MLA drafter's config: the source's own keys (MLA ranks, MoE settings, YaRN, eagle_config flags kept as
    written), with the draft vocabulary size, the aux ids and the export block rewritten."""
    out = {k: v for k, v in cfg.raw.items() if k != "eaglekit_export"}
    arch = cfg.architecture
    if not any(arch in names for names in ENGINE_ARCHITECTURES.values()):
        out["architectures"] = [MLA_ENGINE_ARCHITECTURE]  # SpecForge's training name: neither engine registers it
        provenance["note"] += (f" The architecture {arch} (registered by neither vLLM nor SGLang) is written as "
                               f"{MLA_ENGINE_ARCHITECTURE}, the MLA drafter class both engines load.")
    out["draft_vocab_size"] = draft_vocab
    eagle = dict(out.get("eagle_config") or {})
    eagle[AUX_IDS_KEY] = None if ids is None else list(ids)
    out["eagle_config"] = eagle
    if AUX_IDS_KEY in out:
        out[AUX_IDS_KEY] = None if ids is None else list(ids)
    out["eaglekit_export"] = provenance
    return out


def _labels(cfg: DrafterConfig) -> dict[str, Any]:
    """Labels that must travel with the weights (the demo's SYNTHETIC marker)."""
    return {k: cfg.raw[k] for k in ("eaglekit_demo",) if k in cfg.raw}


#: The trainer in words, for the export note.
_TRAINER_WORDS = {"specforge": "trained with SpecForge, as guessed from its format",
                  "speculators": "trained with speculators, as guessed from its format",
                  "eagle": "trained with the original EAGLE-3 code, as guessed from its format",
                  "modelopt": "trained with Model-Optimizer or TorchSpec, as guessed from its format",
                  "torchspec-vllm": "trained with TorchSpec and exported for vLLM (layers.0.*, kimi_k2: ids count inputs)",
                  "declared-outputs": "its aux ids declared as layer outputs by an earlier eaglekit export",
                  "declared-inputs": "its aux ids declared as layer inputs by an earlier eaglekit export"}


def _note(source, cfg, format, ids, read_as, aux_note, engine, kept, from_target, vocab_map, embed_from_target,
          target) -> str:
    parts = [f"Warm-start EAGLE-3 drafter written by eaglekit export from {source} ({cfg.format} layout, "
             f"{_TRAINER_WORDS.get(cfg.trained_by, cfg.trained_by)}) in the {format} layout."]
    if ids is None:
        parts.append("No aux ids: each engine uses its default, and the defaults name the same target tensors.")
    else:
        parts.append(f"Aux ids {list(ids)} are meant as layer {read_as}" +
                     (f", rewritten for {engine}." if engine else " (as the source wrote them).")
                     if read_as != "ambiguous" else f"Aux ids {list(ids)} as the source wrote them.")
    if aux_note:
        parts.append(aux_note)
    if vocab_map is not None:
        parts.append(f"lm_head re-aligned to the vocabulary map {vocab_map}: {kept} rows carried over by target token, "
                     f"{from_target} initialised from the target's lm_head rows ({target}).")
    if embed_from_target:
        parts.append(f"embed_tokens copied from the target {target}.")
    return " ".join(parts)


__all__ = ["ExportResult", "export", "is_export", "FORMATS", "SPECULATORS_EAGLE3_FIELDS"]
