"""Measure a drafter's accept length offline, against a target's greedy continuations.

The convention (vLLM's "mean acceptance length"; docs/acceptance.md):

* The target generates its greedy continuation of each prompt. The first generated token comes from
  prefill and opens no cycle. A cycle at base ``t`` (last known token ``x_{t+1}``) drafts ``K`` tokens
  (chain, top-1), accepts the ``m(t)`` leading ones equal to the target's next tokens, plus one bonus
  token; the next cycle starts at ``t + m(t) + 1``; the last cycle is capped at max_new_tokens.
* ``accept_length = generated tokens (prefill token excluded) / cycles = 1 + accepted / drafts``.
  SGLang's benchmark clients count the prefill token too (``accept_length_prefill_included``).
* ``per_step_acceptance[j-1]`` = P(step j accepted | steps 1..j-1 accepted), over every position of the
  continuation where step j has a target token to compare with; None where nothing conditions it.
* ``accept_length_by_steps[k-1]``: the same simulation with ``K = k``, from the same match counts.
* temperature > 0 adds ``expected_acceptance[j-1]``: the mean over positions whose steps 1..j-1 matched
  of ``sum_v min(p(v), q(v))`` (Leviathan et al. 2023, arXiv 2211.17192), p the target's and q the
  draft's softmax at that temperature, q mapped to target ids through d2t; and ``expected_accept_length``:
  the same cycles as the greedy figure, each step accepted with that probability at its position
  (:func:`expected_cycles`), so the two compare (at T -> 0 they are equal).

Drafting runs all positions of a sequence at once (one pass per chain step, the training-time-test
mask; :meth:`~eaglekit.analysis.draft.DraftModel.draft`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.configs.layers import AuxConvention, other_convention
from eaglekit.core.records import register
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.uncertainty import Interval, bootstrap_ratio, verdict
from eaglekit.core.speedup.specmath import Estimate, Scenario, estimate
from eaglekit.analysis.acceptance.notes import (collapse_note, embeddings_note, generation_limit_note,
                                                unknown_tokens_note)
from eaglekit.io.cache import Cached, cached_call
from eaglekit.core.acceptance.prompts import Prompt

Source = Literal["target", "hidden-states"]
#: the estimator of every accept length measured on the target's own continuations
CYCLE_SIMULATION = "cycle simulation (every draft compared with the target's continuation)"


def match_lengths(drafts, expected):
    """Leading draft tokens equal to the expected ones: drafts, expected (K, B) -> (B,) int64.

    ``expected`` holds -1 where no target token exists (never matches)."""
    import torch

    eq = (drafts == expected) & (expected >= 0)
    return torch.cumprod(eq.to(torch.int64), 0).sum(0)


def expected_cycles(accept: np.ndarray, generated: int, steps: int) -> float:
    """Expected cycles to emit ``generated`` tokens when the cycle at continuation offset ``i`` accepts its
    draft step ``j`` with probability ``accept[j-1, i]`` once steps 1..j-1 were accepted (then the bonus
    token): the sampling counterpart of :func:`simulate_cycles`, on the same cycle basis.

    ``accept`` (K, G) holds sum_v min(p(v), q(v)) along the target's greedy continuation (0 where the greedy
    draft left it); with one-hot p and q it is the greedy match indicator and the result is exactly
    ``simulate_cycles``. Solved backwards, without sampling: ``C[i] = 1 + sum_a P_i(a) C[i + a + 1]``,
    ``C[i >= G] = 0``."""
    return expected_counts(accept, generated, steps)[1]


def expected_counts(accept: np.ndarray, generated: int, steps: int, *, open_end: bool = False,
                    open_start: bool = False) -> tuple[float, float]:
    """(expected tokens, expected cycles) of :func:`counted_cycles` when each draft step is accepted with
    probability ``accept[j-1, i]`` (see :func:`expected_cycles`), solved backwards: ``C[i] = 1 + sum_a P_i(a)
    C[i + a + 1]``, ``N[i] = sum_a P_i(a) (emitted + N[i + a + 1])``. A continuation that runs to its end emits
    all ``generated`` tokens (its last cycle capped); an ``open_end`` one counts only the cycles that start where
    ``i + K <= G``; an ``open_start`` one leaves its first cycle out."""
    G = int(generated)
    if G == 0:
        return 0.0, 0.0
    a = np.clip(np.asarray(accept, dtype=np.float64)[:steps, :G], 0.0, 1.0)   # (K, G)
    reach = np.vstack([np.ones((1, G)), np.cumprod(a, axis=0)])              # (K + 1, G): steps 1..j accepted
    exactly = reach.copy()
    exactly[:-1] -= reach[1:]                                                # (K + 1, G): P(a = j), j = 0..K
    cycles, tokens = np.zeros(G + steps + 2), np.zeros(G + steps + 2)
    accepted = np.arange(steps + 1)
    last = G - steps if open_end else G - 1
    if last < 0:
        return 0.0, 0.0
    for i in range(last, -1, -1):
        p = exactly[:, i]
        emitted = accepted + 1 if open_end else np.minimum(accepted, G - i - 1) + 1
        cycles[i] = 1.0 + float(p @ cycles[i + 1:i + steps + 2])
        tokens[i] = float(p @ (emitted + tokens[i + 1:i + steps + 2]))
    if open_start:  # the first cycle left out: what follows it, in expectation over its outcome
        p = exactly[:, 0]
        return float(p @ tokens[1:steps + 2]), float(p @ cycles[1:steps + 2])
    return float(tokens[0]), float(cycles[0])


def counted_cycles(s: SampleStats, steps: int) -> list[int]:
    """Drafts accepted in each cycle of one continuation that the accept length counts (what vLLM counts per
    draft).

    A continuation that runs to its end (a prompt's greedy continuation, or a span of training text that ends
    where its sample or assistant turn ends) is simulated to its end, the last cycle capped
    (:func:`simulate_cycles`): every generated token counts. A span of training text that stops where the text departs from the target's
    choice (``open_end``: serving would have gone on) counts only the cycles whose K drafts all have a token
    to compare with (offset ``i + K <= G``), with all the tokens they emit: which cycles count is decided by
    where a cycle starts, before its outcome is seen, so the cut adds no bias (Wald's identity), where capping
    the span's last cycle would count a short cycle for every span. A span that starts right after such a
    departure (``open_start``) leaves its first cycle out: it drafts from a context the target would not have
    written, which serving never does."""
    out, i, G = [], 0, s.generated
    first = True
    while (i + steps <= G) if s.open_end else (i < G):
        a = min(int(s.matches[i]), steps) if s.open_end else min(int(s.matches[i]), steps, G - i - 1)
        if not (first and s.open_start):
            out.append(a)
        first = False
        i += a + 1
    return out


def cycle_counts(s: SampleStats, steps: int) -> tuple[int, int]:
    """(tokens, cycles) that the counted cycles of one continuation emit and take (:func:`counted_cycles`)."""
    if not s.open_end and not s.open_start:
        return s.generated, simulate_cycles(s.matches, s.generated, steps)
    accepted = counted_cycles(s, steps)
    return sum(accepted) + len(accepted), len(accepted)


def simulate_cycles(matches: np.ndarray, generated: int, steps: int) -> int:
    """Cycles to emit ``generated`` tokens (prefill token excluded) when a cycle at continuation offset
    ``i`` accepts ``min(matches[i], steps)`` drafts plus one bonus token; the last cycle is capped."""
    i = cycles = 0
    while i < generated:
        i += min(int(matches[i]), steps) + 1
        cycles += 1
    return cycles


@dataclass(frozen=True)
class SampleStats:
    """One prompt's counts: matches at each continuation offset, tokens generated after prefill,
    per-step [conditioned, accepted] counts, and the expected-acceptance sums at temperature > 0."""

    matches: np.ndarray         # (G,) leading matches from base P-1+i
    generated: int              # G
    conditioned: np.ndarray     # (K,) bases where step j was reached with a token to compare
    accepted: np.ndarray        # (K,)
    soft_sum: np.ndarray | None = None   # (K,) sum over conditioned bases of sum_v min(p, q)
    soft: np.ndarray | None = None       # (K, G) sum_v min(p, q) at each base (0 where not reached)
    #: a span of training text, not a whole continuation: it stops where the text departs from the target's
    #: choice (``open_end``) or starts right after such a departure (``open_start``): see :func:`counted_cycles`
    open_end: bool = False
    open_start: bool = False
    #: the base of its first cycle, a position of its sample (a span of training text; 0 elsewhere)
    base: int = 0


def count_drafts(drafts, bases, target_ids, last: int, steps: int, *, temperature: float = 0.0,
                 target_probs=None, draft_logits=None) -> SampleStats:
    """Count chain drafts against the target: ``drafts`` (K, G) drafted from ``bases`` (G,), step j from base
    t compared with ``target_ids[t + j]`` wherever ``t + j <= last``. At temperature > 0,
    ``target_probs(positions)`` gives the target's probabilities on the draft vocabulary's target ids (n, N) at
    those positions and ``draft_logits(s, sel)`` the drafter's step-s logits (n, N) from the bases ``sel``."""
    import torch

    G = int(bases.shape[0])
    j = torch.arange(1, steps + 1)[:, None]
    idx = bases[None, :] + j                                            # (K, G): t + j
    tgt = target_ids.cpu().to(torch.int64)
    avail = idx <= last                                                 # a target token to compare with
    expected = torch.where(avail, tgt[idx.clamp(max=len(tgt) - 1)], torch.full_like(idx, -1))
    m = match_lengths(drafts, expected)                                 # (G,)
    reached = (m[None, :] >= j - 1) & avail                             # steps 1..j-1 matched, j comparable
    conditioned = reached.sum(1).numpy()
    accepted = ((m[None, :] >= j) & avail).sum(1).numpy()
    soft = by_base = None
    if temperature > 0:
        by_base = np.zeros((steps, G))                                  # per base, 0 where not reached
        for s in range(steps):
            sel = reached[s].nonzero().flatten()
            if len(sel):
                p = target_probs(idx[s, sel])                           # (n, N)
                q = torch.softmax(draft_logits(s, sel).float().cpu() / temperature, -1)
                by_base[s, sel.numpy()] = torch.minimum(p, q).sum(-1).double().numpy()
        soft = by_base.sum(1)                                           # (K,)
    return SampleStats(m.numpy(), G, conditioned, accepted, soft, by_base)


def sample_stats(drafter, aux, input_ids, target_ids, prompt_len: int, *, steps: int, temperature: float = 0.0,
                 target_logits=None) -> SampleStats:
    """Draft every continuation position of one sequence and count matches (torch in, numpy out)."""
    import torch

    T = int(input_ids.shape[0])
    P = int(prompt_len)
    G = max(T - P - 1, 0)
    if G == 0:
        z = np.zeros(steps, np.int64)
        return SampleStats(np.zeros(0, np.int64), 0, z, z.copy(), np.zeros(steps) if temperature > 0 else None,
                           np.zeros((steps, 0)) if temperature > 0 else None)
    h = drafter.project(aux)                                            # (T, H)
    out = drafter.draft(h[:T - 1], input_ids[1:], steps, start=P - 1, return_logits=temperature > 0)
    tids = drafter.draft_to_target.cpu()

    def target_probs(positions):
        return torch.softmax(target_logits[positions].float() / temperature, -1)[:, tids]

    return count_drafts(out.tokens[:, :G].cpu(), torch.arange(P - 1, P - 1 + G), target_ids, T - 2, steps,
                        temperature=temperature, target_probs=target_probs,
                        draft_logits=lambda s, sel: out.logits[s][sel])


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
            notes=self.notes + (f"read at K = {k} from a measurement drafted to K = {self.steps} (the same cycles "
                                f"simulated with K = {k}).",))

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
            pairs.insert(4, ("  the authors' figure", f"{self.accept_length_authors:.3f} (mean over prompts of each "
                             f"prompt's mean tokens per cycle; {self.family}, block size {self.block_size})"))
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


def accept_length_gain(before: AcceptanceResult, after: AcceptanceResult, *, seed: int = 0) -> Interval:
    """``after``'s accept length minus ``before``'s, measured on the same prompts at the same K (a re-mapped drafter
    against the original, a fine-tune against its start): a paired bootstrap over the prompts, so a gain reads
    against its own noise. :func:`~eaglekit.core.uncertainty.verdict` against 0 says whether it helps."""
    from eaglekit.core.uncertainty import bootstrap_difference

    for name, r in (("before", before), ("after", after)):
        if not r.prompt_counts:
            raise InputError(f"the {name} result holds no per-prompt counts (read from a file or another tool): "
                             "measure both with eaglekit acceptance to compare them prompt by prompt")
    if len(before.prompt_counts) != len(after.prompt_counts) or before.steps != after.steps:
        raise InputError(f"the two results were measured on {len(before.prompt_counts)} and "
                         f"{len(after.prompt_counts)} prompts at K = {before.steps} and {after.steps}: a paired "
                         "comparison needs the same prompts at the same K")
    return bootstrap_difference(before.prompt_counts, after.prompt_counts, seed=seed)


register(AcceptanceResult, Interval)


def _null_nan(value):
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _null_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_null_nan(v) for v in value]
    return value


def summarise(stats: Sequence[SampleStats], *, steps: int, seed: int = 0, groups: Sequence[Any] | None = None,
              unit: str = "prompts") -> dict[str, Any]:
    """Pool per-continuation counts into the accept-length figures (cycles counted by :func:`cycle_counts`).

    ``groups``: the request each continuation belongs to (the spans of one training sample are one request);
    default: each is its own. Per-request figures and the interval (a bootstrap that resamples requests,
    pooled as the figure is) are by request."""
    keys = list(range(len(stats))) if groups is None else list(groups)
    if len(keys) != len(stats):
        raise InputError("summarise: one group per continuation.")

    def pooled(k: int) -> tuple[list[int], list[int]]:
        """Tokens and cycles per request at K = k."""
        tok: dict[Any, int] = {}
        cyc: dict[Any, int] = {}
        for key, st in zip(keys, stats):
            t, c = cycle_counts(st, k)
            tok[key] = tok.get(key, 0) + t
            cyc[key] = cyc.get(key, 0) + c
        return list(tok.values()), list(cyc.values())

    def ratio(tok, cyc) -> float:
        return sum(tok) / sum(cyc) if sum(cyc) else float("nan")

    def interval(tok, cyc) -> Interval | None:
        return bootstrap_ratio(tok, cyc, seed=seed, unit=unit) if sum(cyc) else None

    by_k = [pooled(k) for k in range(1, steps + 1)]
    tokens, cycles = by_k[-1]
    cond = np.sum([s.conditioned for s in stats], axis=0)
    acc = np.sum([s.accepted for s in stats], axis=0)
    per_step = tuple(float(a / c) if c else None for a, c in zip(acc, cond))
    per_prompt = tuple((t / c) if c else None for t, c in zip(tokens, cycles))
    expected = expected_length = None
    if stats and stats[0].soft_sum is not None:
        soft = np.sum([s.soft_sum for s in stats], axis=0)
        expected = tuple(float(x / c) if c else None for x, c in zip(soft, cond))
        e = [expected_counts(s.soft, s.generated, steps, open_end=s.open_end, open_start=s.open_start)
             for s in stats]
        e_cycles = sum(c for _, c in e)
        expected_length = sum(t for t, _ in e) / e_cycles if e_cycles else float("nan")
    return {"generated_tokens": sum(tokens), "cycles": sum(cycles), "expected_accept_length": expected_length,
            "accept_length": ratio(tokens, cycles),
            "per_step_acceptance": per_step, "accept_length_by_steps": tuple(ratio(*p) for p in by_k),
            "per_step_counts": tuple(int(c) for c in np.atleast_1d(cond)),
            "per_prompt_accept_length": per_prompt, "expected_acceptance": expected,
            "interval": interval(tokens, cycles), "interval_by_steps": tuple(interval(*p) for p in by_k),
            "requests": len(tokens), "prompt_counts": tuple(zip(tokens, cycles)), "positions": int(sum(s.generated for s in stats))}


# -- the measurement ----------------------------------------------------------------------------------
def measure_acceptance(drafter, *, target=None, hidden_states=None, prompts=None, max_new_tokens: int = 64,
                       steps: int | None = None, temperature: float = 0.0, aux_convention: AuxConvention | None = None,
                       device: str = "cpu", dtype: str = "float32", embeddings=None,
                       endpoint: str | None = None, timeout: float | None = None, progress: bool | None = None,
                       keep_samples: bool = False, trust_remote_code: bool = False,
                       on_sample=None, cache: bool | str = True, cache_dir=None) -> AcceptanceResult:
    """Measure ``drafter`` (a location or a loaded :class:`~eaglekit.analysis.draft.DraftModel`)
    against ``target`` (a location transformers loads, or a loaded
    :class:`~eaglekit.analysis.acceptance.target.TargetModel`) on ``prompts`` (a JSONL path, or parsed
    prompts), or against a hidden-state dump folder ``hidden_states``; exactly one of the two.

    ``aux_convention`` (``"outputs"`` | ``"inputs"``): how the drafter's aux ids select target hidden
    states; default: what it was trained with. The other reading is measured too when the features allow.
    ``trust_remote_code``: let a target folder's own Python run (its ``auto_map``); never on by default.
    ``on_sample(model, aux, input_ids, target_ids, prompt_len, logits)``: called for every measured sample
    with the primary reading's features (tree drafts measure there: :mod:`~eaglekit.analysis.acceptance.trees`).

    ``cache``: the answer is kept in the result cache (:mod:`eaglekit.io.cache`, ``cache_dir`` or its default)
    keyed by the content of the drafter, target, prompts or dump and every option here, and read back on a repeat
    (``result.cached`` says when it was computed); ``False`` neither reads nor writes, ``"refresh"`` recomputes and
    writes. Loaded models, remote locations, ``keep_samples`` and ``on_sample`` are measured and not cached.
    """
    options = dict(target=target, hidden_states=hidden_states, prompts=prompts, max_new_tokens=max_new_tokens,
                   steps=steps, temperature=temperature, aux_convention=aux_convention, device=device, dtype=dtype,
                   embeddings=embeddings, endpoint=endpoint, timeout=timeout, progress=progress,
                   keep_samples=keep_samples, trust_remote_code=trust_remote_code, on_sample=on_sample)
    parts = None
    if not keep_samples and on_sample is None:
        def parts(store):
            return acceptance_key_parts(store, drafter, options)
    return cached_call("acceptance", ACCEPTANCE_CODE_VERSION, parts,
                       lambda: _measure_acceptance(drafter, **options), cache=cache, cache_dir=cache_dir,
                       stamp=with_cached)


def with_cached(value, cached: Cached):
    """``value`` (an :class:`AcceptanceResult`, or a record holding one as ``.result``: a dump's, a tree run's)
    marked as read from the result cache: its text, HTML and JSON then say so, and when it was computed."""
    if isinstance(value, AcceptanceResult):
        return replace(value, cached=cached)
    return replace(value, result=with_cached(value.result, cached))


#: the version of the accept-length code a cached answer was computed by: bump it with any change to what
#: :func:`measure_acceptance` (or the drafter forward it runs) computes
ACCEPTANCE_CODE_VERSION = 1


def acceptance_key_parts(store, drafter, options: dict[str, Any]) -> dict[str, Any]:
    """The parts of a cache key that say what :func:`measure_acceptance` measures, by content (raises the store's
    not-keyable error for a loaded drafter, a remote location or prompts it cannot read)."""
    options = {**_MEASURE_DEFAULTS, **options}
    target = options["target"]
    loaded = f"{options['device']}:{options['dtype']}:{bool(options['trust_remote_code'])}"  # as load_target_model
    if target is not None and not isinstance(target, (str, os.PathLike)):
        from eaglekit.analysis.acceptance.target import TargetModel
    if target is not None and not isinstance(target, (str, os.PathLike)) and isinstance(target, TargetModel):
        if target.location is None:
            return store.location_digest(target)  # not keyable: raises
        target, loaded = target.location, target.loaded_as
    prompts = options["prompts"]
    if prompts is not None and not isinstance(prompts, (str, os.PathLike)):
        prompts = [asdict(p) if isinstance(p, Prompt) else p for p in prompts]
    elif prompts is not None:
        prompts = store.location_digest(prompts)
    skip = {"target", "prompts", "endpoint", "timeout", "progress", "on_sample", "keep_samples", "hidden_states",
            "embeddings"}
    return {
        "drafter": store.location_digest(drafter),
        "target": None if target is None else store.location_digest(target),
        "hidden_states": None if options["hidden_states"] is None else store.location_digest(options["hidden_states"]),
        "embeddings": None if options["embeddings"] is None else store.location_digest(options["embeddings"]),
        "prompts": prompts, "target_loaded_as": loaded,
        **{k: v for k, v in options.items() if k not in skip},
    }


def _measure_defaults() -> dict[str, Any]:
    import inspect

    return {n: p.default for n, p in inspect.signature(_measure_acceptance).parameters.items() if n != "drafter"}


def _measure_acceptance(drafter, *, target=None, hidden_states=None, prompts=None, max_new_tokens: int = 64,
                        steps: int | None = None, temperature: float = 0.0, aux_convention: AuxConvention | None = None,
                        device: str = "cpu", dtype: str = "float32", embeddings=None,
                        endpoint: str | None = None, timeout: float | None = None, progress: bool | None = None,
                        keep_samples: bool = False, trust_remote_code: bool = False,
                        on_sample=None) -> AcceptanceResult:
    """The measurement itself (:func:`measure_acceptance`, uncached). ``steps`` None: 5, or a block drafter's
    block_size - 1."""
    if _is_block_drafter(drafter):  # DFlash and its kin draft whole blocks: their own measurement
        from eaglekit.analysis.acceptance.block import measure_block

        return measure_block(drafter, target=target, hidden_states=hidden_states, prompts=prompts,
                             max_new_tokens=max_new_tokens, steps=steps, temperature=temperature,
                             aux_convention=aux_convention, device=device, dtype=dtype, embeddings=embeddings,
                             endpoint=endpoint, timeout=timeout, progress=progress, keep_samples=keep_samples,
                             trust_remote_code=trust_remote_code, on_sample=on_sample)
    steps = 5 if steps is None else steps
    # torch and the models load here, not at import: a cached answer is read without them
    from eaglekit.analysis.draft import DraftModel, trained_convention
    from eaglekit.analysis.acceptance.target import TargetModel, load_target_model, read_prompts
    from eaglekit.io.dumps.native import HiddenStateDump, open_dump
    import torch
    from tqdm.auto import tqdm


    if (target is None) == (hidden_states is None):
        raise InputError("give exactly one of target (a model transformers loads) or hidden_states (a dump folder).")
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= 64:
        raise InputError(f"steps must be an integer from 1 to 64, got {steps!r}.")
    if (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
            or not math.isfinite(temperature) or temperature < 0):
        raise InputError(f"temperature must be a finite number >= 0 (0 is greedy), got {temperature!r}.")
    if aux_convention not in (None, "inputs", "outputs"):
        raise InputError(f"aux convention must be 'outputs' or 'inputs', got {aux_convention!r}.")
    torch.manual_seed(0)

    if target is not None:

        if prompts is None:
            raise InputError("measuring against a target needs prompts (a JSONL file).")
        tmodel = target if isinstance(target, TargetModel) else load_target_model(
            target, device=device, dtype=dtype, trust_remote_code=trust_remote_code)
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}.")
        model = drafter if isinstance(drafter, DraftModel) else DraftModel.load(
            drafter, embed=tmodel.embedding().float().cpu(), device=device, dtype=dtype, endpoint=endpoint, timeout=timeout)
        num_layers, hidden, vocab, tname = tmodel.num_hidden_layers, tmodel.hidden_size, tmodel.vocab_size, tmodel.name
    else:

        dump = hidden_states if isinstance(hidden_states, HiddenStateDump) else open_dump(hidden_states)
        m = dump.manifest
        num_layers, hidden, vocab, tname = m.num_hidden_layers, m.hidden_size, m.vocab_size, m.target or str(dump.path)
        if temperature > 0:
            raise InputError("temperature > 0 needs the target's full next-token distribution, which dumps do not "
                             "hold; measure with --target, or at temperature 0.")
        if isinstance(drafter, DraftModel):
            model = drafter
        else:
            emb = embeddings
            if emb is None and m.target:
                emb = _local_target(m.target, Path(dump.path))
            model = DraftModel.load(drafter, embeddings=emb, device=device, dtype=dtype, endpoint=endpoint, timeout=timeout)
    _check_fit(model, hidden=hidden, vocab=vocab, target=tname)
    primary = aux_convention or trained_convention(model.config, model.layout)
    conventions = (primary, other_convention(primary))
    indices = {c: model.aux_indices(c, num_layers) for c in conventions}

    notes: list[str] = []
    skipped: list[int] = []
    if target is not None:

        if isinstance(prompts, (str, os.PathLike)):
            plist, psource = read_prompts(prompts)
        else:
            plist, psource = tuple(prompts), "prompts"
            if not all(isinstance(p, Prompt) for p in plist):
                raise InputError("prompts must be a JSONL path or Prompt records (eaglekit.core.acceptance.prompts).")
        layers = sorted(set(indices[conventions[0]]) | set(indices[conventions[1]]))
        ids_list = tmodel.tokenize_all(plist, source=psource, max_new_tokens=max_new_tokens)
        notes.extend(filter(None, [unknown_tokens_note(*tmodel.unknown_tokens(plist, ids_list), target=tname)]))

        def samples():
            for p, ids in zip(plist, ids_list):
                s = tmodel.run(ids, max_new_tokens=max_new_tokens, layers=layers, keep_logits=temperature > 0,
                               where=f"{psource} line {p.line}")
                yield s.input_ids, s.hidden_states, s.target_ids, s.prompt_len, s.logits
        total = len(plist)
        sha = tmodel.chat_template_sha256 if any(p.kind == "messages" for p in plist) else None
        available = {c: True for c in conventions}
    else:
        layers = list(dump.layers)
        missing = [k for k in indices[primary] if k not in layers]
        if missing:
            raise InputError(
                f"{dump.path} holds hidden states {layers} (output_hidden_states indices) but the drafter reads "
                f"{list(indices[primary])} ({primary} convention): the dump is from other layers. Re-dump with "
                f"`eaglekit dump-hidden ... --for-drafter DRAFTER`, or pick --aux-convention.")
        available = {c: all(k in layers for k in indices[c]) for c in conventions}
        if embeddings is not None and 0 not in layers:  # else compared with hidden_states[0] below
            notes.extend(filter(None, [embeddings_note(embeddings, m.target)]))
        if not available[conventions[1]]:
            notes.append(f"the dump lacks the hidden states the {conventions[1]} reading needs "
                         f"({list(indices[conventions[1]])}); that comparison is not available.")

        def samples():
            for s in dump:
                bad = ~np.isfinite(s.hidden_states).all(axis=(0, 2))   # NaN/Inf positions: skipped and counted
                if bad.any():
                    skipped.append(int(bad.sum()))
                    continue
                yield (torch.as_tensor(np.array(s.input_ids)), torch.as_tensor(np.array(s.hidden_states)),
                       torch.as_tensor(np.array(s.target_ids)), s.prompt_len, None)
        total, sha = len(dump), m.chat_template_sha256

    stats: dict[str, list[SampleStats]] = {c: [] for c in conventions if available[c]}
    kept: list[tuple[np.ndarray, np.ndarray]] = []
    pos = {k: i for i, k in enumerate(layers)}
    check_embeddings = target is None and embeddings is not None and 0 in pos
    for ids, hs, tgt, plen, logits in tqdm(samples(), total=total, desc="acceptance", unit="prompt",
                                            disable=None if progress is None else not progress, leave=False):
        if int(ids.max()) >= model.embed.shape[0]:
            raise VocabMapError(f"token id {int(ids.max())} is outside the drafter's vocabulary "
                                f"(0..{model.embed.shape[0] - 1}): vocabulary mismatch with {tname}.")
        if check_embeddings:  # the given embeddings of the dump's tokens against its hidden_states[0]
            e = model.embed(ids, device=torch.device("cpu"), dtype=torch.float32)   # (T, H)
            cos = float(torch.nn.functional.cosine_similarity(e, hs[pos[0]].float(), dim=-1).mean())
            notes.extend(filter(None, [embeddings_note(embeddings, m.target, cosine=cos)]))
            check_embeddings = False
        for c in stats:
            aux = hs[[pos[k] for k in indices[c]]]
            stats[c].append(sample_stats(model, aux, ids, tgt, plen, steps=steps,
                                         temperature=temperature if c == primary else 0.0, target_logits=logits))
        if on_sample is not None:
            on_sample(model, hs[[pos[k] for k in indices[primary]]], ids, tgt, plen, logits)
        if keep_samples:
            kept.append((np.asarray(ids[plen:].cpu()), stats[primary][-1].matches))
    if skipped:  # never a silent figure: SpecForge skips such samples too, and says so
        if not stats[primary]:
            raise InputError(f"every sample of {tname} holds NaN/Inf hidden states ({sum(skipped)} positions); "
                             "nothing to measure.")
        notes.append(f"{len(skipped)} of {total} samples skipped: {sum(skipped)} positions hold NaN/Inf hidden states.")
        total -= len(skipped)
    main = summarise(stats[primary], steps=steps)
    notes.extend(filter(None, [collapse_note(main["per_step_acceptance"], counts=main["per_step_counts"]),
                               generation_limit_note([st.generated for st in stats[primary]], steps)]))
    summaries = {c: summarise(stats[c], steps=steps) for c in conventions if c in stats}
    by_conv = {c: (summaries[c]["accept_length"] if c in summaries else None) for c in conventions}
    by_conv_k = {c: (tuple(summaries[c]["accept_length_by_steps"]) if c in summaries else None) for c in conventions}
    return AcceptanceResult(
        drafter=model.source, target=tname, source="target" if target is not None else "hidden-states",
        steps=steps, temperature=float(temperature), prompts=total, generated_tokens=main["generated_tokens"],
        cycles=main["cycles"], accept_length=main["accept_length"],
        per_step_acceptance=main["per_step_acceptance"], accept_length_by_steps=main["accept_length_by_steps"],
        aux_convention=primary, aux_indices=tuple(indices[primary]), accept_length_by_convention=by_conv,
        per_prompt_accept_length=main["per_prompt_accept_length"], expected_acceptance=main["expected_acceptance"],
        expected_accept_length=main["expected_accept_length"], accept_length_interval=main["interval"],
        accept_length_by_steps_interval=main["interval_by_steps"], chat_template_sha256=sha, positions=main["positions"], notes=tuple(notes + list(getattr(model, "vocab_notes", ()))),
        prompt_counts=main["prompt_counts"], samples=tuple(kept), accept_length_by_convention_by_steps=by_conv_k)


_MEASURE_DEFAULTS = _measure_defaults()


def _is_block_drafter(drafter) -> bool:
    """Whether ``drafter`` is a block drafter (DFlash, DFlash2, DSpark): a loaded one, or a local folder whose
    config.json declares one (:func:`~eaglekit.core.configs.block.block_family`)."""
    from eaglekit.core.configs.block import block_family
    from eaglekit.core.errors import ConfigError
    from eaglekit.core.safejson import loads

    if type(drafter).__name__ == "DFlashDrafter":
        return True
    if not isinstance(drafter, (str, os.PathLike)):
        return False
    config = Path(drafter).expanduser() / "config.json"
    if not config.is_file() or config.stat().st_size > 16 << 20:
        return False
    try:
        return block_family(loads(config.read_bytes(), what=str(config), error=ConfigError)) is not None
    except ConfigError:
        return False  # the drafter's own loader says what is wrong with it


def _local_target(name: str, dump: Path) -> str | None:
    """The dump manifest's target as a folder here, if it is one: an absolute path, or a relative one read from
    the dump folder or one of the three folders above it (a dump written beside its target, as the demo world's
    are: ``hidden-states/k25`` beside ``targets/k25``)."""
    path = Path(name).expanduser()
    for cand in ([path] if path.is_absolute() else [*(base / path for base in [dump, *dump.parents[:3]]), path]):
        if cand.is_dir():
            return str(cand)
    return None


def _check_fit(model, *, hidden: int, vocab: int, target: str) -> None:
    if model.target_hidden_size != hidden:
        raise InputError(f"hidden-size mismatch: the drafter reads target hidden states of size "
                         f"{model.target_hidden_size}, {target} has {hidden}.")
    if model.config.vocab_size != vocab:
        raise VocabMapError(f"vocabulary mismatch: the drafter's config says the target vocabulary has "
                            f"{model.config.vocab_size} tokens, {target} has {vocab}.")
    if int(model.draft_to_target.max()) >= vocab:
        raise VocabMapError(f"vocabulary mismatch: the drafter's d2t maps to target id "
                            f"{int(model.draft_to_target.max())}, beyond {target}'s {vocab} tokens.")
