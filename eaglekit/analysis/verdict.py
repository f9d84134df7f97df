"""One verdict per candidate drafter: the answer every page, the report's index and the CLI open with.

A candidate is judged on the serving plan (:func:`eaglekit.plan`) of one deployment at one batch size: its measured
acceptance over the plan's cycle, at the k the plan finds best with speculation (a block drafter on its block
cycle), its throughput interval against serving without speculation (:func:`~eaglekit.core.uncertainty.verdict`).
Where the verify's excess over bytes and FLOPs can be read two ways (per verified token, per verify forward) and
the two readings judge the candidate differently, the verdict is TOO CLOSE TO CALL until the verify at another k
is measured: that run comes first in :attr:`Verdicts.next_runs`, before the runs that only narrow an interval.

Pure over records: :class:`~eaglekit.analysis.acceptance.measure.AcceptanceResult` and a
:class:`~eaglekit.analysis.serving.plan.ServingPlan` in, :class:`CandidateVerdict` records out.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglekit.analysis.serving.plan import ServingPlan, plan
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_badge, html_table, Html
from eaglekit.core.uncertainty import Interval, Verdict, verdict

_COLOUR = {"GO": "green", "NO-GO": "red", "TOO CLOSE TO CALL": "yellow"}


@dataclass(frozen=True)
class CandidateVerdict:
    """One candidate's verdict: at ``steps`` draft steps (k), ``batch``, under ``reading`` of the verify, on
    ``gpu`` at ``context`` tokens; its throughput and accept length with their 95% intervals; ``readings``: the
    verdict under each reading of the verify the plan priced; ``next_run``: the one measurement that would move it."""

    candidate: str
    verdict: Verdict
    steps: int
    batch: int
    reading: str
    gpu: str
    context: int
    tokens_per_s: Interval
    baseline_tps: float
    accept_length: Interval
    readings: tuple[tuple[str, Verdict], ...]
    next_run: str
    block: bool = False

    @property
    def speedup(self) -> Interval:
        return self.tokens_per_s.scaled(1 / self.baseline_tps)

    def sentence(self) -> str:
        """``warm start: GO at k = 2, batch 1: 95.3 (88.1-101.2) tok/s against 82 without speculation ...``"""
        split = ""
        if len({v for _, v in self.readings}) > 1:
            split = " (" + ", ".join(f"{r}: {v}" for r, v in self.readings) + ")"
        cycle = "block cycle, " if self.block else ""
        return (f"{self.candidate}: {self.verdict}{split} at k = {self.steps}, batch {self.batch}: "
                f"{self.tokens_per_s.text(1)} tok/s against {self.baseline_tps:g} without speculation "
                f"({cycle}verify read {self.reading}); accept length {self.accept_length.text(2)} at k = {self.steps}")

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "verdict": self.verdict, "steps": self.steps, "batch": self.batch,
                "reading": self.reading, "gpu": self.gpu, "context": self.context, "block": self.block,
                **self.tokens_per_s.fields("tokens_per_s"), "baseline_tps": self.baseline_tps,
                **self.accept_length.fields("accept_length"), "readings": dict(self.readings),
                "next_run": self.next_run}


@dataclass(frozen=True, repr=False)
class Verdicts:
    """Every candidate's verdict, the settings they were judged on, and the next measurements ranked: the run that
    can change a verdict first, then the runs that narrow an interval."""

    candidates: tuple[CandidateVerdict, ...]
    settings: str
    next_runs: tuple[str, ...]

    def __getitem__(self, name: str) -> CandidateVerdict:
        for c in self.candidates:
            if c.candidate == name:
                return c
        raise KeyError(name)

    def headline(self) -> str:
        return f"Verdict per candidate ({self.settings})"

    def __str__(self) -> str:
        lines = [self.headline()]
        lines += [f"- {c.sentence()}" for c in self.candidates]
        lines.append("Next measurements, the one that can change a verdict first:")
        lines += [f"{i}. {run}" for i, run in enumerate(self.next_runs, start=1)]
        return "\n".join(lines)

    __repr__ = __str__  # a notebook's plain-text view is the text

    def _repr_html_(self) -> str:
        rows = [[c.candidate, html_badge(c.verdict, _COLOUR[c.verdict]),  # type: ignore[arg-type]
                 "; ".join(f"{r}: {v}" for r, v in c.readings) if len({v for _, v in c.readings}) > 1 else "agree",
                 f"k = {c.steps}" + (" (block)" if c.block else ""), c.tokens_per_s.text(1),
                 c.speedup.text(2) + "x", c.accept_length.text(2)] for c in self.candidates]
        table = html_table(["candidate", "verdict", "readings of the verify", "k", "tok/s (95%)", "speedup (95%)",
                            "accept length at k (95%)"], rows, caption=self.headline())
        runs = "".join(f"<li>{html.escape(r)}</li>" for r in self.next_runs)
        return Html(f'<div class="eaglekit-verdict" data-verdicts="{html.escape(self._data())}">{table}'
                    f"<p><b>Next measurements</b>, the one that can change a verdict first:</p><ol>{runs}</ol></div>")

    def _data(self) -> str:
        """``warm start=GO;scratch=NO-GO;...``: the verdicts as the HTML carries them for a reader of the page."""
        return ";".join(f"{c.candidate}={c.verdict}@{c.steps}" for c in self.candidates)

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings, "candidates": [c.to_json() for c in self.candidates],
                "next_runs": list(self.next_runs)}


def judge(candidates: Mapping[str, Any], *, costs: Any, measured: Any, target: str, gpu: str, tp: int, context: int,
          batch: int = 1, max_steps: int = 4, block_drafters: Mapping[str, str | os.PathLike[str]] | None = None,
          gpu_assumed: bool = False, context_assumed: bool = False) -> Verdicts:
    """Each candidate's verdict at ``batch``: ``candidates`` maps a name to its measured acceptance (an
    :class:`~eaglekit.analysis.acceptance.measure.AcceptanceResult` or what :func:`eaglekit.plan` reads); block
    drafters (DFlash) are those named in ``block_drafters`` with their config. Each is planned alone on the same
    deployment: ``costs`` and ``measured`` (the deployment's own runs: measured cells belong to the drafter that was
    measured, so give the runs without speculation here), ``target`` on ``gpu`` x ``tp`` at ``context`` tokens.
    ``gpu_assumed`` / ``context_assumed``: the settings say so, where the user did not choose them."""
    blocks = dict(block_drafters or {})
    if not candidates:
        raise InputError("judge needs at least one candidate's acceptance.")
    out, decisive, narrowing = [], [], []
    for name, acceptance in candidates.items():
        is_block = name in blocks
        p = plan([acceptance], block_drafter=[blocks[name]] if is_block else None, costs=costs, measured=measured,
                 target=target, gpu=gpu, tp=tp, context=context, batches=(batch,), max_steps=max_steps)
        o = _option(p, block=is_block)
        if o is None:
            raise InputError(f"{name}: batch {batch} does not fit in the memory of {tp} x {gpu}; nothing to judge.")
        readings = tuple((r, verdict(_option(rp, block=is_block).gain, 1.0)) for r, rp in p.readings
                         if _option(rp, block=is_block) is not None)
        main = verdict(o.gain, 1.0)
        calls = {v for _, v in readings} | {main}
        call: Verdict = main if len(calls) == 1 else "TOO CLOSE TO CALL"
        settle = p.settle_run()
        if len(calls) > 1 and settle:
            run = settle
            decisive.append(run)
        elif call == "TOO CLOSE TO CALL":
            run = (f"{p.next_run['sentence']} (narrows the cycle's interval)" if p.next_run else
                   f"measure {name} on more prompts (narrows its accept length's interval)")
            narrowing.append(run)
        elif call == "GO":
            run = f"serve {name} at k = {o.steps}, batch {batch}, and read the engine's acceptance (eaglekit live)"
            narrowing.append(run)
        else:
            run = "none: it does not pay under either reading of the verify"
        al = (o.accept_length_interval if o.accept_length_interval is not None
              else _interval_at(acceptance, o.steps) or Interval(o.accept_length))
        out.append(CandidateVerdict(name, call, o.steps, batch, "per-token" if not p.split else f"split {p.split:g}",
                                    gpu, context, o.tps, o.tps.value / o.gain.value, al, readings, run, is_block))
    settings = (f"batch {batch}, {target} on {tp} x {gpu}{' (assumed)' if gpu_assumed else ''}, context {context}"
                f"{' (assumed)' if context_assumed else ''}; the deployment's measured decode and verify"
                + _positions_clause(candidates.values(), context))
    return Verdicts(tuple(out), settings, tuple(dict.fromkeys([*decisive, *narrowing])))


def _option(p: ServingPlan, *, block: bool):
    """The candidate's best option with speculation at the plan's batch size (a block drafter's best block option);
    None where the batch size does not fit."""
    if not p.fitting:
        return None
    b = p.fitting[0]
    if block:
        return b.best_block
    best = b.best_eagle
    if best.steps:
        return best
    return max([*b.options[1:], *b.trees], key=lambda o: o.tokens_per_s)


def _positions_clause(acceptances: Any, context: int) -> str:
    """Where the accept lengths were measured, from the cycles' positions eaglekit measurements keep; and, where the
    judged context lies past every one of them, that the acceptance there was not measured (it falls with context
    for drafters trained on short samples: judge_by_context / ``eaglekit plan --contexts`` read it there)."""
    logs = [log for a in acceptances if (log := getattr(a, "cycle_log", None)) is not None and len(log)]
    if not logs:
        return ""
    lo, hi = min(min(log.position) for log in logs), max(max(log.position) for log in logs)
    clause = f"; accept lengths measured on requests whose cycles start at positions {lo}-{hi}"
    if context > hi:
        clause += (f", short of context {context}: acceptance falls with context for drafters trained on short "
                   "samples, so measure it there (accept length by position; judge_by_context)")
    return clause


def _interval_at(acceptance: Any, k: int) -> Interval | None:
    at = getattr(acceptance, "interval_at", None)
    return at(k) if at is not None and k <= getattr(acceptance, "steps", 0) else None

