"""Turn raw safetensors bytes into numpy arrays or torch tensors (little-endian, as the format says)."""

from __future__ import annotations

from collections.abc import Sequence

from eaglekit.core.errors import HeaderError

#: safetensors dtype -> numpy dtype string, for the dtypes numpy represents natively.
NUMPY_DTYPES = {
    "BOOL": "?", "U8": "u1", "I8": "i1", "I16": "<i2", "U16": "<u2", "F16": "<f2", "I32": "<i4", "U32": "<u4",
    "F32": "<f4", "I64": "<i8", "U64": "<u8", "F64": "<f8", "C64": "<c8",
}

#: safetensors dtype -> torch dtype attribute name.
TORCH_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "F16": "float16",
    "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32", "I64": "int64", "U64": "uint64",
    "F64": "float64", "C64": "complex64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}


def to_numpy(data: bytes, dtype: str, shape: Sequence[int], *, name: str = "tensor"):
    import numpy as np

    if dtype not in NUMPY_DTYPES:
        raise HeaderError(f"{name} is {dtype}, which numpy cannot hold; read it with read_tensor() (torch).")
    return np.frombuffer(data, dtype=NUMPY_DTYPES[dtype]).reshape(tuple(shape))


def torch_dtype(dtype: str):
    import torch

    attr = TORCH_DTYPES.get(dtype)
    if attr is None or not hasattr(torch, attr):
        raise HeaderError(f"dtype {dtype} has no torch equivalent in this torch version.")
    return getattr(torch, attr)


def to_torch(data: bytes | bytearray | memoryview, dtype: str, shape: Sequence[int], *, name: str = "tensor"):
    """A torch tensor over ``data`` (copied once into a writable buffer, as torch.frombuffer wants)."""
    import torch

    buf = bytearray(data) if isinstance(data, bytes) else data
    if len(buf) == 0:
        return torch.empty(tuple(shape), dtype=torch_dtype(dtype))
    return torch.frombuffer(buf, dtype=torch_dtype(dtype)).reshape(tuple(shape))
