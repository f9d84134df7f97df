"""Prompt files for accept-length measurement: JSONL, one prompt a line, parsed without I/O.

Each line is one JSON object with exactly one of:

* ``{"input_ids": [int, ...]}``: token ids, used as they are;
* ``{"text": "..."}``: plain text, tokenized by the target's tokenizer;
* ``{"messages": [{"role": ..., "content": ...}, ...]}``: a chat, rendered with the target tokenizer's
  chat template (generation prompt added); the template's sha256 is recorded in the result.

Blank lines are skipped. A bad line is an :class:`~eaglekit.core.errors.InputError` naming the file and
the line number. Prompts files come from anywhere: a line longer than :data:`MAX_LINE_BYTES`, JSON nested
deeper than :mod:`~eaglekit.core.safejson` allows, an integer longer than Python parses and a token id
of :data:`MAX_TOKEN_ID` or more are refused with one line (the file's size is checked by its reader,
against :data:`MAX_FILE_BYTES`, before it is read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from eaglekit.core.errors import InputError
from eaglekit.core.safejson import loads

PromptKind = Literal["input_ids", "text", "messages"]
_KINDS = ("input_ids", "text", "messages")
#: The largest prompts file read (64 MiB: millions of prompts' worth of token ids).
MAX_FILE_BYTES = 64 << 20
#: The longest line parsed (4 MiB: about a million tokens of text, past any model's context).
MAX_LINE_BYTES = 4 << 20
#: Token ids are below this (2^31: the largest vocabularies hold a few hundred thousand).
MAX_TOKEN_ID = 1 << 31


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
    if len(text) > MAX_LINE_BYTES:
        raise InputError(f"{where} holds {len(text):,} characters; a prompt line may hold at most "
                         f"{MAX_LINE_BYTES:,}.")
    try:
        obj = loads(text, what=where, error=InputError)  # bounded: depth, integer length
    except InputError as e:
        if isinstance(e.__cause__, json.JSONDecodeError):
            bad = e.__cause__
            raise InputError(f"{where}: not valid JSON ({bad.msg} at column {bad.colno}).") from bad
        raise
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
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_TOKEN_ID for v in value):
            raise InputError(f"{where}: input_ids must be a non-empty list of integers from 0 to {MAX_TOKEN_ID - 1}.")
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
