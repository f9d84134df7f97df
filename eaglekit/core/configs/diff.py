"""Diff two config.json dicts: nested, every difference classified shape | behaviour | metadata.

* ``shape``: changes a tensor's shape or adds/removes a tensor (hidden size, heads, vocab, draft
  vocab, MLA ranks, norm_before_fc's input_norm, bias flags...). Weights cannot be shared as they are.
* ``behaviour``: same tensors, different runtime behaviour (rope theta/scaling, max positions, aux
  layer ids, norm placement, eps, activation, drafted tokens...).
* ``metadata``: labels that change no computation (dtype labels, versions, names, model_type,
  architecture aliases, an absent key whose default equals the other side's value).

A key eaglekit does not know is classified ``behaviour``: it is not known to change a shape, and
calling it metadata would hide a change nobody has checked (the reason says so).

Lists of plain values (aux layer ids, architectures) are compared whole; lists holding objects are
compared item by item (``proposal_methods[0].speculative_tokens``). ``dtype`` and ``torch_dtype``
(transformers renamed the key in 4.56) are one key.

Across formats (a SpecForge config against a speculators one) the configs are compared by their
normalised fields (:func:`eaglekit.core.configs.config.normalize_config`), so the same value spelled elsewhere
(``eagle_config.eagle_aux_hidden_state_layer_ids`` vs top-level, ``transformer_layer_config.hidden_size``
vs ``hidden_size``, ``Eagle3Speculator`` vs ``LlamaForCausalLMEagle3``) is not a difference; keys
only one format has are listed once as metadata. speculators omits every value equal to its layer
config class's default (LlamaConfig, or Qwen3Config for a qwen3 layer), so an absent key whose other
side holds that default is equal; the same for speculators' own library defaults (``accept_tolerance``
0.0, ``verifier_accept_k`` 1, ``norm_output`` false, ...), which older files leave out. ``rope_parameters``
and ``rope_theta``/``rope_scaling`` spelling the same settings are equal.

Block drafters (DFlash, DFlash2, DSpark; :mod:`eaglekit.core.configs.block`) have keys of their own
(``block_size``, ``dflash_config.mask_token_id``, ``dflash_config.target_layer_ids``, ``num_target_layers``,
DFlash2's ``conv_*`` / ``selector_*`` / ``attention_mode``, DSpark's ``markov_*`` / ``enable_confidence_head``),
classified with what each change changes. A key spelled at the top level on one side and inside
``dflash_config`` on the other (DFlash and DFlash2 files differ so) with the same effective value is metadata.
A diff between drafters of different families (an EAGLE-3 drafter and a block drafter, or DFlash and DSpark)
begins with one ``family`` row that says so: their keys do not mean the same things.

Between two *target* configs, ``quantization_config`` is behaviour, not shape: a target's quantisation
changes how it stores its own weights (and, slightly, the hidden states a drafter reads), no drafter
tensor. In a drafter's own config it stays shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from eaglekit.core.configs.block import BlockDrafterConfig, block_family, read_block_config
from eaglekit.core.configs.config import (LLAMA_ARCHITECTURES, LLAMA_DEFAULTS, MLA_ARCHITECTURES, MLA_FLAGS, MLA_KEYS,
                                  MOE_KEYS, NORMALISED_FIELDS,
                                  SPECULATORS_ARCHITECTURES, SPECULATORS_DEFAULTS, TEXT_CONFIG_KEYS, DrafterConfig,
                                  detect_format, layer_defaults, normalize_config)
from eaglekit.core.errors import ConfigError
from eaglekit.core.render import ansi, format_value, html_badge, html_table, html_tint, text_table, truncate, use_colour

DiffClass = Literal["shape", "behaviour", "metadata"]
CLASSES: tuple[DiffClass, ...] = ("shape", "behaviour", "metadata")
_COLOURS = {"shape": "red", "behaviour": "yellow", "metadata": "grey"}


class _Absent:
    """A key missing on one side; shows as ``(absent)``."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "(absent)"

    __str__ = __repr__


ABSENT: Any = _Absent()

_SHAPE = {
    "hidden_size": "draft hidden size H sets every tensor's width (fc, attention, MLP, norms, lm_head)",
    "target_hidden_size": "fc.weight's input width is 3 x target_hidden_size",
    "intermediate_size": "MLP width: gate/up/down_proj shapes",
    "num_attention_heads": "q_proj/o_proj shapes are heads x head_dim",
    "num_key_value_heads": "k_proj/v_proj shapes are kv_heads x head_dim",
    "head_dim": "attention projection shapes are heads x head_dim",
    "vocab_size": "target vocabulary: t2d (and embed_tokens) length",
    "draft_vocab_size": "lm_head rows and d2t length",
    "num_hidden_layers": "number of decoder layers, so the tensor set",
    "q_lora_rank": ("MLA query LoRA rank: q_a_proj [rank, 2H], q_a_layernorm [rank] and q_b_proj's input width; "
                    "null replaces the three by one q_proj"),
    "kv_lora_rank": ("MLA key/value latent rank: kv_a_proj_with_mqa [rank + qk_rope_head_dim, 2H], kv_a_layernorm "
                     "[rank] and kv_b_proj's input width"),
    "qk_nope_head_dim": "MLA per-head key/query part without rotary: q_b_proj and kv_b_proj rows (heads x dims)",
    "qk_rope_head_dim": ("MLA rotary part of each head: q_b_proj rows and the shared key part of kv_a_proj_with_mqa; "
                         "also the dimensions rotary/YaRN turns"),
    "v_head_dim": "MLA value head width: kv_b_proj rows and o_proj's input width (heads x v_head_dim)",
    # MoE MLP (TorchSpec kimi_k25_eagle3_moe): the experts' and the router's tensors.
    "use_moe": ("dense MLP (gate/up/down_proj) vs MoE MLP (router mlp.gate, routed experts, shared experts): a "
                "different tensor set"),
    "n_routed_experts": "number of routed experts: mlp.gate.weight rows, e_score_correction_bias and expert tensors",
    "moe_intermediate_size": "routed and shared experts' width: expert gate/up/down_proj shapes",
    "n_shared_experts": "shared experts' width is moe_intermediate_size x n_shared_experts (0: no shared expert)",
    "norm_before_fc": "adds or removes input_norm.weight [3 x target hidden] before fc",
    "fc_norm": "adds or removes fc_norm.{0,1,2}.weight (EAGLE-3.1)",
    "attention_bias": "adds or removes the q/k/v/o_proj bias tensors",
    "mlp_bias": "adds or removes the gate/up/down_proj bias tensors",
    "quantization_config": "quantised weights change tensor dtypes and shapes",
    # eaglekit's normalised fields (no config spells them so): what they sum up of the raw keys.
    "n_aux": "the number of aux layers sets fc.weight's input width (n x target hidden size)",
    "input_norm": "adds or removes the norm tensors before fc (norm_before_fc / fc_norm)",
}
#: A TARGET's quantisation changes how its own weights are stored, not any drafter tensor: what it
#: changes for a drafter is the numerics of the hidden states fc reads (and the serving kernels).
_TARGET_QUANTIZATION = ("target weight quantisation: changes how the target stores its weights and so, slightly, "
                        "the hidden states the drafter reads; no drafter tensor changes shape")
_BEHAVIOUR = {
    "eagle_aux_hidden_state_layer_ids": "which target hidden states feed fc: same shapes, different tensors",
    "aux_layer_ids": "which target hidden states feed fc: same shapes, different tensors",
    "use_aux_hidden_state": "whether fc reads the target's aux hidden states",
    "rope_theta": "rotary base: changes position encoding",
    "rope_scaling": "rotary scaling: changes position encoding (long context)",
    "rope_parameters": "rotary parameters: change position encoding",
    "rope_type": "rotary scaling type (default, yarn, llama3, ...): changes position encoding",
    "partial_rotary_factor": "share of head_dim that is rotated",
    "max_position_embeddings": "longest position the rotary cache covers",
    "rms_norm_eps": "RMSNorm epsilon",
    "norm_before_residual": "where hidden_norm applies relative to the residual",
    "hidden_act": "MLP activation function",
    "tie_word_embeddings": "whether lm_head shares the embedding matrix",
    "sliding_window": "attention window", "use_sliding_window": "attention window",
    "max_window_layers": "attention window",
    "attention_dropout": "dropout (training only)",
    "speculative_tokens": "tokens drafted per step",
    "proposal_type": "speculative proposal method", "default_proposal_method": "speculative proposal method",
    "algorithm": "speculative algorithm", "accept_tolerance": "acceptance rule",
    "verifier_accept_k": "acceptance rule",
    "norm_output": "post-norm hidden states fed back across draft steps (EAGLE 3.1)",
    "use_input_layernorm_in_first_layer": ("norm: whether the embedding passes input_layernorm (Model-Optimizer's "
                                           "Megatron flow reads it; vLLM, SGLang and TorchSpec always apply it)"),
    "use_last_layernorm": ("norm: whether the final norm applies before lm_head (Model-Optimizer; vLLM, SGLang and "
                           "TorchSpec always apply it)"),
    "use_mtp_layernorm": ("norm: MTP-style enorm/hnorm instead of EAGLE-3's input norms (Model-Optimizer's Megatron "
                          "flow; the engines ignore it)"),
    # MLA flags.
    "rope_interleave": ("rotary layout of the MLA rope dims: DeepSeek's interleaved pairs or Llama's halves (the "
                        "same attention only if the weights were permuted to match)"),
    "mla_use_nope": "MLA without rotary (Kimi-K3's NoPE): the rope dims are not rotated and YaRN does not apply",
    # MoE routing.
    "num_experts_per_tok": "routing: routed experts per token (top-k)",
    "scoring_func": "routing: router scores (sigmoid or softmax) that select and weight experts",
    "norm_topk_prob": "routing: whether the chosen experts' weights are renormalised to sum to 1",
    "routed_scaling_factor": "routing: the routed experts' output is scaled by this factor",
    "n_group": "routing: experts split into n_group groups for group-limited top-k",
    "topk_group": "routing: top-k is taken within the topk_group best expert groups",
    "topk_method": "routing: how experts are picked (noaux_tc: scores plus e_score_correction_bias; greedy)",
    "first_k_dense_replace": ("which layers are dense in a DeepSeek target; TorchSpec drafters switch on use_moe "
                              "alone"),
    # YaRN rotary scaling (rope_scaling.*): the frequencies and, for MLA, the softmax scale.
    "factor": "rotary/YaRN: context extension factor, changes the rotary frequencies and the YaRN mscale",
    "mscale": "rotary/YaRN: attention temperature of the rotary cos/sin (mscale / mscale_all_dim)",
    "mscale_all_dim": "rotary/YaRN: scales the MLA softmax by mscale(factor, mscale_all_dim) squared",
    "original_max_position_embeddings": "rotary/YaRN: the pre-extension context, sets which frequencies are scaled",
    "beta_fast": "rotary/YaRN: ramp bounds between extrapolated and interpolated frequencies",
    "beta_slow": "rotary/YaRN: ramp bounds between extrapolated and interpolated frequencies",
    "type": "rotary scaling type (default, yarn, llama3, ...): changes position encoding",
}
_METADATA = {
    "torch_dtype": "dtype label: the tensors' real dtypes are in the safetensors header",
    "transformers_version": "version of the library that wrote the file",
    "speculators_version": "version of the library that wrote the file",
    "_name_or_path": "a name, not a value the model uses", "name_or_path": "a name, not a value the model uses",
    "model_type": "label: architectures selects the model code",
    "speculators_model_type": "format marker",
    "auto_map": "remote-code pointer",
    "initializer_range": "weight initialisation (training start only)",
    "use_cache": "runtime KV-cache flag the engine sets",
    "bos_token_id": "special token id: the engine takes it from the target's tokenizer",
    "eos_token_id": "special token id: the engine takes it from the target's tokenizer",
    "pad_token_id": "special token id: the engine takes it from the target's tokenizer",
    "pretraining_tp": "tensor-parallel training hint",
    "has_no_defaults_at_init": "serialisation flag", "embed_requires_grad": "training flag",
    "enable_sp_ulysses": "training flag",
    "dtype": "dtype label: the tensors' real dtypes are in the safetensors header",
    "eaglekit_export": "provenance note written by eaglekit export",
    "eaglekit_demo": "label of eaglekit's synthetic demo data",
    "train_router": "training flag: whether the router learns through the expert path (TorchSpec)",
    "output_router_logits": "training flag: router logits returned for the balancing loss",
    "router_aux_loss_coef": "training flag: weight of the router balancing loss",
    "num_mtp_layers": "layers a DeepSeek target's MTP head has: not a drafter tensor",
}
#: Top-level keys only speculators configs have (speculators src/speculators/config.py).
_SPECULATORS_ONLY = ("speculators_model_type", "speculators_config", "speculators_version", "auto_map",
                     "has_no_defaults_at_init", "embed_requires_grad", "enable_sp_ulysses")
#: Keys whose absence equals a known neutral default, beyond LlamaConfig's (Qwen2-style window keys).
_NEUTRAL = {**LLAMA_DEFAULTS, "sliding_window": None, "use_sliding_window": False}
#: Library defaults whose absence means that value at any depth (speculators writes them in 0.9, older
#: files leave them out): not differences.
_LIBRARY_DEFAULTS = {k: v for k, v in SPECULATORS_DEFAULTS.items() if k != "draft_vocab_size"}
_INDEX = re.compile(r"\[\d+\]")

#: Block drafters' keys (docs/block-drafters.md): what a change of each changes. Checked before the EAGLE-3
#: tables when either side is a block drafter.
_BLOCK_SHAPE = {
    "hidden_size": ("draft hidden size H: every tensor's width; it must equal the target's, whose embedding and "
                    "lm_head the block drafter uses"),
    "target_hidden_size": "fc.weight's input width is n_aux x target_hidden_size",
    "vocab_size": ("target vocabulary: rows of DFlash2's selector codebooks and DSpark's Markov head (a DFlash body "
                   "has no vocabulary-sized tensor)"),
    "conv_kernel_size": ("DFlash2 dynamic convolutions: base_kernel [2, kernel, H] and kernel_projection "
                         "[2 x kernel x H / group, H]"),
    "conv_group_size": "DFlash2 dynamic convolutions: kernel_projection rows are 2 x kernel x H / conv_group_size",
    "selector_rank": "DFlash2 candidate selector: hidden_projection [rank, H] and both codebooks [vocab, rank]",
    "attention_mode": "attention tensors: GQA's q/k/v/o_proj or MLA's q_a/q_b/kv_a/kv_b projections",
    "markov_rank": "DSpark Markov head: markov_w1 / markov_w2 [vocab, rank]; 0 removes the head",
    "markov_head_type": "DSpark Markov head kind: gated adds gate_proj, rnn adds joint_proj",
    "enable_confidence_head": "DSpark: adds or removes confidence_head.proj",
    "confidence_head_with_markov": "DSpark: confidence_head.proj reads H or H + markov_rank inputs",
}
_BLOCK_BEHAVIOUR = {
    "block_size": ("drafts per cycle and the verify width (block_size - 1 drafts, block_size for DSpark; the target "
                   "verifies one more token): same tensors, trained for another block"),
    "mask_token_id": ("the token whose target embedding fills the draft slots: the drafter learned that embedding; "
                      "another id means retraining"),
    "target_layer_ids": ("which target features the drafter reads (layer outputs, hidden_states[id + 1]): same "
                         "shapes, other hidden states; retraining"),
    "dspark_target_layer_ids": ("which target features the drafter reads (layer outputs, hidden_states[id + 1]): "
                                "same shapes, other hidden states; retraining"),
    "num_target_layers": ("the target's layer count the drafter was trained for; sets the default target_layer_ids "
                          "when none are given"),
    "selector_top_k": "DFlash2: candidates the selector scores per slot",
    "output_multiplier": "DFlash2: scale of the draft logits",
    "final_logit_softcapping": "DFlash2: tanh softcap of the draft logits",
    "input_embedding_scale": "scale on the target's embedding of the block",
    "is_causal": "attention inside the block: bidirectional (false, the authors' DFlash) or causal",
    "layer_types": "attention kind per draft layer (full or sliding window)",
    "shift_label": "whether the anchor slot drafts too (DSpark's label shift): drafts per block",
    "projector_type": "SpecForge's family marker (dspark): which draft code runs",
    "num_anchors": "DSpark: anchors sampled per training sequence (training setting)",
    "dflash_config": "the block drafter's own settings (mask token, target layers, block size): no EAGLE-3 counterpart",
    "eagle_config": "EAGLE-3's own settings (aux layer ids): no block-drafter counterpart",
}
#: what each family is, for the family row
_FAMILY_WORDS = {
    "eagle3": ("EAGLE-3", "drafts one token per step from fc over target hidden states joined with the token "
                          "embedding, through its own lm_head"),
    "dflash": ("DFlash", "drafts a block in one pass, embedded with the target's embedding and drafted through the "
                         "target's lm_head, every layer attending to the projected target layer outputs"),
    "dflash2": ("DFlash2", "is a DFlash backbone plus a candidate selector and dynamic convolutions"),
    "dspark": ("DSpark", "is a DFlash backbone plus a Markov head and a confidence head; its anchor slot drafts too"),
    None: ("a model (no drafter)", "is not a drafter config"),
}


@dataclass(frozen=True)
class Difference:
    """One difference: ``a``/``b`` are the values (:data:`ABSENT` when missing on that side)."""

    path: str
    a: Any
    b: Any
    cls: DiffClass
    reason: str

    def to_json(self) -> dict:
        return {"path": self.path, "a": _jsonable(self.a), "b": _jsonable(self.b), "class": self.cls,
                "reason": self.reason}


@dataclass(frozen=True)
class ConfigDiff:
    """All differences between config A and config B, ordered shape, behaviour, metadata."""

    a_name: str
    b_name: str
    a_format: str | None
    b_format: str | None
    differences: tuple[Difference, ...]

    @property
    def cross_format(self) -> bool:
        return self.a_format != self.b_format

    @property
    def identical(self) -> bool:
        return not self.differences

    @property
    def counts(self) -> dict[str, int]:
        return {c: sum(d.cls == c for d in self.differences) for c in CLASSES}

    def by_class(self, *classes: DiffClass) -> tuple[Difference, ...]:
        """The differences of the given classes, e.g. ``diff.by_class("shape", "behaviour")``."""
        unknown = [c for c in classes if c not in CLASSES]
        if unknown:
            raise ValueError(f"unknown difference class {unknown[0]!r}: expected one of {', '.join(CLASSES)}")
        return tuple(d for d in self.differences if d.cls in classes)

    def __iter__(self) -> Iterator[Difference]:
        return iter(self.differences)

    def __len__(self) -> int:
        return len(self.differences)

    def to_json(self) -> list[dict]:
        return [d.to_json() for d in self.differences]

    @property
    def summary(self) -> str:
        fa, fb = (f" ({f})" if f else "" for f in (self.a_format, self.b_format))
        head = f"Config diff {self.a_name}{fa} vs {self.b_name}{fb}: "
        if self.identical:
            return head + "no differences"
        return head + ", ".join(f"{n} {c}" for c, n in self.counts.items() if n)

    def render_text(self, *, colour: bool | None = None, width: int = 40) -> str:
        """Aligned text table; ``colour`` None means ANSI only when stdout is a terminal."""
        colour = use_colour() if colour is None else colour
        rows = [(ansi(d.cls, _COLOURS[d.cls], enabled=colour), d.path, truncate(_show(d.a), width),
                 truncate(_show(d.b), width), d.reason) for d in self.differences]
        if not rows:
            return self.summary
        return text_table(["class", "path", self.a_name, self.b_name, "reason"], rows, title=self.summary)

    def __str__(self) -> str:
        return self.render_text()

    def _repr_html_(self) -> str:
        rows = [(html_badge(d.cls, _COLOURS[d.cls]), d.path, truncate(_show(d.a), 200),
                 truncate(_show(d.b), 200), d.reason) for d in self.differences]
        styles = [f"background:{html_tint(_COLOURS[d.cls])}" for d in self.differences]
        return html_table(["class", "path", self.a_name, self.b_name, "reason"], rows, row_styles=styles,
                          caption=self.summary, classes=["eaglekit-configdiff"])


def diff_configs(a: Mapping[str, Any] | DrafterConfig, b: Mapping[str, Any] | DrafterConfig, *,
                 a_name: str = "A", b_name: str = "B") -> ConfigDiff:
    """Diff two configs (raw dicts or :class:`DrafterConfig`); drafter or target configs alike."""
    raw_a = dict(a.raw) if isinstance(a, DrafterConfig) else a
    raw_b = dict(b.raw) if isinstance(b, DrafterConfig) else b
    for raw, name in ((raw_a, a_name), (raw_b, b_name)):
        if not isinstance(raw, Mapping):
            raise ConfigError(f"config {name} must be a JSON object (dict), got {type(raw).__name__}.")
    fa, fb = detect_format(raw_a), detect_format(raw_b)
    ba, bb = block_family(raw_a), block_family(raw_b)
    if ba or bb:
        return _block_diff(raw_a, raw_b, fa, fb, ba, bb, a_name, b_name)
    ctx = _Context(a_name, b_name, fa, fb)
    if fa and fb and fa != fb:
        found = _cross_format(raw_a, raw_b, ctx)
    else:
        ctx.cfg_a, ctx.cfg_b = _try_normalize(raw_a, a_name), _try_normalize(raw_b, b_name)
        raw_a, raw_b, wrapped = _unwrap_targets(raw_a, raw_b, ctx)
        found = wrapped + [_classified(p, x, y, ctx) for p, x, y in _walk(raw_a, raw_b, "")]
    found = [d for d in found if d is not None]
    ordered = tuple(sorted(found, key=lambda d: CLASSES.index(d.cls)))  # stable: keeps discovery order
    return ConfigDiff(a_name, b_name, fa, fb, ordered)


class _Context:
    def __init__(self, a_name: str, b_name: str, fa: str | None, fb: str | None) -> None:
        self.a_name, self.b_name, self.fa, self.fb = a_name, b_name, fa, fb
        self.cfg_a: DrafterConfig | None = None
        self.cfg_b: DrafterConfig | None = None
        self.cross = False
        self.block = False  # either side is a block drafter: its keys are read with the block tables
        self.block_a: BlockDrafterConfig | None = None
        self.block_b: BlockDrafterConfig | None = None


def _block_diff(raw_a: Mapping[str, Any], raw_b: Mapping[str, Any], fa: str | None, fb: str | None,
                ba: str | None, bb: str | None, a_name: str, b_name: str) -> ConfigDiff:
    """A diff where one side (or both) is a block drafter: a family row when the families differ, then key by key."""
    ctx = _Context(a_name, b_name, fa, fb)
    ctx.block = True
    ctx.cfg_a, ctx.cfg_b = _try_normalize(raw_a, a_name), _try_normalize(raw_b, b_name)
    ctx.block_a, ctx.block_b = _try_block(raw_a, a_name), _try_block(raw_b, b_name)
    fam_a, fam_b = ba or ("eagle3" if fa else None), bb or ("eagle3" if fb else None)
    found: list[Difference | None] = []
    if fam_a != fam_b:
        (na, wa), (nb, wb) = _FAMILY_WORDS[fam_a], _FAMILY_WORDS[fam_b]
        backbone = {fam_a, fam_b} <= {"dflash", "dflash2", "dspark"}
        tail = ("they share the DFlash backbone (fc, hidden_norm, the decoder layers), whose keys compare below; "
                "each family's own keys do not" if backbone else
                "different families: no key below means the same thing on both sides, and a warm start of one "
                "from the other takes little (eaglekit compat says what)")
        found.append(Difference("family", na, nb, "shape", f"{na} {wa}; {nb} {wb}: {tail}"))
    found += [_classified(p, x, y, ctx) for p, x, y in _walk(raw_a, raw_b, "")]
    found = [d for d in found if d is not None]
    ordered = tuple(sorted(found, key=lambda d: CLASSES.index(d.cls)))
    return ConfigDiff(a_name, b_name, ba or fa, bb or fb, ordered)


def _read_if(detect, read, raw: Mapping[str, Any], name: str):
    """``read(raw)`` when ``detect`` recognises it, else None; None too for a broken config, which still diffs key
    by key."""
    if detect(raw) is None:
        return None
    try:
        return read(raw, source=name)
    except ConfigError:
        return None


def _try_block(raw: Mapping[str, Any], name: str) -> BlockDrafterConfig | None:
    return _read_if(block_family, read_block_config, raw, name)


def _block_same(path: str, ctx: _Context) -> Difference | None:
    """Metadata when a block key differs only in where it is spelled (top level or dflash_config) or in being
    left to its default: both configs read to the same effective value."""
    leaf = path.rsplit(".", 1)[-1]
    fields = BlockDrafterConfig.__dataclass_fields__
    if ctx.block_a is None or ctx.block_b is None or leaf not in fields or leaf in ("where", "raw", "source"):
        return None
    va, vb = getattr(ctx.block_a, leaf), getattr(ctx.block_b, leaf)
    if not _equal(list(va) if isinstance(va, tuple) else va, list(vb) if isinstance(vb, tuple) else vb):
        return None
    return (f"same effective {leaf} in both ({format_value(va)}): spelled at the top level on one side and inside "
            "dflash_config on the other, or left to its default")


def _try_normalize(raw: Mapping[str, Any], name: str) -> DrafterConfig | None:
    return _read_if(detect_format, normalize_config, raw, name)


def _walk(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """Yield (path, a, b) for every leaf that differs."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        a, b = _alias(a), _alias(b)
        for key in [*a, *(k for k in b if k not in a)]:
            yield from _walk(a.get(key, ABSENT), b.get(key, ABSENT), f"{path}.{key}" if path else str(key))
    elif (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
          and any(isinstance(v, (Mapping, list)) for v in [*a, *b])):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _walk(x, y, f"{path}[{i}]")
    elif not _equal(a, b):
        yield path, a, b


def _alias(d: Mapping[str, Any]) -> Mapping[str, Any]:
    if "dtype" in d and "torch_dtype" not in d:
        return {("torch_dtype" if k == "dtype" else k): v for k, v in d.items()}
    return d


def _equal(a: Any, b: Any) -> bool:
    """Equality where true != 1 but 1 == 1.0, applied through lists and dicts."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _classified(path: str, a: Any, b: Any, ctx: _Context) -> Difference | None:
    keys = [k for k in _INDEX.sub("", path).split(".") if k]
    leaf = keys[-1] if keys else path
    if ctx.block:
        same = _block_same(path, ctx)
        if same is not None:
            return Difference(path, a, b, "metadata", same)
        cls, reason = _classify_keys(keys, a, b, block=True)
        return Difference(path, a, b, cls, reason)
    # Explicit on one side, default on the other, same effective value.
    field = _field_for(path, ctx)
    if field and ctx.cfg_a and ctx.cfg_b and _equal(_norm(ctx.cfg_a, field), _norm(ctx.cfg_b, field)):
        return Difference(path, a, b, "metadata",
                          f"same effective {field} in both ({format_value(_norm(ctx.cfg_a, field))}): the key is "
                          f"spelled elsewhere or left to its default")
    if leaf == "rope_parameters" and ctx.cfg_a and ctx.cfg_b \
            and _equal(_rope(ctx.cfg_a), _rope(ctx.cfg_b)):
        return Difference(path, a, b, "metadata", "same rotary settings, spelled as rope_parameters "
                          "(transformers 5) on one side and rope_theta / rope_scaling on the other")
    if (a is ABSENT or b is ABSENT) and leaf in _LIBRARY_DEFAULTS and ctx.fa in ("speculators", None) \
            and ctx.fb in ("speculators", None) and _equal(b if a is ABSENT else a, _LIBRARY_DEFAULTS[leaf]):
        if ctx.cross:
            return None
        missing = ctx.a_name if a is ABSENT else ctx.b_name
        return Difference(path, a, b, "metadata", f"absent in {missing}, where the library default "
                          f"{format_value(_LIBRARY_DEFAULTS[leaf])} applies: same effective value")
    neutral = _neutral_for(keys, ctx)
    if (a is ABSENT or b is ABSENT) and _llama_family(ctx) and len(keys) <= 2 and leaf in neutral:
        present = b if a is ABSENT else a
        if _equal(present, neutral[leaf]):
            if ctx.cross:
                return None  # speculators drops defaults by design: not a difference across formats
            missing = ctx.a_name if a is ABSENT else ctx.b_name
            return Difference(path, a, b, "metadata", f"absent in {missing}, where the default "
                              f"{format_value(neutral[leaf])} applies: same effective value")
    if keys and keys[0] == "quantization_config" and not (ctx.fa or ctx.fb):
        return Difference(path, a, b, "behaviour", _TARGET_QUANTIZATION)
    cls, reason = _classify_keys(keys, a, b)
    return Difference(path, a, b, cls, reason)


def _neutral_for(keys: list[str], ctx: _Context) -> dict[str, Any]:
    """Absent-key defaults for the layer config holding ``keys`` (Qwen3Config for a qwen3 layer)."""
    for cfg in (ctx.cfg_a, ctx.cfg_b):
        if cfg is not None:
            _, _, table = layer_defaults(cfg.raw, cfg.format)
            return {**table, "sliding_window": None, "use_sliding_window": False}
    return _NEUTRAL


def _rope(cfg: DrafterConfig) -> Any:
    return {k: v for k, v in (cfg.rope_parameters or {}).items()}


def _classify_keys(keys: list[str], a: Any, b: Any, *, block: bool = False) -> tuple[DiffClass, str]:
    if "verifier" in keys:
        return "metadata", "declared target model: a name only; check the target's own config"
    for key in reversed(keys):
        if block and key in ("target_layer_ids", "dspark_target_layer_ids") and isinstance(a, list) \
                and isinstance(b, list) and len(a) != len(b):
            return "shape", ("the number of target layers read sets fc.weight's input width (n x target hidden size), "
                             "and which features it reads")
        if block:
            for cls, table in (("shape", _BLOCK_SHAPE), ("behaviour", _BLOCK_BEHAVIOUR)):
                if key in table:
                    return cls, table[key]
        if key == "architectures":
            fam_a, fam_b = _family(a), _family(b)
            if fam_a and fam_a == fam_b:
                return "metadata", "aliases of the same drafter architecture"
            return "shape", "different model architecture: different code and tensor layout"
        if key in ("eagle_aux_hidden_state_layer_ids", "aux_layer_ids") and isinstance(a, list) \
                and isinstance(b, list) and len(a) != len(b):
            return "shape", "the number of aux layers sets fc.weight's input width (n x target hidden size)"
        for cls, table in (("shape", _SHAPE), ("behaviour", _BEHAVIOUR), ("metadata", _METADATA)):
            if key in table:
                return cls, table[key]
    return "behaviour", ("not a key eaglekit knows: assumed to change behaviour until checked "
                         "(unknown keys are not assumed harmless)")


def _family(value: Any) -> str | None:
    archs = value if isinstance(value, list) else [value]
    block = block_family({"architectures": archs})
    if block is not None:
        return block
    if any(x in LLAMA_ARCHITECTURES or x in SPECULATORS_ARCHITECTURES for x in archs):
        return "llama"
    if any(x in MLA_ARCHITECTURES for x in archs):
        return "mla"
    return None


#: Normalised fields that only sum up others: left out of a cross-format diff when those differ.
_SUMMED_UP = {"n_aux": {"aux_layer_ids"}, "rope_type": {"rope_scaling"}, "input_norm": {"norm_before_fc", "fc_norm"}}


def _format_family(cfg: DrafterConfig) -> str:
    """The attention a normalised drafter config builds: MLA drafters, else Llama attention (SpecForge,
    speculators and the original EAGLE-3 layout, whose plain LlamaForCausalLM name is not a family)."""
    return "mla" if cfg.format == "mla" else "llama"


def _llama_family(ctx: _Context) -> bool:
    return ctx.fa in ("specforge", "speculators") or ctx.fb in ("specforge", "speculators")


def _field_for(path: str, ctx: _Context) -> str | None:
    for cfg in (ctx.cfg_a, ctx.cfg_b):
        if cfg is not None:
            for name, src in cfg.sources.items():
                if src and _alias_path(src) == path:
                    return name
    return None


def _alias_path(path: str) -> str:
    head, _, leaf = path.rpartition(".")
    return f"{head}.torch_dtype" if head and leaf == "dtype" else ("torch_dtype" if leaf == "dtype" else path)


def _norm(cfg: DrafterConfig, field: str) -> Any:
    group, _, key = field.partition(".")
    if key and group in ("mla", "moe"):  # provenance names of the MLA/MoE settings: "mla.q_lora_rank"
        return getattr(cfg, group).get(key, ABSENT)
    value = getattr(cfg, field)
    return list(value) if isinstance(value, tuple) else value


def _unwrap_targets(a: Mapping[str, Any], b: Mapping[str, Any], ctx: _Context):
    """When one target keeps its language model under text_config (K2.5) and the other does not
    (K2), compare the wrapped fields with the other's top level."""
    if ctx.fa or ctx.fb:
        return a, b, []
    keys_a = [k for k in TEXT_CONFIG_KEYS if isinstance(a.get(k), Mapping)]
    keys_b = [k for k in TEXT_CONFIG_KEYS if isinstance(b.get(k), Mapping)]
    if bool(keys_a) == bool(keys_b):
        return a, b, []
    key = (keys_a or keys_b)[0]
    note = Difference(key, "(wrapper)" if keys_a else ABSENT, "(wrapper)" if keys_b else ABSENT, "metadata",
                      f"{ctx.a_name if keys_a else ctx.b_name} keeps its language model config under {key}; "
                      f"those fields are compared with the other config's top level")

    def flat(d):
        inner = d[key]
        return {**{k: v for k, v in d.items() if k != key}, **inner}

    return (flat(a) if keys_a else a), (flat(b) if keys_b else b), [note]


def _cross_format(a: Mapping[str, Any], b: Mapping[str, Any], ctx: _Context) -> list[Difference | None]:
    ctx.cross = True
    try:
        cfg_a, cfg_b = normalize_config(a, source=ctx.a_name), normalize_config(b, source=ctx.b_name)
    except ConfigError as e:
        raise ConfigError(f"Cannot compare configs of different formats ({ctx.fa} vs {ctx.fb}): {e}") from e
    out: list[Difference | None] = []
    differing = {name for name in NORMALISED_FIELDS if not _equal(_norm(cfg_a, name), _norm(cfg_b, name))}
    for name in NORMALISED_FIELDS:
        va, vb = _norm(cfg_a, name), _norm(cfg_b, name)
        if _SUMMED_UP.get(name, set()) & differing:
            continue  # a summary of a field whose own row already shows the difference
        if not _equal(va, vb):
            cls, reason = _classify_keys([name], va, vb)
            if name == "aux_layer_ids" and "n_aux" in differing:
                cls, reason = "shape", (f"{cfg_a.n_aux} vs {cfg_b.n_aux} aux layers: their number sets fc.weight's "
                                        "input width (n x target hidden size), and which ones the tensors fc reads")
            sa, sb = cfg_a.sources.get(name), cfg_b.sources.get(name)
            if sa != sb:
                spelled = f" ({ctx.a_name}: {sa or 'default'}; {ctx.b_name}: {sb or 'default'})"
            else:
                spelled = " (default on both sides)" if sa is None else ""
            out.append(Difference(name, va, vb, cls, reason + spelled))
    if bool(cfg_a.moe) != bool(cfg_b.moe):  # one MoE MLP, one dense: one row, not one per MoE key
        out.append(Difference("moe", dict(cfg_a.moe) or ABSENT, dict(cfg_b.moe) or ABSENT, "shape",
                              "only one drafter has a MoE MLP (router mlp.gate, routed and shared experts); the other "
                              "a dense MLP (gate/up/down_proj)"))
    for group in ("mla", "moe") if cfg_a.moe and cfg_b.moe else ("mla",):
        ga, gb = getattr(cfg_a, group), getattr(cfg_b, group)
        for key in [*ga, *(k for k in gb if k not in ga)]:
            va, vb = ga.get(key, ABSENT), gb.get(key, ABSENT)
            if key in MLA_FLAGS and (va is ABSENT or vb is ABSENT):
                continue  # flags of an MLA layer against a Llama one: the format row says the layers differ
            if not _equal(va, vb):
                out.append(Difference(key, va, vb, *_classify_keys([key], va, vb)))
    left_a, only_a = _leftovers(cfg_a)
    left_b, only_b = _leftovers(cfg_b)
    out.extend(_classified(p, x, y, ctx) for p, x, y in _walk(left_a, left_b, ""))
    same_family = _format_family(cfg_a) == _format_family(cfg_b)
    out.append(Difference(
        "format", f"{cfg_a.format} ({cfg_a.architecture})", f"{cfg_b.format} ({cfg_b.architecture})",
        "metadata" if same_family else "shape",
        "different config formats, compared by normalised fields: equal values spelled differently are not "
        "differences" if same_family else "different drafter architectures (Llama attention vs MLA): tensor "
        "layouts differ"))
    for key, value in only_a.items():
        out.append(Difference(key, value, ABSENT, "metadata", f"only {cfg_a.format} configs have this key"))
    for key, value in only_b.items():
        out.append(Difference(key, ABSENT, value, "metadata", f"only {cfg_b.format} configs have this key"))
    return out


def _leftovers(cfg: DrafterConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """Raw keys the normalised fields did not consume (speculators' layer config flattened to the top
    level, as SpecForge spells it), and the keys only this format has."""
    used = set(cfg.read_paths) | {"architectures"} | set(MLA_KEYS) | set(MLA_FLAGS) | set(MOE_KEYS)
    left: dict[str, Any] = {}
    only: dict[str, Any] = {}
    for key, value in cfg.raw.items():
        if key in used:
            continue
        if key in ("eagle_config", "transformer_layer_config") and isinstance(value, Mapping):
            flat = key == "transformer_layer_config"
            for sub, v in value.items():
                path = f"{key}.{sub}"
                if path in used or (flat and sub in ("dtype", "torch_dtype")):
                    continue
                if flat and sub == "architectures":
                    only[path] = v
                else:
                    left[sub if flat else path] = v
        elif cfg.format == "speculators" and key in _SPECULATORS_ONLY:
            only[key] = value
        else:
            left[key] = value
    return left, only


def _show(value: Any) -> str:
    return "(absent)" if value is ABSENT else format_value(value)


def _jsonable(value: Any) -> Any:
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value
