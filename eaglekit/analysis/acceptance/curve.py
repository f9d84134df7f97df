"""``acceptance_curve``: accept length across a training run's checkpoints, the curve through them, and what
more data (or a warm start) would buy.

Each checkpoint is measured exactly as ``eaglekit acceptance`` measures one drafter (against a target and
prompts, eaglekit's own hidden-state dump, or a training pipeline's dump with its target head, on a Dask
cluster with ``scheduler``); its accept length carries a bootstrap interval over prompts. With three or
more checkpoints a saturating curve in samples is fitted (:mod:`eaglekit.core.acceptance.curve`), with a
bootstrap over the checkpoints and the prompts, and it predicts accept lengths at other sample counts
(``predict``) and the samples needed for an accept length (``reach``), joined to a serving plan's
break-even (``break_even``, ``plan``).

Samples per checkpoint: given, or read from the checkpoint: SpecForge's ``training_state.pt``
(``global_step``; loaded with ``torch.load(weights_only=True)``, memory-mapped, so it runs no code from the
file) or a step count in the folder name (``step_1200``, ``epoch_3_step_400``, ``checkpoint-1200``), times
``batch_size`` (samples per step, summed over data-parallel ranks).
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eaglekit.core import safejson
from eaglekit.core.acceptance.curve import (BEYOND, CURVE_RESAMPLES, FAMILIES, MIN_POINTS, CurveBootstrap, PointCounts,
                                            bootstrap_fits, check_increasing, constrained, held_out_errors,
                                            perfect_accept_length, reach_constrained)
from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.redact import shown
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.uncertainty import Interval, bootstrap_ratio, verdict
from eaglekit.io.drafter import read_maps
from eaglekit.io.dumps.native import open_dump
from eaglekit.io.reader import open_checkpoint

__all__ = ["AcceptanceCurve", "CurvePoint", "Curve", "PlanLine", "acceptance_curve", "checkpoint_samples",
           "read_plan_break_even"]

#: SpecForge's saved training state, beside each checkpoint (scripts/train_eagle3.py, save_checkpoints)
TRAINING_STATE = "training_state.pt"
_STEP = re.compile(r"(?:^|[_-])step[_-]?(\d+)$|^checkpoint-(\d+)$")


# -- records ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CurvePoint:
    """One measured checkpoint: where, how many samples it had seen (and where that number came from), its
    accept length with the interval over prompts, per-step acceptance and the accept length at each K."""

    path: str
    samples: float
    samples_from: str
    accept_length: Interval
    per_step: tuple[float | None, ...]
    by_steps: tuple[float, ...]
    prompt_counts: tuple[tuple[int, int], ...] = field(repr=False, compare=False, default=())

    def to_json(self) -> dict[str, Any]:
        i = self.accept_length
        return {"path": self.path, "samples": self.samples, "samples_from": self.samples_from,
                "accept_length": _num(i.value), "low": _num(i.low), "high": _num(i.high), "interval": i.method,
                "per_step": list(self.per_step), "accept_length_by_steps": [_num(x) for x in self.by_steps]}


@dataclass(frozen=True)
class PlanLine:
    """A serving plan's break-even at one batch size, at the curve's K: the accept length where speculation
    starts to pay, and, when the plan gives it, its best configuration there."""

    batch: int | None
    steps: int
    break_even: float
    cycle_ms: float | None = None       # the cycle at K (tok/s at an accept length: batch x AL x 1000 / cycle)
    best_steps: int | None = None
    best_tokens_per_s: float | None = None
    source: str = ""

    def tokens_per_s(self, accept_length: float) -> float | None:
        if self.cycle_ms is None or self.batch is None or not math.isfinite(accept_length):
            return None
        return self.batch * accept_length * 1000.0 / self.cycle_ms


@dataclass(frozen=True)
class Curve:
    """One training run's checkpoints, and with three or more the fitted curve and what it predicts."""

    label: str
    steps: int
    checkpoints: tuple[CurvePoint, ...]
    fit: CurveBootstrap | None = field(default=None, repr=False)
    held_out: Mapping[str, float | None] = field(default_factory=dict)
    predictions: tuple[tuple[float, Interval], ...] = ()
    reach: tuple[tuple[float, Interval], ...] = ()
    plan: tuple[PlanLine, ...] = ()
    notes: tuple[str, ...] = ()
    #: as many checkpoints as the curve has parameters: it passes through them and nothing tests it, so
    #: nothing beyond the largest checkpoint counts as constrained
    exact: bool = False

    @property
    def samples(self) -> tuple[float, ...]:
        return tuple(c.samples for c in self.checkpoints)

    def constrained_at(self, samples: float, i: Interval) -> bool:
        """Whether the data constrain the prediction ``i`` at ``samples`` (:func:`constrained`, and never past the
        largest checkpoint of an exactly determined curve)."""
        return constrained(i) and not (self.exact and samples > max(self.samples))

    def reach_is_constrained(self, i: Interval) -> bool:
        return reach_constrained(i) and not (self.exact and i.value > max(self.samples))

    def at(self, samples: float) -> Interval:
        """The accept length at ``samples``: the checkpoint's measurement when one saw exactly that many, else
        the curve's prediction (an error without a fit)."""
        for c in self.checkpoints:
            if c.samples == samples:
                return c.accept_length
        if self.fit is None:
            raise InputError(f"{self.label}: no checkpoint at {samples:g} samples and no fit (fewer than "
                             f"{MIN_POINTS} checkpoints) to predict one.")
        return self.fit.predict(samples)

    def samples_for(self, accept_length: float) -> Interval | None:
        """Samples for the curve to reach ``accept_length`` (None without a fit; value inf past the ceiling)."""
        return None if self.fit is None else self.fit.reach(accept_length)

    # -- JSON --------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "steps": self.steps,
                               "checkpoints": [c.to_json() for c in self.checkpoints]}
        if self.fit is None:
            out["fit"] = None
        else:
            f = self.fit.fit.to_json()
            f.update({"method": self.fit.method, "ceiling": _interval_json(self.fit.ceiling()),
                      "held_out_error": dict(self.held_out),
                      "constrained_width": MAX_WIDTH_TEXT})
            out["fit"] = f
        out["predictions"] = [{"samples": n, **_interval_json(i), "constrained": self.constrained_at(n, i)}
                              for n, i in self.predictions]
        out["reach"] = [_reach_json(al, i, self.reach_is_constrained(i)) for al, i in self.reach]
        out["plan"] = [self._plan_json(p) for p in self.plan]
        out["notes"] = list(self.notes)
        return out

    def _plan_json(self, p: PlanLine) -> dict[str, Any]:
        need = self.samples_for(p.break_even)
        last = self.checkpoints[-1].accept_length
        return {"batch": p.batch, "steps": p.steps, "break_even": p.break_even, "source": p.source,
                "samples_to_break_even": None if need is None else _reach_json(p.break_even, need,
                                                                                         self.reach_is_constrained(need)),
                "last_checkpoint": {"samples": self.checkpoints[-1].samples, "verdict": verdict(last, p.break_even),
                                    "tokens_per_s": p.tokens_per_s(last.value)},
                "plan_best": {"steps": p.best_steps, "tokens_per_s": p.best_tokens_per_s},
                "predicted_tokens_per_s": [{"samples": n, "tokens_per_s": p.tokens_per_s(i.value),
                                            "low": None if i.low is None else p.tokens_per_s(i.low),
                                            "high": None if i.high is None else p.tokens_per_s(i.high)}
                                           for n, i in self.predictions]}

    # -- text --------------------------------------------------------------------------------------------
    def _point_rows(self) -> list[list[str]]:
        return [[_count(c.samples), c.accept_length.text(3), " ".join("-" if x is None else f"{x:.2f}" for x in c.per_step),
                 " ".join(f"{x:.2f}" for x in c.by_steps), c.path] for c in self.checkpoints]

    def _pairs(self) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = [("checkpoints", f"{len(self.checkpoints)}, K = {self.steps}; accept length "
                                         f"interval: {self.checkpoints[0].accept_length.method}")]
        if self.fit is None:
            pairs.append(("fit", f"none: a curve needs at least {MIN_POINTS} checkpoints (the points are shown)"))
        else:
            f = self.fit
            pairs.append(("fit", f"{f.fit.formula} ({f.fit.family}); ceiling {f.ceiling().text(3)}, capped at "
                                 f"{f.fit.cap:.3f} (every draft accepted on these prompts; K + 1 = {self.steps + 1})"))
            pairs.append(("  uncertainty", f.method))
            if any(v is not None for v in self.held_out.values()):
                pairs.append(("  held-out error", ", ".join(f"{k} {'-' if v is None else f'{v:.3f}'}"
                                                             for k, v in self.held_out.items())
                              + " (mean |error| predicting each next checkpoint from the ones before)"))
        for n, i in self.predictions:
            flag = "" if self.constrained_at(n, i) else (
                f"  NOT CONSTRAINED by the data (interval {_width(i)} wide, limit {MAX_WIDTH_TEXT}"
                + ("; 3 checkpoints for 3 parameters" if self.exact else "") + ")")
            pairs.append((f"predicted at {_count(n)} samples", i.text(3) + flag))
        for al, i in self.reach:
            pairs.append((f"samples to reach {al:g}", _reach_text(i, self.reach_is_constrained(i))))
        for p in self.plan:
            need = self.samples_for(p.break_even)
            last = self.checkpoints[-1].accept_length
            where = f"batch {p.batch}, " if p.batch is not None else ""
            text = (f"{p.break_even:.3f} ({where}K = {p.steps}; {p.source}): last checkpoint "
                    f"{verdict(last, p.break_even)}" + ("" if need is None else
                                                        f"; samples needed {_reach_text(need, self.reach_is_constrained(need))}"))
            if p.best_tokens_per_s is not None:
                text += f"; the plan's best there: k = {p.best_steps}, {p.best_tokens_per_s:.0f} tok/s"
            pairs.append(("break-even", text))
        pairs.extend(("note", n) for n in self.notes)
        return pairs

    HEADERS = ["samples", "accept length (95%)", "per-step acceptance", "accept length at K = 1..", "checkpoint"]

    def __str__(self) -> str:
        return (kv_text(self._pairs(), title=f"Accept-length curve: {self.label}") + "\n\n"
                + text_table(self.HEADERS, self._point_rows(), align=["right", "right", "left", "left", "left"]))

    def _repr_html_(self) -> str:
        return ("<div>" + kv_html(self._pairs(), caption=f"Accept-length curve: {self.label}")
                + html_table(self.HEADERS, self._point_rows()) + "</div>")


@dataclass(frozen=True)
class AcceptanceCurve:
    """One or several curves (``--label``) measured the same way; ``to_json()`` is
    ``eaglekit acceptance-curve --json``: the first curve's ``checkpoints``, ``fit``, ``predictions``,
    ``reach`` and ``plan`` at the top level, and every curve under ``curves``."""

    curves: tuple[Curve, ...]
    measured_on: str

    def __getitem__(self, label: str) -> Curve:
        for c in self.curves:
            if c.label == label:
                return c
        raise KeyError(label)

    def compare(self, candidate: str, baseline: str, *, samples: float, break_even: float) -> str:
        """The seed's question in two sentences: at ``samples`` (the baseline's data), does ``candidate`` (a warm
        start) reach ``break_even``, and how many samples would ``baseline`` (from scratch) need to reach it."""
        a, b = self[candidate], self[baseline]
        ia, ib = a.at(samples), b.at(samples)
        va, vb = verdict(ia, break_even), verdict(ib, break_even)
        out = (f"With {_count(samples)} samples, {candidate} measures {ia.text(2)} and {baseline} {ib.text(2)} "
               f"against a break-even of {break_even:.2f}: {candidate} {va}, {baseline} {vb} ({ia.method}).")
        need = b.samples_for(break_even)
        if need is None:
            return out + f" {baseline} has no fit (fewer than {MIN_POINTS} checkpoints) to say how much data it needs."
        if not math.isfinite(need.value):
            return out + f" {baseline} does not reach it: break-even is {BEYOND}."
        where = "" if b.reach_is_constrained(need) else " (NOT CONSTRAINED by the data: treat it as a guess)"
        return out + (f" {baseline} reaches break-even at about {_reach_text(need, True)} samples{where}, "
                      f"{need.value / samples:.1f}x the data.")

    def to_json(self) -> dict[str, Any]:
        curves = [c.to_json() for c in self.curves]
        return {**curves[0], "measured_on": self.measured_on, "curves": curves}

    def __str__(self) -> str:
        return "\n\n".join(str(c) for c in self.curves) + f"\n\nmeasured on {self.measured_on}"

    def _repr_html_(self) -> str:
        return "<div>" + "".join(c._repr_html_() for c in self.curves) + f"<p>measured on {self.measured_on}</p></div>"


MAX_WIDTH_TEXT = "1.0"


def _num(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _interval_json(i: Interval) -> dict[str, Any]:
    return {"accept_length": _num(i.value), "low": _num(i.low), "high": _num(i.high), "interval": i.method}


def _reach_json(al: float, i: Interval, ok: bool) -> dict[str, Any]:
    if not math.isfinite(i.value):
        return {"accept_length": al, "samples": BEYOND, "low": _num(i.low), "high": _num(i.high)}
    return {"accept_length": al, "samples": i.value, "low": _num(i.low),
            "high": _num(i.high) if i.high is not None else "unbounded", "constrained": ok}


def _count(n: float) -> str:
    return f"{n:,.0f}" if n >= 100 or float(n).is_integer() else f"{n:.3g}"


def _width(i: Interval) -> str:
    return "unbounded" if i.width is None else f"{i.width:.2f}"


def _reach_text(i: Interval, ok: bool) -> str:
    if not math.isfinite(i.value):
        return BEYOND
    hi = "unbounded" if i.high is None else _count(i.high)
    lo = "-" if i.low is None else _count(i.low)
    flag = "" if ok else "  NOT CONSTRAINED by the data"
    return f"{_count(i.value)} ({lo}-{hi}){flag}"


# -- samples per checkpoint -----------------------------------------------------------------------------
def checkpoint_samples(path: str | os.PathLike[str], *, batch_size: int | None) -> tuple[float, str]:
    """Samples a checkpoint has seen, and where that came from: SpecForge's ``training_state.pt``
    (``global_step``) beside the weights, else a step in the folder name; times ``batch_size``."""
    p = Path(os.path.expanduser(os.fspath(path)))
    step: int | None = None
    state = p / TRAINING_STATE
    if p.is_dir() and state.is_file():
        step, where = read_training_step(state), f"{TRAINING_STATE} global_step"
    else:
        m = _STEP.search(p.name)
        if m:
            step, where = int(m.group(1) or m.group(2)), f"folder name {p.name!r}"
    if step is None:
        raise InputError(f"{shown(str(path))}: no {TRAINING_STATE} and no step in the folder name (step_N, "
                         "epoch_E_step_N, checkpoint-N): give --samples N,N,... (samples seen by each checkpoint).")
    if batch_size is None:
        raise InputError(f"{shown(str(path))}: {where} says step {step}; give --batch-size (samples per step, summed "
                         "over data-parallel ranks) to turn steps into samples, or --samples N,N,...")
    return float(step * batch_size), f"{where} = {step} x batch {batch_size}"


def read_training_step(path: str | os.PathLike[str]) -> int:
    """``global_step`` of a SpecForge training state, loaded with ``torch.load(weights_only=True)``
    (memory-mapped: optimizer tensors stay on disk). Only tensors, numbers, strings, containers and
    ``argparse.Namespace`` (SpecForge saves its arguments as one) are accepted; anything else is refused
    before it runs."""
    import torch  # heavy: only when a training state is read

    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            try:
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:   # not a zip file (legacy format): mmap is unavailable
                if "mmap" not in str(e):
                    raise
                state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        what = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(e))
        raise InputError(f"{shown(str(path))} is not a plain tensor/number pickle"
                         + (f" (it names {what.group(1)})" if what else "")
                         + ": refused without running it. Give --samples N,N,... or name the folders step_N with "
                           "--batch-size.") from e
    except (OSError, RuntimeError, EOFError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"{shown(str(path))} cannot be read as a training state ({first[:160]}).") from e
    step = state.get("global_step") if isinstance(state, dict) else None
    if isinstance(step, torch.Tensor) and step.numel() == 1:
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InputError(f"{shown(str(path))} holds no whole global_step (SpecForge's key): give --samples N,N,...")
    return int(step)


# -- the serving plan --------------------------------------------------------------------------------------
def read_plan_break_even(plan: str | os.PathLike[str] | Mapping[str, Any], *, steps: int) -> tuple[PlanLine, ...]:
    """Break-even accept lengths at K = ``steps`` from an ``eaglekit plan --json`` object (a path or the dict),
    read defensively. Keys read, per entry of ``batches``: ``batch``; ``break_even_accept_length`` or
    ``break_even`` (a number, or a mapping by k) when the plan states it, else from ``steps[k].cycle_ms``:
    break-even at k = cycle at k / decode step (k = 0), the accept length at which a cycle emits as fast as
    plain decoding; ``best_steps`` and ``tokens_per_s`` (the plan's best configuration) for reference."""
    if not isinstance(plan, Mapping):
        p = Path(os.path.expanduser(os.fspath(plan)))
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"--plan {shown(str(plan))}: cannot read it ({e.__class__.__name__}).") from e
        plan = safejson.loads(text, what=f"plan {p.name}", error=InputError)
    batches = plan.get("batches") if isinstance(plan, Mapping) else None
    if not isinstance(batches, list) or not batches:
        raise InputError("--plan: expected `eaglekit plan --json` output, an object with a non-empty \"batches\" list.")
    out = []
    for k, b in enumerate(batches):
        if not isinstance(b, Mapping):
            raise InputError(f"--plan: batches[{k}] is not an object.")
        by_k = {o.get("steps"): o for o in b.get("steps", []) if isinstance(o, Mapping)} if isinstance(b.get("steps"), list) else {}
        cyc = by_k.get(steps, {}).get("cycle_ms")
        base = by_k.get(0, {}).get("cycle_ms")
        be = _stated_break_even(b, by_k.get(steps, {}), steps)
        source = "the plan's break-even"
        if be is None and _pos(cyc) and _pos(base):
            be, source = cyc / base, "the plan's cycle at K / its decode step"
        if be is None:
            raise InputError(f"--plan: batches[{k}] states no break-even and no cycle_ms at k = 0 and k = {steps} "
                             f"(the curve's K); plan with --max-steps >= {steps}, or give --break-even AL.")
        batch = b.get("batch")
        out.append(PlanLine(batch if isinstance(batch, int) and not isinstance(batch, bool) else None, steps,
                            float(be), float(cyc) if _pos(cyc) else None,
                            b.get("best_steps") if isinstance(b.get("best_steps"), int) else None,
                            float(b["tokens_per_s"]) if _pos(b.get("tokens_per_s")) else None, source))
    return tuple(out)


def _pos(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _stated_break_even(batch: Mapping[str, Any], option: Mapping[str, Any], steps: int) -> float | None:
    for where in (option, batch):
        for key in ("break_even_accept_length", "break_even"):
            v = where.get(key)
            if isinstance(v, Mapping):   # {"value": x} (an interval's JSON), or a mapping by k
                v = v["value"] if "value" in v else v.get(str(steps), v.get(steps))  # type: ignore[call-overload]
            if _pos(v):
                return float(v)
    return None


# -- consistency of a series ------------------------------------------------------------------------------
def check_series(paths: Sequence[str], *, endpoint: str | None = None, timeout: float | None = None) -> None:
    """Every checkpoint of one curve has the same tensors, shapes and vocabulary map as the first: a curve
    through different drafters would measure something else."""
    first = None
    for i, path in enumerate(paths, start=1):
        with open_checkpoint(path, endpoint=endpoint, timeout=timeout) as ckpt:
            shapes = {t.name: tuple(t.shape) for t in ckpt.inventory.tensors}
            maps = read_maps(ckpt)
        if first is None:
            first = (path, shapes, maps)
            continue
        p0, s0, m0 = first
        for name in sorted(set(s0) | set(shapes)):
            if s0.get(name) != shapes.get(name):
                a = "absent" if name not in s0 else list(s0[name])
                b = "absent" if name not in shapes else list(shapes[name])
                raise InputError(f"checkpoints of different shapes: {shown(name)} is {b} in checkpoint {i} "
                                 f"({shown(str(path))}), {a} in checkpoint 1 ({shown(str(p0))}); a curve follows one "
                                 "drafter through its training.")
        for key, a, b in (("d2t", m0[0], maps[0]), ("t2d", m0[1], maps[1])):
            if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
                diff = "" if a is None or b is None or a.shape != b.shape else f" ({int((a != b).sum())} entries differ)"
                raise VocabMapError(f"checkpoints with different vocabulary maps: {key} of checkpoint {i} "
                                    f"({shown(str(path))}) differs from checkpoint 1's ({shown(str(p0))}){diff}; a "
                                    "curve's checkpoints must share one draft vocabulary.")


# -- the measurement --------------------------------------------------------------------------------------
def _measure_one(path: str, how: dict[str, Any], shared: dict[str, Any]):
    """One checkpoint, as ``eaglekit acceptance`` measures it: an AcceptanceResult."""
    if how.get("target_head") is not None:
        from eaglekit.analysis.acceptance.dumps import measure_dump  # heavy (torch): when a checkpoint is measured

        opts = {k: v for k, v in how.items() if k not in ("target", "prompts", "max_new_tokens", "aux_convention",
                                                           "trust_remote_code")}
        return measure_dump(path, opts.pop("hidden_states"), **opts).result
    from eaglekit.analysis.acceptance.measure import measure_acceptance  # heavy (torch): when measured

    opts = {k: v for k, v in how.items() if k != "target_head"}
    if opts.get("target") is not None:
        if "target" not in shared:   # loaded once for every checkpoint
            shared["target"] = _load_target(opts)
        opts["target"] = shared["target"]
    else:
        opts.pop("target", None)
        opts.pop("prompts", None)
        opts.pop("trust_remote_code", None)
    return measure_acceptance(path, **opts)


def _load_target(opts: dict[str, Any]):
    from eaglekit.analysis.acceptance.target import TargetModel, load_target_model  # heavy (transformers)

    t = opts["target"]
    return t if isinstance(t, TargetModel) else load_target_model(
        t, device=opts.get("device", "cpu"), dtype=opts.get("dtype", "float32"),
        trust_remote_code=opts.get("trust_remote_code", False))


def _point(path: str, samples: float, where: str, r) -> CurvePoint:
    counts = tuple(r.prompt_counts)
    interval = r.accept_length_interval
    if interval is None and counts and sum(c for _, c in counts) > 0:
        interval = bootstrap_ratio([g for g, _ in counts], [c for _, c in counts], unit="prompts")
    interval = interval or Interval(r.accept_length, None, None, "no interval")
    return CurvePoint(str(path), samples, where, interval, tuple(r.per_step_acceptance),
                      tuple(r.accept_length_by_steps), counts)


def _as_numbers(values: Sequence[float] | None, what: str) -> tuple[float, ...]:
    out = []
    for v in values or ():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"{what} must be positive numbers, got {v!r}.")
        out.append(float(v))
    return tuple(out)


def acceptance_curve(checkpoints: Sequence[str | os.PathLike[str]] | Mapping[str, Sequence[str | os.PathLike[str]]], *,
                     samples: Sequence[float] | Mapping[str, Sequence[float]] | None = None,
                     batch_size: int | None = None, target=None, prompts=None, hidden_states=None,
                     target_head: str | None = None, steps: int = 5, max_new_tokens: int = 64,
                     predict: Sequence[float] = (), reach: Sequence[float] = (), break_even: float | None = None,
                     plan: str | os.PathLike[str] | Mapping[str, Any] | None = None, family: str = "loglogistic",
                     seed: int = 0, resamples: int | None = None, device: str = "cpu", dtype: str = "float32",
                     embeddings: str | None = None, endpoint: str | None = None, timeout: float | None = None,
                     progress: bool | None = None, trust_remote_code: bool = False,
                     **dump_options: Any) -> AcceptanceCurve:
    """Measure every checkpoint of one run (a list of locations, in training order) or several runs
    (``{label: [locations]}``), fit the accept-length curve of each, and predict.

    ``samples``: samples seen by each checkpoint (a list, or one list per label); default: read from each
    checkpoint (:func:`checkpoint_samples`) with ``batch_size``. Measurement: ``target`` + ``prompts``, or
    ``hidden_states`` (eaglekit's dump, or a training pipeline's with ``target_head``; further options of
    :func:`~eaglekit.analysis.acceptance.dumps.measure_dump`, e.g. ``scheduler``, in ``dump_options``).
    ``predict``: sample counts to predict at; ``reach``: accept lengths to find the samples for;
    ``break_even`` (an accept length) and ``plan`` (an ``eaglekit plan --json`` object or file) join the
    serving plan. ``family``: ``"loglogistic"`` (default), ``"power"``, ``"exp"`` or ``"auto"`` (the better on held-out
    checkpoints). ``seed`` and ``resamples`` fix the bootstrap.
    """
    series = ({str(k): [str(p) for p in v] for k, v in checkpoints.items()} if isinstance(checkpoints, Mapping)
              else {"checkpoints": [str(p) for p in checkpoints]})
    if not series or any(not v for v in series.values()):
        raise InputError("give at least one checkpoint for every curve.")
    if family not in (*FAMILIES, "auto"):
        raise InputError(f"curve family must be one of {', '.join(FAMILIES)} or auto, got {family!r}.")
    if (target is None) == (hidden_states is None):
        raise InputError("give exactly one of target (with prompts) or hidden_states (a dump folder).")
    predict, reach = _as_numbers(predict, "--predict sample counts"), _as_numbers(reach, "--reach accept lengths")
    if break_even is not None:
        _as_numbers([break_even], "--break-even")
    given = _samples_by_label(samples, series)
    lines = list(read_plan_break_even(plan, steps=steps)) if plan is not None else []
    if break_even is not None:
        lines.insert(0, PlanLine(None, steps, float(break_even), source="given"))

    # every checkpoint's sample count and shapes before the first (long) measurement
    counted: dict[str, list[tuple[float, str]]] = {}
    for label, paths in series.items():
        if given.get(label) is not None:
            counted[label] = [(n, "given") for n in given[label]]
        else:
            counted[label] = [checkpoint_samples(p, batch_size=batch_size) for p in paths]
        check_increasing([n for n, _ in counted[label]], where=f"{label}: " if len(series) > 1 else "")
        check_series(paths, endpoint=endpoint, timeout=timeout)

    how: dict[str, Any] = {"steps": steps, "device": device, "dtype": dtype, "endpoint": endpoint, "timeout": timeout,
                           "progress": progress}
    if target is not None:
        how.update(target=target, prompts=prompts, max_new_tokens=max_new_tokens, trust_remote_code=trust_remote_code)
    else:
        how.update(hidden_states=hidden_states, embeddings=embeddings)
        if target_head is not None:
            how.update(target_head=target_head, **dump_options)
    if target is not None or target_head is None:
        unused = [k for k, v in dump_options.items() if v not in (None, False)]
        if unused:
            raise InputError(f"{unused[0]} applies to a training pipeline's dump (with a target head); drop it.")
    shared: dict[str, Any] = {}
    if hidden_states is not None and target_head is None:
        how["hidden_states"] = open_dump(hidden_states)   # opened once for every checkpoint
    curves = []
    for label, paths in series.items():
        points = tuple(_point(p, n, where, _measure_one(p, how, shared)) for p, (n, where) in zip(paths, counted[label]))
        curves.append(fit_points(label, points, steps=steps, predict=predict, reach=reach, plan=tuple(lines),
                                 family=family, seed=seed, resamples=resamples or CURVE_RESAMPLES))
    on = (f"target {shown(str(getattr(target, 'name', target)))} with prompts {shown(str(prompts))}" if target is not None
          else f"hidden states {shown(str(hidden_states))}" + (f" with target head {shown(target_head)}" if target_head else ""))
    return AcceptanceCurve(tuple(curves), on)


def _samples_by_label(samples, series: Mapping[str, Sequence[str]]) -> dict[str, tuple[float, ...] | None]:
    if samples is None:
        return {k: None for k in series}
    if isinstance(samples, Mapping):
        by = {str(k): v for k, v in samples.items()}
    elif len(series) == 1:
        by = {next(iter(series)): samples}
    else:
        raise InputError("several curves: give samples per label ({label: [n, ...]}), or read them from the checkpoints.")
    out: dict[str, tuple[float, ...] | None] = {}
    for label, paths in series.items():
        v = by.get(label)
        if v is None:
            out[label] = None
            continue
        nums = _as_numbers(v, "sample counts")
        if len(nums) != len(paths):
            raise InputError(f"{label}: {len(nums)} sample counts for {len(paths)} checkpoints; give one per checkpoint.")
        out[label] = nums
    return out


def fit_points(label: str, points: Sequence[CurvePoint], *, steps: int, predict: Sequence[float] = (),
               reach: Sequence[float] = (), plan: Sequence[PlanLine] = (), family: str = "loglogistic", seed: int = 0,
               resamples: int = 1000) -> Curve:
    """The curve through measured points (no fit with fewer than three: the points alone, and a note)."""
    points = tuple(points)
    check_increasing([p.samples for p in points], where=f"{label}: ")
    if len(points) < MIN_POINTS:
        note = (f"{len(points)} checkpoint{'s' * (len(points) != 1)}: a curve needs at least {MIN_POINTS}; the points "
                "are shown, nothing is fitted or predicted.")
        return Curve(label, steps, points, plan=tuple(plan), notes=(note,))
    counts = [PointCounts(p.samples, tuple(g for g, _ in p.prompt_counts) or (1,),
                          tuple(c for _, c in p.prompt_counts) or (1,)) for p in points]
    if any(not p.prompt_counts for p in points):   # measured elsewhere: the accept length alone
        counts = [PointCounts(p.samples, (p.accept_length.value,), (1.0,)) for p in points]  # type: ignore[arg-type]
    # the ceiling: what a drafter accepting every draft would measure on these prompts (at most K + 1)
    cap = min([perfect_accept_length([g for g, _ in p.prompt_counts], steps) for p in points if p.prompt_counts]
              or [steps + 1.0])
    held = held_out_errors([p.samples for p in points], [p.accept_length.value for p in points], cap=cap)
    chosen = family
    notes = []
    if family == "auto":
        scored = {k: v for k, v in held.items() if v is not None}
        chosen = min(scored, key=scored.__getitem__) if scored else "loglogistic"
        notes.append(f"family chosen by held-out error: {chosen}" if scored else
                     "family auto with 3 checkpoints: no held-out test possible; log-logistic used.")
    boot = bootstrap_fits(counts, cap=cap, family=chosen, seed=seed, resamples=resamples)  # type: ignore[arg-type]
    preds = tuple((float(n), boot.predict(n)) for n in predict)
    reached = tuple((float(al), boot.reach(al)) for al in reach)
    exact = len(points) == MIN_POINTS
    curve = Curve(label, steps, points, boot, held, preds, reached, tuple(plan), (), exact)
    if exact:
        notes.append(f"{MIN_POINTS} checkpoints for the curve's {MIN_POINTS} parameters: it passes through them and "
                     "nothing tests it; predictions past the largest checkpoint are not constrained.")
    loose = [n for n, i in preds if not curve.constrained_at(n, i)]
    if loose:
        notes.append(f"the data do not constrain the prediction at {', '.join(_count(n) for n in loose)} samples: its "
                     f"interval is wider than {MAX_WIDTH_TEXT} accept length or unbounded"
                     + (", or the curve is exactly determined." if exact else "."))
    return Curve(label, steps, points, boot, held, preds, reached, tuple(plan), tuple(notes), exact)
