"""The record of a measured accept length (:class:`AcceptanceResult`), shared by every path that measures one:
EAGLE-3 chains (:mod:`.measure`), trees, training dumps and block drafters (:mod:`.block`). It renders as text,
HTML and JSON, and reads itself at a smaller K, against a break-even, or through the calculator."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from eaglekit.core.errors import InputError
from eaglekit.core.configs.layers import AuxConvention, other_convention
from eaglekit.core.records import register
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.uncertainty import Interval, verdict
from eaglekit.core.speedup.specmath import Estimate, Scenario, estimate
from eaglekit.io.cache import Cached
from eaglekit.analysis.acceptance.notes import generation_limit_note
from eaglekit.analysis.acceptance.positions import CycleLog, PositionProfile, PositionRange, by_position

Source = Literal["target", "hidden-states"]
#: the estimator of every accept length measured on the target's own continuations
CYCLE_SIMULATION = "cycle simulation (every draft compared with the target's continuation)"


@dataclass(frozen=True)
class AcceptanceResult:
    """A drafter's measured accept length on a target; renders in Jupyter and the terminal.

    ``to_json()`` is ``eaglekit acceptance --json``."""

    drafter: str
    target: str
    source: Source
    steps: int
    temperature: float
    prompts: int
    generated_tokens: int
    cycles: int | float          # expected cycles (a float) where a dump's text could not show every draft
    accept_length: float
    per_step_acceptance: tuple[float | None, ...]
    accept_length_by_steps: tuple[float, ...]
    aux_convention: AuxConvention
    aux_indices: tuple[int, ...]
    accept_length_by_convention: dict[str, float | None]
    per_prompt_accept_length: tuple[float | None, ...]
    expected_acceptance: tuple[float | None, ...] | None = None
    #: at temperature > 0: generated tokens / expected cycles, the greedy figure's cycles (:func:`expected_cycles`)
    expected_accept_length: float | None = None
    chat_template_sha256: str | None = None
    positions: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the accept length's interval: a bootstrap over prompts (requests), pooled as the figure is
    accept_length_interval: Interval | None = None
    #: (generated tokens, cycles) of every prompt, in order: the accept length is their pooled ratio
    prompt_counts: tuple[tuple[int, int], ...] = field(default=(), repr=False, compare=False)
    #: the same at each K of ``accept_length_by_steps``
    accept_length_by_steps_interval: tuple[Interval | None, ...] = ()
    #: with ``keep_samples``: (continuation token ids, leading matches per position) of every prompt
    samples: tuple[tuple[np.ndarray, np.ndarray], ...] = field(default=(), repr=False, compare=False)
    #: how the accept length was obtained (a dump of dataset text completes what its text cannot show:
    #: :mod:`~eaglekit.analysis.acceptance.span_estimate`)
    estimator: str = CYCLE_SIMULATION
    #: each reading's accept length at every K = 1..steps (None where the reading was not measured)
    accept_length_by_convention_by_steps: dict[str, tuple[float, ...] | None] = field(default_factory=dict)
    #: the drafter's family: "eagle3" (chains of K steps), or a block drafter ("dflash", "dflash2", "dspark":
    #: K is the drafts per block, each K measured with a block of K + 1, as engines run it)
    family: str = "eagle3"
    #: a block drafter's trained block size
    block_size: int | None = None
    #: a block drafter's figure as its authors' benchmark prints it: the mean over prompts of each prompt's mean
    #: accepted-plus-bonus per cycle (z-lab/dflash benchmark.py); ``accept_length`` is the pooled one
    accept_length_authors: float | None = None
    #: a block drafter's cycles, prompt by prompt at K = ``steps``: the tokens each cycle produced (accepted drafts
    #: plus the bonus, clipped by the budget and the first stop token, as the authors' loop records them)
    block_cycles: tuple[tuple[int, ...], ...] = field(default=(), repr=False, compare=False)
    #: every counted cycle at K = ``steps`` with the context length it starts at (:meth:`by_position`)
    cycle_log: CycleLog | None = field(default=None, repr=False, compare=False)
    #: the same cycles simulated at every K = 1..``steps`` (``cycle_logs[k - 1]``), where the measurement kept them:
    #: :meth:`at_steps` views keep theirs, so accept length by position is read at any K the pages judge
    cycle_logs: tuple[CycleLog, ...] = field(default=(), repr=False, compare=False)
    #: set when the answer was read from the result cache (:mod:`eaglekit.io.cache`): when it was computed
    cached: Cached | None = field(default=None, compare=False)

    def by_convention_at(self, steps: int) -> dict[str, float | None]:
        """Each aux reading's accept length at ``steps`` (<= the measured K): compare readings at one K, the depth
        a verdict uses, whatever K the measurement ran to."""
        if not 1 <= steps <= self.steps:
            raise InputError(f"the readings were measured up to K = {self.steps}; K = {steps} is not among them.")
        if steps == self.steps:
            return dict(self.accept_length_by_convention)
        out: dict[str, float | None] = {}
        for c in self.accept_length_by_convention:
            by = self.accept_length_by_convention_by_steps.get(c)
            out[c] = None if by is None else by[steps - 1]
        return out

    def at_steps(self, k: int) -> AcceptanceResult:
        """The same measurement read at K = ``k`` (<= the measured K): the figures of ``accept_length_by_steps[k-1]``,
        which come from the same cycles simulated with K = k (the same match counts), with their interval. What is
        kept per prompt only at the measured K (per-prompt figures) is left out of the view."""
        if not 1 <= k <= self.steps:
            raise InputError(f"the measurement drafted up to K = {self.steps}; K = {k} is not among them.")
        if k == self.steps:
            return self
        al = self.accept_length_by_steps[k - 1]
        by_k = {c: (None if v is None else v[:k]) for c, v in self.accept_length_by_convention_by_steps.items()}
        return replace(
            self, steps=k, accept_length=al, accept_length_interval=self.interval_at(k),
            cycles=round(self.generated_tokens / al) if al else self.cycles,
            per_step_acceptance=self.per_step_acceptance[:k], accept_length_by_steps=self.accept_length_by_steps[:k],
            accept_length_by_steps_interval=self.accept_length_by_steps_interval[:k],
            accept_length_by_convention=self.by_convention_at(k), accept_length_by_convention_by_steps=by_k,
            expected_acceptance=None if self.expected_acceptance is None else self.expected_acceptance[:k],
            expected_accept_length=None, per_prompt_accept_length=(), prompt_counts=(), samples=(),
            cycle_log=self.cycle_logs[k - 1] if len(self.cycle_logs) >= k else None,
            cycle_logs=self.cycle_logs[:k], notes=self._notes_at(k))

    def by_position(self, buckets: int | Sequence[int] = 8, *, break_even: float | None = None, seed: int = 0,
                    drafter_range: PositionRange | None = None) -> PositionProfile:
        """Accept length and per-step acceptance in buckets of the context length at which each cycle starts, with
        intervals (:func:`~eaglekit.analysis.acceptance.positions.by_position`): ``buckets`` a count of equal-width
        buckets or their edges; against ``break_even``, a verdict per bucket and the position from which the
        drafter stops paying."""
        if self.cycle_log is None:
            raise InputError("this result kept no cycle positions (read from another tool, or viewed at a smaller "
                             "K): measure it with eaglekit acceptance to read accept length by position.")
        return by_position(self.cycle_log, buckets=buckets, break_even=break_even, seed=seed,
                           drafter_range=drafter_range)

    def _notes_at(self, k: int) -> tuple[str, ...]:
        """The notes of the view at K = ``k``: the generation-limit sentence (which names a K) said again at ``k``."""
        limit = "each prompt's last cycle is cut at the generation limit"
        kept = [n for n in self.notes if not n.startswith(limit)]
        if self.prompt_counts and any(n.startswith(limit) for n in self.notes):
            kept.extend(filter(None, [generation_limit_note([g for g, _ in self.prompt_counts], k)]))
        return tuple(kept) + (f"read at K = {k} from a measurement drafted to K = {self.steps} (the same cycles "
                              f"simulated with K = {k}).",)

    @property
    def accept_length_prefill_included(self) -> float:
        """SGLang benchmark clients' figure: (generated + each prompt's prefill token) / cycles."""
        return (self.generated_tokens + self.prompts) / self.cycles if self.cycles else float("nan")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready figures; an undefined figure (no cycles: every output ended at once) is null."""
        out: dict[str, Any] = {
            "steps": self.steps, "temperature": self.temperature, "prompts": self.prompts,
            "generated_tokens": self.generated_tokens, "cycles": self.cycles, "accept_length": self.accept_length,
            **self.interval.fields("accept_length"), "accept_length_interval": self.interval.method,
            "per_step_acceptance": list(self.per_step_acceptance),
            "accept_length_by_steps": list(self.accept_length_by_steps), "estimator": self.estimator,
        }
        out.update({
            "drafter": self.drafter, "target": self.target, "source": self.source,
            "aux_convention": self.aux_convention, "aux_hidden_state_indices": list(self.aux_indices),
            "accept_length_by_convention": dict(self.accept_length_by_convention),
            "accept_length_prefill_included": self.accept_length_prefill_included,
            "per_prompt_accept_length": list(self.per_prompt_accept_length),
            "expected_acceptance": list(self.expected_acceptance) if self.expected_acceptance is not None else None,
            "expected_accept_length": self.expected_accept_length,
            "positions": self.positions, "chat_template_sha256": self.chat_template_sha256,
            "notes": list(self.notes),
        })
        if self.family != "eagle3":
            ivs = [self.interval_at(k) for k in range(1, len(self.accept_length_by_steps) + 1)]
            out.update({"family": self.family, "block_size": self.block_size,
                        "accept_length_authors": self.accept_length_authors,
                        "accept_length_by_steps_low": [i.low for i in ivs],
                        "accept_length_by_steps_high": [i.high for i in ivs]})
        out.update(self.cached.to_json() if self.cached is not None else {"cached": False})
        return _null_nan(out)

    @property
    def interval(self) -> Interval:
        """The accept length with its interval (none when it was not computed)."""
        return self.accept_length_interval or Interval(self.accept_length, None, None, "no interval")

    def interval_at(self, k: int) -> Interval:
        """The accept length at K = ``k`` (``accept_length_by_steps[k - 1]``) with its interval."""
        if not 1 <= k <= len(self.accept_length_by_steps):
            raise InputError(f"K = {k} is outside 1..{len(self.accept_length_by_steps)}, the steps measured.")
        if k == self.steps:
            return self.interval
        found = self.accept_length_by_steps_interval[k - 1] if k <= len(self.accept_length_by_steps_interval) else None
        return found or Interval(self.accept_length_by_steps[k - 1], None, None, "no interval")

    # -- the calculator --------------------------------------------------------------------------------
    def speedup(self, *, baseline_tps: float, verify_ms: float, draft_ms: float | None = None,
                overhead_ms: float = 0.0) -> Estimate:
        """Throughput at the measured accept length with ``steps`` drafts per cycle (the calculator's
        :class:`~eaglekit.core.speedup.specmath.Estimate`). Without ``draft_ms`` drafting is counted free
        (the estimate's ``drafting_counted_free`` says so)."""
        return estimate(Scenario(baseline_tps=baseline_tps, verify_ms=verify_ms,
                                 draft_ms=0.0 if draft_ms is None else draft_ms,
                                 steps=self.steps, overhead_ms=overhead_ms), accept_length=self.accept_length)

    def go_no_go(self, *, baseline_tps: float | None = None, verify_ms: float | None = None,
                 draft_ms: float | None = None, overhead_ms: float = 0.0, scenario: Scenario | None = None) -> str:
        """One line: the measured accept length with its interval against the break-even one, and the verdict
        (GO / NO-GO / TOO CLOSE TO CALL, :func:`~eaglekit.core.uncertainty.verdict`). ``scenario``: the serving
        cycle (e.g. :attr:`eaglekit.core.serving.account.Account.growing_scenario`, a verify that grows with K),
        priced at this measurement's K; else ``baseline_tps``, a constant ``verify_ms`` and ``draft_ms``. Without
        ``draft_ms`` the line says that drafting is counted free (break-even is then understated)."""
        if scenario is not None:
            cycle = scenario.at_steps(self.steps)
            e = estimate(cycle, accept_length=self.accept_length)
            baseline_tps, free = cycle.baseline_tps, ""
            grows = (f", the verify {cycle.verify_ms:.1f} ms growing {cycle.verify_growth_ms:.2f} ms per drafted token"
                     if cycle.verify_growth_ms else "")
        else:
            if baseline_tps is None or verify_ms is None:
                raise InputError("go_no_go needs a serving scenario, or baseline_tps and verify_ms.")
            e = self.speedup(baseline_tps=baseline_tps, verify_ms=verify_ms, draft_ms=draft_ms, overhead_ms=overhead_ms)
            free = (" Drafting counted free (no draft_ms given): the real break-even is higher by K x draft ms x "
                    "baseline tok/s / 1000.") if draft_ms is None else ""
            grows = ""
        call = verdict(self.interval, e.break_even_accept_length)
        where = {"GO": ">", "NO-GO": "<", "TOO CLOSE TO CALL": "straddles"}[call]
        return (f"{call}: measured accept length {self.interval.text()} {where} break-even "
                f"{e.break_even_accept_length:.2f} (k = {self.steps}, {e.cycle_ms:.1f} ms per cycle{grows} at "
                f"{baseline_tps:g} tok/s baseline; {self.interval.method}): {e.tokens_per_s:.0f} tok/s, "
                f"{e.speedup:.2f}x.{free}")

    # -- rendering -----------------------------------------------------------------------------------
    def _other_text(self, other: str, alt: float) -> str:
        """The other reading at K, and at every K beside the trained reading's when measured at more than one K."""
        by = self.accept_length_by_convention_by_steps
        mine, theirs = by.get(self.aux_convention), by.get(other)
        if self.steps < 2 or mine is None or theirs is None:
            return f"{alt:.3f}"
        pairs = ", ".join(f"K = {k}: {a:.3f} vs {b:.3f}" for k, (a, b) in enumerate(zip(mine, theirs), start=1))
        return f"{alt:.3f} at K = {self.steps} ({self.aux_convention} vs {other}, by K: {pairs})"

    def _pairs(self) -> list[tuple[str, Any]]:
        other = other_convention(self.aux_convention)
        alt = self.accept_length_by_convention.get(other)
        pairs: list[tuple[str, Any]] = [
            ("drafter", self.drafter), ("target", f"{self.target} ({self.source})"),
            ("accept length" + (" (greedy)" if self.temperature > 0 else ""),
             f"{self.accept_length:.3f} (vLLM convention: bonus token in, prefill token out)"),
            ("  interval", self._interval_text()),
            ("  estimator", self.estimator),
            ("  prefill token included (SGLang clients)", f"{self.accept_length_prefill_included:.3f}"),
            ("steps K", self.steps), ("temperature", self.temperature),
            ("prompts / generated tokens / cycles", f"{self.prompts} / {self.generated_tokens} / {self.cycles}"),
            ("aux convention", f"{self.aux_convention} (hidden_states {list(self.aux_indices)})"),
            (f"  accept length reading them as {other}", "not available" if alt is None else self._other_text(other, alt)),
        ]
        if self.expected_accept_length is not None:
            pairs.insert(3, (f"expected accept length at T = {self.temperature:g}",
                             f"{self.expected_accept_length:.3f} (same cycles as the greedy figure, each step "
                             "accepted with its expected probability along the greedy continuation)"))
        if self.family != "eagle3" and self.accept_length_authors is not None:
            how = ("DeepSpec's: tokens per cycle pooled over all prompts" if self.family == "dspark"
                   else "mean over prompts of each prompt's mean tokens per cycle")
            pairs.insert(4, ("  the authors' figure", f"{self.accept_length_authors:.3f} ({how}; {self.family}, "
                             f"block size {self.block_size})"))
        if self.chat_template_sha256:
            pairs.append(("chat template sha256", self.chat_template_sha256[:16] + "..."))
        pairs.extend(("note", n) for n in self.notes)
        if self.cached is not None:
            pairs.append(("result", self.cached.text()))
        return pairs

    def _interval_text(self) -> str:
        i = self.interval
        return f"{i.low:.3f}-{i.high:.3f} ({i.method})" if i.has_interval else i.method

    def _step_rows(self) -> list[list[str]]:
        rows = []
        for j in range(self.steps):
            c = self.per_step_acceptance[j]
            row = [str(j + 1), "-" if c is None else f"{c:.3f}", f"{self.accept_length_by_steps[j]:.3f}"]
            if self.expected_acceptance is not None:
                e = self.expected_acceptance[j]
                row.append("-" if e is None else f"{e:.3f}")
            rows.append(row)
        return rows

    def _step_headers(self) -> list[str]:
        h = ["step j", "P(accept j | 1..j-1)", "accept length at K = j"]
        return h + (["expected acceptance"] if self.expected_acceptance is not None else [])

    def __str__(self) -> str:
        return (kv_text(self._pairs(), title="Measured accept length") + "\n\n"
                + text_table(self._step_headers(), self._step_rows(), align=["right"] * len(self._step_headers())))

    def _repr_html_(self) -> str:
        return ("<div>" + kv_html(self._pairs(), caption="Measured accept length")
                + html_table(self._step_headers(), self._step_rows(), align=["right"] * len(self._step_headers()))
                + "</div>")


def _null_nan(value):
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _null_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_null_nan(v) for v in value]
    return value


register(AcceptanceResult, Interval)


def _local_target(name: str, dump: Path) -> str | None:
    """The dump manifest's target as a folder here, if it is one: an absolute path, or a relative one read from
    the dump folder or one of the three folders above it (a dump written beside its target, as the demo world's
    are: ``hidden-states/k25`` beside ``targets/k25``)."""
    path = Path(name).expanduser()
    for cand in ([path] if path.is_absolute() else [*(base / path for base in [dump, *dump.parents[:3]]), path]):
        if cand.is_dir():
            return str(cand)
    return None
