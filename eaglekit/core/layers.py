"""Auxiliary hidden-state layer ids: which target tensors an EAGLE-3 drafter reads, in two conventions.

An EAGLE-3 drafter's ``fc`` takes three hidden states of the target (a low, a middle and a high
layer). Configs name them by number, and the same tensors have two spellings (DOMAIN.md, "Auxiliary
hidden-state layer ids"):

* ``"inputs"``: id k is the hidden state *entering* decoder layer k (the output of layer k-1).
  vLLM, SGLang and the original EAGLE count this way; default ``[2, L//2, L-3]``.
* ``"outputs"``: id k is the hidden state *leaving* decoder layer k. SpecForge (internally, in
  training) and NVIDIA Model-Optimizer count this way; default ``[1, L//2-1, L-4]``.

For L = 61 both defaults name the same three tensors: ``[2, 30, 58]`` inputs == ``[1, 29, 57]``
outputs. Off-by-one mistakes here silently collapse acceptance (vLLM PRs 50170, 43671, 46788;
SGLang PR 25454 changed when it adds +1).

Which convention a *config* implies (:func:`config_convention`): eaglekit models the convention as
what the number in that config means to the serving engine that reads it. SpecForge configs'
``eagle_config.eagle_aux_hidden_state_layer_ids`` are read by SGLang, speculators configs'
top-level ``eagle_aux_hidden_state_layer_ids`` by vLLM, and MLA drafters
(``Eagle3DeepseekV2ForCausalLM``) by vLLM's ``deepseek_eagle3``: all count layer INPUTS (DOMAIN.md:
"vLLM, SGLang and the original EAGLE count layer INPUTS"). So a SpecForge K2 config's
``[2, 30, 58]`` is the inputs-convention default for the 61-layer Kimi-K2, even though SpecForge's
training loop captures the outputs of layers ``[1, 29, 57]`` to produce the same tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, kv_text

AuxConvention = Literal["inputs", "outputs"]
_CONVENTIONS = ("inputs", "outputs")
_WHO = {"inputs": "vLLM, SGLang, original EAGLE", "outputs": "SpecForge training, Model-Optimizer"}
#: An EAGLE-3 fc layer concatenates this many target hidden states (fc.weight is [H, 3*Ht]).
NUM_AUX_LAYERS = 3


def other_convention(convention: AuxConvention) -> AuxConvention:
    """``"outputs"`` for ``"inputs"`` and the reverse."""
    _check_convention(convention)
    return "outputs" if convention == "inputs" else "inputs"


def config_convention(fmt: str) -> AuxConvention:
    """The convention the aux ids of a config in format ``fmt`` follow: always ``"inputs"``.

    Every EAGLE-3 config format eaglekit reads is consumed by an engine that counts layer inputs
    (SGLang for SpecForge, vLLM for speculators and MLA); see the module docstring.
    """
    if fmt not in ("specforge", "speculators", "mla"):
        raise InputError(f"Unknown config format {fmt!r}: expected specforge, speculators or mla.")
    return "inputs"


def parse_aux_layer_ids(value: object) -> tuple[int, ...]:
    """Validate aux layer ids: a list (or tuple) of integers; booleans and strings are refused."""
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise InputError(f"aux layer ids must be a list of integers, got {value!r}.")
    return tuple(int(v) for v in value)


def default_aux_layers(num_layers: int, *, convention: AuxConvention) -> tuple[int, ...]:
    """The default three ids for an ``num_layers``-layer target: inputs ``[2, L//2, L-3]``,
    outputs ``[1, L//2-1, L-4]`` (DOMAIN.md)."""
    _check_convention(convention)
    _check_num_layers(num_layers)
    L = num_layers
    if convention == "inputs":
        return (2, L // 2, L - 3)
    return (1, L // 2 - 1, L - 4)


def convert_aux_layers(ids: Sequence[int], *, from_convention: AuxConvention,
                       to_convention: AuxConvention) -> tuple[int, ...]:
    """The same tensors in the other spelling: inputs k == outputs k-1."""
    _check_convention(from_convention)
    _check_convention(to_convention)
    ids = parse_aux_layer_ids(ids)
    if from_convention == to_convention:
        return ids
    shift = -1 if from_convention == "inputs" else 1
    return tuple(i + shift for i in ids)


@dataclass(frozen=True)
class AuxLayerReport:
    """What a list of aux layer ids means for a target with ``num_layers`` decoder layers.

    ``outputs_of`` lists the decoder layer whose output each id names (-1: the embedding output).
    ``is_default`` and ``in_range`` are None when the layer count is unknown.
    """

    ids: tuple[int, ...]
    convention: AuxConvention
    num_layers: int | None
    equivalent: tuple[int, ...]  # the same tensors in the other convention
    outputs_of: tuple[int, ...]
    in_range: bool | None
    out_of_range: tuple[int, ...]
    default: tuple[int, ...] | None
    is_default: bool | None
    problems: tuple[str, ...]
    explanation: str

    @property
    def other_convention(self) -> AuxConvention:
        return other_convention(self.convention)

    @property
    def ok(self) -> bool:
        """No problem found (ids in range when the layer count is known, three distinct ids)."""
        return not self.problems

    def to_json(self) -> dict:
        return {
            "ids": list(self.ids), "convention": self.convention, "num_layers": self.num_layers,
            "equivalent": {"convention": self.other_convention, "ids": list(self.equivalent)},
            "outputs_of_layers": list(self.outputs_of), "in_range": self.in_range,
            "out_of_range": list(self.out_of_range),
            "default": list(self.default) if self.default is not None else None,
            "is_default": self.is_default, "problems": list(self.problems), "explanation": self.explanation,
        }

    def _pairs(self) -> list[tuple[str, object]]:
        return [
            ("ids", list(self.ids)),
            ("convention", f"{self.convention} ({_WHO[self.convention]})"),
            (f"as {self.other_convention}", list(self.equivalent)),
            ("outputs of layers", ", ".join(_tensor_name(i) for i in self.outputs_of)),
            ("target layers", "unknown" if self.num_layers is None else self.num_layers),
            ("default", "unknown" if self.default is None else list(self.default)),
            ("in range", "unknown" if self.in_range is None else self.in_range),
            *(("problem", p) for p in self.problems),
        ]

    def __str__(self) -> str:
        return kv_text(self._pairs(), title=f"Aux layers: {self.explanation}")

    def _repr_html_(self) -> str:
        return html_table(["field", "value"], self._pairs(), caption=self.explanation)


def interpret_aux_layers(ids: Sequence[int], *, convention: AuxConvention,
                         num_layers: int | None = None) -> AuxLayerReport:
    """Say which target tensors ``ids`` name, whether they fit a ``num_layers``-layer target, and
    whether they are that convention's default.

    Valid ids: inputs 0..L-1 (an engine collects the state entering layer k while running layer k,
    so input L never exists); outputs 0..L-1. Ids out of range are never captured by the engine, so
    the drafter would get fewer hidden states than its fc expects.
    """
    ids = parse_aux_layer_ids(ids)
    _check_convention(convention)
    if num_layers is not None:
        _check_num_layers(num_layers)
    other = other_convention(convention)
    equivalent = convert_aux_layers(ids, from_convention=convention, to_convention=other)
    outputs_of = ids if convention == "outputs" else equivalent
    problems: list[str] = []
    if len(ids) != NUM_AUX_LAYERS:
        problems.append(f"expected {NUM_AUX_LAYERS} aux layer ids (fc takes 3 hidden states), got {len(ids)}")
    if len(set(ids)) != len(ids):
        problems.append(f"aux layer ids repeat: {list(ids)}")
    in_range = out_of_range = default = is_default = None
    if num_layers is not None:
        out_of_range = tuple(i for i in ids if not 0 <= i < num_layers)
        in_range = not out_of_range
        if out_of_range:
            problems.append(
                f"ids {list(out_of_range)} are out of range for a {num_layers}-layer target "
                f"(valid {convention} ids: 0..{num_layers - 1}); the engine would never capture them"
            )
        if convention == "outputs" and num_layers - 1 in ids:
            problems.append(
                f"id {num_layers - 1} (outputs) is the last layer's output: as inputs it is {num_layers}, "
                f"which engines that count inputs (vLLM, SGLang) cannot capture"
            )
        default = default_aux_layers(num_layers, convention=convention)
        is_default = ids == default
    explanation = _explain(ids, convention, equivalent, outputs_of, num_layers, in_range, is_default, default)
    return AuxLayerReport(ids, convention, num_layers, equivalent, tuple(outputs_of), in_range,
                          out_of_range or (), default, is_default, tuple(problems), explanation)


def _tensor_name(layer: int) -> str:
    return "embeddings" if layer == -1 else str(layer)


def _explain(ids, convention, equivalent, outputs_of, num_layers, in_range, is_default, default) -> str:
    layers = ", ".join(_tensor_name(i) for i in outputs_of)
    if convention == "inputs":
        text = f"{list(ids)} counted as layer inputs = the outputs of decoder layers [{layers}]"
    else:
        text = f"{list(ids)} counted as layer outputs = {list(equivalent)} counted as layer inputs"
    if num_layers is None:
        return text + "; target layer count unknown"
    if is_default:
        text += f"; the {convention} default for {num_layers} layers"
    else:
        text += f"; not the {convention} default for {num_layers} layers ({list(default)})"
    text += f"; fits a {num_layers}-layer target" if in_range else f"; does NOT fit a {num_layers}-layer target"
    return text


def _check_convention(convention: str) -> None:
    if convention not in _CONVENTIONS:
        raise InputError(f"Unknown aux layer convention {convention!r}: expected 'inputs' or 'outputs'.")


def _check_num_layers(num_layers: object) -> None:
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
        raise InputError(f"num_layers must be a positive integer, got {num_layers!r}.")
