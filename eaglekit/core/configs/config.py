"""EAGLE-3 drafter and target configs: every published drafter format normalised into one typed record.

Formats (docs/config-formats.md):

* ``"specforge"``: SpecForge / SGLang, a Llama config with ``architectures``
  ``["LlamaForCausalLMEagle3"]`` (aliases ``Eagle3LlamaForCausalLM``, ``Eagle3DraftModel`` without a
  layer config), ``draft_vocab_size`` and ``eagle_config.eagle_aux_hidden_state_layer_ids``.
* ``"eagle"``: the original EAGLE-3 layout: ``architectures ["LlamaForCausalLM"]``, one hidden layer
  and ``draft_vocab_size``, no eagle_config. A drafter, not a one-layer target.
* ``"speculators"``: vllm-project/speculators ``Eagle3SpeculatorConfig``: ``speculators_model_type:
  "eagle3"``, the decoder layer's config in ``transformer_layer_config`` (whose ``vocab_size`` is the
  target's), top-level ``draft_vocab_size``, ``target_hidden_size``, norm options
  (``norm_before_residual``, ``norm_before_fc``, ``fc_norm``, ``norm_output``) and aux ids, the
  declared target in ``speculators_config.verifier``. speculators writes ``transformer_layer_config``
  with ``to_diff_dict()``, which drops every value equal to that config class's default, so absent
  fields there take the defaults of the class its ``model_type`` names (:data:`LAYER_DEFAULTS`:
  ``LlamaConfig`` or ``Qwen3Config``; ``Eagle3DraftModel`` checkpoints default to Qwen3). Rotary
  settings may be ``rope_parameters {rope_theta, rope_type, ...}`` (transformers 5) instead of
  ``rope_theta`` / ``rope_scaling``.
* ``"mla"``: MLA drafters (``Eagle3DeepseekV2ForCausalLM`` from TorchSpec / Model-Optimizer,
  ``DeepseekV3ForCausalLMEagle3``); the MLA ranks are kept in :attr:`DrafterConfig.mla`.

Any number of aux layers (``n_aux``; three when the config names none). Every field keeps its
provenance (:attr:`DrafterConfig.provenance`): the path it was read from, or a default and whose.
Detection is by config fields, never by repository name (:func:`is_eagle3_config`). Everything here is
pure: dicts in, frozen records out; :func:`load_config_bytes` parses bytes some reader fetched.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from eaglekit.core.errors import ConfigError, InputError
from eaglekit.core.configs.block import block_family
from eaglekit.core.configs.aux_view import AuxEngineView, aux_engine_view
from eaglekit.core.configs.layers import (NUM_AUX_LAYERS, READER_CONVENTION, TRAINER_OF_FORMAT, AuxConvention, AuxLayerReport,
                                  Layout, interpret_aux_layers, layout_trainer, parse_aux_layer_ids)
from eaglekit.core.render import html_table, kv_text
from eaglekit.core.safejson import loads

DrafterFormat = Literal["specforge", "eagle", "speculators", "mla"]
ConfigKind = Literal["drafter", "target", "any"]

LLAMA_ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3DraftModel")
SPECULATORS_ARCHITECTURES = ("Eagle3Speculator",)
MLA_ARCHITECTURES = ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMEagle3")
#: Architecture of the original EAGLE-3 drafters (SafeAILab/EAGLE): a plain Llama name plus draft_vocab_size.
EAGLE_ORIGINAL_ARCHITECTURES = ("LlamaForCausalLM",)
EAGLE3_ARCHITECTURES = LLAMA_ARCHITECTURES + SPECULATORS_ARCHITECTURES + MLA_ARCHITECTURES
AUX_IDS_KEY = "eagle_aux_hidden_state_layer_ids"

#: transformers ``LlamaConfig`` defaults: what an absent key means in a Llama-family config.
LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
    "hidden_act": "silu", "max_position_embeddings": 2048, "initializer_range": 0.02,
    "rms_norm_eps": 1e-6, "use_cache": True, "pad_token_id": None, "bos_token_id": 1, "eos_token_id": 2,
    "pretraining_tp": 1, "tie_word_embeddings": False, "rope_theta": 10000.0, "rope_scaling": None,
    "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "rope_type": "default",
}
#: transformers ``Qwen3Config`` defaults (what speculators' Eagle3DraftModel layer config starts from).
QWEN3_DEFAULTS: dict[str, Any] = {
    **LLAMA_DEFAULTS, "vocab_size": 151936, "intermediate_size": 22016, "max_position_embeddings": 32768,
    "head_dim": 128, "bos_token_id": None, "eos_token_id": None, "use_sliding_window": False,
    "sliding_window": None, "max_window_layers": 28,
}
#: transformers ``DeepseekV3Config`` defaults (the config class TorchSpec, SpecForge and vLLM build an MLA
#: drafter's config with): what an absent key means in an MLA drafter config.
DEEPSEEK_V3_DEFAULTS: dict[str, Any] = {
    **LLAMA_DEFAULTS, "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
    "num_attention_heads": 128, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "bos_token_id": 0,
    "eos_token_id": 1,
}
#: Defaults by the layer config's model_type, and the class they come from.
LAYER_DEFAULTS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", LLAMA_DEFAULTS), "qwen3": ("Qwen3Config", QWEN3_DEFAULTS),
}
#: Values the speculators library writes when nothing was chosen (absent means these).
SPECULATORS_DEFAULTS: dict[str, Any] = {
    "norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False,
    "embed_requires_grad": False, "enable_sp_ulysses": False, "target_hidden_size": None,
    "accept_tolerance": 0.0, "verifier_accept_k": 1, "draft_vocab_size": 32000,
}
#: MLA dimensions of Eagle3DeepseekV2ForCausalLM / DeepseekV3ForCausalLMEagle3 configs (HF key names).
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
#: MLA flags: ``rope_interleave`` (transformers ``DeepseekV3Config``: rotary on interleaved pairs, DeepSeek's
#: layout; default true) and ``mla_use_nope`` (TorchSpec's kimi_k3_eagle3_mla config; absent: false).
MLA_FLAGS = ("rope_interleave", "mla_use_nope")
#: What an absent MLA key means: transformers ``DeepseekV3Config``'s defaults (TorchSpec, SpecForge and vLLM
#: build the drafter's config with that class), and no NoPE unless a config says so.
MLA_DEFAULTS: dict[str, Any] = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                                "qk_rope_head_dim": 64, "v_head_dim": 128, "rope_interleave": True,
                                "mla_use_nope": False}
#: MoE keys of a MoE-MLP drafter (TorchSpec ``configs/draft_models/kimi_k25_eagle3_moe.json``; HF names).
MOE_KEYS = ("use_moe", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
            "scoring_func", "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group", "topk_method",
            "first_k_dense_replace")
#: What an absent MoE key means once ``use_moe`` is true: ``DeepseekV3Config``'s defaults (TorchSpec's MoE block
#: reads them from that class), and for the two keys that class lacks, what TorchSpec's router hard-codes:
#: sigmoid scores, top-k on the scores plus ``e_score_correction_bias`` within the top groups (DeepSeek-V3's
#: ``noaux_tc``).
MOE_DEFAULTS: dict[str, Any] = {"n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
                                "n_shared_experts": 1, "scoring_func": "sigmoid", "norm_topk_prob": True,
                                "routed_scaling_factor": 2.5, "n_group": 8, "topk_group": 4,
                                "topk_method": "noaux_tc", "first_k_dense_replace": 0}
#: Router scoring functions (DeepSeek-V2: softmax; V3 / Kimi: sigmoid) and top-k methods (V2: greedy,
#: group_limited_greedy; V3: noaux_tc).
SCORING_FUNCS = ("sigmoid", "softmax")
TOPK_METHODS = ("noaux_tc", "greedy", "group_limited_greedy")
#: No published MoE has more routed experts than this (Kimi-K2: 384; DeepSeek-V3: 256).
MAX_EXPERTS = 1 << 16
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
    if "Eagle3DraftModel" in archs and isinstance(raw.get("transformer_layer_config"), Mapping):
        return "speculators"  # speculators' training class, saved with its layer config
    if any(a in LLAMA_ARCHITECTURES for a in archs):
        return "specforge"
    eagle = raw.get("eagle_config")
    if isinstance(eagle, dict) and AUX_IDS_KEY in eagle and "draft_vocab_size" in raw:
        return "specforge"  # an EAGLE-3 head saved under a plain Llama architecture name
    if any(a in EAGLE_ORIGINAL_ARCHITECTURES for a in archs) and "draft_vocab_size" in raw \
            and raw.get("num_hidden_layers", 1) == 1:
        return "eagle"  # the original EAGLE-3 layout: a one-layer Llama with a draft vocabulary
    return None


def is_eagle3_config(raw: object) -> bool:
    """Whether ``raw`` is an EAGLE-3 drafter config (by its fields, never by a repository name)."""
    return isinstance(raw, Mapping) and detect_format(raw) is not None


def looks_like_target(raw: object) -> bool:
    """Whether ``raw`` reads as a target model config: layer count, hidden size and vocab size found
    at the top level or under a text-config wrapper, and not an EAGLE-3 drafter."""
    if not isinstance(raw, Mapping) or is_eagle3_config(raw) or block_family(raw) is not None:
        return False
    body, _ = _target_body(raw)
    return all(isinstance(body.get(k), int) for k in ("num_hidden_layers", "hidden_size", "vocab_size"))


def load_config_bytes(data: bytes, *, source: str = "config.json", kind: ConfigKind = "drafter") -> dict:
    """Parse config.json bytes into a dict, refusing what is not JSON, not an object, or (for
    ``kind="drafter"``) not an EAGLE-3 drafter config, and (for ``kind="target"``) not a model config."""

    raw = loads(data, what=source, error=ConfigError)
    if not isinstance(raw, dict):
        raise ConfigError(f"{source} is a JSON {_json_type(raw)}, not an object: a config.json holds one "
                          f"JSON object of fields.")
    if kind == "drafter" and not is_eagle3_config(raw):
        raise ConfigError(_not_eagle3_message(raw, source))
    if kind == "target" and not looks_like_target(raw):
        if is_eagle3_config(raw):
            raise ConfigError(f"{source} is an EAGLE-3 drafter config, not a target model config.")
        if block_family(raw) is not None:
            raise ConfigError(f"{source} is a block drafter's config (DFlash, DFlash2 or DSpark), not a target model "
                              "config.")
        raise ConfigError(f"{source} is not a target model config: expected num_hidden_layers, hidden_size "
                          f"and vocab_size (at the top level or under {', '.join(TEXT_CONFIG_KEYS)}).")
    return raw


@dataclass(frozen=True)
class DrafterConfig:
    """One EAGLE-3 drafter config in any format, with absent fields resolved to their defaults.

    ``sources`` maps each field to the raw dotted path it was read from (None: a default applied);
    ``default_sources`` says whose default filled the others (``"LlamaConfig"``, ``"Qwen3Config"``,
    ``"speculators"``, ``"eaglekit: ..."``); :attr:`provenance` joins both. ``read_paths`` are all the
    paths normalisation looked at.

    ``aux_convention`` is how the drafter's trainer (``trained_by``, guessed from the format) counted
    ``aux_layer_ids``: ``"outputs"`` for SpecForge and Model-Optimizer, ``"inputs"`` for speculators and
    the original EAGLE-3. What each serving engine reads is :meth:`aux_view`'s business.
    ``n_aux`` is the number of target hidden states fc concatenates (fc.weight is [H, n_aux x
    target_hidden_size]). Norm options: ``norm_before_fc`` (one input_norm over the concatenation),
    ``fc_norm`` (one norm per aux state), ``norm_output`` (post-norm states fed back across steps),
    ``norm_before_residual``, and ``input_norm`` (the embedding passes input_layernorm; MLA configs can
    turn it off). ``rope_parameters`` holds the rotary settings as one dict whichever way the file
    spelled them; ``rope_theta``, ``rope_type`` and ``rope_scaling`` are read from it.

    ``mla`` (MLA drafters only, else empty): :data:`MLA_KEYS` and :data:`MLA_FLAGS` under their HF names,
    absent ones filled from :data:`MLA_DEFAULTS` (``q_lora_rank`` may be None: a plain ``q_proj``).
    ``moe`` (a MoE MLP, else empty: a dense ``gate/up/down_proj`` MLP): :data:`MOE_KEYS` under their HF names,
    absent ones from :data:`MOE_DEFAULTS`; set when ``use_moe`` is true (TorchSpec's switch; a config
    without ``use_moe`` builds a dense MLP). Provenance of each is under ``mla.<key>`` / ``moe.<key>``.
    ``use_last_layernorm`` / ``use_mtp_layernorm``: the ``eagle_config`` flags of MLA drafters (the final
    ``norm`` before lm_head; MTP-style extra norms).
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
    mla: Mapping[str, Any] = field(default_factory=dict)
    moe: Mapping[str, Any] = field(default_factory=dict)
    use_last_layernorm: bool = True
    use_mtp_layernorm: bool = False
    n_aux: int = NUM_AUX_LAYERS
    norm_output: bool = False
    input_norm: bool = True
    rope_type: str | None = None
    rope_parameters: Mapping[str, Any] | None = None
    layer_model_type: str | None = None
    trained_by: str = "specforge"
    source: str = "config.json"
    sources: Mapping[str, str | None] = field(default_factory=dict, repr=False, compare=False)
    default_sources: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    read_paths: frozenset[str] = field(default_factory=frozenset, repr=False, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def attention(self) -> str:
        """``"mla"`` (DeepSeek multi-head latent attention) or ``"llama"`` (q/k/v/o_proj)."""
        return "mla" if self.format == "mla" else "llama"

    @property
    def full_vocabulary(self) -> bool:
        """Whether the drafter drafts over the whole target vocabulary (draft_vocab_size = vocab_size):
        then d2t/t2d are not needed, and draft id i is target id i."""
        return self.draft_vocab_size == self.vocab_size

    @property
    def vocabulary(self) -> str:
        """The draft vocabulary in words: full, or reduced through d2t/t2d."""
        if self.full_vocabulary:
            return (f"full vocabulary ({self.vocab_size:,} tokens): no d2t/t2d needed, every target token can "
                    "be drafted")
        return f"reduced: {self.draft_vocab_size:,} of {self.vocab_size:,} target tokens, mapped by d2t/t2d"

    @property
    def defaulted(self) -> tuple[str, ...]:
        """Fields absent from the config, filled with their default."""
        return tuple(k for k, v in self.sources.items() if v is None)

    @property
    def provenance(self) -> dict[str, str]:
        """Where each field's value came from: ``"file: <path>"`` or ``"default: <whose>"``."""
        return {k: f"file: {v}" if v is not None else f"default: {self.default_sources.get(k, 'eaglekit')}"
                for k, v in self.sources.items()}

    def for_layout(self, layout: Layout | None) -> DrafterConfig:
        """This config as a checkpoint of ``layout`` (``"specforge"``: ``midlayer.*``, ``"speculators"``:
        ``layers.0.*``) means it: the layout rule (:func:`~eaglekit.core.configs.layers.layout_trainer`) may change
        who fed the aux ids and so how they count. ``check``, ``compat`` and ``acceptance`` all read a drafter
        through this, so one drafter has one reading everywhere."""
        trainer = layout_trainer(self.format, self.raw.get("model_type"), layout, self.trained_by)
        if trainer == self.trained_by:
            return self
        return replace(self, trained_by=trainer, aux_convention=READER_CONVENTION[trainer])

    def aux_report(self, num_layers: int | None = None) -> AuxLayerReport | None:
        """What the aux layer ids mean, as the trainer counted them, for a target with ``num_layers``
        layers (None: no ids given)."""
        if self.aux_layer_ids is None:
            return None
        return interpret_aux_layers(self.aux_layer_ids, convention=self.aux_convention, num_layers=num_layers,
                                    expected=self.n_aux)

    def aux_view(self, num_layers: int | None = None, *, engines=("sglang", "vllm"),
                 trained_by: str | None = None, architecture: str | None = None) -> AuxEngineView:
        """Per engine release, which target tensors the aux ids select against the ones used in training
        (``trained_by`` overrides the trainer guessed from the format, e.g. ``"specforge"``;
        ``architecture``: the target's, which decides SGLang's reading since PR #25454; ``engines``:
        ``"sglang"``, ``"sglang==0.5.9"``, ``"vllm"``)."""
        return aux_engine_view(self.aux_layer_ids, trained_by=trained_by or self.trained_by, num_layers=num_layers,
                               architecture=architecture,
                               engines=engines)

    def to_json(self) -> dict:
        """The normalised fields as JSON-ready values (no raw dict)."""
        out = {name: getattr(self, name) for name in NORMALISED_FIELDS}
        out["aux_layer_ids"] = list(self.aux_layer_ids) if self.aux_layer_ids is not None else None
        out["rope_parameters"] = dict(self.rope_parameters) if self.rope_parameters is not None else None
        out.update(format=self.format, architecture=self.architecture, aux_convention=self.aux_convention,
                   trained_by=self.trained_by, layer_model_type=self.layer_model_type,
                   declared_target=self.declared_target,
                   declared_target_architectures=list(self.declared_target_architectures),
                   mla=dict(self.mla), moe=dict(self.moe), mlp="moe" if self.moe else "dense",
                   attention=self.attention, vocabulary=self.vocabulary,
                   defaulted=list(self.defaulted), provenance=self.provenance)
        return out

    def _pairs(self) -> list[tuple[str, Any]]:
        prov = self.provenance
        pairs: list[tuple[str, Any]] = [("format", self.format), ("architecture", self.architecture),
                                        ("layer config", self.layer_model_type or "-")]
        for name in NORMALISED_FIELDS:
            value = getattr(self, name)
            value = list(value) if isinstance(value, tuple) else value
            if name == "aux_layer_ids" and value is not None:
                value = f"{value} (trained as {self.aux_convention}, {self.trained_by})"
            where = prov.get(name)
            if where and where.startswith("default"):
                value = f"{_show(value)} ({where})"
            pairs.append((name, value))
        pairs.append(("attention", self.attention))
        pairs.append(("mlp", _moe_words(self.moe) if self.moe else "dense (gate/up/down_proj)"))
        pairs.append(("vocabulary", self.vocabulary))
        for group, values in (("mla", self.mla), ("moe", self.moe)):
            for k, v in values.items():
                where = prov.get(f"{group}.{k}")
                pairs.append((f"{group}.{k}", f"{_show(v)} ({where})" if where and where.startswith("default") else v))
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
    "head_dim", "vocab_size", "draft_vocab_size", "num_hidden_layers", "aux_layer_ids", "n_aux",
    "use_aux_hidden_state", "norm_before_residual", "norm_before_fc", "fc_norm", "norm_output", "input_norm",
    "use_last_layernorm", "use_mtp_layernorm", "rms_norm_eps", "rope_theta", "rope_type", "rope_scaling",
    "max_position_embeddings", "hidden_act",
    "torch_dtype",
)


#: Bounds on a drafter config's whole numbers: past them the value is a typo or an attack (a vocabulary of
#: 10^400 tokens would be allocated as a map), and no model has that many.
MAX_VOCAB = 1 << 24
MAX_CONFIG_INT = 1 << 31


def _most(path: str) -> int:
    return MAX_VOCAB if path.endswith("vocab_size") else MAX_CONFIG_INT


class _Reader:
    """Reads typed fields from dotted paths of a raw config, remembering where each came from."""

    def __init__(self, raw: Mapping[str, Any], source: str, fmt: str) -> None:
        self.raw, self.source, self.fmt = raw, source, fmt
        self.sources: dict[str, str | None] = {}
        self.whose: dict[str, str] = {}
        self.read_paths: set[str] = set()

    def lookup(self, path: str) -> tuple[bool, Any]:
        self.read_paths.add(path)
        node: Any = self.raw
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False, None
            node = node[part]
        return True, node

    def get(self, name: str, paths: Sequence[str], kind: str, default: Any = _REQUIRED, whose: str = "eaglekit") -> Any:
        for path in paths:
            present, value = self.lookup(path)
            if present and (value is not None or kind == "any"):
                self.sources[name] = path
                return self._check(path, value, kind)
        if default is _REQUIRED:
            where = " or ".join(paths)
            raise ConfigError(f"{self.source} ({self.fmt} format) lacks {where}: an EAGLE-3 drafter config needs it.")
        self.sources[name] = None
        self.whose[name] = whose
        return default

    def _check(self, path: str, value: Any, kind: str) -> Any:
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _most(path),
            "float": (isinstance(value, float) and math.isfinite(value))
            or (isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 1 << 53),
            "bool": isinstance(value, bool),
            "str": isinstance(value, str),
            "dict": value is None or isinstance(value, dict),
            "any": True,
        }[kind]
        if not ok:
            expected = {"int": "a positive integer", "float": "a number", "bool": "true or false",
                        "str": "a string", "dict": "an object or null", "any": ""}[kind]
            if kind == "int" and isinstance(value, int) and not isinstance(value, bool) and value > 0:
                expected += f" of at most {_most(path):,} (no model has more)"
            shown_value = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
            raise ConfigError(f"{self.source}: {path} must be {expected}, got {shown_value}.")
        return float(value) if kind == "float" else value


def layer_defaults(raw: Mapping[str, Any], fmt: str) -> tuple[str | None, str, dict[str, Any]]:
    """(layer model_type, whose defaults, the defaults) for the decoder layer of a drafter config.

    speculators keeps the layer's config under ``transformer_layer_config``; its class comes from the
    ``model_type`` there (absent: LlamaConfig, or Qwen3Config for an ``Eagle3DraftModel``). SpecForge
    and original EAGLE-3 configs are the layer's config themselves; SpecForge builds a Llama layer, so
    a Qwen3 model_type there is the only one that changes the defaults."""
    layer = raw.get("transformer_layer_config") if fmt == "speculators" else raw
    layer = layer if isinstance(layer, Mapping) else {}
    model_type = layer.get("model_type") if isinstance(layer.get("model_type"), str) else None
    if fmt == "mla":
        return model_type, "DeepseekV3Config", DEEPSEEK_V3_DEFAULTS
    archs = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
    key = model_type if model_type in LAYER_DEFAULTS else None
    if key is None and fmt == "speculators" and model_type is None and "Eagle3DraftModel" in archs:
        key = "qwen3"
    whose, table = LAYER_DEFAULTS[key or "llama"]
    return model_type, whose, table


def normalize_config(raw: Mapping[str, Any], *, source: str = "config.json") -> DrafterConfig:
    """Normalise a SpecForge, original EAGLE-3, speculators or MLA drafter config into a :class:`DrafterConfig`."""
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
    model_type, whose, table = layer_defaults(raw, fmt)

    def shape(name: str) -> int:
        default = table[name] if fmt == "speculators" else _REQUIRED
        return r.get(name, [layer + name], "int", default, whose)

    def behaviour(name: str, kind: str, paths: Sequence[str] | None = None) -> Any:
        return r.get(name, paths or [layer + name], kind, table[name], whose)

    hidden = shape("hidden_size")
    intermediate = shape("intermediate_size")
    heads = shape("num_attention_heads")
    vocab = shape("vocab_size")
    kv_heads = r.get("num_key_value_heads", [layer + "num_key_value_heads"], "int", heads,
                     "num_attention_heads (no grouped-query attention)")
    mla = _mla(r, layer) if fmt == "mla" else {}
    mla_dim = (mla.get("qk_nope_head_dim") or 0) + (mla.get("qk_rope_head_dim") or 0)
    if mla_dim:
        head_default, head_whose = mla_dim, "qk_nope_head_dim + qk_rope_head_dim"
    elif table.get("head_dim") and fmt == "speculators":
        head_default, head_whose = table["head_dim"], whose
    else:
        head_default, head_whose = hidden // heads, "hidden_size // num_attention_heads"
    head_dim = r.get("head_dim", [layer + "head_dim"], "int", head_default, head_whose)
    target_hidden = r.get("target_hidden_size", ["target_hidden_size"], "int", hidden,
                          "hidden_size (drafter and target share it)")
    draft_vocab = r.get("draft_vocab_size", ["draft_vocab_size"], "int",
                        32000 if fmt == "speculators" else vocab,
                        "speculators" if fmt == "speculators" else "vocab_size (no reduced draft vocabulary)")
    layers = r.get("num_hidden_layers", [layer + "num_hidden_layers"], "int", 1, "eaglekit: one decoder layer")
    aux_paths = ([AUX_IDS_KEY, f"eagle_config.{AUX_IDS_KEY}"] if fmt == "speculators"
                 else [f"eagle_config.{AUX_IDS_KEY}", AUX_IDS_KEY])
    aux = _aux_ids(r, aux_paths)
    if aux is not None:
        n_aux = len(aux)
        r.sources["n_aux"] = r.sources["aux_layer_ids"]
    else:
        n_aux = NUM_AUX_LAYERS
        r.sources["n_aux"] = None
        r.whose["n_aux"] = "EAGLE-3 (three aux layers when the config names none)"
    torch_dtype = r.get("torch_dtype", ["torch_dtype", "dtype", layer + "torch_dtype", layer + "dtype"], "str", None,
                        "none given")
    spec = raw.get("speculators_config") if fmt == "speculators" else None
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    verifier = verifier if isinstance(verifier, dict) else {}
    target_archs = verifier.get("architectures") if isinstance(verifier.get("architectures"), list) else []
    archs = raw.get("architectures")
    rope = _rope(r, layer, table, whose, llama)
    norms = {name: r.get(name, [name], "bool", False, "speculators" if fmt == "speculators" else "eaglekit: off")
             for name in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")}
    input_norm = r.get("input_norm", ["eagle_config.use_input_layernorm_in_first_layer"], "bool", True,
                       "eaglekit: the embedding passes input_layernorm")
    last_norm = r.get("use_last_layernorm", ["eagle_config.use_last_layernorm"], "bool", True,
                      "eaglekit: the final norm applies before lm_head")
    mtp_norm = r.get("use_mtp_layernorm", ["eagle_config.use_mtp_layernorm"], "bool", False,
                     "eaglekit: no MTP-style extra norms")
    moe = _moe(r, layer)
    trained_by = TRAINER_OF_FORMAT[fmt]
    present, declared = r.lookup("eaglekit_export.aux_ids_read_as")
    if present and declared in ("inputs", "outputs"):
        trained_by = f"declared-{declared}"  # an eaglekit export says what its ids mean
    else:
        # An export of a drafter whose meaning was ambiguous keeps its source's trainer (and so the ambiguity).
        _, source_trainer = r.lookup("eaglekit_export.trained_by")
        if source_trainer in TRAINER_OF_FORMAT.values():
            trained_by = source_trainer
    return DrafterConfig(
        format=fmt,
        architecture=archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
        hidden_size=hidden, target_hidden_size=target_hidden,
        target_hidden_size_explicit=r.sources["target_hidden_size"] is not None,
        intermediate_size=intermediate, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, draft_vocab_size=draft_vocab, num_hidden_layers=layers,
        aux_layer_ids=aux, aux_convention=READER_CONVENTION[trained_by], n_aux=n_aux,
        use_aux_hidden_state=r.get("use_aux_hidden_state", ["eagle_config.use_aux_hidden_state"], "bool", True,
                                   "eaglekit: EAGLE-3 reads aux states"),
        **norms, input_norm=input_norm,
        rms_norm_eps=behaviour("rms_norm_eps", "float"),
        rope_theta=rope["rope_theta"], rope_type=rope["rope_type"], rope_scaling=rope["rope_scaling"],
        rope_parameters=rope["rope_parameters"],
        max_position_embeddings=behaviour("max_position_embeddings", "int"),
        hidden_act=behaviour("hidden_act", "str"),
        torch_dtype=torch_dtype, layer_model_type=model_type, trained_by=trained_by,
        declared_target=verifier.get("name_or_path") if isinstance(verifier.get("name_or_path"), str) else None,
        declared_target_architectures=tuple(a for a in target_archs if isinstance(a, str)),
        mla=mla, moe=moe, use_last_layernorm=last_norm, use_mtp_layernorm=mtp_norm,
        source=source, sources=dict(r.sources), default_sources=dict(r.whose),
        read_paths=frozenset(r.read_paths), raw=raw,
    )


def _mla(r: _Reader, layer: str) -> dict[str, Any]:
    """The MLA dimensions and flags, absent ones from :data:`MLA_DEFAULTS` (``q_lora_rank`` null: no query
    LoRA, a plain q_proj); checked as positive integers (``qk_rope_head_dim`` even: rotary turns pairs)."""
    out: dict[str, Any] = {}
    for key in MLA_KEYS:
        path = layer + key
        present, value = r.lookup(path)
        if present and value is None and key == "q_lora_rank":
            out[key] = None
            r.sources[f"mla.{key}"] = path
            continue
        if present and key == "qk_rope_head_dim" and value == 0 and not isinstance(value, bool):
            out[key] = 0  # NoPE MLA: no rotary part at all
            r.sources[f"mla.{key}"] = path
            continue
        out[key] = r.get(f"mla.{key}", [path], "int", MLA_DEFAULTS[key], "DeepseekV3Config")
    for key in MLA_FLAGS:
        out[key] = r.get(f"mla.{key}", [layer + key], "bool", MLA_DEFAULTS[key],
                         "DeepseekV3Config" if key == "rope_interleave" else "eaglekit: rotary on the rope dims")
    if out["qk_rope_head_dim"] % 2:
        raise ConfigError(f"{r.source}: qk_rope_head_dim is {out['qk_rope_head_dim']}, an odd number: rotary "
                          "embedding turns pairs of dimensions, so the rope part of each head must be even.")
    return out


def _moe(r: _Reader, layer: str) -> dict[str, Any]:
    """The MoE MLP's settings when ``use_moe`` is true (else {}), absent keys from :data:`MOE_DEFAULTS`,
    validated: whole numbers positive and bounded, a known scoring function and top-k method,
    ``num_experts_per_tok <= n_routed_experts``, ``n_routed_experts`` divisible by ``n_group``,
    ``topk_group <= n_group``, and enough experts in the chosen groups for the top-k. ``first_k_dense_replace``
    is recorded as written (0 when absent) but decides nothing: TorchSpec's switch is ``use_moe`` alone (its
    comment: DeepseekV3Config's non-zero expert defaults must not turn a drafter MoE)."""
    for key in MOE_KEYS:
        r.lookup(layer + key)  # read, so a cross-format diff does not list them twice
    use = r.get("moe.use_moe", [layer + "use_moe"], "bool", False, "eaglekit: no use_moe, a dense MLP")
    if not use:
        return {}
    src = r.source
    whose = "DeepseekV3Config"
    out: dict[str, Any] = {"use_moe": True}
    for key in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_group", "topk_group"):
        out[key] = r.get(f"moe.{key}", [layer + key], "int", MOE_DEFAULTS[key], whose)
    present, shared = r.lookup(layer + "n_shared_experts")
    if present and shared is not None:
        if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared <= MAX_EXPERTS:
            raise ConfigError(f"{src}: {layer}n_shared_experts must be a whole number from 0 to {MAX_EXPERTS:,} "
                              f"(0: no shared expert), got {shared!r}.")
        out["n_shared_experts"] = shared
        r.sources["moe.n_shared_experts"] = layer + "n_shared_experts"
    else:
        out["n_shared_experts"] = r.get("moe.n_shared_experts", [], "int", MOE_DEFAULTS["n_shared_experts"], whose)
    present, dense = r.lookup(layer + "first_k_dense_replace")
    if present and dense is not None:
        if isinstance(dense, bool) or not isinstance(dense, int) or not 0 <= dense <= MAX_CONFIG_INT:
            raise ConfigError(f"{src}: {layer}first_k_dense_replace must be a whole number of at least 0, got "
                              f"{dense!r}.")
        r.sources["moe.first_k_dense_replace"] = layer + "first_k_dense_replace"
    else:
        dense = r.get("moe.first_k_dense_replace", [], "int", 0, "eaglekit: recorded only, TorchSpec does not read it")
    out["first_k_dense_replace"] = dense
    out["norm_topk_prob"] = r.get("moe.norm_topk_prob", [layer + "norm_topk_prob"], "bool", True, whose)
    out["routed_scaling_factor"] = r.get("moe.routed_scaling_factor", [layer + "routed_scaling_factor"], "float",
                                         MOE_DEFAULTS["routed_scaling_factor"], whose)
    router = "TorchSpec's router (sigmoid scores, bias-corrected group-limited top-k)"
    out["scoring_func"] = r.get("moe.scoring_func", [layer + "scoring_func"], "str", "sigmoid", router)
    out["topk_method"] = r.get("moe.topk_method", [layer + "topk_method"], "str", "noaux_tc", router)
    for key, known in (("scoring_func", SCORING_FUNCS), ("topk_method", TOPK_METHODS)):
        if out[key] not in known:
            raise ConfigError(f"{src}: {layer}{key} is {out[key]!r}; eaglekit knows {', '.join(known)}.")
    if not out["routed_scaling_factor"] > 0:
        raise ConfigError(f"{src}: {layer}routed_scaling_factor must be a positive number, got "
                          f"{out['routed_scaling_factor']!r}.")
    experts, k = out["n_routed_experts"], out["num_experts_per_tok"]
    if experts > MAX_EXPERTS:
        raise ConfigError(f"{src}: {layer}n_routed_experts is {experts:,}; no published MoE has more than "
                          f"{MAX_EXPERTS:,} routed experts.")
    if k > experts:
        raise ConfigError(f"{src}: num_experts_per_tok {k} is more than n_routed_experts {experts}: a token cannot "
                          "be routed to more experts than there are.")
    groups, top_groups = out["n_group"], out["topk_group"]
    if experts % groups:
        raise ConfigError(f"{src}: n_routed_experts {experts} is not divisible by n_group {groups}: grouped routing "
                          "splits the experts into n_group equal groups.")
    if top_groups > groups:
        raise ConfigError(f"{src}: topk_group {top_groups} is more than n_group {groups}: routing picks topk_group "
                          "of the n_group expert groups.")
    if top_groups * (experts // groups) < k:
        raise ConfigError(f"{src}: topk_group {top_groups} groups of {experts // groups} experts hold fewer than "
                          f"num_experts_per_tok {k}: grouped routing could not pick that many experts.")
    return out


def _moe_words(moe: Mapping[str, Any]) -> str:
    """The MoE MLP in words: experts, routing, shared experts."""
    groups = (f", top {moe['topk_group']} of {moe['n_group']} groups" if moe.get("n_group", 1) > 1 else "")
    return (f"MoE: {moe['num_experts_per_tok']} of {moe['n_routed_experts']} routed experts of width "
            f"{moe['moe_intermediate_size']} ({moe['scoring_func']} scores, {moe['topk_method']}{groups}"
            f"{', renormalised' if moe['norm_topk_prob'] else ''}, x{moe['routed_scaling_factor']:g}) + "
            f"{moe['n_shared_experts']} shared")


def _rope(r: _Reader, layer: str, table: Mapping[str, Any], whose: str, llama: bool) -> dict[str, Any]:
    """Rotary settings from ``rope_parameters`` (transformers 5) or ``rope_theta`` + ``rope_scaling``."""
    for spelled in ("rope_theta", "rope_scaling"):
        r.lookup(layer + spelled)  # both spellings are rotary settings, whichever one is read
    present, params = r.lookup(layer + "rope_parameters")
    if present and params is not None and not isinstance(params, Mapping):
        raise ConfigError(f"{r.source}: {layer}rope_parameters must be an object, got {params!r}.")
    params = params or {}
    theta = r.get("rope_theta", [layer + "rope_parameters.rope_theta", layer + "rope_theta"], "float",
                  table["rope_theta"] if llama else None, whose)
    scaling = r.get("rope_scaling", [layer + "rope_scaling"], "dict", None, whose)
    kind_paths = [layer + "rope_parameters.rope_type", layer + "rope_scaling.rope_type", layer + "rope_scaling.type"]
    rope_type = r.get("rope_type", kind_paths, "str", "default" if llama or theta is not None else None, whose)
    if scaling is None and rope_type not in (None, "default"):
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}  # the same settings, rope_scaling's spelling
        r.sources["rope_scaling"] = layer + "rope_parameters"
    merged = None
    if theta is not None or rope_type is not None:
        merged = {**(scaling or {}), **{k: v for k, v in params.items()}, "rope_theta": theta, "rope_type": rope_type}
        merged.pop("type", None)
    return {"rope_theta": theta, "rope_type": rope_type, "rope_scaling": scaling, "rope_parameters": merged}


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
    ids = next(iter(found.values()), None)
    if ids is not None and not ids:
        raise ConfigError(f"{r.source}: {next(iter(found))} is empty: give the target layers fc reads, or null "
                          f"for the three-layer default.")
    r.sources["aux_layer_ids"] = next(iter(found), None)
    if ids is None:
        r.whose["aux_layer_ids"] = "each engine's own default (none in the config)"
    return ids


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
    rope_theta: float | None = None
    rope_type: str | None = None
    quantization: str | None = None  # quantization_config.quant_method (the target's own weights)
    source: str = "config.json"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def _pairs(self) -> list[tuple[str, Any]]:
        return [("architecture", self.architecture), ("model_type", self.model_type),
                ("fields from", self.text_config_key or "top level"), ("num_hidden_layers", self.num_hidden_layers),
                ("hidden_size", self.hidden_size), ("vocab_size", self.vocab_size),
                ("max_position_embeddings", self.max_position_embeddings), ("rope_theta", self.rope_theta),
                ("rope_type", self.rope_type), ("quantization", self.quantization)]

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
    rope = body.get("rope_parameters") if isinstance(body.get("rope_parameters"), Mapping) else {}
    scaling = body.get("rope_scaling") if isinstance(body.get("rope_scaling"), Mapping) else {}
    theta = rope.get("rope_theta", body.get("rope_theta"))
    rope_type = rope.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or ("default" if theta else None)
    quant = raw.get("quantization_config", body.get("quantization_config"))
    quant = quant.get("quant_method") if isinstance(quant, Mapping) else None
    archs = raw.get("architectures")
    return TargetConfig(
        architecture=archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
        model_type=raw.get("model_type") if isinstance(raw.get("model_type"), str) else None,
        max_position_embeddings=max_pos if isinstance(max_pos, int) and not isinstance(max_pos, bool) else None,
        text_model_type=body.get("model_type") if key and isinstance(body.get("model_type"), str) else None,
        text_config_key=key, source=source, raw=raw,
        rope_theta=float(theta) if isinstance(theta, (int, float)) and not isinstance(theta, bool) else None,
        rope_type=rope_type if isinstance(rope_type, str) else None,
        quantization=quant if isinstance(quant, str) else None, **values,
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
    family = block_family(raw)
    if family is not None:
        names = {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}
        return (f"{source} is a {names[family]} block drafter's config, not an EAGLE-3 one: eaglekit search, inspect, "
                "diff, compat and check read block drafters; this command needs an EAGLE-3 drafter.")
    got = []
    for key in ("architectures", "model_type", "speculators_model_type"):
        if key in raw:
            got.append(f"{key} {raw[key]!r}")
    return (f"{source} has no recognisable EAGLE-3 fields: expected architectures to include one of "
            f"{', '.join(EAGLE3_ARCHITECTURES)}, or speculators_model_type \"eagle3\", or the original EAGLE-3 "
            f"layout (LlamaForCausalLM with draft_vocab_size and one layer) "
            f"(got {', '.join(got) or 'neither'}). A target model config goes in the target argument.")


def _json_type(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def require_llama_attention(cfg: DrafterConfig, where: str, what: str) -> None:
    """Refuse an MLA drafter where only Llama-style attention is implemented: ``what`` names the feature
    ("export converts", "eaglekit's draft forward covers")."""
    if cfg.format == "mla":
        raise ConfigError(f"{where} is an MLA drafter ({cfg.architecture}): {what} Llama-attention EAGLE-3 drafters "
                          "only.")
