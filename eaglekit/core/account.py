"""One throughput account of a speculative-decoding deployment, told the same way on every page.

Two models of the draft-verify cycle meet in practice, and they disagree unless both are stated:

- **verify only**: the cycle is the target's verify time, drafting counted free and the chain
  unbounded. The seed account's arithmetic is this model: 30 ms x 82 tok/s = break-even 2.46,
  150 tok/s needs 4.5, 200 tok/s needs 6.0.
- **measured**: the cycle is what the measured throughput implies, accept length / speculative
  tok/s (2.0 / 60 tok/s = 33.3 ms). What exceeds the verify time is drafting and per-cycle
  overhead: with the deployment's k draft steps, (33.3 - 30) / 2 = 1.67 ms per step. Here
  break-even is 2.73, and k steps emit at most k + 1 tokens per cycle.

:class:`Account` holds both, with what each target throughput needs at the deployment's steps
(:class:`Reach`: reachable or not, what draft cost or how many steps would reach it, or that none
can) and what an expected accept length would give (:class:`Projection`). The notebooks, the
conclusion of the investigation and ``eaglekit speedup --spec-tps`` all render this one record.
Arithmetic: :mod:`eaglekit.core.specmath` (Leviathan et al. 2023; accept length counts the bonus token).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from eaglekit.core.errors import InputError
from eaglekit.core.render import kv_html
from eaglekit.core.specmath import (
    Reach,
    Scenario,
    alpha_for_accept_length,
    break_even_accept_length,
    check_accept_length,
    check_steps,
    fit_from_measurements,
    needed_accept_length,
    reach,
    throughput,
)

__all__ = ["Account", "Projection"]


@dataclass(frozen=True)
class Projection:
    """Throughput an expected accept length gives at the fewest steps that allow it (at least the deployment's)."""

    accept_length: float
    steps: int
    cycle_ms: float
    tokens_per_s: float
    speedup: float

    def sentence(self, account: Account) -> str:
        word = "faster" if self.speedup > 1 else "slower"
        more = "" if self.steps == account.steps else f" needs at least {self.steps} draft steps; there it"
        return (f"Accept length {self.accept_length:g}{more} gives {self.tokens_per_s:.0f} tok/s at k = {self.steps} "
                f"(cycle {self.cycle_ms:.1f} ms = verify {account.verify_ms:g} + {self.steps} x "
                f"{account.draft_ms:.2f} ms drafting{account._overhead_words()}), {abs(self.speedup - 1):.0%} {word} "
                f"than {account.baseline_tps:g} tok/s without speculation.")


@dataclass(frozen=True)
class Account:
    """The throughput account of one deployment: the verify-only arithmetic beside the cycle the measurement
    implies, what each target needs at the deployment's steps, and what expected accept lengths give.

    ``draft_ms`` is per draft step: derived from the measurement ((cycle - verify) / steps, any other
    per-cycle cost included) unless given, in which case the rest is ``overhead_ms``.
    """

    baseline_tps: float
    verify_ms: float
    steps: int
    accept_length: float  # measured
    spec_tps: float  # measured
    draft_ms: float
    overhead_ms: float
    targets: tuple[Reach, ...]
    projections: tuple[Projection, ...]

    @classmethod
    def from_measurements(cls, baseline_tps: float, spec_tps: float, accept_length: float, *, verify_ms: float,
                          steps: int, draft_ms: float | None = None, targets: Sequence[float] = (),
                          expected: Sequence[float] = ()) -> Account:
        """The account of a deployment measured at ``spec_tps`` with accept length ``accept_length`` and
        ``steps`` draft steps, against ``baseline_tps`` without speculation and ``verify_ms`` per verify."""
        k = check_steps(steps)
        if k is None:
            raise InputError("the account needs the deployment's draft steps k (num_speculative_tokens): "
                             "it splits the measured cycle into verify and k draft steps")
        fit = fit_from_measurements(baseline_tps, spec_tps, accept_length, verify_ms=verify_ms, steps=k)
        rest = fit.cycle_ms - verify_ms
        if rest < -1e-9:
            raise InputError(
                f"{spec_tps:g} tok/s at accept length {accept_length:g} implies a {fit.cycle_ms:.2f} ms cycle, shorter "
                f"than the {verify_ms:g} ms verify alone: check the verify time and the measured throughput")
        if draft_ms is None:
            draft, overhead = max(rest, 0.0) / k, 0.0
        else:
            draft = float(draft_ms)
            overhead = rest - k * draft
            if overhead < -1e-9:
                raise InputError(
                    f"{k} draft steps of {draft:g} ms do not fit the measured {fit.cycle_ms:.2f} ms cycle (verify "
                    f"{verify_ms:g} ms leaves {rest:.2f} ms): lower the draft time, or leave it out to derive it")
            overhead = max(overhead, 0.0)
        ts = tuple(reach(t, verify_ms=verify_ms, steps=k, draft_ms=draft, overhead_ms=overhead) for t in targets)
        projections = []
        for L in expected:
            L = check_accept_length(L, None)
            m = max(k, math.ceil(L - 1 - 1e-9))
            cycle = verify_ms + overhead + m * draft
            tps = throughput(L, cycle_ms=cycle)
            projections.append(Projection(L, m, cycle, tps, tps / baseline_tps))
        return cls(float(baseline_tps), float(verify_ms), k, fit.accept_length, fit.spec_tps, draft, overhead, ts,
                   tuple(projections))

    @classmethod
    def seed(cls) -> Account:
        """The seed's deployment: 82 tok/s baseline; 60 tok/s (59-61 measured) at accept length 2.0 with 2 draft
        steps; 30 ms verify; targets 150 and 200 tok/s; the public K2 drafter's 3.2-3.5 priced."""
        return cls.from_measurements(82.0, 60.0, 2.0, verify_ms=30.0, steps=2, targets=(150.0, 200.0),
                                     expected=(3.2, 3.5))

    # -- derived -----------------------------------------------------------------------------------

    @property
    def cycle_ms(self) -> float:
        """The measured cycle: accept length / speculative throughput."""
        return self.verify_ms + self.overhead_ms + self.steps * self.draft_ms

    @property
    def scenario(self) -> Scenario:
        """The measured deployment as a :class:`Scenario` (for :func:`~eaglekit.core.specmath.estimate`)."""
        return Scenario(self.baseline_tps, self.verify_ms, draft_ms=self.draft_ms, steps=self.steps,
                        overhead_ms=self.overhead_ms)

    @property
    def break_even(self) -> float:
        """Break-even accept length on the measured cycle."""
        return break_even_accept_length(baseline_tps=self.baseline_tps, cycle_ms=self.cycle_ms)

    @property
    def verify_only_break_even(self) -> float:
        """Break-even accept length on the verify time alone (the seed's 2.46)."""
        return break_even_accept_length(baseline_tps=self.baseline_tps, cycle_ms=self.verify_ms)

    @property
    def ceiling_tps(self) -> float:
        """The most the deployment's k steps can give on the measured cycle: k + 1 tokens per cycle."""
        return (self.steps + 1) * 1000.0 / self.cycle_ms

    def verify_only_needs(self, target_tps: float) -> tuple[float, float]:
        """(accept length, alpha) a target needs in the verify-only model (unbounded chain, drafting free)."""
        need = needed_accept_length(target_tps, cycle_ms=self.verify_ms)
        return need, (0.0 if need <= 1 else alpha_for_accept_length(need))

    def _overhead_words(self) -> str:
        return f" + {self.overhead_ms:.2f} ms overhead" if self.overhead_ms > 0 else ""

    # -- words -------------------------------------------------------------------------------------

    def measured_sentence(self) -> str:
        change = self.spec_tps / self.baseline_tps - 1
        what = "drafting and any other per-cycle cost" if self.overhead_ms == 0 else "drafting"
        extra = self.cycle_ms - self.verify_ms
        return (f"Measured: {self.spec_tps:g} tok/s at accept length {self.accept_length:g} with k = {self.steps} draft "
                f"steps against {self.baseline_tps:g} tok/s without speculation ({change:+.0%}). That is "
                f"{self.cycle_ms:.1f} ms per draft-verify cycle: the {self.verify_ms:g} ms verify plus {extra:.1f} ms "
                f"of {what} ({self.steps} steps of {self.draft_ms:.2f} ms{self._overhead_words()}), so speculation "
                f"pays only above accept length {self.break_even:.2f}.")

    def verify_only_sentence(self) -> str:
        parts = []
        for r in self.targets:
            need, alpha = self.verify_only_needs(r.target_tps)
            parts.append(f"{r.target_tps:g} tok/s needs {need:.1f} ({alpha:.0%} per-token acceptance)")
        needs = ("; " + ", ".join(parts)) if parts else ""
        return (f"The verify-only arithmetic ({self.verify_ms:g} ms per cycle, drafting counted free, no limit on "
                f"steps) gives break-even {self.verify_only_break_even:.2f}{needs}. It leaves out the "
                f"{self.cycle_ms - self.verify_ms:.1f} ms of drafting per cycle and the ceiling of "
                f"{self.steps + 1} tokens per cycle that {self.steps} steps impose (at most {self.ceiling_tps:.0f} "
                "tok/s here), so it understates break-even and makes high targets look reachable.")

    def sentences(self) -> list[str]:
        """The account in sentences: measured cycle, the verify-only figures and why they differ, targets,
        projections."""
        return [self.measured_sentence(), self.verify_only_sentence(), *(r.sentence() for r in self.targets),
                *(p.sentence(self) for p in self.projections)]

    def rows(self) -> list[tuple[str, str]]:
        k, d = self.steps, self.draft_ms
        rows = [
            ("measured", f"{self.spec_tps:g} tok/s at accept length {self.accept_length:g}, k = {k} draft steps "
                         f"(baseline {self.baseline_tps:g} tok/s, {self.spec_tps / self.baseline_tps - 1:+.0%})"),
            ("measured cycle", f"{self.cycle_ms:.2f} ms = verify {self.verify_ms:g} + {k} x draft {d:.2f}"
                               f"{self._overhead_words()} (accept length / tok/s)"),
            ("break-even", f"accept length {self.break_even:.2f} on the measured cycle; "
                           f"{self.verify_only_break_even:.2f} on verify alone"),
            ("ceiling", f"k = {k}: at most {k + 1} tokens per cycle, {self.ceiling_tps:.0f} tok/s"),
            ("why two figures", f"verify-only arithmetic counts drafting free and steps unlimited; the measured "
                                f"cycle adds {self.cycle_ms - self.verify_ms:.2f} ms of drafting and k = {k}"),
        ]
        for r in self.targets:
            need, alpha = self.verify_only_needs(r.target_tps)
            rows.append((f"{r.target_tps:g} tok/s", f"{r.sentence()} (Verify-only arithmetic: {need:.2f}, "
                                                     f"{alpha:.0%} per-token acceptance.)"))
        rows += [(f"accept length {p.accept_length:g}", p.sentence(self)) for p in self.projections]
        return rows

    def to_json(self) -> dict:
        """The ``eaglekit speedup --spec-tps --json`` object."""
        return {
            "baseline_tps": self.baseline_tps, "spec_tps": self.spec_tps, "accept_length": self.accept_length,
            "steps": self.steps, "verify_ms": self.verify_ms, "draft_ms": self.draft_ms, "overhead_ms": self.overhead_ms,
            "speedup": self.spec_tps / self.baseline_tps,
            "cycle_ms": self.cycle_ms, "drafting_ms_per_cycle": self.cycle_ms - self.verify_ms,
            "break_even_accept_length": self.break_even,
            "verify_only_break_even_accept_length": self.verify_only_break_even, "ceiling_tps": self.ceiling_tps,
            "targets": [{**r.to_json(), **dict(zip(("verify_only_accept_length", "verify_only_alpha"),
                                                   self.verify_only_needs(r.target_tps)))}
                        for r in self.targets],
            "projections": [{"accept_length": p.accept_length, "steps": p.steps, "cycle_ms": p.cycle_ms,
                             "tokens_per_s": p.tokens_per_s, "speedup": p.speedup} for p in self.projections],
        }

    def __str__(self) -> str:
        wrap = textwrap.TextWrapper(width=100, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)
        return "Throughput account\n" + "\n".join(wrap.fill(s) for s in self.sentences())

    def _repr_html_(self) -> str:
        return kv_html(self.rows(), caption="Throughput account")
