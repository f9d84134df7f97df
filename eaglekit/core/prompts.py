"""Prompt files for accept-length measurement: JSONL, one prompt a line, parsed without I/O.

Each line is one JSON object with exactly one of:

* ``{"input_ids": [int, ...]}``: token ids, used as they are;
* ``{"text": "..."}``: plain text, tokenized by the target's tokenizer;
* ``{"messages": [{"role": ..., "content": ...}, ...]}``: a chat, rendered with the target tokenizer's
  chat template (generation prompt added); the template's sha256 is recorded in the result.

Blank lines are skipped. A bad line is an :class:`~eaglekit.core.errors.InputError` naming the file and
the line number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from eaglekit.core.errors import InputError

PromptKind = Literal["input_ids", "text", "messages"]
_KINDS = ("input_ids", "text", "messages")


@dataclass(frozen=True)
class Prompt:
    """One prompt: its kind and value (token ids as a tuple, text, or the messages list)."""

    kind: PromptKind
    value: Any
    line: int


def parse_prompts(data: bytes | str, *, source: str = "prompts.jsonl") -> tuple[Prompt, ...]:
    """Every prompt in a JSONL file's contents; errors name ``source`` and the line."""
    text = data.decode("utf-8", errors="strict") if isinstance(data, bytes) else data
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        prompts.append(parse_line(line, source=source, line=number))
    if not prompts:
        raise InputError(f"{source} holds no prompts: give one JSON object a line, "
                         '{"input_ids": [...]}, {"text": "..."} or {"messages": [...]}.')
    return tuple(prompts)


def parse_line(text: str, *, source: str, line: int) -> Prompt:
    """One JSONL line (``line`` is its 1-based number, for messages)."""
    where = f"{source} line {line}"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: not valid JSON ({e.msg} at column {e.colno}).") from e
    if not isinstance(obj, Mapping):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}.")
    keys = [k for k in _KINDS if k in obj]
    if len(keys) != 1:
        raise InputError(f"{where}: give exactly one of input_ids, text or messages (found "
                         f"{', '.join(keys) or 'none of them'}).")
    kind = keys[0]
    value = obj[kind]
    if kind == "input_ids":
        if not isinstance(value, list) or not value or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise InputError(f"{where}: input_ids must be a non-empty list of non-negative integers.")
        return Prompt("input_ids", tuple(value), line)
    if kind == "text":
        if not isinstance(value, str) or not value:
            raise InputError(f"{where}: text must be a non-empty string.")
        return Prompt("text", value, line)
    if not isinstance(value, list) or not value or not all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in value):
        raise InputError(f"{where}: messages must be a non-empty list of {{\"role\": str, \"content\": str}} objects.")
    return Prompt("messages", [dict(m) for m in value], line)
