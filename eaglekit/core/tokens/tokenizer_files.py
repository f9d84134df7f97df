"""A target's tokenizer, read from its files' bytes: vocabulary, special tokens, chat templates.

Pure: bytes in, a :class:`TokenizerFiles` record out; no tokenizer is built and no code runs. The files
and what is read from each (transformers ``tokenization_utils_base._from_pretrained``; huggingface
tokenizers' ``tokenizer.json``; Kimi's ``tokenization_kimi.py``):

* ``tokenizer.json``: ``model.vocab`` ({token: id} for BPE, WordPiece and WordLevel; [[piece, score], ...]
  for Unigram, the id being the index) and ``added_tokens`` ([{id, content, special, ...}]);
* ``tokenizer_config.json``: ``bos_token`` / ``eos_token`` / ``pad_token`` / ``unk_token`` (a string or an
  ``{"content": ...}`` object), ``added_tokens_decoder`` ({"id": {content, special}}), ``chat_template`` (a
  string, or a list of ``{"name", "template"}``), ``tokenizer_class`` and ``auto_map`` (remote code);
* ``special_tokens_map.json``: the same ``*_token`` keys (legacy; the config's win);
* ``chat_template.jinja``: the default chat template, which takes priority over the config's;
* tiktoken-style ``*.model`` (Kimi's ``tiktoken.model``, Llama 3's ``original/tokenizer.model``): one
  ``<base64 token> <rank>`` line per token (tiktoken ``load_tiktoken_bpe``); Kimi names the ids after the
  base vocabulary from ``added_tokens_decoder``. A binary (SentencePiece protobuf) ``tokenizer.model`` is
  compared by its hash only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.redact import shown
from eaglekit.core.safejson import loads

#: The files a tokenizer is read from, in the order they are fetched.
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
TIKTOKEN_NAMES = ("tiktoken.model", "tokenizer.model")
SPECIAL_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")
#: Most tokens a vocabulary may hold (the largest real ones hold about 260,000).
MAX_VOCAB = 1 << 21
#: Most strings a tokenizer JSON file may hold (vocabulary plus merges: about 600,000 for Qwen's).
MAX_STRINGS = 1 << 22

# token id -> its text (tiktoken tokens: their bytes, shown as Python bytes literals when not UTF-8)
Vocab = dict[int, str]


@dataclass(frozen=True)
class AddedToken:
    id: int
    content: str
    special: bool


@dataclass(frozen=True)
class TokenizerFiles:
    """What a target's tokenizer files say. ``vocab`` maps every id the files name to its token;
    ``files`` maps each file read to its sha256; ``remote_code`` names the class ``auto_map`` asks for."""

    source: str
    vocab: Vocab
    added: tuple[AddedToken, ...]
    special: dict[str, str | None]
    templates: dict[str, str]
    files: dict[str, str]
    kind: str
    tokenizer_class: str | None = None
    remote_code: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the model's ``vocab_size`` from its config.json (``text_config.vocab_size`` for a multimodal one such as
    #: Kimi-K2.5): the size engines give the embedding, the lm_head and a drafter's t2d; None when not read
    model_vocab_size: int | None = None

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def vocab_sha256(self) -> str:
        """sha256 over (id, token) in id order: equal vocabularies hash equal whatever file held them."""
        h = hashlib.sha256()
        for i in sorted(self.vocab):
            h.update(f"{i}\t{self.vocab[i]}\n".encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    @property
    def template(self) -> str | None:
        """The default chat template (``default`` of several), or None."""
        return self.templates.get("default")

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "kind": self.kind, "vocab_size": self.vocab_size,
                "vocab_sha256": self.vocab_sha256, "special": dict(self.special),
                "added_tokens": [{"id": a.id, "content": a.content, "special": a.special} for a in self.added],
                "chat_templates": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in self.templates.items()},
                "files": dict(self.files), "tokenizer_class": self.tokenizer_class, "remote_code": self.remote_code,
                "notes": list(self.notes)}


def parse_tokenizer_files(raw: Mapping[str, bytes], *, source: str) -> TokenizerFiles:
    """A :class:`TokenizerFiles` from the bytes of the files found (name -> bytes). Raises
    :class:`InputError` naming the file when one is malformed, or when none holds a vocabulary or template."""
    files = {name: hashlib.sha256(data).hexdigest() for name, data in raw.items()}
    config = _json(raw, TOKENIZER_CONFIG, source)
    smap = _json(raw, SPECIAL_TOKENS_MAP, source)
    tjson = _json(raw, TOKENIZER_JSON, source)
    notes: list[str] = []
    vocab: Vocab = {}
    added: dict[int, AddedToken] = {}
    kind = "none"
    if tjson is not None:
        vocab, kind = _vocab_from_tokenizer_json(tjson, f"{source}/{TOKENIZER_JSON}")
        for entry in _list(tjson.get("added_tokens"), f"{source}/{TOKENIZER_JSON} added_tokens"):
            tok = _added(entry, None, f"{source}/{TOKENIZER_JSON} added_tokens")
            added[tok.id] = tok
    else:
        for name in TIKTOKEN_NAMES:
            if name in raw:
                parsed = _tiktoken(raw[name], f"{source}/{name}")
                if parsed is None:
                    notes.append(f"{name} is not a tiktoken text file (a SentencePiece model?): compared by its hash only")
                    kind = "binary-model"
                else:
                    vocab, kind = parsed, "tiktoken"
                break
    if config is not None:
        decoder = config.get("added_tokens_decoder")
        if decoder is not None:
            if not isinstance(decoder, Mapping):
                raise InputError(f"{source}/{TOKENIZER_CONFIG}: added_tokens_decoder must be an object of id -> token.")
            for key, entry in decoder.items():
                added.setdefault(_int_key(key, f"{source}/{TOKENIZER_CONFIG} added_tokens_decoder"),
                                 _added(entry, key, f"{source}/{TOKENIZER_CONFIG} added_tokens_decoder"))
    for tok in added.values():
        vocab[tok.id] = tok.content
    if len(vocab) > MAX_VOCAB:
        raise InputError(f"{source}: the tokenizer names {len(vocab):,} tokens, more than any real vocabulary "
                         f"({MAX_VOCAB:,}); refusing it.")
    special: dict[str, str | None] = {}
    for key in SPECIAL_KEYS:
        value = _token_text(config.get(key)) if config is not None and key in config else None
        if value is None and smap is not None:
            value = _token_text(smap.get(key))
        special[key] = value
    templates = _templates(raw, config, source)
    remote, cls = None, None
    if config is not None:
        cls = config.get("tokenizer_class") if isinstance(config.get("tokenizer_class"), str) else None
        auto = config.get("auto_map")
        if isinstance(auto, Mapping) and auto.get("AutoTokenizer") is not None:
            entry = auto["AutoTokenizer"]
            names = [e for e in (entry if isinstance(entry, list) else [entry]) if isinstance(e, str)]
            remote = names[0] if names else "AutoTokenizer"
    if not vocab and not templates and kind != "binary-model":
        raise InputError(f"{source} holds no tokenizer files eaglekit reads (tokenizer.json, tokenizer_config.json, "
                         "tiktoken.model, chat_template.jinja): give the target model's folder or repository.")
    return TokenizerFiles(source=source, vocab=vocab, added=tuple(sorted(added.values(), key=lambda a: a.id)),
                          special=special, templates=templates, files=files, kind=kind, tokenizer_class=cls,
                          remote_code=remote, notes=tuple(notes))


def _json(raw: Mapping[str, bytes], name: str, source: str) -> dict[str, Any] | None:
    if name not in raw:
        return None
    # every string costs a Python object: refuse, before parsing, more than any real tokenizer file holds
    if raw[name].count(b'"') > 2 * MAX_STRINGS:
        raise InputError(f"{source}/{name} holds more than {MAX_STRINGS:,} strings, more than any real tokenizer "
                         "file; refusing to parse it.")
    value = loads(raw[name], what=f"{source}/{name}", error=InputError)
    if not isinstance(value, dict):
        raise InputError(f"{source}/{name} must be a JSON object, got {type(value).__name__}.")
    return value


def _list(value: Any, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{what} must be a list.")
    return value


def _int_key(key: Any, what: str) -> int:
    """A token id: a JSON integer, or an object key of decimal digits (added_tokens_decoder's "7"); ``true``,
    ``7.9`` or ``"7.0"`` are refused, never read as 1 or 7."""
    if isinstance(key, str) and re.fullmatch(r"[0-9]{1,12}", key.strip()):
        key = int(key.strip())
    if isinstance(key, bool) or not isinstance(key, int):
        raise InputError(f"{what}: {shown(repr(key)[:80])} is not a token id (a whole number).")
    i = key
    if not 0 <= i < MAX_VOCAB:
        raise InputError(f"{what}: token id {shown(str(key)[:40])} is outside 0..{MAX_VOCAB - 1}.")
    return i


def _added(entry: Any, key: Any, what: str) -> AddedToken:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("content"), str):
        raise InputError(f"{what}: every entry must be an object with a string content.")
    i = _int_key(entry.get("id") if key is None else key, what)
    return AddedToken(i, entry["content"], bool(entry.get("special", False)))


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _vocab_from_tokenizer_json(tjson: Mapping[str, Any], what: str) -> tuple[Vocab, str]:
    model = tjson.get("model")
    if not isinstance(model, Mapping):
        raise InputError(f"{what} has no model object: not a Hugging Face tokenizers file.")
    kind = str(model.get("type") or "unknown")
    raw = model.get("vocab")
    vocab: Vocab = {}
    if isinstance(raw, Mapping):
        if len(raw) > MAX_VOCAB:
            raise InputError(f"{what}: model.vocab holds {len(raw):,} tokens, more than {MAX_VOCAB:,}; refusing it.")
        for token, i in raw.items():
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < MAX_VOCAB:
                raise InputError(f"{what}: token {shown(repr(token)[:80])} has id {shown(repr(i)[:40])}, not an id in "
                                 f"0..{MAX_VOCAB - 1}.")
            vocab[i] = str(token)
    elif isinstance(raw, list):  # Unigram: [[piece, score], ...], the id is the index
        if len(raw) > MAX_VOCAB:
            raise InputError(f"{what}: model.vocab holds {len(raw):,} tokens, more than {MAX_VOCAB:,}; refusing it.")
        for i, entry in enumerate(raw):
            if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
                raise InputError(f"{what}: model.vocab entry {i} is not a [piece, score] pair.")
            vocab[i] = entry[0]
    elif raw is not None:
        raise InputError(f"{what}: model.vocab must be an object or a list, got {type(raw).__name__}.")
    return vocab, kind


def _tiktoken(data: bytes, what: str) -> Vocab | None:
    """``<base64> <rank>`` lines (tiktoken.load.load_tiktoken_bpe); None when the file is not text."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    vocab: Vocab = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise InputError(f"{what} line {number}: expected '<base64 token> <rank>', got {len(parts)} fields.")
        try:
            token = base64.b64decode(parts[0], validate=True)
            rank = int(parts[1]) if len(parts[1]) <= 9 else -1
        except (binascii.Error, ValueError):
            raise InputError(f"{what} line {number}: not a base64 token and an integer rank.") from None
        if not 0 <= rank < MAX_VOCAB:
            raise InputError(f"{what} line {number}: rank {shown(parts[1][:20])} is outside 0..{MAX_VOCAB - 1}.")
        try:
            vocab[rank] = token.decode("utf-8")
        except UnicodeDecodeError:
            vocab[rank] = repr(token)
    return vocab


def _templates(raw: Mapping[str, bytes], config: Mapping[str, Any] | None, source: str) -> dict[str, str]:
    templates: dict[str, str] = {}
    value = config.get("chat_template") if config is not None else None
    if isinstance(value, str):
        templates["default"] = value
    elif isinstance(value, list):
        for entry in value:
            if isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and isinstance(entry.get("template"), str):
                templates[entry["name"]] = entry["template"]
    elif value is not None:
        raise InputError(f"{source}/{TOKENIZER_CONFIG}: chat_template must be a string or a list of "
                         "{name, template} objects.")
    if CHAT_TEMPLATE_FILE in raw:  # transformers: the file takes priority over the config's template
        try:
            templates["default"] = raw[CHAT_TEMPLATE_FILE].decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{source}/{CHAT_TEMPLATE_FILE} is not UTF-8 text ({e.reason} at byte {e.start}).") from e
    return templates


def config_vocab_size(config: Any) -> int | None:
    """The ``vocab_size`` a model's config.json gives (top level, else ``text_config``), or None. Engines size the
    target's embedding and lm_head, and so an EAGLE-3 drafter's t2d, by it (SGLang and vLLM build t2d as a
    boolean over ``target vocab_size`` entries), not by how many ids the tokenizer names."""
    if not isinstance(config, Mapping):
        return None
    for where in (config, config.get("text_config")):
        if isinstance(where, Mapping):
            v = where.get("vocab_size")
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None
