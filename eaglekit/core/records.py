"""Frozen result records to JSON and back, exactly, for the result cache (:mod:`eaglekit.io.cache`).

A cache entry is input like any other: it is decoded by a strict reader that builds only the record classes
registered here (by name, never by import path), only from plain JSON (no pickle), and refuses anything else with
:class:`RecordError`. Floats round-trip exactly (``repr``); NaN and infinities, tuples, dicts and small numpy
arrays carry a tag, so a decoded record compares equal to the one encoded.

    >>> register(Interval)                                  # once, where the class is defined or used
    >>> decode(json.loads(json.dumps(encode(x)))) == x
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from eaglekit.core.errors import EaglekitError

#: record classes a cache entry may build, by name
_REGISTRY: dict[str, type] = {}
#: numpy dtypes an entry may hold (small per-sample arrays)
_DTYPES = ("int64", "int32", "float64", "float32", "bool")
#: nesting an entry may have: records inside records are a few levels deep
MAX_DEPTH = 64


class RecordError(EaglekitError):
    """A cache entry that is not a record this version of eaglekit wrote: it is ignored and recomputed."""


def register(*classes: type) -> None:
    """Let :func:`decode` build these frozen dataclasses (by their class name)."""
    for cls in classes:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a dataclass")
        _REGISTRY[cls.__name__] = cls


def encode(value: Any, _depth: int = 0) -> Any:
    """A JSON-ready form of ``value`` (registered records, tuples, dicts with string keys, lists, numbers, strings,
    None, numpy arrays and scalars). Raises TypeError for anything else: such a result is not cached."""
    if _depth > MAX_DEPTH:
        raise TypeError("record nested too deeply to cache")
    d = _depth + 1
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, tuple):
        return {"$t": [encode(v, d) for v in value]}
    if isinstance(value, list):
        return [encode(v, d) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("only dicts with string keys are cached")
        return {"$d": {k: encode(v, d) for k, v in value.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _REGISTRY.get(name) is not type(value):
            raise TypeError(f"{name} is not a registered record")
        return {"$c": name, "f": {f.name: encode(getattr(value, f.name), d) for f in dataclasses.fields(value)}}
    mod = type(value).__module__
    if mod == "numpy":
        import numpy as np

        if isinstance(value, np.ndarray):
            if value.dtype.name not in _DTYPES:
                raise TypeError(f"numpy {value.dtype} arrays are not cached")
            return {"$a": value.dtype.name, "s": list(value.shape), "v": encode(value.ravel().tolist(), d)}
        if isinstance(value, np.generic):
            return encode(value.item(), _depth)
    raise TypeError(f"{type(value).__name__} values are not cached")


def decode(data: Any, _depth: int = 0) -> Any:
    """The value :func:`encode` was given; :class:`RecordError` for anything it could not have written."""
    if _depth > MAX_DEPTH:
        raise RecordError("entry nested too deeply")
    d = _depth + 1
    if data is None or isinstance(data, (bool, str, int)):
        return data
    if isinstance(data, float):
        if not math.isfinite(data):
            raise RecordError("a bare non-finite number")
        return data
    if isinstance(data, list):
        return [decode(v, d) for v in data]
    if not isinstance(data, dict) or len(data) not in (1, 2, 3):
        raise RecordError(f"unexpected {type(data).__name__} in entry")
    if set(data) == {"$f"}:
        if data["$f"] not in ("nan", "inf", "-inf"):
            raise RecordError(f"bad float tag {data['$f']!r}")
        return float(data["$f"])
    if set(data) == {"$t"} and isinstance(data["$t"], list):
        return tuple(decode(v, d) for v in data["$t"])
    if set(data) == {"$d"} and isinstance(data["$d"], dict):
        return {str(k): decode(v, d) for k, v in data["$d"].items()}
    if set(data) == {"$c", "f"} and isinstance(data["f"], dict):
        cls = _REGISTRY.get(data["$c"]) if isinstance(data["$c"], str) else None
        if cls is None:
            raise RecordError(f"unknown record {data['$c']!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        if set(data["f"]) != names:
            raise RecordError(f"{cls.__name__} fields differ: written by another version")
        try:
            return cls(**{k: decode(v, d) for k, v in data["f"].items()})
        except (TypeError, ValueError) as e:
            raise RecordError(f"{cls.__name__} refused its fields: {e}") from e
    if set(data) == {"$a", "s", "v"}:
        import numpy as np

        if data["$a"] not in _DTYPES or not isinstance(data["s"], list) or not isinstance(data["v"], list):
            raise RecordError("bad array entry")
        if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in data["s"]):
            raise RecordError("bad array shape")
        values = decode(data["v"], d)
        if math.prod(data["s"]) != len(values):
            raise RecordError("array shape and values disagree")
        return np.asarray(values, dtype=data["$a"]).reshape(data["s"])
    raise RecordError("unexpected mapping in entry")
