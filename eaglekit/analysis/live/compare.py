"""The engine's accept length beside eaglekit's offline one: both intervals, the gap, and why it may be there.

Offline said 3.2, the engine says 2.4: is the gap real, and which of the known causes can be checked?
:func:`compare_live` takes a live reading (:class:`~eaglekit.core.serving.live.LiveReading`) and an
``eaglekit acceptance --json`` result (read at the engine's served steps, from ``accept_length_by_steps``),
and returns a :class:`LiveComparison`:

- the gap, offline minus live, with an interval (the two intervals' half-widths combined as independent normal
  errors) and its own words (:data:`GAP_WORDS`; GO / NO-GO stay with "speculation pays" everywhere else):
  REAL GAP = the engine accepts less, REVERSE GAP = it accepts more, TOO CLOSE TO CALL = no gap told apart
  from noise;
- the causes: served steps against the measured ones; the depth the drafter was trained for (per-step acceptance
  that collapses) against the served steps; where the gap opens (the first step whose conditional acceptance
  falls); the aux layer ids as the served engine release reads them (with the drafter's config and ``--engine``);
  temperature, the chat template, the traffic mix and draft-vocabulary coverage, which ``/metrics`` does not show
  (listed as uncheckable, with what to run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from eaglekit.core.configs.layers import layer_names
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, text_table
from eaglekit.core.serving.live import LiveReading
from eaglekit.core.uncertainty import Interval, verdict

__all__ = ["GAP_WORDS", "Cause", "LiveComparison", "compare_live", "offline_at"]

Status = Literal["fine", "suspect", "uncheckable"]
GapVerdict = Literal["REAL GAP", "REVERSE GAP", "TOO CLOSE TO CALL"]
#: The gap's verdict in words of its own: the gap (offline minus live) above 0, below 0, or neither.
GAP_WORDS: dict[str, GapVerdict] = {"GO": "REAL GAP", "NO-GO": "REVERSE GAP", "TOO CLOSE TO CALL": "TOO CLOSE TO CALL"}
_Z95 = 1.959963984540054


@dataclass(frozen=True)
class Cause:
    """One known cause of a gap: ``fine`` (checked, not it), ``suspect`` (checked, may be it) or
    ``uncheckable`` (what would check it is in ``detail``)."""

    name: str
    status: Status
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class LiveComparison:
    live: LiveReading
    offline: Interval
    offline_steps: int
    compared_at: int | None
    gap: Interval
    verdict: GapVerdict
    causes: tuple[Cause, ...]
    offline_per_step: tuple[float | None, ...]

    @property
    def meaning(self) -> str:
        return {"REAL GAP": "the engine accepts less than offline",
                "REVERSE GAP": "the engine accepts more than offline (easier traffic?)",
                }.get(self.verdict, "no gap told apart from noise")

    def to_json(self) -> dict[str, Any]:
        return {"live": self.live.to_json(), **self.live.accept_length.fields("live_accept_length"),
                **self.offline.fields("offline_accept_length"), "offline_interval": self.offline.method,
                "offline_steps": self.offline_steps, "compared_at_steps": self.compared_at,
                **self.gap.fields("gap"), "gap_interval": self.gap.method, "verdict": self.verdict,
                "meaning": self.meaning, "offline_per_step_acceptance": list(self.offline_per_step),
                "live_per_step_acceptance": list(self.live.conditional_acceptance),
                "causes": [c.to_json() for c in self.causes]}

    def _rows(self) -> list[list[str]]:
        return [[c.name, c.status.upper() if c.status == "suspect" else c.status, c.detail] for c in self.causes]

    def headline(self) -> str:
        at = f" at {self.compared_at} steps" if self.compared_at else ""
        return (f"offline {self.offline.text()} vs engine {self.live.accept_length.text()}{at}: gap "
                f"{self.gap.text()} -> {self.verdict} ({self.meaning})")

    def __str__(self) -> str:
        return f"{self.live}\n\n" + text_table(("cause", "status", "detail"), self._rows(), title=self.headline())

    def _repr_html_(self) -> str:
        return (f"<p><b>{escape(self.headline())}</b></p>"
                + html_table(("cause", "status", "detail"), self._rows(), caption="Known causes of a gap")
                + "<details><summary>the live reading</summary>" + self.live._repr_html_() + "</details>")


def _number(rec: Mapping, key: str, what: str, *, low: float = -math.inf, high: float = math.inf,
            required: bool = True) -> float | None:
    v = rec.get(key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not low <= v <= high:
        raise InputError(f"{what}: {key} must be a number from {low:g} to {high:g}, got {str(v)[:40]!r}; is it an "
                         "`eaglekit acceptance --json` result?")
    return float(v)


def offline_at(offline: Mapping[str, Any], steps: int | None, *, what: str = "offline result") -> tuple[Interval, int | None]:
    """The offline accept length at ``steps`` (its own K when None or when it was measured at that K), with
    its interval where the result has one; and the K it is read at (None: not measured that far)."""
    if not isinstance(offline, Mapping):
        raise InputError(f"{what}: expected the JSON object `eaglekit acceptance --json` writes.")
    k_off = int(_number(offline, "steps", what, low=1, high=64))
    L = _number(offline, "accept_length", what, low=1, high=65)
    lo = _number(offline, "accept_length_low", what, low=1, high=65, required=False)
    hi = _number(offline, "accept_length_high", what, low=1, high=65, required=False)
    method = str(offline.get("accept_length_interval") or "bootstrap over prompts")[:200]
    own = Interval(L, lo, hi, method) if lo is not None and hi is not None and lo <= L <= hi else \
        Interval(L, None, None, "no interval in the offline result")
    if steps is None or steps == k_off:
        return own, k_off
    by = offline.get("accept_length_by_steps")
    if isinstance(by, list) and 1 <= steps <= len(by):
        v = by[steps - 1]
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 1 <= v <= steps + 1:
            return Interval(float(v), None, None, f"measured at {k_off} steps, read at {steps}: no interval there"), steps
    return own, None


def _collapse(per_step: Sequence[float | None]) -> int | None:
    """The first step whose acceptance falls below half of the step before and by at least 0.2 (1-based)."""
    for j in range(1, len(per_step)):
        a, b = per_step[j - 1], per_step[j]
        if a is not None and b is not None and b < a / 2 and a - b >= 0.2:
            return j + 1
    return None


def _gap(offline: Interval, live: Interval) -> Interval:
    value = offline.value - live.value
    if not (offline.has_interval and live.has_interval):
        return Interval(value, None, None, "no interval: " + ("the offline figure" if not offline.has_interval
                                                              else "the live figure") + " has none")
    se = math.hypot((offline.high - offline.low) / (2 * _Z95), (live.high - live.low) / (2 * _Z95))  # type: ignore[operator]
    return Interval(value, value - _Z95 * se, value + _Z95 * se,
                    "offline minus live, the two intervals combined as independent normal errors, 95%")


def compare_live(live: LiveReading, offline: Mapping[str, Any], *, aux_view=None, engine: str | None = None,
                 temperature: float | None = None) -> LiveComparison:
    """The live reading beside an ``eaglekit acceptance --json`` result ``offline``.

    ``aux_view``: the drafter's :class:`~eaglekit.core.configs.aux_view.AuxEngineView` for the served ``engine``
    (``"vllm"``, ``"sglang==0.5.9"``), if known; ``temperature``: the served requests' temperature, if known.
    ``offline`` may be the ``AcceptanceResult`` itself."""
    if hasattr(offline, "to_json"):
        offline = offline.to_json()
    off, at = offline_at(offline, live.steps)
    k_off = int(offline["steps"])
    gap = _gap(off, live.accept_length)
    call = GAP_WORDS[verdict(gap, 0.0) if gap.has_interval else "TOO CLOSE TO CALL"]
    per_step_raw = offline.get("per_step_acceptance")
    off_steps: tuple[float | None, ...] = tuple(
        float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None
        for x in per_step_raw[:64]) if isinstance(per_step_raw, list) else ()
    causes: list[Cause] = []
    if live.steps is None:
        causes.append(Cause("served steps", "uncheckable", "the engine did not say how many draft tokens it "
                            f"serves; offline was measured at {k_off} (give --steps with a log)"))
    elif at is None:
        causes.append(Cause("served steps", "suspect", f"the engine serves {live.steps} steps; offline measured only "
                            f"up to {k_off}: measure again with `eaglekit acceptance --steps {live.steps}`"))
    else:
        causes.append(Cause("served steps", "fine", f"compared at the served {live.steps} steps"
                            + (f" (offline measured to {k_off})" if k_off != live.steps else "")))
    depth_off = _collapse(off_steps)
    depth_live = _collapse(live.conditional_acceptance)
    served = live.steps
    if depth_off is None and depth_live is None:
        causes.append(Cause("trained depth vs served steps", "fine" if off_steps else "uncheckable",
                            "no step's acceptance collapses" if off_steps else "no per-step acceptance offline"))
    else:
        j = depth_off or depth_live
        where = "offline" if depth_off else "live"
        bad = served is not None and j is not None and j <= served
        causes.append(Cause("trained depth vs served steps", "suspect" if bad else "fine",
                            f"acceptance collapses at step {j} ({where}): the drafter seems trained for {j - 1} steps"
                            + (f", and the engine serves {served}: serve {j - 1}" if bad else "")))
    live_steps = live.conditional_acceptance
    if live_steps and off_steps:
        opens = next((i + 1 for i, (a, b) in enumerate(zip(off_steps, live_steps))
                      if a is not None and b is not None and a - b > 0.1), None)
        if opens is None:
            causes.append(Cause("where the gap opens", "fine", "no step's conditional acceptance is 0.1 below offline"))
        elif opens == 1:
            causes.append(Cause("where the gap opens", "suspect", "at step 1: the drafter's first guess is worse "
                                "served, so what it reads differs (aux layers under another convention, another "
                                "chat template, another target revision, the traffic mix)"))
        else:
            causes.append(Cause("where the gap opens", "suspect", f"at step {opens}: later steps fall (temperature, "
                                "a drafter trained for fewer steps, or long-range drift on the served traffic)"))
    else:
        causes.append(Cause("where the gap opens", "uncheckable", "needs per-position counts (vLLM) and the offline "
                            "per-step acceptance"))
    if aux_view is not None and engine is not None:
        r = aux_view.reading(engine.split("==")[0])  # a view built for that release holds its reading
        status: Status = {"yes": "fine", "no": "suspect"}.get(r.as_trained, "uncheckable")  # type: ignore[assignment]
        causes.append(Cause("aux layer ids as the engine reads them", status,
                            f"{r.name} feeds the outputs of layers {layer_names(r.outputs_of or ())}: as trained "
                            f"{r.as_trained}" + (f"; write {list(r.write)} instead" if r.write and status == "suspect"
                                                 else "")))
    else:
        causes.append(Cause("aux layer ids as the engine reads them", "uncheckable",
                            "give --drafter (its config.json) and --engine E==VERSION (the served release)"))
    t_off = offline.get("temperature")
    if temperature is None:
        causes.append(Cause("temperature", "uncheckable", f"/metrics does not show the requests' temperature; offline "
                            f"was measured at {t_off} (give --temperature, or measure offline at the served one)"))
    else:
        same = isinstance(t_off, (int, float)) and abs(float(t_off) - temperature) < 1e-9
        causes.append(Cause("temperature", "fine" if same else "suspect",
                            f"served at {temperature:g}, offline at {t_off}"
                            + ("" if same else f": measure with `eaglekit acceptance --temperature {temperature:g}`")))
    sha = offline.get("chat_template_sha256")
    causes.append(Cause("chat template", "uncheckable", "the served template is not in /metrics; "
                        + (f"offline used template sha256 {str(sha)[:12]}...: compare with the served one "
                           "(`eaglekit tokenizer-diff`)" if sha else "offline used no chat template: measure with "
                           "the served one (`eaglekit acceptance --chat-template`)")))
    causes.append(Cause("traffic mix", "uncheckable", "offline prompts against served traffic: measure offline on a "
                        "sample of the served prompts"))
    causes.append(Cause("draft-vocabulary coverage", "uncheckable", "run `eaglekit vocab-coverage` on the served "
                        "traffic's tokens"))
    return LiveComparison(live, off, k_off, at, gap, call, tuple(causes), off_steps)
