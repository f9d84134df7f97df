"""Hidden-state dumps: a target's aux hidden states, saved once on a GPU box, read anywhere.

A dump is a folder (documented in ``docs/acceptance.md``)::

    manifest.json                 {"format": "eaglekit-hidden-states", "version": 1, "target": ...,
                                   "hidden_size": H, "num_hidden_layers": L, "vocab_size": V,
                                   "layers": [k0, k1, ...], "samples": N, "dtype": "bfloat16"|"float32",
                                   "chat_template_sha256": str|null, "eaglekit_version": str}
    sample-000000.safetensors     input_ids int64 [T]; hidden_states [len(layers), T, H];
    sample-000001.safetensors     target_ids int64 [T]; metadata {"prompt_len": "<int>"}
    ...

``layers`` index Hugging Face ``output_hidden_states``: index ``i + 1`` is the OUTPUT of decoder layer
``i`` and index ``i`` its INPUT; index ``L`` is already final-normed. ``input_ids`` is the prompt followed
by the target's greedy continuation; ``target_ids[t]`` is the target's argmax next token after position
``t``. numpy and safetensors bytes only: no torch at import (bf16 is decoded bit-wise).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from eaglekit.core.errors import HeaderError, InputError, NotFoundError
from eaglekit.core.checkpoint.header import encode_header, parse_header
from eaglekit.core.redact import shown, visible
from eaglekit.core.render import kv_html, kv_text
from eaglekit.core.safejson import loads
from eaglekit.core.checkpoint.tensors import to_numpy
from eaglekit.core.version import __version__
from eaglekit.io.dumps.files import MAX_POSITIONS, DumpFolder
from eaglekit.io.reader import read_header
from eaglekit.io.write import write_atomic

FORMAT = "eaglekit-hidden-states"
VERSION = 1
MANIFEST_NAME = "manifest.json"
#: A manifest is a few hundred bytes; anything past this is not one.
MANIFEST_LIMIT = 1024 * 1024
DumpDType = Literal["bfloat16", "float32"]
_SAFETENSORS_DTYPE = {"bfloat16": "BF16", "float32": "F32"}
_SAMPLE_RE = re.compile(r"^sample-(\d{6,})\.safetensors$")


def sample_name(index: int) -> str:
    return f"sample-{index:06d}.safetensors"


@dataclass(frozen=True)
class DumpManifest:
    """What ``manifest.json`` says about a dump."""

    target: str
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    layers: tuple[int, ...]
    samples: int
    dtype: DumpDType = "float32"
    chat_template_sha256: str | None = None
    eaglekit_version: str = ""
    format: str = FORMAT
    version: int = VERSION

    def to_json(self) -> dict:
        out = asdict(self)
        out["layers"] = list(self.layers)
        order = ["format", "version", "target", "hidden_size", "num_hidden_layers", "vocab_size", "layers",
                 "samples", "dtype", "chat_template_sha256", "eaglekit_version"]
        return {k: out[k] for k in order}

    def _pairs(self) -> list[tuple[str, object]]:
        return [("target", self.target), ("hidden size", self.hidden_size),
                ("layers (output_hidden_states index)", ", ".join(map(str, self.layers))),
                ("target layers", self.num_hidden_layers), ("vocab", self.vocab_size),
                ("samples", self.samples), ("dtype", self.dtype),
                ("chat template sha256", self.chat_template_sha256 or "none")]

    def __str__(self) -> str:
        return kv_text(self._pairs(), title="hidden-state dump")

    def _repr_html_(self) -> str:
        return kv_html(self._pairs(), caption="hidden-state dump")


@dataclass(frozen=True, eq=False)
class DumpSample:
    """One prompt's record: ``input_ids`` [T], ``hidden_states`` [len(layers), T, H] float32,
    ``target_ids`` [T] (argmax next token after each position), ``prompt_len``."""

    input_ids: np.ndarray
    hidden_states: np.ndarray
    target_ids: np.ndarray
    prompt_len: int

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])


def _bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, round to nearest even (as torch does); NaN stays NaN."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16
    nan = np.isnan(a)
    if nan.any():
        rounded = np.where(nan, (bits >> 16) | 0x40, rounded)
    return rounded.astype(np.uint16)


def _bf16_to_float32(data: bytes, shape: Sequence[int]) -> np.ndarray:
    bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(tuple(shape))


def encode_sample(sample: DumpSample, *, dtype: DumpDType = "float32") -> bytes:
    """One sample as safetensors bytes (the inverse of :func:`decode_sample`)."""
    ids = np.ascontiguousarray(sample.input_ids, dtype="<i8")
    tgt = np.ascontiguousarray(sample.target_ids, dtype="<i8")
    hs = np.asarray(sample.hidden_states)
    hs_bytes = (_bf16_bits(hs) if dtype == "bfloat16" else np.ascontiguousarray(hs, dtype="<f4")).tobytes()
    header, _ = encode_header(
        {"input_ids": ("I64", ids.shape), "hidden_states": (_SAFETENSORS_DTYPE[dtype], hs.shape),
         "target_ids": ("I64", tgt.shape)},
        metadata={"prompt_len": str(int(sample.prompt_len))})
    return header + ids.tobytes() + hs_bytes + tgt.tobytes()


def decode_sample(data: bytes, *, filename: str) -> DumpSample:
    """Parse one sample file's bytes; :class:`HeaderError` naming ``filename`` on anything malformed."""
    header = parse_header(data, file_size=len(data), filename=filename)
    tensors = {t.name: t for t in header.tensors}
    missing = {"input_ids", "hidden_states", "target_ids"} - set(tensors)
    if missing:
        raise HeaderError(f"{filename}: not an eaglekit hidden-state sample, it lacks {', '.join(sorted(missing))}.")
    arrays = {}
    for name, info in tensors.items():
        raw = data[header.header_bytes + info.data_offsets[0]:header.header_bytes + info.data_offsets[1]]
        if info.dtype == "BF16":
            arrays[name] = _bf16_to_float32(raw, info.shape)
        else:
            arrays[name] = to_numpy(raw, info.dtype, info.shape, name=f"{filename}: {name}")
    ids, hs, tgt = arrays["input_ids"], arrays["hidden_states"], arrays["target_ids"]
    if ids.ndim != 1 or tgt.shape != ids.shape or hs.ndim != 3 or hs.shape[1] != ids.shape[0]:
        raise HeaderError(
            f"{filename}: inconsistent shapes input_ids {list(ids.shape)}, target_ids {list(tgt.shape)}, "
            f"hidden_states {list(hs.shape)}; expected [T], [T] and [layers, T, hidden].")
    if ids.dtype.kind not in "iu" or tgt.dtype.kind not in "iu":
        raise HeaderError(f"{filename}: input_ids and target_ids must be integer tensors.")
    if hs.dtype.kind != "f":
        raise HeaderError(f"{filename}: hidden_states must be floating point (bf16, fp16 or fp32), got {hs.dtype}.")
    try:
        prompt_len = int(header.metadata.get("prompt_len", ""))
    except ValueError:
        raise HeaderError(f"{filename}: metadata prompt_len must be an integer string, "
                          f"got {header.metadata.get('prompt_len')!r}.") from None
    if not 1 <= prompt_len <= ids.shape[0]:
        raise HeaderError(f"{filename}: prompt_len {prompt_len} is outside 1..{ids.shape[0]} (the sample's length).")
    return DumpSample(ids.astype(np.int64), hs.astype(np.float32, copy=False), tgt.astype(np.int64), prompt_len)


def _manifest_from_json(obj: object, where: str) -> DumpManifest:
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise HeaderError(f"{where} is not an eaglekit hidden-state manifest (its \"format\" must be {FORMAT!r}); "
                          "write dumps with `eaglekit dump-hidden`.")
    if obj.get("version") != VERSION:
        raise HeaderError(f"{where}: version {obj.get('version')!r} is not supported (this eaglekit reads version "
                          f"{VERSION}); upgrade eaglekit or re-dump.")

    def integer(key: str, minimum: int = 1) -> int:
        v = obj.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise HeaderError(f"{where}: {key!r} must be an integer >= {minimum}, got {v!r}.")
        return v

    layers = obj.get("layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(x, int) and not isinstance(x, bool)
                                                             and x >= 0 for x in layers):
        raise HeaderError(f"{where}: 'layers' must be a non-empty list of output_hidden_states indices, got {layers!r}.")
    dtype = obj.get("dtype")
    if dtype not in _SAFETENSORS_DTYPE:
        raise HeaderError(f"{where}: 'dtype' must be 'bfloat16' or 'float32', got {dtype!r}.")
    sha = obj.get("chat_template_sha256")
    if sha is not None and not isinstance(sha, str):
        raise HeaderError(f"{where}: 'chat_template_sha256' must be a string or null.")
    num_layers = integer("num_hidden_layers")
    if max(layers) > num_layers:
        raise HeaderError(f"{where}: layer index {max(layers)} exceeds num_hidden_layers {num_layers} "
                          "(output_hidden_states holds indices 0..L).")
    # the target name is shown in terminals and pages: control characters escaped once, here
    return DumpManifest(target=visible(str(obj.get("target", "")), newlines=False), hidden_size=integer("hidden_size"),
                        num_hidden_layers=num_layers, vocab_size=integer("vocab_size"),
                        layers=tuple(layers), samples=integer("samples", 0), dtype=dtype,
                        chat_template_sha256=sha, eaglekit_version=str(obj.get("eaglekit_version", "")))


class HiddenStateDump:
    """A dump folder, opened: ``manifest``, ``layers``, ``len()``, iteration and indexing yield
    :class:`DumpSample` records (each file read when asked for, checked against the manifest)."""

    def __init__(self, path: Path, manifest: DumpManifest) -> None:
        self.path = path
        self.manifest = manifest

    @property
    def layers(self) -> tuple[int, ...]:
        return self.manifest.layers

    def __len__(self) -> int:
        return self.manifest.samples

    def __getitem__(self, index: int) -> DumpSample:
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"dump indices are integers, got {type(index).__name__}")
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"sample {index} out of range: the dump holds {n}")
        file = self.path / sample_name(index)
        folder = DumpFolder(self.path)
        try:
            header = read_header(folder.source, sample_name(index))
        except NotFoundError:
            raise NotFoundError(f"{shown(file)}: missing, but the manifest says the dump holds {n} samples.") from None
        longest = max((max(t.shape) for t in header.tensors if t.shape), default=0)   # positions, or a width
        if longest > MAX_POSITIONS:
            raise HeaderError(f"{shown(file)} declares a dimension of {longest} (positions or width), over the "
                              f"{MAX_POSITIONS} eaglekit reads in one sample; refusing it.")
        sample = decode_sample(folder.read(sample_name(index)), filename=shown(file))
        m = self.manifest
        hs = sample.hidden_states
        if hs.shape[0] != len(m.layers) or hs.shape[2] != m.hidden_size:
            raise HeaderError(f"{file}: hidden_states is {list(hs.shape)}, but the manifest says "
                              f"[{len(m.layers)} layers, T, {m.hidden_size}].")
        if sample.input_ids.size and (sample.input_ids.min() < 0 or sample.input_ids.max() >= m.vocab_size
                                      or sample.target_ids.min() < 0 or sample.target_ids.max() >= m.vocab_size):
            raise HeaderError(f"{file}: token ids outside the manifest's vocabulary 0..{m.vocab_size - 1}.")
        return sample

    def __iter__(self) -> Iterator[DumpSample]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"HiddenStateDump({str(self.path)!r}, samples={len(self)}, layers={list(self.layers)})"

    def __str__(self) -> str:
        return f"{self.path}\n{self.manifest}"

    def _repr_html_(self) -> str:
        return self.manifest._repr_html_()


def open_dump(path: str | os.PathLike[str]) -> HiddenStateDump:
    """Open a dump folder written by :func:`write_dump` (``eaglekit dump-hidden``); eaglekit errors on
    anything malformed, naming the file."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise NotFoundError(f"{shown(folder)}: no such hidden-state dump folder (write one with `eaglekit dump-hidden`).")
    mpath = folder / MANIFEST_NAME
    # a regular file inside the folder, at most MANIFEST_LIMIT bytes (a FIFO or /dev/zero is refused unread)
    raw = DumpFolder(folder).read_small(MANIFEST_NAME, MANIFEST_LIMIT)
    if raw is None:
        raise NotFoundError(f"{shown(mpath)}: missing; {shown(folder)} is not an eaglekit hidden-state dump "
                            "(write one with `eaglekit dump-hidden`).")
    obj = loads(raw, what=shown(mpath), error=HeaderError)
    manifest = _manifest_from_json(obj, shown(mpath))
    if manifest.samples == 0:
        raise HeaderError(f"{shown(mpath)} says the dump holds 0 samples: nothing to measure (an interrupted or empty "
                          "dump? re-run `eaglekit dump-hidden`).")
    present = sum(1 for p in folder.iterdir() if _SAMPLE_RE.match(p.name))
    if present < manifest.samples:
        raise HeaderError(f"{folder}: the manifest lists {manifest.samples} samples but only {present} "
                          "sample files are there (an interrupted dump? re-run `eaglekit dump-hidden`).")
    return HiddenStateDump(folder, manifest)


def check_new_folder(path: str | os.PathLike[str]) -> Path:
    """The folder a dump will be written to: new or empty, never an existing one with files, never a symbolic
    link (dangling, a loop, or to a folder: eaglekit does not write through links)."""
    folder = Path(path).expanduser()
    if folder.is_symlink():
        raise InputError(f"{folder} is a symbolic link; eaglekit does not write through links: give a new folder's "
                         "real path for --out.")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError(f"{folder} exists and is not an empty folder; choose a new --out folder "
                         "(eaglekit never overwrites files).")
    return folder


def write_dump(path: str | os.PathLike[str], manifest: DumpManifest, samples: Iterable[DumpSample]) -> HiddenStateDump:
    """Write a dump folder: each sample as it comes (so a dump streams), then ``manifest.json`` last with
    the count written (a folder without a manifest is an unfinished dump). Refuses a non-empty folder."""
    folder = check_new_folder(path)
    if manifest.dtype not in _SAFETENSORS_DTYPE:
        raise InputError(f"dump dtype must be 'bfloat16' or 'float32', got {manifest.dtype!r}.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the dump folder {folder}: {e.strerror or e}; choose a new folder you can "
                         "write to for --out.") from None
    if folder.is_symlink() or not folder.is_dir():   # planted after the check
        raise InputError(f"{folder} became a link or a file while eaglekit created it; nothing was written.")
    n = 0
    for sample in samples:
        hs = np.asarray(sample.hidden_states)
        if hs.ndim != 3 or hs.shape[0] != len(manifest.layers) or hs.shape[2] != manifest.hidden_size:
            raise InputError(f"sample {n}: hidden_states is {list(hs.shape)}, expected "
                             f"[{len(manifest.layers)}, T, {manifest.hidden_size}].")
        write_atomic(folder / sample_name(n), encode_sample(sample, dtype=manifest.dtype), what="a dump sample")
        n += 1

    manifest = replace(manifest, samples=n, eaglekit_version=manifest.eaglekit_version or __version__)
    write_atomic(folder / MANIFEST_NAME, json.dumps(manifest.to_json(), indent=2) + "\n", what="a dump manifest")
    return HiddenStateDump(folder, manifest)
