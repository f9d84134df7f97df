"""The records of :func:`~eaglekit.analysis.acceptance.curve.acceptance_curve`: each checkpoint's measurement
(:class:`CurvePoint`), a serving plan's break-even (:class:`PlanLine`), one run's curve (:class:`Curve`) and
the whole result (:class:`AcceptanceCurve`); they render as text and HTML and serialise with ``to_json()``
(``eaglekit acceptance-curve --json``)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from eaglekit.core.acceptance.curve import (BEYOND, FAMILIES, MIN_POINTS, CurveAverage, CurveBootstrap, constrained,
                                            reach_constrained)
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.uncertainty import Interval, verdict

__all__ = ["AcceptanceCurve", "Curve", "CurvePoint", "PlanLine"]

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
    fit: CurveAverage | CurveBootstrap | None = field(default=None, repr=False)
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
        largest checkpoint of an exactly determined curve, nor where the plausible forms disagree)."""
        return constrained(i) and not (self.exact and samples > max(self.samples)) and not self.forms_disagree(samples)

    def forms_disagree(self, samples: float) -> bool:
        """Whether the points do not pin the curve down at ``samples``: plausible forms disagree there (one's
        prediction outside another's interval). Never for a single form or inside the measured range."""
        return (isinstance(self.fit, CurveAverage) and samples > max(self.samples)
                and self.fit.disagree(samples))

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
            if isinstance(self.fit, CurveAverage):
                f = {"family": "average", "leading": self.fit.fit.to_json(),
                     "forms": [{**x.boot.fit.to_json(), "weight": x.weight, "delta_qaic": x.delta,
                                "plausible": x.plausible, "chi_square": x.boot.chi_square} for x in self.fit.forms],
                     "overdispersion": self.fit.overdispersion}
            else:
                f = self.fit.fit.to_json()
            f.update({"method": self.fit.method, "ceiling": _interval_json(self.fit.ceiling()),
                      "held_out_error": dict(self.held_out),
                      "constrained_width": MAX_WIDTH_TEXT})
            out["fit"] = f
        out["predictions"] = [{"samples": n, **_interval_json(i), "constrained": self.constrained_at(n, i),
                               "forms_disagree": self.forms_disagree(n)}
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
        return [[samples_text(c.samples), c.accept_length.text(3), " ".join("-" if x is None else f"{x:.2f}" for x in c.per_step),
                 " ".join(f"{x:.2f}" for x in c.by_steps), c.path] for c in self.checkpoints]

    def _pairs(self) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = [("checkpoints", f"{len(self.checkpoints)}, K = {self.steps}; accept length "
                                         f"interval: {self.checkpoints[0].accept_length.method}")]
        if self.fit is None:
            pairs.append(("fit", f"none: a curve needs at least {MIN_POINTS} checkpoints (the points are shown)"))
        else:
            f = self.fit
            if isinstance(f, CurveAverage):
                pairs.append(("forms fitted", "; ".join(
                    f"{x.family} {FAMILIES[x.family]}: " + (f"weight {x.weight:.2f}" if x.plausible else
                                                           f"implausible (QAIC +{x.delta:.1f})")
                    for x in f.forms)))
                pairs.append(("fit", f"weighted mean of the plausible forms; leading: {f.fit.formula} ({f.fit.family}); "
                                     f"ceiling {f.ceiling().text(3)}, capped at {f.fit.cap:.3f} (every draft accepted on "
                                     f"these prompts; K + 1 = {self.steps + 1})"))
            else:
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
                + ("; 3 checkpoints for 3 parameters" if self.exact else "")
                + ("; the forms disagree" if self.forms_disagree(n) else "") + ")")
            pairs.append((f"predicted at {samples_text(n)} samples", i.text(3) + flag))
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
    #: :meth:`compare`'s sentences when asked for (``eaglekit acceptance-curve --compare``): the page's conclusion
    comparison: str | None = None

    def with_comparison(self, candidate: str, baseline: str, *, samples: float, break_even: float | None = None
                        ) -> AcceptanceCurve:
        """This result with :meth:`compare`'s answer attached (shown last in the text, ``comparison`` in the JSON).
        ``break_even``: default the first curve's first plan line (``--break-even`` or ``--plan``)."""
        for name in (candidate, baseline):
            if name not in [c.label for c in self.curves]:
                raise InputError(f"--compare names {name!r}, not a curve: the curves are "
                                 + ", ".join(c.label for c in self.curves) + ".")
        if isinstance(samples, bool) or not isinstance(samples, (int, float)) or not math.isfinite(samples) \
                or samples <= 0:
            raise InputError(f"--compare N: the sample count must be a positive number (37K allowed), got {samples!r}.")
        if break_even is None:
            lines = self.curves[0].plan
            if not lines:
                raise InputError("--compare judges against a break-even: give --break-even AL or --plan PLAN.json.")
            break_even = lines[0].break_even
        return replace(self, comparison=self.compare(candidate, baseline, samples=samples, break_even=break_even))

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
        out = (f"With {samples_text(samples)} samples, {candidate} measures {ia.text(2)} and {baseline} {ib.text(2)} "
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
        out = {**curves[0], "measured_on": self.measured_on, "curves": curves}
        if self.comparison is not None:
            out["comparison"] = self.comparison
        return out

    def __str__(self) -> str:
        tail = "" if self.comparison is None else f"\n\n{self.comparison}"
        return "\n\n".join(str(c) for c in self.curves) + f"\n\nmeasured on {self.measured_on}" + tail

    def _repr_html_(self) -> str:
        tail = "" if self.comparison is None else f"<p>{html.escape(self.comparison)}</p>"
        return ("<div>" + "".join(c._repr_html_() for c in self.curves) + f"<p>measured on {self.measured_on}</p>"
                + tail + "</div>")


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


def samples_text(n: float) -> str:
    """A sample count as the tables show it: 1,024 or 23.7."""
    return f"{n:,.0f}" if n >= 100 or float(n).is_integer() else f"{n:.3g}"


def _width(i: Interval) -> str:
    return "unbounded" if i.width is None else f"{i.width:.2f}"


def _reach_text(i: Interval, ok: bool) -> str:
    if not math.isfinite(i.value):
        return BEYOND
    hi = "unbounded" if i.high is None else samples_text(i.high)
    lo = "-" if i.low is None else samples_text(i.low)
    flag = "" if ok else "  NOT CONSTRAINED by the data"
    return f"{samples_text(i.value)} ({lo}-{hi}){flag}"
