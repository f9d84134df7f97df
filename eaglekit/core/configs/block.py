"""Block drafters' configs: DFlash, DFlash2 and DSpark, read into one typed record.

A block drafter proposes a whole block in one forward pass: the block ``[last committed token, MASK x
(block_size - 1)]`` is embedded with the target's embedding, read by a few decoder layers that attend to context
features from the target (``target_layer_ids``, concatenated, then ``fc`` and ``hidden_norm``) and to the block
itself, and the target's ``lm_head`` turns the mask slots into drafts (docs/block-drafters.md). Where each key
lives, checked against the authors' and the engines' loaders:

* DFlash (z-lab/dflash ``DFlashDraftModel``): a Qwen3 config plus top-level ``block_size`` (newer files: inside
  ``dflash_config``, which the authors' loader reads first), ``dflash_config.mask_token_id``,
  ``dflash_config.target_layer_ids`` (target layer *outputs*: ``hidden_states[id + 1]``; when absent, spread over
  ``num_target_layers`` as :func:`default_target_layer_ids`), ``num_target_layers``.
* DFlash2 (``DFlash2DraftModel``): ``dflash_config`` holds ``block_size``, ``conv_kernel_size``,
  ``conv_group_size``, ``selector_rank``, ``selector_top_k``, ``attention_mode`` (``gqa`` | ``mla``),
  ``output_multiplier``, ``final_logit_softcapping``, ``input_embedding_scale``.
* DSpark (DeepSpec ``Qwen3DSparkModel``, SpecForge ``DSparkDraftModel``): a DFlash backbone plus ``markov_rank``,
  ``markov_head_type``, ``enable_confidence_head`` (top level in DeepSpec's files, inside ``dflash_config`` in
  SpecForge's). DeepSpec's anchor slot drafts too (its label shift): a block of 7 proposes 7 tokens; SpecForge's
  ``DSparkDraftModel`` drafts from slots 1.. as DFlash does, unless ``shift_label`` says otherwise.

Pure: a mapping in, a :class:`BlockDrafterConfig` out, :class:`~eaglekit.core.errors.ConfigError` naming the key
for anything out of range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eaglekit.core.errors import ConfigError

BlockFamily = Literal["dflash", "dflash2", "dspark"]

#: the architectures each family's checkpoints declare
BLOCK_ARCHITECTURES: dict[str, BlockFamily] = {
    "DFlashDraftModel": "dflash",
    "DFlash2DraftModel": "dflash2",
    "DSparkDraftModel": "dspark",
    "Qwen3DSparkModel": "dspark",
    "DSparkModel": "dspark",
}

#: a bound on every size a block drafter's config may declare (far above any published one)
MAX_SIZE = 1 << 22
MAX_BLOCK = 256
MAX_LAYERS = 4096


def block_family(raw: object) -> BlockFamily | None:
    """The block family a config declares (by ``architectures``, or DFlash's own ``dflash_config``), else None."""
    if not isinstance(raw, Mapping):
        return None
    archs = raw.get("architectures")
    if isinstance(archs, list):
        for a in archs:
            if isinstance(a, str) and a in BLOCK_ARCHITECTURES:
                return BLOCK_ARCHITECTURES[a]
    cfg = raw.get("dflash_config")
    if isinstance(cfg, Mapping):
        if cfg.get("projector_type") == "dspark" or "markov_rank" in cfg or "markov_rank" in raw:
            return "dspark"
        if any(k in cfg for k in ("selector_rank", "conv_kernel_size", "conv_group_size")):
            return "dflash2"
        return "dflash"
    return None


def is_block_config(raw: object) -> bool:
    return block_family(raw) is not None


def default_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> tuple[int, ...]:
    """The authors' spread when a config names no ``target_layer_ids`` (z-lab/dflash ``build_target_layer_ids``;
    SpecForge and SGLang use the same): one id per draft layer, from layer 1 to ``num_target_layers - 3``."""
    if num_draft_layers == 1:
        return (num_target_layers // 2,)
    start, end = 1, num_target_layers - 3
    span = end - start
    return tuple(int(round(start + (i * span) / (num_draft_layers - 1))) for i in range(num_draft_layers))


@dataclass(frozen=True)
class BlockDrafterConfig:
    """A block drafter's config, normalised. ``where[key]`` is the path the value was read from (for messages)."""

    family: BlockFamily
    architecture: str | None
    block_size: int
    mask_token_id: int | None
    target_layer_ids: tuple[int, ...]
    target_layer_ids_given: bool
    num_target_layers: int | None
    hidden_size: int
    target_hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_hidden_layers: int
    vocab_size: int | None
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: Mapping[str, Any] | None
    max_position_embeddings: int | None
    attention_bias: bool
    hidden_act: str
    #: attention inside the block: False (bidirectional, the authors' DFlash) unless the config says otherwise
    is_causal: bool
    layer_types: tuple[str, ...]
    sliding_window: int | None
    attention_mode: str = "gqa"
    input_embedding_scale: float = 1.0
    output_multiplier: float = 1.0
    final_logit_softcapping: float | None = None
    #: DFlash2
    conv_kernel_size: int | None = None
    conv_group_size: int | None = None
    selector_rank: int | None = None
    selector_top_k: int | None = None
    #: DSpark
    markov_rank: int | None = None
    markov_head_type: str | None = None
    enable_confidence_head: bool = False
    #: whether the confidence head also reads the Markov state (its input is then H + markov_rank wide)
    confidence_head_with_markov: bool = False
    #: whether the anchor slot drafts too (DSpark's label shift): then a block of B proposes B tokens, else B - 1
    anchor_drafts: bool = False
    source: str = "config.json"
    where: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def drafts_per_block(self) -> int:
        """Draft tokens one full block proposes."""
        return self.block_size if self.anchor_drafts else self.block_size - 1

    @property
    def format(self) -> str:
        """What :func:`eaglekit.analysis.draft.rope.rope_tables` asks of a config: block drafters keep RoPE keys
        where a Qwen3 config does (``rope_parameters``, else ``rope_theta`` / ``rope_scaling``)."""
        return "block"

    def layer_attention(self, layer: int) -> tuple[bool, int | None]:
        """(causal, sliding window) of decoder layer ``layer``, as the authors' newer ``Qwen3DFlashAttention``
        decides them: a ``sliding_attention`` layer slides over ``sliding_window`` and is causal unless the config
        sets ``is_causal``; a full-attention layer is bidirectional unless ``is_causal`` is true."""
        kind = self.layer_types[layer] if layer < len(self.layer_types) else "full_attention"
        sliding = kind == "sliding_attention"
        causal = self.is_causal if "is_causal" in self.where else sliding
        return causal, (self.sliding_window if sliding else None)

    @property
    def n_aux(self) -> int:
        return len(self.target_layer_ids)

    @property
    def family_name(self) -> str:
        return {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}[self.family]

    def hidden_state_indices(self) -> tuple[int, ...]:
        """``output_hidden_states`` indices the drafter reads: layer outputs, ``id + 1`` (the authors'
        ``extract_context_feature``; SGLang and vLLM add the same one when they read the config)."""
        return tuple(i + 1 for i in self.target_layer_ids)

    def key(self, name: str) -> str:
        """Where ``name`` was read from (``dflash_config.block_size`` or ``block_size``), for messages; the
        nested spelling when the config left it to its default."""
        return self.where.get(name, name if name in _TOP_LEVEL else f"dflash_config.{name}")

    def to_json(self) -> dict[str, Any]:
        """The normalised fields, as ``--json`` prints them (``hidden_state_indices`` beside the ids)."""
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f not in ("where", "raw")}
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}
        out["rope_scaling"] = dict(self.rope_scaling) if self.rope_scaling is not None else None
        return {**out, "family_name": self.family_name, "drafts_per_block": self.drafts_per_block,
                "hidden_state_indices": list(self.hidden_state_indices())}


#: Keys a block drafter's config keeps at the top level (the Qwen3 body), never inside dflash_config.
_TOP_LEVEL = frozenset({"hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers",
                        "vocab_size", "intermediate_size", "max_position_embeddings", "sliding_window"})


class _Keys:
    """Reads keys nested in ``dflash_config`` first, then at the top level (the authors' ``_draft_value``)."""

    def __init__(self, raw: Mapping[str, Any], source: str) -> None:
        self.raw, self.source = raw, source
        nested = raw.get("dflash_config")
        if nested is not None and not isinstance(nested, Mapping):
            raise ConfigError(f"{source}: dflash_config is a {type(nested).__name__}, not an object.")
        self.nested: Mapping[str, Any] = nested or {}
        self.where: dict[str, str] = {}

    def find(self, name: str, *, nested_first: bool = True) -> tuple[Any, str | None]:
        order = (("dflash_config." + name, self.nested), (name, self.raw))
        for path, table in (order if nested_first else order[::-1]):
            if name in table and table[name] is not None:
                self.where[name] = path
                return table[name], path
        return None, None

    def whole(self, name: str, *, default: Any = ..., low: int = 0, high: int = MAX_SIZE,
              nested_first: bool = True) -> Any:
        value, path = self.find(name, nested_first=nested_first)
        if path is None:
            if default is ...:
                raise ConfigError(f"{self.source}: {name} is missing; a block drafter's config must give it.")
            return default
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ConfigError(f"{self.source}: {path} must be a whole number from {low} to {high}, got {value!r}.")
        return value

    def number(self, name: str, default: float, *, positive: bool = True) -> float:
        value, path = self.find(name)
        if path is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
                or value in (float("inf"), float("-inf")) or (positive and value <= 0):
            raise ConfigError(f"{self.source}: {path} must be a finite{' positive' if positive else ''} number, "
                              f"got {value!r}.")
        return float(value)

    def flag(self, name: str, default: bool | None) -> bool | None:
        value, path = self.find(name)
        if path is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"{self.source}: {path} must be true or false, got {value!r}.")
        return value

    def word(self, name: str, default: str | None, allowed: Sequence[str] | None = None) -> str | None:
        value, path = self.find(name)
        if path is None:
            return default
        if not isinstance(value, str) or (allowed is not None and value not in allowed):
            want = f"one of {', '.join(allowed)}" if allowed else "a string"
            raise ConfigError(f"{self.source}: {path} must be {want}, got {value!r}.")
        return value


def read_block_config(raw: Mapping[str, Any], *, source: str = "config.json") -> BlockDrafterConfig:
    """A DFlash, DFlash2 or DSpark config as a :class:`BlockDrafterConfig`; ConfigError naming the key when a value
    is missing, of the wrong kind or out of range (a mask id outside the vocabulary, a layer id past the target's
    layers)."""
    family = block_family(raw)
    if family is None:
        raise ConfigError(f"{source} is not a block drafter's config (no DFlashDraftModel, DFlash2DraftModel or "
                          "DSpark architecture, no dflash_config).")
    k = _Keys(raw, source)
    archs = raw.get("architectures")
    arch = next((a for a in archs if isinstance(a, str)), None) if isinstance(archs, list) else None
    block = k.whole("block_size", default=16, low=1, high=MAX_BLOCK)
    hidden = k.whole("hidden_size", low=1, nested_first=False)
    heads = k.whole("num_attention_heads", low=1, nested_first=False)
    kv = k.whole("num_key_value_heads", default=heads, low=1, nested_first=False)
    if heads % kv:
        raise ConfigError(f"{source}: num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv}).")
    head_dim = k.whole("head_dim", default=hidden // heads if hidden % heads == 0 else ..., low=1, nested_first=False)
    layers = k.whole("num_hidden_layers", low=1, high=MAX_LAYERS, nested_first=False)
    vocab = k.whole("vocab_size", default=None, low=1, nested_first=False)
    num_target = k.whole("num_target_layers", default=None, low=1, high=MAX_LAYERS)
    mask = k.whole("mask_token_id", default=None, low=0)
    if mask is not None and vocab is not None and mask >= vocab:
        raise ConfigError(f"{source}: {k.where['mask_token_id']} is {mask}, outside the vocabulary "
                          f"(vocab_size {vocab}: ids 0..{vocab - 1}).")
    ids_raw, ids_path = k.find("target_layer_ids")
    if ids_path is None:
        ids_raw, ids_path = k.find("dspark_target_layer_ids")
    if ids_path is not None:
        if (not isinstance(ids_raw, list) or not ids_raw or len(ids_raw) > MAX_LAYERS
                or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_LAYERS for i in ids_raw)):
            raise ConfigError(f"{source}: {ids_path} must be a non-empty list of layer ids (whole numbers >= 0), "
                              f"got {ids_raw!r}.")
        ids = tuple(ids_raw)
        if num_target is not None and max(ids) >= num_target:
            raise ConfigError(f"{source}: {ids_path} names layer {max(ids)}, past the target's {num_target} layers "
                              f"(num_target_layers: ids 0..{num_target - 1}).")
    else:
        if num_target is None:
            raise ConfigError(f"{source}: neither dflash_config.target_layer_ids nor num_target_layers is given: "
                              "which target layers the drafter reads cannot be known.")
        ids = default_target_layer_ids(num_target, layers)
    target_hidden = k.whole("target_hidden_size", default=hidden, low=1)
    layer_types = raw.get("layer_types")
    if layer_types is not None and (not isinstance(layer_types, list)
                                    or not all(isinstance(t, str) for t in layer_types)):
        raise ConfigError(f"{source}: layer_types must be a list of strings, got {layer_types!r}.")
    window = k.whole("sliding_window", default=None, low=1, nested_first=False) \
        if raw.get("use_sliding_window", True) is not False or layer_types else None
    rope = raw.get("rope_parameters") if isinstance(raw.get("rope_parameters"), Mapping) else {}
    theta = rope.get("rope_theta", raw.get("rope_theta", 10000.0))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 0 < theta < float("inf"):
        raise ConfigError(f"{source}: rope_theta must be a positive number, got {theta!r}.")
    scaling = raw.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise ConfigError(f"{source}: rope_scaling must be an object or null, got {scaling!r}.")
    act = raw.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise ConfigError(f"{source}: hidden_act {act!r} is not the SiLU-gated MLP block drafters use.")
    causal = k.flag("is_causal", None)
    mode = k.word("attention_mode", "gqa", ("gqa", "mha", "mla"))
    dspark = family == "dspark"
    markov = k.whole("markov_rank", default=None, low=0) if dspark else None
    shift, _ = k.find("shift_label")
    # DeepSpec's Qwen3DSparkModel drafts from every slot (build_dspark_proposal: block_hidden[:, :block_size]);
    # SpecForge's DSparkDraftModel reads slots 1.. (_sample_draft_tokens: draft_hidden[:, -block_size + 1:]) and
    # its dflash_config.shift_label defaults to false
    anchor_drafts = (dspark and arch != "DSparkDraftModel") if shift is None else bool(shift)
    return BlockDrafterConfig(
        family=family, architecture=arch, block_size=block, mask_token_id=mask, target_layer_ids=ids,
        target_layer_ids_given=ids_path is not None, num_target_layers=num_target, hidden_size=hidden,
        target_hidden_size=target_hidden,
        intermediate_size=k.whole("intermediate_size", low=1, nested_first=False), num_attention_heads=heads,
        num_key_value_heads=kv, head_dim=head_dim, num_hidden_layers=layers, vocab_size=vocab,
        rms_norm_eps=k.number("rms_norm_eps", 1e-6), rope_theta=float(theta), rope_scaling=scaling,
        max_position_embeddings=k.whole("max_position_embeddings", default=None, low=1, nested_first=False),
        attention_bias=bool(raw.get("attention_bias", False)), hidden_act=str(act),
        is_causal=bool(causal) if causal is not None else False,
        layer_types=tuple(layer_types or ("full_attention",) * layers), sliding_window=window,
        attention_mode=mode or "gqa",
        input_embedding_scale=k.number("input_embedding_scale", 1.0),
        output_multiplier=k.number("output_multiplier", 1.0),
        final_logit_softcapping=(k.number("final_logit_softcapping", 0.0, positive=False) or None),
        conv_kernel_size=k.whole("conv_kernel_size", default=None, low=1) if family == "dflash2" else None,
        conv_group_size=k.whole("conv_group_size", default=None, low=1) if family == "dflash2" else None,
        selector_rank=k.whole("selector_rank", default=None, low=1) if family == "dflash2" else None,
        selector_top_k=k.whole("selector_top_k", default=None, low=1) if family == "dflash2" else None,
        markov_rank=markov, markov_head_type=k.word("markov_head_type", None) if dspark else None,
        enable_confidence_head=bool(k.flag("enable_confidence_head", False)) if dspark else False,
        confidence_head_with_markov=bool(k.flag("confidence_head_with_markov", False)) if dspark else False,
        anchor_drafts=anchor_drafts, source=source, where=dict(k.where), raw=raw)
