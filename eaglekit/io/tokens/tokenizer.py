"""A target's tokenizer files, read from any location the kit reads, as config.json is read.

Each file is one small GET (a local read, an HTTP or Hub GET, an SFTP read) whose size is checked
against its limit before it is read (:data:`LIMITS`): no tokenizer is built and no code in the folder runs
(``auto_map`` is only named, :mod:`eaglekit.core.tokens.tokenizer_files`). tiktoken files are fetched only when
there is no ``tokenizer.json``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from eaglekit.core.tokens.chat_template import MAX_TEMPLATE_BYTES
from eaglekit.core.errors import ConfigError, InputError, TooLargeError
from eaglekit.core.redact import visible
from eaglekit.core.safejson import loads
from eaglekit.core.tokens.diff import TokenizerDiff, diff_tokenizers
from eaglekit.core.tokens.tokenizer_files import (
    CHAT_TEMPLATE_FILE,
    SPECIAL_TOKENS_MAP,
    TIKTOKEN_NAMES,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    TokenizerFiles,
    config_vocab_size,
    parse_tokenizer_files,
)
from eaglekit.io.location import Location, parse_location
from eaglekit.io.sources import open_source

#: Bytes each file may have (Gemma 3's tokenizer.json, among the largest, is about 33 MB).
LIMITS: Mapping[str, int] = {
    TOKENIZER_CONFIG: 16 << 20, SPECIAL_TOKENS_MAP: 1 << 20, CHAT_TEMPLATE_FILE: MAX_TEMPLATE_BYTES,
    TOKENIZER_JSON: 64 << 20, "tiktoken.model": 32 << 20, "tokenizer.model": 32 << 20,
}

#: Bytes a model's config.json may have (read for its vocab_size).
CONFIG_LIMIT = 4 << 20


def read_tokenizer(location: str | os.PathLike[str] | Location, *, endpoint: str | None = None, timeout: float | None = None,
                   token: str | bool | None = None) -> TokenizerFiles:
    """The tokenizer files of a target folder, Hub repo, URL or SSH path (a file location means its folder)."""
    raw = _read_files(location, endpoint=endpoint, timeout=timeout, token=token, required=True)
    label = str(location.raw if isinstance(location, Location) else location)
    files = parse_tokenizer_files(raw, source=label)
    size = _config_vocab_size(location, endpoint=endpoint, timeout=timeout, token=token)
    return files if size is None else replace(files, model_vocab_size=size)


def _config_vocab_size(location, *, endpoint, timeout, token) -> int | None:
    """``vocab_size`` from the folder's config.json (None without one)."""
    loc = location if isinstance(location, Location) else parse_location(location)
    source, loc = open_source(loc, endpoint=endpoint, timeout=timeout, token=token)
    with source:
        try:
            raw = source.read_small("config.json", limit=CONFIG_LIMIT)
        except TooLargeError as e:
            raise InputError(f"{source.display}/config.json is larger than {CONFIG_LIMIT:,} bytes, more than any "
                             "model config; refusing to read it.") from e
    if raw is None:
        return None
    return config_vocab_size(loads(raw, what=f"{loc.raw}/config.json", error=ConfigError))


def _read_files(location, *, endpoint, timeout, token, required: bool) -> dict[str, bytes]:
    loc = location if isinstance(location, Location) else parse_location(location)
    source, loc = open_source(loc, endpoint=endpoint, timeout=timeout, token=token)
    raw: dict[str, bytes] = {}
    with source:
        listing = source.list() if source.kind == "ssh" else None  # local reads refuse FIFOs and links out
        for name in (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, CHAT_TEMPLATE_FILE, TOKENIZER_JSON, *TIKTOKEN_NAMES):
            if name in TIKTOKEN_NAMES and (TOKENIZER_JSON in raw or any(n in raw for n in TIKTOKEN_NAMES)):
                continue
            if listing is not None and name not in listing:
                continue
            try:
                data = source.read_small(name, limit=LIMITS[name])
            except TooLargeError as e:
                raise InputError(f"{source.display}/{name} is larger than {LIMITS[name]:,} bytes, more than any "
                                 "real tokenizer file of its kind; refusing to read it.") from e
            if data is not None:
                raw[name] = data
    if required and not raw:
        raise InputError(f"{loc.raw} holds no tokenizer files (tokenizer.json, tokenizer_config.json, tiktoken.model, "
                         "chat_template.jinja): give the target model's folder or repository.")
    return raw


def tokenizer_diff(a: str | os.PathLike[str], b: str | os.PathLike[str], *, endpoint: str | None = None, timeout: float | None = None,
                   token: str | bool | None = None) -> TokenizerDiff:
    """Two targets' tokenizers and chat templates compared (``eaglekit tokenizer-diff A B``)."""
    return diff_tokenizers(read_tokenizer(a, endpoint=endpoint, timeout=timeout, token=token),
                           read_tokenizer(b, endpoint=endpoint, timeout=timeout, token=token))


@dataclass(frozen=True)
class DrafterClaims:
    """What a drafter's checkpoint says about the tokenizer it was trained with (often nothing)."""

    drafter: str
    verifier: str | None
    tokenizer: TokenizerFiles | None

    @property
    def says_anything(self) -> bool:
        return self.verifier is not None or self.tokenizer is not None

    def __str__(self) -> str:
        if not self.says_anything:
            return f"{self.drafter} does not say which tokenizer or chat template it was trained with."
        parts = []
        if self.verifier:
            parts.append(f"its config names the target {visible(repr(self.verifier), newlines=False)}")
        if self.tokenizer is not None:
            t = self.tokenizer
            parts.append(f"it ships tokenizer files ({', '.join(sorted(t.files))}; {t.vocab_size:,} tokens"
                         + (", a chat template" if t.templates else "") + ")")
        return f"{visible(self.drafter, newlines=False)}: " + "; ".join(parts) + "."

    def to_json(self) -> dict[str, Any]:
        return {"drafter": self.drafter, "verifier": self.verifier,
                "tokenizer": self.tokenizer.to_json() if self.tokenizer is not None else None}


def drafter_claims(drafter: str | os.PathLike[str] | Location, *, endpoint: str | None = None, timeout: float | None = None,
                   token: str | bool | None = None) -> DrafterClaims:
    """The verifier a drafter's config names (speculators ``speculators_config.verifier.name_or_path``) and
    the tokenizer files saved beside its weights, if any."""
    loc = drafter if isinstance(drafter, Location) else parse_location(drafter)
    source, loc = open_source(loc, endpoint=endpoint, timeout=timeout, token=token)
    with source:
        raw = source.read_small("config.json")
    verifier = None
    if raw is not None:
        cfg = loads(raw, what=f"{loc.raw}/config.json", error=ConfigError)
        spec = cfg.get("speculators_config") if isinstance(cfg, dict) else None
        ver = spec.get("verifier") if isinstance(spec, dict) else None
        name = ver.get("name_or_path") if isinstance(ver, dict) else None
        verifier = name if isinstance(name, str) else None
    files = _read_files(loc, endpoint=endpoint, timeout=timeout, token=token, required=False)
    tok = parse_tokenizer_files(files, source=loc.raw) if files else None
    return DrafterClaims(loc.raw, verifier, tok)
