"""A drafter's rotary settings as each reader reads them: checked before any maths, and the base each one uses.

Checks (:func:`rope_scaling_problem`): a ``rope_scaling`` (or ``rope_parameters``) dict is refused before any
table is built when its numbers cannot make one: a YaRN ``factor`` of 0 (every position the same angle: accept
length 1.0 without an error), a ``factor`` written as a string, ``original_max_position_embeddings`` 0 (a division
by zero in YaRN's correction range), a negative ``beta_fast`` (a logarithm of a negative number), a bare
``longrope`` without its ``short_factor`` / ``long_factor`` lists.

The base: transformers (``DeepseekV3RotaryEmbedding`` through ``ROPE_INIT_FUNCTIONS``), vLLM
(``model_executor/models/deepseek_v2.py``: ``get_rope(..., rope_parameters=config.rope_parameters)``) and SGLang
build every table on ``rope_theta``. TorchSpec does not, for some kinds: its MLA drafter
(lightseekorg/TorchSpec ``torchspec/models/draft/deepseek_eagle.py``, ``DeepSeekMLAAttention._init_rope``) builds
``LlamaYarnRotaryEmbedding``, ``LlamaLinearScalingRotaryEmbedding`` and ``LlamaDynamicNTKScalingRotaryEmbedding``
without ``base=``, so they take the class default ``base=10000`` (``torchspec/models/draft/llama3_eagle.py``);
its Llama drafter (``llama3_eagle.py`` ``_init_rope``) passes ``rope_theta`` to YaRN but not to linear or dynamic.
A drafter trained by TorchSpec with such a config and served by an engine meets another rotary table: acceptance
drops and nothing reports an error. Which base a drafter was trained on is not in its files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, Union

#: the base TorchSpec's rotary classes default to (``LlamaRotaryEmbedding(..., base=10000)``)
TORCHSPEC_BASE = 10000.0
#: rope kinds whose table TorchSpec builds on TORCHSPEC_BASE whatever rope_theta says, per attention family
TORCHSPEC_FIXED_BASE = {"mla": ("yarn", "linear", "dynamic"), "llama": ("linear", "dynamic")}
#: ``"config"``: rope_theta (what vLLM, SGLang and transformers use); ``"torchspec"``: what TorchSpec's training
#: code uses for this config; a number: that base
RotaryBase = Union[Literal["config", "torchspec"], float]
#: rope kinds transformers' initialisers build, and what each needs
KNOWN_KINDS = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "mrope")


def rope_kind(scaling: Mapping[str, Any] | None) -> str:
    """The rope kind a scaling dict names (``rope_type``, or the older ``type``); ``"default"`` when none."""
    if not isinstance(scaling, Mapping):
        return "default"
    kind = scaling.get("rope_type", scaling.get("type"))
    return kind if isinstance(kind, str) else "default"


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def rope_scaling_problem(scaling: Mapping[str, Any] | None, *, theta: object = None) -> str | None:
    """What is wrong with rotary settings (a ``rope_scaling`` or ``rope_parameters`` dict, and ``rope_theta``),
    in one sentence naming the key and what to write; None when a table can be built from them."""
    if theta is not None and (not _number(theta) or theta <= 0):
        return f"rope_theta is {theta!r}: the rotary base must be a positive number (10000 when in doubt)"
    if scaling is None:
        return None
    if not isinstance(scaling, Mapping):
        return f"rope_scaling is {scaling!r}, not an object such as {{\"rope_type\": \"yarn\", \"factor\": 40}}"
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind is not None and not isinstance(kind, str):
        return f"rope_scaling's rope_type is {kind!r}, not a name such as \"yarn\""
    kind = kind or "default"
    if kind == "deepseek_yarn":  # vLLM's internal name for DeepSeek's YaRN
        kind = "yarn"
    if kind not in KNOWN_KINDS:
        return f"rope_scaling names rope_type {kind!r}; eaglekit builds {', '.join(KNOWN_KINDS)}"
    if kind in ("default", "mrope"):  # mrope: Qwen-VL's sections over the default frequencies, no factor
        return None
    factor = scaling.get("factor")
    if kind != "longrope" or factor is not None:
        if not _number(factor):
            return (f"rope_scaling ({kind}) has factor {factor!r}: write the context-stretch factor as a number "
                    "(e.g. 40, not \"40\")")
        if factor < 1 if kind in ("yarn", "dynamic", "llama3") else factor <= 0:
            return (f"rope_scaling ({kind}) has factor {factor!r}: it must be {'at least 1' if kind != 'linear' else 'positive'} "
                    "(a factor of 0 turns every position by the same angle)")
    original = scaling.get("original_max_position_embeddings")
    if original is not None or kind in ("llama3",):
        if isinstance(original, bool) or not isinstance(original, int) or original < 1:
            return (f"rope_scaling ({kind}) has original_max_position_embeddings {original!r}: it must be the "
                    "pre-training context length, a positive whole number")
    for key in ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "low_freq_factor",
                "high_freq_factor"):
        v = scaling.get(key)
        if v is None and not (kind == "llama3" and key in ("low_freq_factor", "high_freq_factor")):
            continue
        positive = key in ("beta_fast", "beta_slow", "attention_factor", "low_freq_factor", "high_freq_factor")
        if not _number(v) or (v <= 0 if positive else v < 0):
            return (f"rope_scaling ({kind}) has {key} {v!r}: it must be a {'positive' if positive else 'non-negative'} "
                    "number")
    if kind == "longrope":
        for key in ("short_factor", "long_factor"):
            v = scaling.get(key)
            if not isinstance(v, list) or not v or not all(_number(x) for x in v):
                return (f"rope_scaling (longrope) has no {key} list of numbers: longrope needs short_factor and "
                        "long_factor, one number per rotary frequency")
    return None


def torchspec_base(attention: str, theta: float | None, scaling: Mapping[str, Any] | None) -> float:
    """The base TorchSpec's training code builds this config's rotary table on (see the module docstring)."""
    if rope_kind(scaling) in TORCHSPEC_FIXED_BASE.get(attention, ()):
        return TORCHSPEC_BASE
    return float(theta) if theta is not None else TORCHSPEC_BASE


def rotary_base(choice: RotaryBase, attention: str, theta: float | None, scaling: Mapping[str, Any] | None) -> float:
    """The base a measurement uses: ``"config"`` (rope_theta), ``"torchspec"`` or a positive number."""
    if choice == "config":
        return float(theta) if theta is not None else TORCHSPEC_BASE
    if choice == "torchspec":
        return torchspec_base(attention, theta, scaling)
    if not _number(choice) or choice <= 0:
        return float("nan")  # the caller refuses it (check_rotary_base)
    return float(choice)


def bases_differ(attention: str, theta: float | None, scaling: Mapping[str, Any] | None) -> bool:
    """Whether engines (rope_theta) and TorchSpec build this config's rotary table on different bases."""
    return theta is not None and torchspec_base(attention, theta, scaling) != float(theta)


def base_words(attention: str, theta: float | None, scaling: Mapping[str, Any] | None) -> str:
    """Which base each reader uses for this config, in one sentence (for check, compat and acceptance notes)."""
    kind = rope_kind(scaling)
    return (f"vLLM, SGLang and transformers build its {kind} rotary table on rope_theta {theta:g}; TorchSpec trains "
            f"it on base {torchspec_base(attention, theta, scaling):g} (its {attention.upper() if attention == 'mla' else 'Llama'} "
            f"drafter builds {kind} without base=). Which one it was trained on is not in its files")


__all__ = ["KNOWN_KINDS", "RotaryBase", "TORCHSPEC_BASE", "base_words", "bases_differ", "rope_kind",
           "rope_scaling_problem", "rotary_base", "torchspec_base"]
