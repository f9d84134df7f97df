"""JSON from files and servers we do not control: parsed with bounds, failing with one clear error.

``json.loads`` alone lets hostile input escape as a RecursionError (``[[[[...`` nested thousands
deep), a ValueError (an integer of 5,000 digits: Python caps int parsing at 4,300) or, for nesting a
little under the interpreter's limit, a RecursionError later in whatever walks the value (a config
diff, a renderer). :func:`loads` turns all of these into the caller's error type and refuses nesting
deeper than :data:`MAX_DEPTH` (real configs, indexes and Hub listings nest a handful of levels).
"""

from __future__ import annotations

import json
import math
from typing import Any

from eaglekit.core.errors import EaglekitError

#: Deepest nesting accepted (objects and arrays). Real configs nest about 4 levels, Hub listings 5.
MAX_DEPTH = 64


def loads(data: bytes | str, *, what: str, error: type[EaglekitError], max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` (the contents of ``what``); raise ``error`` with a one-line reason on anything
    that is not bounded, valid JSON."""
    try:
        value = json.loads(data)
    except json.JSONDecodeError as e:
        raise error(f"{what} is not valid JSON: {e.msg} (line {e.lineno} column {e.colno}).") from e
    except UnicodeDecodeError as e:
        raise error(f"{what} is not valid JSON: it is not UTF-8 text ({e.reason} at byte {e.start}).") from e
    except RecursionError as e:
        raise error(f"{what} nests arrays or objects too deeply to parse; expected at most {max_depth} "
                    "levels.") from e
    except ValueError as e:  # an integer literal longer than Python's int-parsing limit
        raise error(f"{what} is not usable JSON: {str(e).split(';')[0]}.") from e
    if depth(value, stop=max_depth + 1) > max_depth:
        raise error(f"{what} nests arrays or objects more than {max_depth} levels deep; refusing it.")
    return value


def depth(value: Any, *, stop: int | None = None) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar is 0), counting no further than
    ``stop``. Iterative: safe on any input."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, level = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        level += 1
        deepest = max(deepest, level)
        if stop is not None and deepest >= stop:
            return deepest
        todo.extend((child, level) for child in children if isinstance(child, (dict, list)))
    return deepest


def finite(value: Any) -> Any:
    """``value`` with every float that is NaN or infinite replaced by None (JSON null), tuples made lists:
    what ``json.dumps(..., allow_nan=False)`` accepts. Iterative, so no nesting depth overflows it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    root = [value]
    todo: list[tuple[Any, Any]] = [(root, 0)]
    while todo:
        holder, key = todo.pop()
        item = holder[key]
        if isinstance(item, float) and not math.isfinite(item):
            holder[key] = None
        elif isinstance(item, dict):
            item = holder[key] = dict(item)
            todo.extend((item, k) for k in item)
        elif isinstance(item, (list, tuple)):
            item = holder[key] = list(item)
            todo.extend((item, i) for i in range(len(item)))
    return root[0]


#: Longest list :func:`summarised` keeps whole.
MAX_LISTED = 1000


def summarised(value: Any, *, most: int = MAX_LISTED, keep: int = 20) -> Any:
    """``value`` with every list (or tuple) or object longer than ``most`` replaced by a summary object:
    ``{"count": n, "first": the first ``keep`` items, "last": the last ``keep``, "summarised": a sentence}``. An output that
    echoes its inputs (a million measured rows) stays a size a terminal, a notebook or ``jq`` can take, and
    says that it was cut. Iterative, like :func:`finite`."""
    def cut(items: Any) -> Any:
        if isinstance(items, (list, tuple)) and len(items) > most:
            n = len(items)
            return {"count": n, "first": list(items[:keep]), "last": list(items[-keep:]),
                    "summarised": f"{n:,} items: the first and last {keep} are listed"}
        if isinstance(items, dict) and len(items) > most:   # a mapping by batch size, say: the same summary
            n, keys = len(items), list(items)
            return {"count": n, "first": {k: items[k] for k in keys[:keep]}, "last": {k: items[k] for k in keys[-keep:]},
                    "summarised": f"{n:,} entries: the first and last {keep} are listed"}
        return items

    root = [cut(value)]
    todo: list[tuple[Any, Any]] = [(root, 0)]
    while todo:
        holder, key = todo.pop()
        item = holder[key]
        if isinstance(item, dict):
            item = holder[key] = {k: cut(v) for k, v in item.items()}
            todo.extend((item, k) for k in item)
        elif isinstance(item, (list, tuple)):
            item = holder[key] = [cut(v) for v in item]
            todo.extend((item, i) for i in range(len(item)))
    return root[0]
