"""Quantised target weights, read by row block and dequantised to float32 (numpy only).

Three storage schemes, recognised from the tensors a module saves (and checked against config.json's
``quantization_config``):

* ``plain``: a BF16/F16/F32 ``weight`` (or any float tensor: norms, biases, the router).
* ``fp8-block``: DeepSeek-V3/Kimi-K2 FP8: ``weight`` F8_E4M3 [rows, cols] and ``weight_scale_inv``
  [ceil(rows/128), ceil(cols/128)] F32; value = e4m3(weight) x scale_inv[r // 128, c // 128]. The block
  size comes from ``quantization_config.weight_block_size``; last blocks may be ragged.
* ``int-pack``: compressed-tensors ``pack-quantized`` (Kimi-K2.5's INT4): ``weight_packed`` I32
  [rows, ceil(cols x bits / 32)], element i of a row at bit ``i x bits`` of the row's words stored as
  ``q + 2^(bits-1)``; ``weight_scale`` [rows, cols / group]; an optional ``weight_zero_point`` packed
  the same way along rows; ``weight_shape`` [2]. value = (q - zero) x scale[r, c // group]
  (compressed_tensors/compressors/pack_quantized, ``unpack_from_int32`` and ``dequantize``).

Rows are contiguous in every scheme, so a block of rows is one byte range per tensor: a worker reads
rows ``r0..r1`` of a 1 TB target without touching the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from eaglekit.core.errors import HeaderError
from eaglekit.io.inventory import Inventory, TensorEntry

Scheme = Literal["plain", "fp8-block", "int-pack"]
FLOAT_DTYPES = ("BF16", "F16", "F32", "F64")
#: Bytes (or words) read by range: ``ReadFn(tensor, start, length) -> bytes``.
ReadFn = Callable[[TensorEntry, int, int], bytes]


class QuantSchemeError(HeaderError):
    """A tensor's quantisation is unknown, incomplete (a scale tensor missing) or inconsistent."""


def _e4m3_table() -> np.ndarray:
    """float32 value of each of the 256 FP8 E4M3FN bit patterns (no infinities; S.1111.111 is NaN)."""
    b = np.arange(256, dtype=np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp, man = (b >> 3) & 0xF, b & 0x7
    value = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1.0 + man / 8.0) * 2.0 ** (exp - 7))
    value = np.where((b & 0x7F) == 0x7F, np.nan, value)
    return (sign * value).astype(np.float32)


E4M3 = _e4m3_table()


class Scratch:
    """Buffers reused across row blocks (keep one per thread): a block's float32 rows and temporaries are
    written into memory allocated once. Dask workers set ``MALLOC_TRIM_THRESHOLD_``, under which glibc
    maps and unmaps every large allocation afresh; decoding into fresh arrays there ran 3x slower."""

    def __init__(self) -> None:
        self._bufs: dict[str, np.ndarray] = {}

    def get(self, key: str, n: int, dtype=np.float32) -> np.ndarray:
        """A flat array of ``n`` items of ``dtype``, valid until the next ``get`` of the same key."""
        itemsize = np.dtype(dtype).itemsize
        buf = self._bufs.get(key)
        if buf is None or buf.nbytes < n * itemsize:
            buf = self._bufs[key] = np.empty(max(n * itemsize, 1 << 16), np.uint8)
        return buf[:n * itemsize].view(dtype)


def _decode_e4m3(codes: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """FP8 E4M3FN codes -> float32 in ``out``, by moving the bits into float32's fields and rescaling:
    sign to bit 31, exponent and mantissa to bits 20..26, times 2^(127-7) (subnormals come out right)."""
    u = out.view(np.uint32)
    np.copyto(u, codes)
    np.bitwise_and(u, 0x80, out=tmp)
    np.left_shift(tmp, 24, out=tmp)
    np.bitwise_and(u, 0x7F, out=u)
    np.left_shift(u, 20, out=u)
    np.bitwise_or(u, tmp, out=u)
    out *= np.float32(2.0 ** 120)
    if out.size and (out.max() > 448 or out.min() < -448):  # S.1111.111 is NaN (decoded as +-480 above)
        out[np.abs(out) > 448] = np.nan
    return out


def to_float32(data: bytes, dtype: str, scratch: Scratch | None = None, key: str = "x") -> np.ndarray:
    """Little-endian tensor bytes as a flat float32 array (BF16 bit-widened, F8_E4M3 bit-moved); into
    ``scratch``'s buffer ``key`` when given, else a fresh array."""
    if dtype in ("BF16", "F8_E4M3"):
        src = np.frombuffer(data, "<u2" if dtype == "BF16" else np.uint8)
        out = scratch.get(key, src.size) if scratch is not None else np.empty(src.size, np.float32)
        if dtype == "BF16":
            u = out.view(np.uint32)
            np.copyto(u, src)
            np.left_shift(u, 16, out=u)
            return out
        tmp = scratch.get(key + ".tmp", src.size, np.uint32) if scratch is not None else np.empty(src.size, np.uint32)
        return _decode_e4m3(src, out, tmp)
    if dtype in ("F16", "F32", "F64"):
        return np.frombuffer(data, {"F16": "<f2", "F32": "<f4", "F64": "<f8"}[dtype]).astype(np.float32)
    if dtype in ("I8", "U8", "I16", "I32", "I64"):
        ints = {"I8": "i1", "U8": "u1", "I16": "<i2", "I32": "<i4", "I64": "<i8"}
        return np.frombuffer(data, ints[dtype]).astype(np.float32)
    raise QuantSchemeError(f"dtype {dtype} cannot be dequantised by eaglekit.")


def unpack_int4_float(words: np.ndarray, cols: int, out: np.ndarray | None = None) -> np.ndarray:
    """4-bit packed int32 rows (n, w) -> float32 values (n, cols): each byte's low nibble, then its high
    one, minus the offset 8; written into ``out`` (flat, at least n*w*8 items) when given."""
    n = words.shape[0]
    b = np.ascontiguousarray(words).view(np.uint8).reshape(n, -1)  # little-endian: low byte first
    o = (np.empty(b.size * 2, np.float32) if out is None else out[:b.size * 2]).reshape(n, -1, 2)
    np.bitwise_and(b, 15, out=o[..., 0], casting="unsafe")
    np.right_shift(b, 4, out=o[..., 1], casting="unsafe")
    o -= 8
    return o.reshape(n, -1)[:, :cols]


def unpack_rows(words: np.ndarray, cols: int, bits: int) -> np.ndarray:
    """Densely packed int32 rows (n, w) -> signed integers (n, cols): element i sits at bit i*bits."""
    per = 32 // bits
    u = np.ascontiguousarray(words).view(np.uint32)
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    q = (u[..., None] >> shifts) & np.uint32((1 << bits) - 1)  # (n, w, per)
    q = q.reshape(u.shape[0], -1)[:, :cols].astype(np.int16)
    return q - (1 << (bits - 1))


@dataclass(frozen=True)
class QuantWeight:
    """One logical weight: its stored tensors and how to turn rows of them into float32.

    ``shape`` is the logical (rows, cols) (1-D tensors are one row; N-D ones fold leading dims)."""

    name: str  # the logical name as stored, e.g. "model.layers.3.mlp.experts.7.down_proj.weight"
    scheme: Scheme
    shape: tuple[int, int]
    data: TensorEntry
    scale: TensorEntry | None = None
    zero: TensorEntry | None = None
    block: tuple[int, int] = (128, 128)  # fp8-block: scale block (rows, cols)
    group: int = 0  # int-pack: columns per scale
    bits: int = 4

    @property
    def stored_bytes(self) -> int:
        return sum(t.nbytes for t in (self.data, self.scale, self.zero) if t is not None)

    @property
    def row_bytes(self) -> float:
        """Bytes read per row on average (data plus its share of scales): budgets plan with it."""
        return self.stored_bytes / max(1, self.shape[0])


def read_rows(read: ReadFn, w: QuantWeight, r0: int, r1: int, *, scratch: Scratch | None = None,
              key: str = "x") -> np.ndarray:
    """Rows ``r0..r1`` of ``w`` as float32 (r1-r0, cols), reading only their bytes (and their scales).

    With ``scratch``, the rows live in its buffer ``key`` (valid until the next call with that key)."""
    rows, cols = w.shape
    n = r1 - r0
    d = w.data
    if w.scheme == "plain":
        rb = d.nbytes // rows
        return to_float32(read(d, r0 * rb, n * rb), d.dtype, scratch, key).reshape(n, cols)
    if w.scheme == "fp8-block":
        bh, bw = w.block
        x = to_float32(read(d, r0 * cols, n * cols), d.dtype, scratch, key).reshape(n, cols)  # (n, cols)
        s = w.scale
        sb0, sb1 = r0 // bh, (r1 - 1) // bh + 1
        nbc = s.shape[1]
        srb = s.nbytes // s.shape[0]
        sc = to_float32(read(s, sb0 * srb, (sb1 - sb0) * srb), s.dtype).reshape(sb1 - sb0, nbc)
        _check_scales(sc, s, sb0)
        per_row = sc[(np.arange(r0, r1) // bh) - sb0]  # (n, blocks across)
        whole = cols // bw  # scale in place, block by block; a ragged last block on its own
        blocks = x[:, :whole * bw]
        blocks.shape = (n, whole, bw)  # a view of x (setting .shape never copies)
        blocks *= per_row[:, :whole, None]
        if whole < nbc:
            x[:, whole * bw:] *= per_row[:, whole:]
        return x
    # int-pack
    words = d.shape[-1]
    packed = np.frombuffer(read(d, r0 * words * 4, n * words * 4), "<i4").reshape(n, words)
    if w.bits == 4:
        out = scratch.get(key, n * words * 8) if scratch is not None else None
        x = unpack_int4_float(packed, cols, out)
        if not x.flags.c_contiguous:  # ragged last word: the slice is a strided view
            x = np.ascontiguousarray(x)
    else:
        x = unpack_rows(packed, cols, w.bits).astype(np.float32)
    s = w.scale
    groups = s.shape[1]
    srb = s.nbytes // s.shape[0]
    sc = to_float32(read(s, r0 * srb, n * srb), s.dtype, scratch, key + ".scale").reshape(n, groups)
    _check_scales(sc, s, r0)
    view = x.reshape(n, groups, w.group)  # the group divides the columns (checked in quant_weights)
    if w.zero is not None:
        view -= _zero_rows(read, w, r0, r1)[:, :, None]
    view *= sc[:, :, None]
    return x


def _check_scales(sc: np.ndarray, s: TensorEntry, first_row: int) -> None:
    """A scale that is NaN or Inf is a broken checkpoint, not a weight that moved: one scale spreads over a
    whole block (128 x 128 weights), and an Inf scale times a zero code is NaN while times the rest it is
    Inf, so the rows left finite would compare as unchanged (cosine 1.0). Refused, naming the tensor."""
    bad = ~np.isfinite(sc)
    if bad.any():
        r, c = (int(v) for v in np.argwhere(bad)[0])
        raise QuantSchemeError(f"{s.name} holds {int(bad.sum())} NaN or Inf scale(s) (first at [{first_row + r}, "
                               f"{c}]: {sc[r, c]}); a checkpoint with broken scales cannot be compared. Check or "
                               "re-download it.")


def _zero_rows(read: ReadFn, w: QuantWeight, r0: int, r1: int) -> np.ndarray:
    """Zero points of rows r0..r1 (n, groups) as float32, packed along rows or stored plain."""
    z, rows, groups = w.zero, w.shape[0], w.scale.shape[1]
    zrb = z.nbytes // z.shape[0]
    if z.shape[0] == rows:  # stored one row per weight row
        return to_float32(read(z, r0 * zrb, (r1 - r0) * zrb), z.dtype).reshape(r1 - r0, groups)
    per = 32 // w.bits
    w0, w1 = r0 // per, -(-r1 // per)
    packed = np.frombuffer(read(z, w0 * zrb, (w1 - w0) * zrb), "<i4").reshape(w1 - w0, groups)
    q = unpack_rows(np.ascontiguousarray(packed.T), (w1 - w0) * per, w.bits).T  # (rows in words, groups)
    return q[r0 - w0 * per:r1 - w0 * per].astype(np.float32)


def read_row_set(read: ReadFn, w: QuantWeight, rows: np.ndarray) -> np.ndarray:
    """Arbitrary rows (sorted ascending) of ``w``: one read per run of consecutive rows."""
    if len(rows) == 0:
        return np.empty((0, w.shape[1]), np.float32)
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    return np.concatenate([read_rows(read, w, int(run[0]), int(run[-1]) + 1) for run in np.split(rows, breaks)])


# -- recognising schemes ---------------------------------------------------------------------------------
_SUFFIXES = ("weight_packed", "weight_scale_inv", "weight_scale", "weight_zero_point", "weight_shape",
             "weight_global_scale", "input_scale", "input_global_scale", "qweight", "qzeros", "scales", "g_idx")


@dataclass(frozen=True)
class QuantConfig:
    """What config.json's quantization_config says (None/empty where it says nothing)."""

    method: str | None
    fmt: str | None
    block: tuple[int, int]
    groups: tuple[tuple[int, int | None, str | None], ...]  # (bits, group_size, strategy) per config group

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, where: str) -> QuantConfig:
        q = None
        for body in (config or {}, (config or {}).get("text_config") or {}):
            if isinstance(body, Mapping) and isinstance(body.get("quantization_config"), Mapping):
                q = body["quantization_config"]
                break
        if q is None:
            return cls(None, None, (128, 128), ())
        block = q.get("weight_block_size") or [128, 128]
        if not (isinstance(block, list) and len(block) == 2 and all(isinstance(v, int) and v > 0 for v in block)):
            raise QuantSchemeError(f"{where}: quantization_config.weight_block_size must be two positive "
                                   f"integers, got {block!r}.")
        groups = []
        config_groups = q.get("config_groups") or {}
        if not isinstance(config_groups, Mapping):
            raise QuantSchemeError(f"{where}: quantization_config.config_groups must be an object of named groups "
                                   f"(compressed-tensors), got a {type(config_groups).__name__}.")
        for g in config_groups.values():
            wts = g.get("weights") if isinstance(g, Mapping) else None
            if isinstance(wts, Mapping):
                bits = wts.get("num_bits") or 4
                if isinstance(bits, bool) or not isinstance(bits, int):
                    raise QuantSchemeError(f"{where}: quantization_config num_bits must be an integer, got "
                                           f"{str(bits)[:40]!r}.")
                groups.append((bits, wts.get("group_size"), wts.get("strategy")))
        return cls(q.get("quant_method"), q.get("format"), tuple(block), tuple(groups))


KNOWN_METHODS = ("fp8", "compressed-tensors")
SUPPORTED = ("bf16/fp16/fp32; FP8 e4m3 with block weight_scale_inv; compressed-tensors pack-quantized "
             "INT (weight_packed + weight_scale)")


def quant_weights(inv: Inventory, *, read_shape: Callable[[TensorEntry], tuple[int, ...]] | None = None
                  ) -> dict[str, QuantWeight]:
    """Every logical weight of a checkpoint by stored name (``...weight``), quantisation recognised.

    Raises :class:`QuantSchemeError` (one line) for an unknown scheme, a missing scale tensor or a group
    size that does not fit the tensors. ``read_shape`` reads a ``weight_shape`` tensor when the config
    cannot pin the column count (channel-wise packing)."""
    where = inv.source
    qc = QuantConfig.from_config(inv.config, where)
    if qc.method is not None and qc.method not in KNOWN_METHODS:
        raise QuantSchemeError(f"{where}: unknown quantisation scheme quant_method={qc.method!r}; eaglekit reads "
                               f"{SUPPORTED}.")
    if qc.method == "compressed-tensors" and qc.fmt not in (None, "pack-quantized", "mixed-precision"):
        raise QuantSchemeError(f"{where}: unknown quantisation scheme: compressed-tensors format {qc.fmt!r}; "
                               f"eaglekit reads {SUPPORTED}.")
    by_module: dict[str, dict[str, TensorEntry]] = {}
    out: dict[str, QuantWeight] = {}
    for t in inv.tensors:
        module, _, leaf = t.name.rpartition(".")
        if leaf in _SUFFIXES or leaf == "weight":
            by_module.setdefault(module, {})[leaf] = t
        elif t.dtype in FLOAT_DTYPES:
            out[t.name] = _plain(t)
    for module, parts in by_module.items():
        name = f"{module}.weight" if module else "weight"
        if "qweight" in parts or "weight_global_scale" in parts:
            raise QuantSchemeError(f"{where}: unknown quantisation scheme for {module} "
                                   f"(tensors {sorted(parts)}); eaglekit reads {SUPPORTED}.")
        if "weight_packed" in parts:
            out[name] = _int_pack(module, parts, qc, where, read_shape)
        elif "weight" in parts:
            t = parts["weight"]
            if t.dtype in FLOAT_DTYPES:
                out[name] = _plain(t)
            elif t.dtype == "F8_E4M3":
                out[name] = _fp8(module, parts, qc, where)
            else:
                raise QuantSchemeError(f"{where}: unknown quantisation scheme: {t.name} is {t.dtype} "
                                       f"(companions {sorted(set(parts) - {'weight'})}); eaglekit reads {SUPPORTED}.")
        elif "weight_scale" in parts or "weight_scale_inv" in parts:
            raise QuantSchemeError(f"{where}: {module} has scales but no weight or weight_packed tensor; "
                                   "the checkpoint is incomplete.")
    return out


def _plain(t: TensorEntry) -> QuantWeight:
    shape = t.shape if len(t.shape) == 2 else (1, t.shape[0]) if len(t.shape) == 1 else \
        (math.prod(t.shape[:-1]), t.shape[-1]) if t.shape else (1, 1)
    return QuantWeight(t.name, "plain", (int(shape[0]), int(shape[1])), t)


def _fp8(module: str, parts: dict[str, TensorEntry], qc: QuantConfig, where: str) -> QuantWeight:
    t = parts["weight"]
    s = parts.get("weight_scale_inv")
    if s is None and "weight_scale" in parts:
        raise QuantSchemeError(f"{where}: unknown quantisation scheme: {t.name} is F8_E4M3 with a weight_scale "
                               "(per-tensor or per-channel FP8, compressed-tensors float-quantized); eaglekit reads "
                               f"{SUPPORTED}.")
    if s is None:
        raise QuantSchemeError(f"{where}: scale tensor missing: {t.name} is F8_E4M3 but {module}.weight_scale_inv "
                               "is absent; block-quantised FP8 needs both.")
    if len(t.shape) != 2:
        raise QuantSchemeError(f"{where}: {t.name} is FP8 with shape {list(t.shape)}; expected 2-D [rows, cols].")
    rows, cols = t.shape
    bh, bw = qc.block
    want = (-(-rows // bh), -(-cols // bw))
    if tuple(s.shape) != want or s.dtype not in FLOAT_DTYPES:
        raise QuantSchemeError(f"{where}: {s.name} is {s.dtype} {list(s.shape)}, but {t.name} {list(t.shape)} in "
                               f"{bh}x{bw} blocks needs a float {list(want)}; check weight_block_size in config.json.")
    return QuantWeight(t.name, "fp8-block", (rows, cols), t, scale=s, block=(bh, bw))


def _int_pack(module: str, parts: dict[str, TensorEntry], qc: QuantConfig, where: str,
              read_shape: Callable[[TensorEntry], tuple[int, ...]] | None) -> QuantWeight:
    p = parts["weight_packed"]
    name = f"{module}.weight"
    s = parts.get("weight_scale")
    if s is None:
        raise QuantSchemeError(f"{where}: scale tensor missing: {p.name} is present but {module}.weight_scale is "
                               "absent; pack-quantised weights need their scales.")
    if p.dtype != "I32" or len(p.shape) != 2 or len(s.shape) != 2 or s.dtype not in FLOAT_DTYPES:
        raise QuantSchemeError(f"{where}: unknown quantisation scheme: {p.name} is {p.dtype} {list(p.shape)} with "
                               f"scale {s.dtype} {list(s.shape)}; eaglekit reads {SUPPORTED}.")
    rows, words = p.shape
    groups = s.shape[1]
    bits_set = {b for b, _, _ in qc.groups} or {4}
    if len(bits_set) != 1 or next(iter(bits_set)) not in (1, 2, 4, 8):
        raise QuantSchemeError(f"{where}: unknown quantisation scheme: num_bits {sorted(bits_set)}; eaglekit "
                               "unpacks 1, 2, 4 or 8 bits per value.")
    bits = next(iter(bits_set))
    per = 32 // bits
    if s.shape[0] != rows:
        raise QuantSchemeError(f"{where}: {s.name} has {s.shape[0]} rows but {p.name} has {rows}.")
    sizes = [g for _, g, strat in qc.groups if isinstance(g, int) and g > 0 and strat in (None, "group")]
    if sizes:
        fits = [g for g in sizes if (words - 1) * per < groups * g <= words * per]
        if not fits:
            raise QuantSchemeError(
                f"{where}: mismatched group size: {p.name} packs about {words * per} columns with {groups} scale "
                f"columns, which no config group_size ({', '.join(map(str, sorted(set(sizes))))}) explains; check "
                "quantization_config.config_groups in config.json.")
        group = fits[0]
        cols = groups * group
    else:
        if "weight_shape" in parts and read_shape is not None:
            ws = parts["weight_shape"]
            if list(ws.shape) != [2] or ws.dtype not in ("I32", "I64"):  # checked before a byte is read
                raise QuantSchemeError(f"{where}: {ws.name} is {ws.dtype} {list(ws.shape)}; compressed-tensors "
                                       "stores a weight's shape as two integers.")
            shape = read_shape(ws)
            cols = int(shape[-1])
            if not 0 < cols <= words * per:
                raise QuantSchemeError(f"{where}: {ws.name} says {cols} columns; {p.name} packs at most "
                                       f"{words * per}.")
        else:
            cols = words * per
        group = cols // groups
        if group * groups != cols:
            raise QuantSchemeError(f"{where}: mismatched group size: {p.name} has {cols} columns and {groups} "
                                   "scale columns; no group size fits.")
    if -(-cols * bits // 32) != words:
        raise QuantSchemeError(f"{where}: {p.name} holds {words} words per row, not the {-(-cols * bits // 32)} "
                               f"that {cols} columns of {bits} bits need.")
    z = parts.get("weight_zero_point")
    if z is not None and (len(z.shape) != 2 or z.shape[1] != groups or z.shape[0] not in (rows, -(-rows // per))):
        raise QuantSchemeError(f"{where}: {z.name} is {list(z.shape)}; expected [{rows} or {-(-rows // per)}, "
                               f"{groups}] for {p.name}.")
    return QuantWeight(name, "int-pack", (rows, cols), p, scale=s, zero=z, group=group, bits=bits)


#: Wrappers nest the language model under a prefix (K2.5: ``language_model.model.``); strip them.
_WRAPPER = re.compile(r"^(?:model\.)?(?:language_model\.)?(?:model\.)?")


def align_name(name: str) -> str:
    """``language_model.model.layers.3.mlp.experts.1.up_proj.weight`` -> ``layers.3.mlp.experts.1.up_proj.weight``."""
    return _WRAPPER.sub("", name, count=1)
