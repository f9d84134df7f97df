"""Auxiliary hidden-state layer ids: which target tensors an EAGLE-3 drafter reads, engine by engine.

An EAGLE-3 drafter's ``fc`` concatenates n hidden states of the target (three by default; real
drafters use four or five, so ``fc.weight`` is ``[H, n x target_hidden]``). Configs name them by
number, and what a number selects depends on the program that reads it, not on the config format
(docs/aux-layers.md):

* an ``"outputs"`` reader takes id i as the hidden state *leaving* decoder layer i. SGLang before
  PR #25454 does (it adds one and captures at the input of layer i + 1), and so does SpecForge's
  Hugging Face training backend;
* an ``"inputs"`` reader takes id i as the hidden state *entering* decoder layer i (the output of
  layer i - 1; id 0 is the embedding output). vLLM does, and so do speculators' and the original
  EAGLE-3 training code.

So one SpecForge config ``[2, 30, 58]`` feeds the outputs of layers 2, 30, 58 under older SGLang but
the outputs of 1, 29, 57 under vLLM. Engines changed their rules between releases, per target model
code: core/configs/engine_readings.py holds the rules by version, and core/configs/aux_view.py's
:func:`~eaglekit.core.configs.aux_view.aux_engine_view` says, per engine release, which tensors are fed,
whether that matches training, and what to write so that it does.

Without ids every reader uses its default, and the defaults name the same tensors: inputs
``[2, L//2, L-3]`` == outputs ``[1, L//2-1, L-4]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from eaglekit.core.configs.engine_readings import parse_engine
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, kv_text

AuxConvention = Literal["inputs", "outputs"]
#: Programs that read aux ids: the two serving engines and the trainers whose checkpoints we meet.
Reader = Literal["sglang", "vllm", "specforge", "speculators", "eagle", "modelopt"]
ENGINES: tuple[Reader, ...] = ("sglang", "vllm")


def check_engine(engine: str | None) -> None:
    """Refuse an engine eaglekit does not know (None: every engine): ``"sglang"``, ``"sglang==0.5.9"``,
    ``"vllm"`` (core/configs/engine_readings.py)."""
    if engine is not None:
        parse_engine(engine)


_CONVENTIONS = ("inputs", "outputs")
#: How each reader spells an id (see the module docstring).
READER_CONVENTION: dict[str, AuxConvention] = {
    "sglang": "outputs", "vllm": "inputs", "specforge": "outputs", "speculators": "inputs", "eagle": "inputs",
    "modelopt": "outputs", "torchspec-vllm": "inputs", "declared-outputs": "outputs", "declared-inputs": "inputs",
}
READER_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "specforge": "SpecForge training",
                "speculators": "speculators training", "eagle": "original EAGLE-3 training",
                "modelopt": "Model-Optimizer / TorchSpec training",
                "torchspec-vllm": "TorchSpec training (vLLM export, ids count inputs)",
                "declared-outputs": "training (as the config declares: outputs)",
                "declared-inputs": "training (as the config declares: inputs)"}
_WHO = {"inputs": "vLLM, speculators, original EAGLE", "outputs": "SGLang, SpecForge training, Model-Optimizer"}
#: Aux layers an EAGLE-3 fc concatenates when a config names none.
NUM_AUX_LAYERS = 3
#: Which trainer wrote a drafter of each config format (a guess from the format; say so when shown).
TRAINER_OF_FORMAT = {"specforge": "specforge", "eagle": "eagle", "speculators": "speculators", "mla": "modelopt"}


#: The two layouts of a drafter's decoder layer: SpecForge and TorchSpec write ``midlayer.*``; speculators, vLLM
#: exports (TorchSpec ``convert_to_hf.py --vllm``) and Model-Optimizer write ``layers.0.*``.
Layout = Literal["specforge", "speculators"]
#: The reader that stands for TorchSpec's ``--vllm`` export of a ``kimi_k2`` MLA drafter (its ids counted as inputs).
TORCHSPEC_VLLM = "torchspec-vllm"


def layout_of(names: Iterable[str]) -> Layout | None:
    """The decoder-layer layout of a drafter checkpoint from its tensor names (None: neither prefix)."""
    names = list(names)
    if any(n.startswith("midlayer.") for n in names):
        return "specforge"
    if any(n.startswith(("layers.0.", "model.layers.0.")) for n in names):
        return "speculators"
    return None


def layout_trainer(fmt: str, model_type: object, layout: Layout | None, trained_by: str) -> str:
    """The layout rule: who fed a drafter its aux ids once the checkpoint's layout is known. TorchSpec's
    ``tools/convert_to_hf.py --vllm`` export of a ``kimi_k2`` MLA drafter writes ``layers.0.*`` and adds one to
    every id ("vLLM uses 1-indexed layer IDs for kimi_k2"), so that copy's ids count layer INPUTS where the
    ``midlayer.*`` copy's count outputs; every other drafter keeps ``trained_by``. One rule for ``check``,
    ``compat`` and ``acceptance``; an eaglekit export that declares its ids is never reread."""
    if (fmt == "mla" and layout == "speculators" and model_type == "kimi_k2"
            and not trained_by.startswith("declared-")):
        return TORCHSPEC_VLLM
    return trained_by


def layer_names(outs) -> str:
    """Layer indices as every report prints them: ``[embeddings, 0, 1]`` (-1 is the embedding output)."""
    return _layers(outs)


def other_convention(convention: AuxConvention) -> AuxConvention:
    """``"outputs"`` for ``"inputs"`` and the reverse."""
    _check_convention(convention)
    return "outputs" if convention == "inputs" else "inputs"


def config_convention(fmt: str) -> AuxConvention:
    """How the trainer that usually writes configs of format ``fmt`` counted its aux ids.

    ``specforge`` and ``mla`` (Model-Optimizer, TorchSpec) drafters were trained on layer outputs;
    ``speculators`` and original ``eagle`` ones on layer inputs.
    """
    if fmt not in TRAINER_OF_FORMAT:
        raise InputError(f"Unknown config format {fmt!r}: expected one of {', '.join(TRAINER_OF_FORMAT)}.")
    return READER_CONVENTION[TRAINER_OF_FORMAT[fmt]]


def parse_aux_layer_ids(value: object) -> tuple[int, ...]:
    """Validate aux layer ids: a list (or tuple) of integers; booleans and strings are refused."""
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise InputError(f"aux layer ids must be a list of integers, got {value!r}.")
    return tuple(int(v) for v in value)


def default_aux_layers(num_layers: int, *, convention: AuxConvention) -> tuple[int, ...]:
    """The default three ids for a ``num_layers``-layer target: inputs ``[2, L//2, L-3]``,
    outputs ``[1, L//2-1, L-4]`` (the same tensors)."""
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


def outputs_read(ids: Sequence[int], reader: str) -> tuple[int, ...]:
    """The decoder layer whose output each id selects when ``reader`` reads it (-1: the embeddings)."""
    return convert_aux_layers(ids, from_convention=_convention_of(reader), to_convention="outputs")




@dataclass(frozen=True)
class AuxLayerReport:
    """What a list of aux layer ids means in one convention for a target with ``num_layers`` layers.

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
        """No problem found (ids in range when the layer count is known, distinct, the expected count)."""
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


def interpret_aux_layers(ids: Sequence[int], *, convention: AuxConvention, num_layers: int | None = None,
                         expected: int | None = None) -> AuxLayerReport:
    """Say which target tensors ``ids`` name in ``convention``, whether they fit a ``num_layers``-layer
    target, and whether they are that convention's default. ``expected``: the number of ids fc takes
    (from its width), when known.

    Valid ids: 0..L-1 in both spellings. Ids out of range are never captured by the engine, so the
    drafter would get fewer hidden states than its fc expects.
    """
    ids = parse_aux_layer_ids(ids)
    _check_convention(convention)
    if num_layers is not None:
        _check_num_layers(num_layers)
    other = other_convention(convention)
    equivalent = convert_aux_layers(ids, from_convention=convention, to_convention=other)
    outputs_of = ids if convention == "outputs" else equivalent
    problems: list[str] = []
    if expected is not None and len(ids) != expected:
        problems.append(f"expected {expected} aux layer ids (fc takes {expected} hidden states), got {len(ids)}")
    if not ids:
        problems.append("no aux layer ids: fc would take no hidden state")
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
                f"which engines that count inputs (vLLM) cannot capture"
            )
        default = default_aux_layers(num_layers, convention=convention)
        is_default = ids == default
    explanation = _explain(ids, convention, equivalent, outputs_of, num_layers, in_range, is_default, default)
    return AuxLayerReport(ids, convention, num_layers, equivalent, tuple(outputs_of), in_range,
                          out_of_range or (), default, is_default, tuple(problems), explanation)


def _convention_of(reader: str) -> AuxConvention:
    if reader not in READER_CONVENTION:
        raise InputError(f"Unknown engine or trainer {reader!r}: expected one of {', '.join(READER_CONVENTION)}.")
    return READER_CONVENTION[reader]


def _show(ids) -> str:
    return "?" if ids is None else "[" + ", ".join(map(str, ids)) + "]"


def _layers(outs) -> str:
    return "[" + ", ".join(_tensor_name(i) for i in outs) + "]"


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
    elif len(set(default)) == len(default):  # a target too shallow for three distinct defaults has none worth naming
        text += f"; not the {convention} default for {num_layers} layers ({list(default)})"
    text += f"; fits a {num_layers}-layer target" if in_range else f"; does NOT fit a {num_layers}-layer target"
    return text


def _check_convention(convention: str) -> None:
    if convention not in _CONVENTIONS:
        raise InputError(f"Unknown aux layer convention {convention!r}: expected 'inputs' or 'outputs'.")


def _check_num_layers(num_layers: object) -> None:
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
        raise InputError(f"num_layers must be a positive integer, got {num_layers!r}.")
