"""The safetensors header parser: bytes in, typed records out. No I/O.

Every reader (local, Hub, HTTP, SSH) fetches the first bytes of a file and hands them here. Validation
follows the reference implementation (huggingface/safetensors ``safetensors/src/tensor.rs``,
``Metadata::validate``): an 8-byte little-endian header length under a cap, a UTF-8 JSON object,
known dtypes, shapes of non-negative integers, and data offsets that tile the data section exactly
(contiguous, non-overlapping, each ``end - begin == numel x dtype size``). Messages follow
huggingface_hub's ``_parse_safetensors_header`` in naming the file and what was expected.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from eaglekit.core.errors import HeaderError

DType = Literal[
    "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16", "F16", "BF16",
    "I32", "U32", "F32", "F64", "I64", "U64", "C64", "F4", "F6_E2M3", "F6_E3M2",
]
TENSOR_NAME_T = str

#: Bits per element of each dtype a safetensors header may name (safetensors ``Dtype::bitsize``).
DTYPE_BITS: Mapping[str, int] = MappingProxyType({
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
})

#: The reference implementation's cap on the JSON header (safetensors ``MAX_HEADER_SIZE``).
MAX_HEADER_BYTES = 100_000_000
#: Bytes of the length prefix that starts every safetensors file.
PREFIX_BYTES = 8


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as its header describes it; ``data_offsets`` count from the end of the header."""

    name: TENSOR_NAME_T
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]
    parameters: int = field(init=False)
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", math.prod(self.shape))
        object.__setattr__(self, "nbytes", self.data_offsets[1] - self.data_offsets[0])


@dataclass(frozen=True)
class FileHeader:
    """A parsed header: tensors in file order, ``__metadata__``, and where the data section starts."""

    filename: str
    file_size: int
    header_bytes: int  # 8-byte prefix + JSON: the data section starts here
    tensors: tuple[TensorInfo, ...]
    metadata: Mapping[str, str]


def header_length(prefix: bytes, *, file_size: int, filename: str) -> int:
    """Length of the JSON header, from the first 8 bytes; checked against the cap and the file size."""
    if file_size < PREFIX_BYTES or len(prefix) < PREFIX_BYTES:
        raise HeaderError(
            f"{filename} is not a safetensors file: it is {file_size} bytes long, shorter than the "
            f"8-byte header length that starts every safetensors file.")
    (n,) = struct.unpack("<Q", prefix[:PREFIX_BYTES])
    if n > MAX_HEADER_BYTES:
        hint = _sniff(prefix)
        raise HeaderError(
            f"{filename} is not a safetensors file{hint}: its first 8 bytes declare a {n}-byte header, over "
            f"the {MAX_HEADER_BYTES}-byte limit of the safetensors format.")
    if PREFIX_BYTES + n > file_size:
        hint = _sniff(prefix)
        if hint:
            raise HeaderError(f"{filename} is not a safetensors file{hint}.")
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: file is truncated. Its header declares "
            f"{n} bytes of metadata but the file holds only {file_size - PREFIX_BYTES} bytes after the prefix.")
    return n


def parse_header(data: bytes, *, file_size: int, filename: str, display: str | None = None) -> FileHeader:
    """Parse a header from the file's first bytes (the prefix and at least the whole JSON).

    ``filename`` is recorded in the result; messages name ``display`` (the full location) when given.
    """
    record_name, filename = filename, display or filename
    n = header_length(data, file_size=file_size, filename=filename)
    if len(data) < PREFIX_BYTES + n:
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: file is truncated. Expected {n} bytes "
            f"of metadata but got {len(data) - PREFIX_BYTES}.")
    raw = data[PREFIX_BYTES:PREFIX_BYTES + n]
    if not raw.lstrip().startswith(b"{"):
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: the header must be a JSON object "
            f"starting with '{{', got {raw[:16]!r}.")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise HeaderError(f"Failed to parse safetensors header for {filename}: header is not valid UTF-8 ({e}).") from e
    except json.JSONDecodeError as e:
        raise HeaderError(f"Failed to parse safetensors header for {filename}: header is not valid JSON ({e}).") from e
    if not isinstance(obj, dict):
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: header must be a JSON object, "
            f"got {type(obj).__name__}.")
    metadata = _metadata(obj.pop("__metadata__", None), filename)
    tensors = sorted((_tensor(name, spec, filename) for name, spec in obj.items()),
                     key=lambda t: t.data_offsets)
    _check_tiling(tensors, data_bytes=file_size - PREFIX_BYTES - n, filename=filename)
    return FileHeader(record_name, file_size, PREFIX_BYTES + n, tuple(tensors), MappingProxyType(metadata))


def _sniff(prefix: bytes) -> str:
    """Name the common impostors: an HTML error page, a zip (torch .bin / pickle), a git-lfs pointer."""
    head = prefix[:8].lstrip().lower()
    if head.startswith((b"<!doctyp", b"<html", b"<?xml", b"<")):
        return " (it looks like an HTML page: the server probably returned an error page)"
    if head.startswith(b"pk\x03\x04"):
        return " (it looks like a zip archive, such as a PyTorch .bin checkpoint)"
    if head.startswith(b"version"):
        return " (it looks like a git-lfs pointer: the real file was not downloaded)"
    if head.startswith(b"{"):
        return " (it looks like a JSON document)"
    return ""


def _metadata(value: object, filename: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: __metadata__ must map strings to strings.")
    return dict(value)


def _tensor(name: str, spec: object, filename: str) -> TensorInfo:
    where = f"Failed to parse safetensors header for {filename}: tensor {name!r}"
    if not isinstance(spec, dict):
        raise HeaderError(f"{where} must be an object with dtype, shape and data_offsets.")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in spec]
    if missing:
        raise HeaderError(f"{where} lacks {', '.join(missing)}.")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise HeaderError(f"{where} has unknown dtype {dtype!r}; known: {', '.join(DTYPE_BITS)}.")
    if not isinstance(shape, list) or not all(_is_uint(d) for d in shape):
        raise HeaderError(f"{where} has shape {shape!r}; a shape is a list of non-negative integers.")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_uint(o) for o in offsets)):
        raise HeaderError(f"{where} has data_offsets {offsets!r}; expected [begin, end] non-negative integers.")
    begin, end = offsets
    if end < begin:
        raise HeaderError(f"{where} has data_offsets [{begin}, {end}]: end is before begin.")
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8 or bits // 8 != end - begin:
        raise HeaderError(
            f"{where} has {end - begin} bytes of data but shape {shape} x {dtype} "
            f"({DTYPE_BITS[dtype]} bits) needs {bits / 8:g}.")
    return TensorInfo(name, dtype, tuple(shape), (begin, end))


def _is_uint(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_tiling(tensors: list[TensorInfo], *, data_bytes: int, filename: str) -> None:
    """Offsets must tile [0, data_bytes) exactly: no gap, no overlap, nothing past the end."""
    where = f"Failed to parse safetensors header for {filename}"
    cursor = 0
    for t in tensors:
        begin, end = t.data_offsets
        if begin != cursor:
            kind = "overlaps the previous tensor" if begin < cursor else f"leaves a gap of {begin - cursor} bytes"
            raise HeaderError(f"{where}: tensor {t.name!r} starts at {begin}, expected {cursor}: it {kind}.")
        cursor = end
    if cursor != data_bytes:
        if cursor > data_bytes:
            raise HeaderError(
                f"{where}: tensor data ends at byte {cursor} of the data section but the file holds only "
                f"{data_bytes} bytes there (truncated, or offsets out of range).")
        raise HeaderError(
            f"{where}: the data section holds {data_bytes} bytes but tensors account for {cursor} "
            f"(trailing bytes no tensor claims).")


def encode_header(tensors: Mapping[str, tuple[str, Sequence[int]]], *,
                  metadata: Mapping[str, str] | None = None) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """The inverse of :func:`parse_header` for writers that stream data themselves (sparse files, benchmarks).

    ``tensors`` maps name -> (dtype, shape), in file order. Returns the prefix + JSON header (padded to a
    multiple of 8, as safetensors writes it) and each tensor's [begin, end) within the data section.
    """
    header: dict[str, object] = {"__metadata__": dict(metadata)} if metadata else {}
    offsets: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        nbytes = math.prod(shape) * DTYPE_BITS[dtype] // 8
        offsets[name] = (offset, offset + nbytes)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw, offsets
