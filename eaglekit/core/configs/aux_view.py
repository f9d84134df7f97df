"""Which target tensors each engine release feeds a drafter, against the ones it was trained on.

:func:`aux_engine_view` joins three things: the ids in the drafter's config, the rule each engine
release applies to them for the target's model code (core/configs/engine_readings.py, from the engines'
sources), and what training fed the drafter. The last is not always settled by the config: SpecForge
captures training data either with its Hugging Face backend (the outputs of the configured layers) or
through SGLang (the rule of the SGLang release it runs, set_eagle3_layers_to_capture in
specforge/modeling/target/sglang_backend/capture.py), and since SGLang PR #25454 those disagree for ids
that do not start at 1 on DeepSeek-family targets. Such a drafter is shown as AMBIGUOUS with both
readings, never "as trained": measure both (``eaglekit acceptance --aux-convention outputs`` and
``inputs``) and keep the higher, or ask the publisher how the training data was captured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Literal

from eaglekit.core.configs.engine_readings import (
    RELEASES,
    SGLANG_RELEASES,
    EngineChoice,
    Family,
    Release,
    Rule,
    capturable,
    capture_range,
    ids_selecting,
    outputs_selected,
    parse_engine,
    target_family,
)
from eaglekit.core.configs.layers import (
    ENGINES,
    READER_CONVENTION,
    READER_NAMES,
    _check_num_layers,
    _convention_of,
    default_aux_layers,
    layer_names,
    outputs_read,
    parse_aux_layer_ids,
)
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, text_table

#: What acceptance's --aux-convention calls each meaning of a list of ids.
SETTLE = ("Settle it by measuring: eaglekit acceptance ... --aux-convention outputs and --aux-convention inputs "
          "(the two readings of these ids; on a hidden-state dump both run from the same capture) and keep the "
          "higher accept length; or ask the publisher how the training data was captured (SpecForge backend, "
          "and the SGLang release if it was SGLang).")


@dataclass(frozen=True)
class TrainingCandidate:
    """One meaning the drafter's training may have given its aux ids: the layer outputs it was fed, and
    the capture paths that feed those (``how``)."""

    outputs_of: tuple[int, ...]
    how: tuple[str, ...]

    def to_json(self) -> dict:
        return {"outputs_of_layers": list(self.outputs_of), "how": list(self.how)}


@dataclass(frozen=True)
class TrainingReading:
    """Which target tensors the drafter was trained on, as far as its config says.

    ``candidates`` holds one entry per distinct meaning (empty: unknown, e.g. no ids and no layer
    count). ``settled``: exactly one. A SpecForge config whose first id is not 1 on a DeepSeek-family
    target is not settled: SpecForge's Hugging Face backend (and its SGLang backend on SGLang up to
    0.5.10) captured the outputs of the ids, its SGLang backend on a release with #25454 the outputs of
    the layers before them."""

    trained_by: str
    candidates: tuple[TrainingCandidate, ...]
    in_range: bool | None

    @property
    def name(self) -> str:
        return READER_NAMES.get(self.trained_by, self.trained_by)

    @property
    def settled(self) -> bool:
        return len(self.candidates) == 1

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1

    @property
    def outputs_of(self) -> tuple[int, ...] | None:
        """The trained tensors when settled, else None."""
        return self.candidates[0].outputs_of if self.settled else None

    def describe(self) -> str:
        """The meanings in words: "the outputs of [2, 30, 58] (a, or b) or of [1, 29, 57] (c)"."""
        if not self.candidates:
            return "unknown tensors"
        parts = [f"{layer_names(c.outputs_of)} ({' or '.join(c.how)})" for c in self.candidates]
        return "the outputs of " + " or of ".join(parts)

    def to_json(self) -> dict:
        return {"trained_by": self.trained_by, "name": self.name, "settled": self.settled,
                "outputs_of_layers": None if self.outputs_of is None else list(self.outputs_of),
                "candidates": [c.to_json() for c in self.candidates], "in_range": self.in_range}


AsTrained = Literal["yes", "no", "ambiguous", "unknown"]


@dataclass(frozen=True)
class EngineReading:
    """What one engine feeds the drafter over a span of its releases (``name``, ``releases``): the ids it
    uses, the layer outputs they select, whether those are the tensors training used, and the ids to
    write so that they are (``writes``, one per meaning training may have had; ``write`` when settled)."""

    engine: str
    key: str
    name: str
    releases: str
    rule: Rule
    ids: tuple[int, ...] | None  # None: no ids configured and the layer count unknown
    from_default: bool
    outputs_of: tuple[int, ...] | None
    in_range: bool | None
    as_trained: AsTrained
    writes: tuple[tuple[tuple[int, ...], tuple[int, ...] | None], ...] = ()  # (trained outputs, ids to write)
    change: str = ""
    pinned: bool = True
    spec: str = ""  # the --engine value that selects this reading ("sglang==0.5.10", "vllm")

    @property
    def matches_training(self) -> bool | None:
        return {"yes": True, "no": False}.get(self.as_trained)

    @property
    def write(self) -> tuple[int, ...] | None:
        """The ids that make this reading feed the trained tensors (training settled), else None."""
        return self.writes[0][1] if len(self.writes) == 1 else None

    def to_json(self) -> dict:
        lst = lambda v: None if v is None else list(v)  # noqa: E731
        return {"engine": self.engine, "release": self.key, "name": self.name, "releases": self.releases,
                "change": self.change, "rule": self.rule, "pinned": self.pinned, "spec": self.spec,
                "ids": lst(self.ids),
                "from_default": self.from_default, "outputs_of_layers": lst(self.outputs_of),
                "in_range": self.in_range, "as_trained": self.as_trained, "matches_training": self.matches_training,
                "write": lst(self.write),
                "write_by_training": [{"trained_outputs_of": list(o), "write": lst(w)} for o, w in self.writes]}


@dataclass(frozen=True)
class AuxEngineView:
    """Per engine release, which target tensors a drafter's aux ids select, against the ones it was
    trained on.

    ``architecture``/``family``: the target's model code, which decides SGLang's reading since #25454.
    ``engines`` lists one reading per release that reads the ids differently (newest first for each
    engine); ``notes`` says where no one id list serves two releases, or where a release number could
    not be pinned to a reading. ``engines_agree``: every reading feeds the same tensors."""

    ids: tuple[int, ...] | None
    num_layers: int | None
    trained_by: str
    training: TrainingReading
    engines: tuple[EngineReading, ...]
    problems: tuple[str, ...]
    architecture: str | None = None
    family: Family = "other"
    notes: tuple[str, ...] = ()
    choices: tuple[EngineChoice, ...] = ()

    @property
    def engines_agree(self) -> bool | None:
        outs = [e.outputs_of for e in self.engines]
        return None if any(o is None for o in outs) else len(set(outs)) == 1

    def reading(self, engine: str) -> EngineReading:
        """The reading of a release key (``"sglang<25454"``) or, for an engine name, its newest reading."""
        for e in self.engines:
            if e.key == engine:
                return e
        for e in self.engines:
            if e.engine == engine:
                return e
        raise InputError(f"No reading for {engine!r} here: expected one of "
                         f"{', '.join(dict.fromkeys([e.engine for e in self.engines] + [e.key for e in self.engines]))}.")

    def readings(self, engine: str) -> tuple[EngineReading, ...]:
        """Every reading of one engine, newest first."""
        return tuple(e for e in self.engines if e.engine == engine)

    @property
    def _assumes_llama(self) -> bool:
        """SpecForge ids read without the target's model code: SpecForge's SGLang backend on a DeepSeek-family
        target since #25454 would have captured other layers, so "trained on" holds only for other code."""
        return (self.architecture is None and self.trained_by == "specforge" and bool(self.ids)
                and self.ids[0] != 1)

    @property
    def summary(self) -> str:
        ids = "no ids (each reader's default)" if self.ids is None else f"ids {list(self.ids)}"
        if not self.training.candidates or any(e.outputs_of is None for e in self.engines):
            return f"Aux layers: {ids}; target layer count unknown, so the tensors are not resolved"
        who = self.training.name.removeprefix("training").strip(" ()") or self.training.name
        if self.training.settled:
            parts = [f"Aux layers: {ids}; trained ({who}) on the outputs of layers {layer_names(self.training.outputs_of)}"
                     + (" if the target runs Llama-style model code (on a DeepSeek-family target such as Kimi-K2 "
                        "this is AMBIGUOUS: give the target's architecture)" if self._assumes_llama else "")]
        else:
            parts = [f"Aux layers: {ids}; training AMBIGUOUS ({who}): {self.training.describe()}"]
        for e in self.engines:
            parts.append(f"{e.name} feeds {layer_names(e.outputs_of)}: {_verdict(e)}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {"ids": None if self.ids is None else list(self.ids), "num_layers": self.num_layers,
                "architecture": self.architecture, "family": self.family, "trained_by": self.trained_by,
                "training": self.training.to_json(), "engines": [e.to_json() for e in self.engines],
                "engines_agree": self.engines_agree, "problems": list(self.problems), "notes": list(self.notes),
                "choices": [c.to_json() for c in self.choices], "summary": self.summary}

    def _rows(self) -> list[list[str]]:
        t = self.training
        rows = [[t.name if t.name.startswith("training") else f"{t.name} (trained)", "-",
                 _show(self.ids) if self.ids is not None else "(default)",
                 "?" if not t.candidates else " or ".join(layer_names(c.outputs_of) for c in t.candidates),
                 "?" if t.in_range is None else ("yes" if t.in_range else "NO"), "-", "-"]]
        for e in self.engines:
            rows.append([f"{e.name} ({e.releases})", e.rule,
                         _show(e.ids) + (" (default)" if e.from_default else ""),
                         "?" if e.outputs_of is None else layer_names(e.outputs_of),
                         "?" if e.in_range is None else ("yes" if e.in_range else "NO"),
                         {"yes": "yes", "no": "NO", "ambiguous": "AMBIGUOUS", "unknown": "?"}[e.as_trained],
                         "-" if e.as_trained == "yes" else _writes(e)])
        return rows

    _HEAD = ("reader", "rule", "ids", "feeds outputs of layers", "in range", "as trained", "write instead")

    def __str__(self) -> str:
        lines = [text_table(self._HEAD, self._rows(), title=self.summary)]
        lines += [f"  ! {p}" for p in self.problems] + [f"  * {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        html = html_table(self._HEAD, self._rows(), caption=self.summary)
        items = [escape(p) for p in self.problems] + [escape(n) for n in self.notes]
        if items:
            html += "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
        return html


def aux_engine_view(ids: Sequence[int] | None, *, trained_by: str, num_layers: int | None = None,
                    engines: Sequence[str] = ENGINES, architecture: str | None = None) -> AuxEngineView:
    """Which target tensors each engine release feeds a drafter whose config says ``ids`` (None: no
    ids, every reader uses its default), against what ``trained_by`` fed it in training.

    ``engines``: ``"sglang"`` (its newest reading, and each older one that reads the ids differently),
    ``"sglang==0.5.9"`` (that release's reading), ``"vllm"``. ``architecture``: the target's
    ``architectures[0]`` (SGLang reads ids by target model code since #25454; unknown means the
    Llama-style rule that adds one)."""
    ids = None if ids is None else parse_aux_layer_ids(ids)
    _convention_of(trained_by)
    choices = tuple(parse_engine(e) for e in engines)
    if num_layers is not None:
        _check_num_layers(num_layers)
    family = target_family(architecture)
    training = _training(trained_by, ids, num_layers, family)
    problems: list[str] = []
    if training.in_range is False:
        problems.append(f"ids {list(ids or ())} are out of range for a {num_layers}-layer target: the drafter was "
                        f"not trained on this target's layers")
    readings: list[EngineReading] = []
    notes: list[str] = []
    for choice in choices:
        mine = _choice_readings(choice, family, ids, num_layers, training, known=architecture is not None)
        readings += mine
        notes += _engine_notes(choice, mine, training)
        if architecture is None and choice.engine == "sglang" and ids and ids[0] != 1:
            notes.append("Target model code unknown: read as Llama-style code, where every SGLang release adds one. "
                         "On DeepSeek-family targets (Kimi-K2, K2.5) SGLang since #25454 reads these ids as layer "
                         "inputs instead: give the target to see both readings.")
    for e in readings:
        if e.in_range is False:
            lo, hi = capture_range(e.rule, e.ids, num_layers)
            bad = [i for i in e.ids if not lo <= i <= hi]
            problems.append(f"{e.name} cannot capture ids {bad} of a {num_layers}-layer target (valid {lo}..{hi}): "
                            f"the drafter would get fewer hidden states than fc expects")
    return AuxEngineView(ids, num_layers, trained_by, training, tuple(readings), tuple(problems), architecture,
                         family, tuple(notes), choices)


def _training(trained_by: str, ids, num_layers, family: Family) -> TrainingReading:
    """The meanings training may have given ``ids`` (see :class:`TrainingReading`)."""
    if ids is None:
        if num_layers is None:
            return TrainingReading(trained_by, (), None)
        outs = default_aux_layers(num_layers, convention="outputs")
        return TrainingReading(trained_by, (TrainingCandidate(outs, ("the trainer's default",)),), True)
    paths: list[tuple[str, tuple[int, ...], bool]] = []  # (capture path, outputs it feeds, can it capture them)
    # A trainer reading all hidden states takes ids 0..L-1 in its own spelling.
    reach = num_layers is None or all(0 <= i < num_layers for i in ids)
    if trained_by == "specforge":
        paths.append(("SpecForge's Hugging Face backend", ids, reach))
        for n, release in enumerate(SGLANG_RELEASES):
            rule = release.rule(family)
            if n and rule == SGLANG_RELEASES[n - 1].rule(family):
                continue  # "since #25454" already covers the later releases that read alike
            paths.append((f"its SGLang backend on {release.name}", outputs_selected(rule, ids),
                          num_layers is None or capturable(rule, ids, num_layers)))
    elif trained_by.startswith("declared-"):
        outs = outputs_read(ids, trained_by)
        paths.append((f"as its config declares ({READER_CONVENTION[trained_by]})", outs, reach))
    else:
        paths.append((READER_NAMES[trained_by], outputs_read(ids, trained_by), reach))
    fit = [p for p in paths if p[2]]
    in_range = None if num_layers is None else bool(fit)
    grouped: dict[tuple[int, ...], list[str]] = {}
    for how, outs, _ in fit or paths:  # a capture path that cannot reach a layer did not train the drafter
        grouped.setdefault(outs, [])
        if how not in grouped[outs]:
            grouped[outs].append(how)
    candidates = tuple(TrainingCandidate(o, _merge_hows(h)) for o, h in grouped.items())
    return TrainingReading(trained_by, candidates, in_range)


def _merge_hows(hows: list[str]) -> tuple[str, ...]:
    """"its SGLang backend on X", "its SGLang backend on Y" -> one phrase naming both releases."""
    sg = [h.removeprefix("its SGLang backend on ") for h in hows if h.startswith("its SGLang backend on ")]
    rest = [h for h in hows if not h.startswith("its SGLang backend on ")]
    if sg:
        rest.append("its SGLang backend on " + " or ".join(sg) if rest else "SpecForge's SGLang backend on "
                    + " or ".join(sg))
    return tuple(rest)


def _choice_readings(choice: EngineChoice, family: Family, ids, num_layers, training: TrainingReading, *,
                     known: bool = True) -> list[EngineReading]:
    """One reading per run of consecutive releases that read ``ids`` alike, newest first, each named for
    its span ("SGLang before #25454", "SGLang since #25454"; a pinned version by its number)."""
    oldest_first = sorted(choice.releases, key=RELEASES[choice.engine].index)
    runs: list[list[Release]] = []
    for release in oldest_first:
        if runs and _reads(runs[-1][0], family, ids, num_layers) == _reads(release, family, ids, num_layers):
            runs[-1].append(release)
        else:
            runs.append([release])
    out = []
    for n, run in enumerate(runs):
        first = run[0]
        engine_name = RELEASES[choice.engine][0].name.split()[0]
        spec = choice.engine
        if choice.pinned and choice.version is not None:
            key, name, span = first.key, choice.label, first.span
            spec = f"{choice.engine}=={choice.version}"
        elif len(runs) == 1:
            key, name = choice.engine, choice.label
            span = "every release eaglekit knows" if len(run) == len(RELEASES[choice.engine]) else first.span
            if not known and choice.engine == "sglang" and ids and ids[0] != 1:
                span += ", if the target runs Llama-style model code"
        elif n == 0:
            nxt = runs[1][0]
            key, name = f"{choice.engine}<{nxt.pr.lstrip('#')}", f"{engine_name} before {nxt.pr}"
            span = first.span if len(run) == 1 else f"{first.span} and later releases without {nxt.pr}"
            spec = f"{choice.engine}=={first.last}" if first.last else spec
        else:
            key, name = f"{choice.engine}>={first.pr.lstrip('#')}", f"{engine_name} since {first.pr}"
            span = f"{first.change.split(', ')[-1]}; first release unknown"
        out.append(_engine_reading(first, family, ids, num_layers, training, key=key, name=name, span=span,
                                   pinned=choice.pinned, spec=spec))
    return out[::-1]


def _reads(release: Release, family: Family, ids, num_layers):
    rule = release.rule(family)
    if ids is None:
        return None
    return outputs_selected(rule, ids), None if num_layers is None else capturable(rule, ids, num_layers)


def _engine_reading(release: Release, family: Family, ids, num_layers, training: TrainingReading, *,
                    key: str, name: str, span: str, pinned: bool, spec: str) -> EngineReading:
    rule = release.rule(family)
    used = ids if ids is not None else (default_aux_layers(num_layers, convention="inputs") if num_layers else None)
    if used is None:
        return EngineReading(release.engine, key, name, span, rule, None, True, None, None, "unknown", (),
                             release.change, pinned, spec)
    outs = outputs_selected("inputs", used) if ids is None else outputs_selected(rule, used)
    in_range = None if num_layers is None else (
        all(0 <= i <= num_layers - 1 for i in used) if ids is None else capturable(rule, used, num_layers))
    targets = [c.outputs_of for c in training.candidates]
    if not targets:
        as_trained: AsTrained = "unknown"
    elif len(targets) == 1:
        as_trained = "yes" if outs == targets[0] else "no"
    else:
        as_trained = "ambiguous" if outs in targets else "no"
    writes = tuple((t, ids_selecting(rule, t, num_layers)) for t in targets)
    return EngineReading(release.engine, key, name, span, rule, used, ids is None, outs, in_range, as_trained,
                         writes, release.change, pinned, spec)


def _engine_notes(choice: EngineChoice, mine: list[EngineReading], training: TrainingReading) -> list[str]:
    notes = []
    if not choice.pinned and choice.version is not None and len(mine) > 1:
        notes.append(f"{choice.label}: eaglekit does not know whether this release carries "
                     f"{' / '.join(r.change.split(',')[0] for r in mine if r.change)}; it reads the ids "
                     f"one of the ways shown. Check set_eagle3_layers_to_capture in the installed SGLang's model "
                     f"code, or name a release eaglekit knows (--engine sglang==0.5.10).")
    if training.settled and len(mine) > 1:
        writes = {e.name: e.write for e in mine}
        if len(set(writes.values())) > 1:
            notes.append("No one id list makes " + " and ".join(writes) + " feed the trained tensors "
                         f"(outputs of {layer_names(training.outputs_of)}): write "
                         + "; ".join(f"{_show(w) if w else 'nothing works'} for {n}" for n, w in writes.items()) + ".")
    return notes


def _verdict(e: EngineReading) -> str:
    if e.as_trained == "yes":
        return "as trained"
    if e.as_trained == "ambiguous":
        return "AMBIGUOUS (one of the readings training may have used)"
    if e.as_trained == "unknown":
        return "training tensors unknown"
    if e.write is not None:
        return f"NOT as trained (write {_show(e.write)})"
    if len(e.writes) > 1:
        return f"NOT as trained under any reading ({_writes(e)})"
    return "NOT as trained (no ids it can capture select the trained layers)"


def _writes(e: EngineReading) -> str:
    if len(e.writes) == 1:
        return _show(e.writes[0][1])
    return "; ".join(f"if trained on {layer_names(o)}: {_show(w) if w else 'none works'}" for o, w in e.writes)


def _show(ids) -> str:
    return "?" if ids is None else "[" + ", ".join(map(str, ids)) + "]"


__all__ = ["AuxEngineView", "EngineReading", "TrainingCandidate", "TrainingReading", "aux_engine_view", "layer_names", "SETTLE"]
