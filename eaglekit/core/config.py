"""EAGLE-3 drafter and target configs: three drafter formats normalised into one typed record.

Formats (DOMAIN.md, "Config formats to read"):

* ``"specforge"``: SpecForge / EAGLE / SGLang, a Llama config with ``architectures``
  ``["LlamaForCausalLMEagle3"]`` (aliases ``Eagle3LlamaForCausalLM``, ``Eagle3DraftModel``),
  ``draft_vocab_size`` and ``eagle_config.eagle_aux_hidden_state_layer_ids``
  (SpecForge configs/kimi-k2-eagle3.json).
* ``"speculators"``: vllm-project/speculators ``Eagle3SpeculatorConfig``
  (src/speculators/models/eagle3/config.py): ``speculators_model_type: "eagle3"``, the decoder layer's
  Llama config in ``transformer_layer_config`` (whose ``vocab_size`` is the target's), top-level
  ``draft_vocab_size``, ``target_hidden_size``, norm options and aux ids, and the declared target in
  ``speculators_config.verifier``. speculators writes ``transformer_layer_config`` with
  ``to_diff_dict()``, which drops every value equal to the ``LlamaConfig`` default, so absent fields
  there take :data:`LLAMA_DEFAULTS`.
* ``"mla"``: ``Eagle3DeepseekV2ForCausalLM`` MLA drafters (NVIDIA Model-Optimizer hf_spec_export.py,
  lightseekorg/kimi-*-eagle3*-mla); the MLA ranks are kept in :attr:`DrafterConfig.mla`.

Detection is by config fields, never by repository name (:func:`is_eagle3_config`). Everything here is
pure: dicts in, frozen records out; :func:`load_config_bytes` parses bytes some reader fetched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eaglekit.core.errors import ConfigError, InputError
from eaglekit.core.layers import AuxConvention, AuxLayerReport, config_convention, interpret_aux_layers, parse_aux_layer_ids
from eaglekit.core.render import html_table, kv_text

DrafterFormat = Literal["specforge", "speculators", "mla"]
ConfigKind = Literal["drafter", "target", "any"]

LLAMA_ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3DraftModel")
SPECULATORS_ARCHITECTURES = ("Eagle3Speculator",)
MLA_ARCHITECTURES = ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM")
EAGLE3_ARCHITECTURES = LLAMA_ARCHITECTURES + SPECULATORS_ARCHITECTURES + MLA_ARCHITECTURES
AUX_IDS_KEY = "eagle_aux_hidden_state_layer_ids"

#: transformers ``LlamaConfig`` defaults: what an absent key means in a Llama-family config.
LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
    "hidden_act": "silu", "max_position_embeddings": 2048, "initializer_range": 0.02,
    "rms_norm_eps": 1e-6, "use_cache": True, "pad_token_id": None, "bos_token_id": 1, "eos_token_id": 2,
    "pretraining_tp": 1, "tie_word_embeddings": False, "rope_theta": 10000.0, "rope_scaling": None,
    "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
}
#: MLA dimensions kept verbatim from Eagle3DeepseekV2ForCausalLM configs.
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
#: Wrapper keys under which multimodal targets keep their language model's config (K2.5: text_config).
TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")

_REQUIRED = object()


def detect_format(raw: Mapping[str, Any]) -> DrafterFormat | None:
    """The drafter format ``raw`` is written in, or None when it is not an EAGLE-3 config."""
    archs = raw.get("architectures")
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    if raw.get("speculators_model_type") == "eagle3":
        return "speculators"
    if "speculators_model_type" in raw:
        return None  # another speculators algorithm (eagle, hass, mtp...)
    if any(a in MLA_ARCHITECTURES for a in archs):
        return "mla"
    if any(a in SPECULATORS_ARCHITECTURES for a in archs):
        return "speculators"
    if any(a in LLAMA_ARCHITECTURES for a in archs):
        return "specforge"
    eagle = raw.get("eagle_config")
    if isinstance(eagle, dict) and AUX_IDS_KEY in eagle and "draft_vocab_size" in raw:
        return "specforge"  # an EAGLE-3 head saved under a plain Llama architecture name
    return None


def is_eagle3_config(raw: object) -> bool:
    """Whether ``raw`` is an EAGLE-3 drafter config (by its fields, never by a repository name)."""
    return isinstance(raw, Mapping) and detect_format(raw) is not None


def looks_like_target(raw: object) -> bool:
    """Whether ``raw`` reads as a target model config: layer count, hidden size and vocab size found
    at the top level or under a text-config wrapper, and not an EAGLE-3 drafter."""
    if not isinstance(raw, Mapping) or is_eagle3_config(raw):
        return False
    body, _ = _target_body(raw)
    return all(isinstance(body.get(k), int) for k in ("num_hidden_layers", "hidden_size", "vocab_size"))


def load_config_bytes(data: bytes, *, source: str = "config.json", kind: ConfigKind = "drafter") -> dict:
    """Parse config.json bytes into a dict, refusing what is not JSON, not an object, or (for
    ``kind="drafter"``) not an EAGLE-3 drafter config, and (for ``kind="target"``) not a model config."""
    from eaglekit.core.safejson import loads

    raw = loads(data, what=source, error=ConfigError)
    if not isinstance(raw, dict):
        raise ConfigError(f"{source} is a JSON {_json_type(raw)}, not an object: a config.json holds one "
                          f"JSON object of fields.")
    if kind == "drafter" and not is_eagle3_config(raw):
        raise ConfigError(_not_eagle3_message(raw, source))
    if kind == "target" and not looks_like_target(raw):
        if is_eagle3_config(raw):
            raise ConfigError(f"{source} is an EAGLE-3 drafter config, not a target model config.")
        raise ConfigError(f"{source} is not a target model config: expected num_hidden_layers, hidden_size "
                          f"and vocab_size (at the top level or under {', '.join(TEXT_CONFIG_KEYS)}).")
    return raw


@dataclass(frozen=True)
class DrafterConfig:
    """One EAGLE-3 drafter config in any format, with absent fields resolved to their defaults.

    ``sources`` maps each field to the raw dotted path it was read from (None: a default applied);
    ``read_paths`` are all the paths normalisation looked at.
    ``aux_convention`` is what ``aux_layer_ids`` mean to the engine that reads this config
    (see :mod:`eaglekit.layers`).
    """

    format: DrafterFormat
    architecture: str | None
    hidden_size: int
    target_hidden_size: int
    target_hidden_size_explicit: bool
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    draft_vocab_size: int
    num_hidden_layers: int
    aux_layer_ids: tuple[int, ...] | None
    aux_convention: AuxConvention
    use_aux_hidden_state: bool
    norm_before_residual: bool
    norm_before_fc: bool
    fc_norm: bool
    rms_norm_eps: float | None
    rope_theta: float | None
    rope_scaling: dict | None
    max_position_embeddings: int | None
    hidden_act: str | None
    torch_dtype: str | None
    declared_target: str | None
    declared_target_architectures: tuple[str, ...]
    mla: Mapping[str, int | None] = field(default_factory=dict)
    source: str = "config.json"
    sources: Mapping[str, str | None] = field(default_factory=dict, repr=False, compare=False)
    read_paths: frozenset[str] = field(default_factory=frozenset, repr=False, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def defaulted(self) -> tuple[str, ...]:
        """Fields absent from the config, filled with their default."""
        return tuple(k for k, v in self.sources.items() if v is None)

    def aux_report(self, num_layers: int | None = None) -> AuxLayerReport | None:
        """What the aux layer ids mean for a target with ``num_layers`` layers (None: no ids given)."""
        if self.aux_layer_ids is None:
            return None
        return interpret_aux_layers(self.aux_layer_ids, convention=self.aux_convention, num_layers=num_layers)

    def to_json(self) -> dict:
        """The normalised fields as JSON-ready values (no raw dict)."""
        out = {name: getattr(self, name) for name in NORMALISED_FIELDS}
        out["aux_layer_ids"] = list(self.aux_layer_ids) if self.aux_layer_ids is not None else None
        out.update(format=self.format, architecture=self.architecture, aux_convention=self.aux_convention,
                   declared_target=self.declared_target,
                   declared_target_architectures=list(self.declared_target_architectures),
                   mla=dict(self.mla), defaulted=list(self.defaulted))
        return out

    def _pairs(self) -> list[tuple[str, Any]]:
        defaulted = set(self.defaulted)
        pairs: list[tuple[str, Any]] = [("format", self.format), ("architecture", self.architecture)]
        for name in NORMALISED_FIELDS:
            value = getattr(self, name)
            value = list(value) if isinstance(value, tuple) else value
            if name == "aux_layer_ids" and value is not None:
                value = f"{value} ({self.aux_convention})"
            if name in defaulted:
                value = f"{_show(value)} (default)"
            pairs.append((name, value))
        pairs.extend((f"mla.{k}", v) for k, v in self.mla.items())
        if self.declared_target or self.declared_target_architectures:
            arch = ", ".join(self.declared_target_architectures)
            pairs.append(("declared target", f"{self.declared_target or '?'}" + (f" ({arch})" if arch else "")))
        return pairs

    def __str__(self) -> str:
        return kv_text(self._pairs(), title=f"EAGLE-3 drafter config: {self.source}")

    def _repr_html_(self) -> str:
        return html_table(["field", "value"], self._pairs(), caption=f"EAGLE-3 drafter config: {self.source}")


#: The fields compared across formats (configdiff) and listed when a config renders.
NORMALISED_FIELDS = (
    "hidden_size", "target_hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
    "head_dim", "vocab_size", "draft_vocab_size", "num_hidden_layers", "aux_layer_ids",
    "use_aux_hidden_state", "norm_before_residual", "norm_before_fc", "fc_norm", "rms_norm_eps",
    "rope_theta", "rope_scaling", "max_position_embeddings", "hidden_act", "torch_dtype",
)


class _Reader:
    """Reads typed fields from dotted paths of a raw config, remembering where each came from."""

    def __init__(self, raw: Mapping[str, Any], source: str, fmt: str) -> None:
        self.raw, self.source, self.fmt = raw, source, fmt
        self.sources: dict[str, str | None] = {}
        self.read_paths: set[str] = set()

    def lookup(self, path: str) -> tuple[bool, Any]:
        self.read_paths.add(path)
        node: Any = self.raw
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False, None
            node = node[part]
        return True, node

    def get(self, name: str, paths: Sequence[str], kind: str, default: Any = _REQUIRED) -> Any:
        for path in paths:
            present, value = self.lookup(path)
            if present and (value is not None or kind == "any"):
                self.sources[name] = path
                return self._check(path, value, kind)
        if default is _REQUIRED:
            where = " or ".join(paths)
            raise ConfigError(f"{self.source} ({self.fmt} format) lacks {where}: an EAGLE-3 drafter config needs it.")
        self.sources[name] = None
        return default

    def _check(self, path: str, value: Any, kind: str) -> Any:
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool) and value > 0,
            "float": isinstance(value, (int, float)) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
            "str": isinstance(value, str),
            "dict": value is None or isinstance(value, dict),
            "any": True,
        }[kind]
        if not ok:
            expected = {"int": "a positive integer", "float": "a number", "bool": "true or false",
                        "str": "a string", "dict": "an object or null", "any": ""}[kind]
            raise ConfigError(f"{self.source}: {path} must be {expected}, got {value!r}.")
        return float(value) if kind == "float" else value


def normalize_config(raw: Mapping[str, Any], *, source: str = "config.json") -> DrafterConfig:
    """Normalise a SpecForge, speculators or MLA drafter config into a :class:`DrafterConfig`."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source} is a JSON {_json_type(raw)}, not an object.")
    fmt = detect_format(raw)
    if fmt is None:
        raise ConfigError(_not_eagle3_message(raw, source))
    r = _Reader(raw, source, fmt)
    # Where each field lives: speculators keeps the decoder layer's config one level down.
    layer = "transformer_layer_config." if fmt == "speculators" else ""
    if fmt == "speculators" and not isinstance(raw.get("transformer_layer_config"), dict):
        raise ConfigError(f"{source} (speculators format) lacks transformer_layer_config: it holds the "
                          f"drafter's hidden size, heads and the target's vocab_size.")
    llama = fmt != "mla"

    def shape(name: str) -> int:
        default = LLAMA_DEFAULTS[name] if fmt == "speculators" else _REQUIRED
        return r.get(name, [layer + name], "int", default)

    def behaviour(name: str, kind: str) -> Any:
        return r.get(name, [layer + name], kind, LLAMA_DEFAULTS[name] if llama else None)

    hidden = shape("hidden_size")
    intermediate = shape("intermediate_size")
    heads = shape("num_attention_heads")
    vocab = shape("vocab_size")
    kv_heads = r.get("num_key_value_heads", [layer + "num_key_value_heads"], "int", heads)
    mla = {k: raw[k] for k in MLA_KEYS if k in raw} if fmt == "mla" else {}
    for k, v in mla.items():
        if v is not None:
            r._check(k, v, "int")
    mla_dim = (mla.get("qk_nope_head_dim") or 0) + (mla.get("qk_rope_head_dim") or 0)
    head_dim = r.get("head_dim", [layer + "head_dim"], "int", mla_dim or hidden // heads)
    target_hidden = r.get("target_hidden_size", ["target_hidden_size"], "int", hidden)
    draft_vocab = r.get("draft_vocab_size", ["draft_vocab_size"], "int",
                        32000 if fmt == "speculators" else vocab)
    layers = r.get("num_hidden_layers", [layer + "num_hidden_layers"], "int", 1)
    aux_paths = ([AUX_IDS_KEY, f"eagle_config.{AUX_IDS_KEY}"] if fmt == "speculators"
                 else [f"eagle_config.{AUX_IDS_KEY}", AUX_IDS_KEY])
    aux = _aux_ids(r, aux_paths)
    torch_dtype = r.get("torch_dtype", ["torch_dtype", "dtype", layer + "torch_dtype", layer + "dtype"], "str", None)
    spec = raw.get("speculators_config") if fmt == "speculators" else None
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    verifier = verifier if isinstance(verifier, dict) else {}
    target_archs = verifier.get("architectures") if isinstance(verifier.get("architectures"), list) else []
    archs = raw.get("architectures")
    return DrafterConfig(
        format=fmt,
        architecture=archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
        hidden_size=hidden, target_hidden_size=target_hidden,
        target_hidden_size_explicit=r.sources["target_hidden_size"] is not None,
        intermediate_size=intermediate, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, draft_vocab_size=draft_vocab, num_hidden_layers=layers,
        aux_layer_ids=aux, aux_convention=config_convention(fmt),
        use_aux_hidden_state=r.get("use_aux_hidden_state", ["eagle_config.use_aux_hidden_state"], "bool", True),
        norm_before_residual=r.get("norm_before_residual", ["norm_before_residual"], "bool", False),
        norm_before_fc=r.get("norm_before_fc", ["norm_before_fc"], "bool", False),
        fc_norm=r.get("fc_norm", ["fc_norm"], "bool", False),
        rms_norm_eps=behaviour("rms_norm_eps", "float"),
        rope_theta=behaviour("rope_theta", "float"),
        rope_scaling=r.get("rope_scaling", [layer + "rope_scaling"], "dict", None),
        max_position_embeddings=behaviour("max_position_embeddings", "int"),
        hidden_act=behaviour("hidden_act", "str"),
        torch_dtype=torch_dtype,
        declared_target=verifier.get("name_or_path") if isinstance(verifier.get("name_or_path"), str) else None,
        declared_target_architectures=tuple(a for a in target_archs if isinstance(a, str)),
        mla=mla, source=source, sources=dict(r.sources), read_paths=frozenset(r.read_paths), raw=raw,
    )


def _aux_ids(r: _Reader, paths: Sequence[str]) -> tuple[int, ...] | None:
    found = {}
    for path in paths:
        present, value = r.lookup(path)
        if present and value is not None:
            try:
                found[path] = parse_aux_layer_ids(value)
            except InputError as e:
                raise ConfigError(f"{r.source}: {path}: {e}") from e
    if len(set(found.values())) > 1:
        a, b = found
        raise ConfigError(f"{r.source} gives two different aux layer id lists: {a} = {list(found[a])} and "
                          f"{b} = {list(found[b])}; keep one.")
    r.sources["aux_layer_ids"] = next(iter(found), None)
    return next(iter(found.values()), None)


@dataclass(frozen=True)
class TargetConfig:
    """The few target-model fields a drafter must agree with. ``text_config_key`` names the wrapper
    the fields came from (K2.5 keeps its kimi_k2 language model under ``text_config``), or None."""

    architecture: str | None
    model_type: str | None
    num_hidden_layers: int
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int | None = None
    text_model_type: str | None = None
    text_config_key: str | None = None
    source: str = "config.json"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def _pairs(self) -> list[tuple[str, Any]]:
        return [("architecture", self.architecture), ("model_type", self.model_type),
                ("fields from", self.text_config_key or "top level"), ("num_hidden_layers", self.num_hidden_layers),
                ("hidden_size", self.hidden_size), ("vocab_size", self.vocab_size),
                ("max_position_embeddings", self.max_position_embeddings)]

    def __str__(self) -> str:
        return kv_text(self._pairs(), title=f"Target config: {self.source}")

    def _repr_html_(self) -> str:
        return html_table(["field", "value"], self._pairs(), caption=f"Target config: {self.source}")


def normalize_target(raw: Mapping[str, Any], *, source: str = "config.json") -> TargetConfig:
    """Read a target model config, looking inside text-config wrappers (K2.5's ``text_config``)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source} is a JSON {_json_type(raw)}, not an object.")
    if is_eagle3_config(raw):
        raise ConfigError(f"{source} is an EAGLE-3 drafter config, not a target model config.")
    body, key = _target_body(raw)
    r = _Reader(body, source, "target")
    prefix = f"{key}." if key else ""
    values = {}
    for name in ("num_hidden_layers", "hidden_size", "vocab_size"):
        present, value = r.lookup(name)
        if not present:
            present, value = _Reader(raw, source, "target").lookup(name)
        if not present or value is None:
            where = f"the top level or {key}" if key else "the top level"
            raise ConfigError(f"{source} is not a target model config: no {name} (looked at {where}).")
        values[name] = r._check(prefix + name, value, "int")
    max_pos = body.get("max_position_embeddings", raw.get("max_position_embeddings"))
    archs = raw.get("architectures")
    return TargetConfig(
        architecture=archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
        model_type=raw.get("model_type") if isinstance(raw.get("model_type"), str) else None,
        max_position_embeddings=max_pos if isinstance(max_pos, int) and not isinstance(max_pos, bool) else None,
        text_model_type=body.get("model_type") if key and isinstance(body.get("model_type"), str) else None,
        text_config_key=key, source=source, raw=raw, **values,
    )


def target_fit(target_hidden_size: int | None, vocab_size: int | None,
               target: TargetConfig) -> list[tuple[str, int | None, int]]:
    """The dimensions a drafter must share with its target: fc reads the target's hidden states
    (``target_hidden_size``) and t2d/embeddings span its vocabulary. (field, drafter value, target value)."""
    return [("hidden size", target_hidden_size, target.hidden_size), ("vocab size", vocab_size, target.vocab_size)]


def _target_body(raw: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    for key in TEXT_CONFIG_KEYS:
        sub = raw.get(key)
        if isinstance(sub, Mapping) and ("hidden_size" in sub or "num_hidden_layers" in sub):
            return sub, key
    return raw, None


def _not_eagle3_message(raw: Mapping[str, Any], source: str) -> str:
    got = []
    for key in ("architectures", "model_type", "speculators_model_type"):
        if key in raw:
            got.append(f"{key} {raw[key]!r}")
    return (f"{source} has no recognisable EAGLE-3 fields: expected architectures to include one of "
            f"{', '.join(EAGLE3_ARCHITECTURES)}, or speculators_model_type \"eagle3\" "
            f"(got {', '.join(got) or 'neither'}). A target model config goes in the target argument.")


def _json_type(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
