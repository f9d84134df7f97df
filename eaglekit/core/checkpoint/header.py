"""The safetensors header parser: bytes in, typed records out. No I/O.

Every reader (local, Hub, HTTP, SSH) fetches the first bytes of a file and hands them here. Validation
follows the reference implementation (huggingface/safetensors ``safetensors/src/tensor.rs``,
``Metadata::validate``): an 8-byte little-endian header length under a cap, a UTF-8 JSON object,
known dtypes, shapes of non-negative integers, and data offsets that tile the data section exactly
(contiguous, non-overlapping, each ``end - begin == numel x dtype size``). Messages follow
huggingface_hub's ``_parse_safetensors_header`` in naming the file and what was expected.

Cost is linear in the header and bounded before the JSON is parsed (:data:`MAX_TENSORS`,
:data:`MAX_JSON_VALUES`): the rules are checked column by column over all tensors at once, and the
entry-by-entry loop runs only to name the first broken rule. Crafted headers (nesting too deep, numbers
of thousands of digits, shapes past 2**64, a million-dimension shape) are one-line HeaderErrors.
"""

from __future__ import annotations

import json
import math
import operator
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from types import MappingProxyType
from typing import Literal

from eaglekit.core.errors import HeaderError
from eaglekit.core.gcpause import paused_gc

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
#: Tensors one file may describe. Generous: a whole 1 T-parameter MoE model with quantisation scales
#: has about 200,000 tensors, spread over dozens of shards; a single file rarely holds 10,000.
MAX_TENSORS = 500_000
#: Values (list items and object members, counted by their separating commas) one header may hold:
#: bounds what the JSON parse builds, so a crafted header cannot make it take gigabytes.
MAX_JSON_VALUES = 16 * MAX_TENSORS

_BITS = dict(DTYPE_BITS)
_DTYPE_SET = frozenset(DTYPE_BITS)
_FIELDS = operator.itemgetter("dtype", "shape", "data_offsets")
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
#: Shapes, element counts and offsets are ``usize`` in the reference implementation.
_USIZE_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
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

    @classmethod
    def _trusted(cls, name: str, dtype: str, shape: tuple[int, ...], data_offsets: tuple[int, int],
                 parameters: int) -> TensorInfo:
        """A record from fields :func:`parse_header` has already checked: skips the frozen dataclass's
        per-field ``__setattr__`` (a third of a 100,000-tensor header's parse time otherwise)."""
        t = cls.__new__(cls)
        _INFO_SET[0](t, name)  # the slots' own descriptors: no per-field lookup, no frozen __setattr__
        _INFO_SET[1](t, dtype)
        _INFO_SET[2](t, shape)
        _INFO_SET[3](t, data_offsets)
        _INFO_SET[4](t, parameters)
        _INFO_SET[5](t, data_offsets[1] - data_offsets[0])
        return t


_INFO_SET = tuple(getattr(TensorInfo, f).__set__ for f in
                  ("name", "dtype", "shape", "data_offsets", "parameters", "nbytes"))


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
    Time is linear in the header's size: one JSON parse and one pass over the tensors (plus a sort
    only when the header does not list them in file order, as every safetensors writer does).
    """
    record_name, filename = filename, display or filename
    n = header_length(data, file_size=file_size, filename=filename)
    if len(data) < PREFIX_BYTES + n:
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: file is truncated. Expected {n} bytes "
            f"of metadata but got {len(data) - PREFIX_BYTES}.")
    end = PREFIX_BYTES + n
    raw = memoryview(data)[PREFIX_BYTES:end]
    if not bytes(raw[:64]).lstrip().startswith(b"{"):
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: the header must be a JSON object "
            f"starting with '{{', got {bytes(raw[:16])!r}.")
    _check_size(data, PREFIX_BYTES, end, filename)
    with paused_gc():  # a million acyclic containers for 100,000 tensors: the collector would double the time
        obj = _load_json(raw, filename)
        if not isinstance(obj, dict):
            raise HeaderError(
                f"Failed to parse safetensors header for {filename}: header must be a JSON object, "
                f"got {type(obj).__name__}.")
        metadata = _metadata(obj.pop("__metadata__", None), filename)
        tensors = _tensors_batch(obj, data_bytes=file_size - end)
        if tensors is None:  # something is wrong, or the header is out of file order: find it entry by entry
            tensors = _tensors(obj, data_bytes=file_size - end, filename=filename)
    return FileHeader(record_name, file_size, end, tensors, MappingProxyType(metadata))


def _check_size(data: bytes, start: int, end: int, filename: str) -> None:
    """Bound what the JSON parse may build before it runs: every tensor is one JSON object (one "{"),
    and every value after the first in a list or object follows a ","; braces and commas inside
    strings only raise the counts. A header within both bounds parses in a few hundred MiB at most."""
    objects, commas = data.count(b"{", start, end), data.count(b",", start, end)
    if objects > MAX_TENSORS + 2 or commas > MAX_JSON_VALUES:
        what = (f"{objects:,} JSON objects: more than {MAX_TENSORS:,} tensors" if objects > MAX_TENSORS + 2
                else f"{commas:,} JSON values, over the limit of {MAX_JSON_VALUES:,}")
        raise HeaderError(
            f"Failed to parse safetensors header for {filename}: the header holds {what}, far more than any "
            "real checkpoint file describes; eaglekit refuses to parse it (a crafted or corrupt file).")


def _load_json(raw: memoryview, filename: str) -> object:
    where = f"Failed to parse safetensors header for {filename}"
    try:
        return json.loads(str(raw, "utf-8"))
    except UnicodeDecodeError as e:
        raise HeaderError(f"{where}: header is not valid UTF-8 ({e}).") from e
    except json.JSONDecodeError as e:
        raise HeaderError(f"{where}: header is not valid JSON ({e}).") from e
    except RecursionError as e:
        raise HeaderError(f"{where}: header nests JSON arrays or objects too deeply to parse (a safetensors "
                          "header is a flat object of tensor entries).") from e
    except ValueError as e:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise HeaderError(f"{where}: header holds a number too long to parse ({e}).") from e


def _tensors_batch(obj: dict, *, data_bytes: int) -> tuple[TensorInfo, ...] | None:
    """Every rule of :func:`_tensors`, checked column by column with C-level builtins (``map``, ``set``,
    list equality) instead of entry by entry: the tensors in file order, or None when any rule fails or
    the header does not list its tensors in file order (then :func:`_tensors` finds what and says so)."""
    specs = list(obj.values())
    if not specs:
        return () if data_bytes == 0 else None
    if set(map(type, specs)) != {dict}:
        return None
    try:
        dtypes, shapes, offsets = zip(*map(_FIELDS, specs))
    except KeyError:
        return None
    if set(map(type, dtypes)) != {str} or not set(dtypes) <= _DTYPE_SET or set(map(type, shapes)) != {list} \
            or set(map(type, offsets)) != {list}:
        return None
    if max(map(len, shapes)) > 16 or set(map(len, offsets)) != {2}:
        return None  # long shapes: the checked product of _tensors keeps the cost linear
    dims = list(chain.from_iterable(shapes))
    if dims and (set(map(type, dims)) != {int} or min(dims) < 0 or max(dims) > _USIZE_MAX):
        return None
    begins, ends = list(map(_FIRST, offsets)), list(map(_SECOND, offsets))
    edges = begins + ends
    if set(map(type, edges)) != {int} or min(edges) != 0 or max(edges) > _USIZE_MAX:
        return None
    # File order and exact tiling: each tensor starts where the previous one ends, the last ends the data.
    if begins[0] != 0 or begins[1:] != ends[:-1] or ends[-1] != data_bytes:
        return None
    counts = list(map(math.prod, shapes))
    if max(counts) > _USIZE_MAX or (0 in counts and not _zero_products_ok(shapes, counts)):
        return None
    nbits = list(map(operator.mul, counts, map(_BITS.__getitem__, dtypes)))
    if max(nbits) > _USIZE_MAX or any(b & 7 for b in nbits) \
            or [b >> 3 for b in nbits] != list(map(operator.sub, ends, begins)):
        return None
    make = TensorInfo._trusted
    return tuple(map(make, obj.keys(), dtypes, map(tuple, shapes), zip(begins, ends), counts))


def _zero_products_ok(shapes: tuple[list, ...], counts: list[int]) -> bool:
    """The reference multiplies with overflow checks left to right: [2**63, 4, 0] overflows before the 0."""
    for shape, count in zip(shapes, counts):
        if count == 0 and len(shape) > 1:
            product = 1
            for d in shape:
                product *= d
                if product > _USIZE_MAX:
                    return False
    return True


def _tensors(obj: dict, *, data_bytes: int, filename: str) -> tuple[TensorInfo, ...]:
    """Validate every entry in one pass (the rules of safetensors ``Metadata::validate``) and return the
    tensors in file order. Offsets are checked to tile the data section in the same pass; a header that
    does not list its tensors in file order is sorted and checked again, for the exact message."""
    rows = []  # (begin, end, name, dtype, shape, parameters)
    append = rows.append
    cursor, in_order = 0, True
    for name, spec in obj.items():
        if type(spec) is not dict:
            raise HeaderError(f"{_where(filename, name)} must be an object with dtype, shape and data_offsets.")
        try:
            dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
        except KeyError:
            missing = [k for k in ("dtype", "shape", "data_offsets") if k not in spec]
            raise HeaderError(f"{_where(filename, name)} lacks {', '.join(missing)}.") from None
        bits = _BITS.get(dtype) if type(dtype) is str else None
        if bits is None:
            raise HeaderError(f"{_where(filename, name)} has unknown dtype {_short(dtype)}; "
                              f"known: {', '.join(DTYPE_BITS)}.")
        if type(shape) is not list:
            raise _bad_shape(filename, name, shape)
        count = 1
        for d in shape:  # checked multiplication, as the reference does: linear even for [2]*N + [0]
            if type(d) is not int or d < 0:
                raise _bad_shape(filename, name, shape)
            count *= d
            if count > _USIZE_MAX:
                raise HeaderError(f"{_where(filename, name)} has shape {_short(shape)}, whose element count "
                                  "overflows 64 bits.")
        if type(offsets) is not list or len(offsets) != 2:
            raise _bad_offsets(filename, name, offsets)
        begin, end = offsets
        if type(begin) is not int or type(end) is not int or begin < 0 or end < 0 \
                or begin > _USIZE_MAX or end > _USIZE_MAX:
            raise _bad_offsets(filename, name, offsets)
        if end < begin:
            raise HeaderError(f"{_where(filename, name)} has data_offsets [{begin}, {end}]: end is before begin.")
        nbits = count * bits
        if nbits % 8 or nbits >> 3 != end - begin:
            needs = f"{nbits >> 3}" if nbits % 8 == 0 else f"{nbits / 8:g}"
            raise HeaderError(
                f"{_where(filename, name)} has {end - begin} bytes of data but shape {_short(shape)} x {dtype} "
                f"({bits} bits) needs {needs}.")
        if begin != cursor:
            in_order = False
        cursor = end
        append((begin, end, name, dtype, shape, count))
    if not in_order:
        rows.sort(key=_span)  # stable: equal spans (zero-size tensors) keep header order
        _check_tiling(rows, filename)
        cursor = rows[-1][1]
    if cursor != data_bytes:
        where = f"Failed to parse safetensors header for {filename}"
        if cursor > data_bytes:
            raise HeaderError(
                f"{where}: tensor data ends at byte {cursor} of the data section but the file holds only "
                f"{data_bytes} bytes there (truncated, or offsets out of range).")
        raise HeaderError(
            f"{where}: the data section holds {data_bytes} bytes but tensors account for {cursor} "
            f"(trailing bytes no tensor claims).")
    make = TensorInfo._trusted
    return tuple(make(name, dtype, tuple(shape), (begin, end), count) for begin, end, name, dtype, shape, count in rows)


def _span(row: tuple) -> tuple[int, int]:
    return row[0], row[1]


def _check_tiling(rows: list[tuple], filename: str) -> None:
    """Offsets (sorted) must tile the data section from 0: no gap, no overlap."""
    cursor = 0
    for begin, end, name, *_ in rows:
        if begin != cursor:
            kind = "overlaps the previous tensor" if begin < cursor else f"leaves a gap of {begin - cursor} bytes"
            raise HeaderError(f"Failed to parse safetensors header for {filename}: tensor {_short(name)} starts at "
                              f"{begin}, expected {cursor}: it {kind}.")
        cursor = end


def _where(filename: str, name: str) -> str:
    return f"Failed to parse safetensors header for {filename}: tensor {_short(name)}"


def _bad_shape(filename: str, name: str, shape: object) -> HeaderError:
    return HeaderError(f"{_where(filename, name)} has shape {_short(shape)}; a shape is a list of non-negative "
                       "integers.")


def _bad_offsets(filename: str, name: str, offsets: object) -> HeaderError:
    return HeaderError(f"{_where(filename, name)} has data_offsets {_short(offsets)}; expected [begin, end] "
                       "non-negative integers under 2**64.")


def _short(value: object, limit: int = 80) -> str:
    """repr of a value from a header, cut to ``limit`` characters: a message stays one short line even for
    a shape of a million dimensions or a number of 4,000 digits."""
    if isinstance(value, list) and len(value) > 8:
        head = ", ".join(_short(v, 24) for v in value[:6])
        return f"[{head}, ... ({len(value):,} entries)]"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of about {int(value.bit_length() * 0.30103):,} digits>"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
