"""Speculative-decoding arithmetic: accept length, cycle time, throughput, break-even, targets.

Convention used everywhere here: the **accept length** L is the mean number of tokens one
draft-verify cycle emits, *including the bonus token* the target model adds after the last accepted
draft token. It is what vLLM reports as "mean acceptance length" (1 + accepted / num_drafts), what
SGLang calls accept length and what EAGLE calls tau. So L >= 1 always, and L <= k + 1 with k draft
steps (tokens drafted per cycle).

Sources:

- Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via Speculative Decoding"
  (arXiv 2211.17192), eq. 1: with i.i.d. per-token acceptance alpha and gamma = k drafted tokens,
  E[tokens per cycle] = (1 - alpha^(k+1)) / (1 - alpha); an unbounded chain gives 1 / (1 - alpha).
- Throughput = L / cycle time, cycle time = verify + k x draft step + overhead; speculation breaks
  even when L = cycle time x baseline tok/s (derived from the same model; the seed's 2.46 =
  30 ms x 82 tok/s).
- Engine metrics: vLLM (examples/offline_inference/spec_decode.py, v1/spec_decode/metrics.py)
  counts num_drafts, num_draft_tokens, num_accepted_tokens and accepted tokens per position; its
  "mean acceptance length" is 1 + accepted / num_drafts, its "acceptance rate" accepted / drafted
  (so L = 1 + k x rate, not alpha), and per-position rates (accepted at i / num_drafts) sum to L - 1.

Results are the records :class:`Scenario`, :class:`Estimate`, :class:`Target`, :class:`Fit` and
:class:`AcceptanceMetrics`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from numbers import Integral, Real

from eaglekit.core.errors import InputError
from eaglekit.core.render import kv_html, kv_text

__all__ = [
    "AcceptanceMetrics",
    "Estimate",
    "Fit",
    "Scenario",
    "Target",
    "accept_length_from_rate",
    "alpha_for_accept_length",
    "break_even_accept_length",
    "conditional_rates",
    "cycle_ms",
    "estimate",
    "expected_accept_length",
    "fit_from_measurements",
    "needed_accept_length",
    "needed_alpha",
    "position_rates_from_alpha",
    "rate_from_accept_length",
    "speedup",
    "throughput",
]


# -- validation ---------------------------------------------------------------------------------


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise InputError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _positive(value: object, what: str, unit: str) -> float:
    x = _number(value, what)
    if x <= 0:
        raise InputError(f"{what} must be greater than 0 {unit}, got {x:g}")
    return x


def _non_negative(value: object, what: str, unit: str) -> float:
    x = _number(value, what)
    if x < 0:
        raise InputError(f"{what} cannot be negative, got {x:g} {unit}")
    return x


#: Draft steps per cycle beyond which the chain is, for every alpha < 1, indistinguishable from unbounded.
MAX_STEPS = 1000


def check_steps(k: object) -> int | None:
    """``k`` (draft steps per cycle) as an int >= 1, or None for an unbounded chain."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise InputError(f"steps k must be a whole number of draft tokens >= 1 (None: unbounded), got {k!r}")
    if k > MAX_STEPS:
        raise InputError(f"steps k = {k} is beyond any real drafter (at most {MAX_STEPS}); "
                         "omit --steps for an unbounded chain")
    return int(k)


def check_alpha(alpha: object, k: int | None = None) -> float:
    """``alpha``, the probability that the target accepts one drafted token, as a float in [0, 1).

    A finite chain of ``k`` steps also admits alpha = 1 (every draft accepted, k + 1 tokens per cycle).
    """
    a = _number(alpha, "alpha")
    if not 0 <= a < 1 and not (a == 1 and k is not None):
        raise InputError(
            f"alpha must be in [0, 1), got {a:g}: it is the per-token acceptance probability "
            "(alpha = 1 is only meaningful with a finite number of draft steps k)"
        )
    return a


def check_accept_length(accept_length: object, k: int | None) -> float:
    """``accept_length`` as a float in [1, k+1] (bonus token included); unbounded when ``k`` is None."""
    L = _number(accept_length, "accept length")
    if L < 1:
        raise InputError(
            f"accept length must be at least 1, got {L:g}: every cycle emits the target's bonus token "
            "(the accept length counts it, as vLLM, SGLang and EAGLE do)"
        )
    if k is not None and L > k + 1:
        raise InputError(
            f"accept length {L:g} is above k+1 = {k + 1} (steps={k}): a chain of {k} drafted tokens "
            f"emits at most {k + 1} tokens per cycle; raise the steps or lower the accept length"
        )
    return L


# -- accept length <-> alpha --------------------------------------------------------------------


def expected_accept_length(alpha: float, *, k: int | None = None) -> float:
    """Mean tokens per cycle (bonus included) for i.i.d. per-token acceptance ``alpha``.

    Leviathan et al. 2023 (arXiv 2211.17192) eq. 1: ``(1 - alpha**(k+1)) / (1 - alpha)``, i.e.
    ``1 + alpha + ... + alpha**k``; ``k=None`` (unbounded chain) gives ``1 / (1 - alpha)``.
    """
    k = check_steps(k)
    a = check_alpha(alpha, k)
    if k is None:
        return 1.0 / (1.0 - a)
    return sum(a**i for i in range(k + 1))  # the geometric sum, exact even as alpha -> 1


def alpha_for_accept_length(accept_length: float, *, k: int | None = None) -> float:
    """The i.i.d. per-token acceptance alpha whose expected accept length is ``accept_length``.

    Inverse of :func:`expected_accept_length`. Unbounded chain: ``alpha = 1 - 1/L`` (the seed's
    4.5 -> 0.78, 6.0 -> 0.83, 2.0 -> 0.5). With ``k`` steps the geometric sum is solved by bisection;
    ``L = k + 1`` returns 1.0 (every draft accepted) and ``L > k + 1`` raises InputError: no alpha
    reaches it.
    """
    k = check_steps(k)
    L = check_accept_length(accept_length, k)
    if k is None:
        return 1.0 - 1.0 / L
    if L in (1, k + 1):
        return 0.0 if L == 1 else 1.0
    lo, hi = 0.0, 1.0
    for _ in range(64):  # the sum 1 + a + ... + a^k increases strictly on [0, 1]
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(k + 1)) < L:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# -- time and throughput ------------------------------------------------------------------------


def cycle_ms(
    verify_ms: float, *, draft_ms: float = 0.0, steps: int | None = None, overhead_ms: float = 0.0
) -> float:
    """One draft-verify cycle in ms: ``verify + steps x draft step + overhead``.

    ``steps=None`` (an unbounded chain, as in the seed's arithmetic) needs ``draft_ms == 0``:
    without a step count the draft cost per cycle is unknown.
    """
    v = _positive(verify_ms, "verify time", "ms")
    d = _non_negative(draft_ms, "draft time per step", "ms")
    o = _non_negative(overhead_ms, "overhead", "ms")
    k = check_steps(steps)
    if k is None and d > 0:
        raise InputError(
            f"a draft time of {d:g} ms per step needs a step count: the draft cost per cycle is "
            "steps x draft time; give steps k, or set the draft time to 0 for an unbounded chain"
        )
    return v + (k or 0) * d + o


def throughput(accept_length: float, *, cycle_ms: float) -> float:
    """Tokens per second with speculation: ``accept_length / cycle time``."""
    L = check_accept_length(accept_length, None)
    return L * 1000.0 / _positive(cycle_ms, "cycle time", "ms")


def speedup(tokens_per_s: float, *, baseline_tps: float) -> float:
    """Ratio of speculative to baseline throughput (below 1 means speculation is slower)."""
    t = _non_negative(tokens_per_s, "throughput", "tok/s")
    return t / _positive(baseline_tps, "baseline throughput", "tok/s")


def break_even_accept_length(*, baseline_tps: float, cycle_ms: float) -> float:
    """The accept length at which speculation matches the baseline: ``cycle time x baseline tok/s``.

    Seed: 30 ms x 82 tok/s = 2.46.
    """
    b = _positive(baseline_tps, "baseline throughput", "tok/s")
    return b * _positive(cycle_ms, "cycle time", "ms") / 1000.0


def needed_accept_length(target_tps: float, *, cycle_ms: float) -> float:
    """The accept length a target throughput needs: ``target tok/s x cycle time`` (150 x 30 ms = 4.5).

    Below 1 means any drafter reaches the target (each cycle emits at least the bonus token).
    """
    t = _positive(target_tps, "target throughput", "tok/s")
    return t * _positive(cycle_ms, "cycle time", "ms") / 1000.0


def needed_alpha(target_tps: float, *, cycle_ms: float, k: int | None = None) -> float | None:
    """The i.i.d. alpha a target throughput needs, or None when ``k`` steps cannot reach it."""
    k = check_steps(k)
    return _alpha_within(needed_accept_length(target_tps, cycle_ms=cycle_ms), k)


def _alpha_within(length: float, k: int | None) -> float | None:
    """The i.i.d. alpha giving accept ``length`` at ``k`` steps: 0 at or below 1, None above the ceiling k + 1."""
    if k is not None and length > k + 1 + 1e-9:
        return None
    return 0.0 if length <= 1 else alpha_for_accept_length(length if k is None else min(length, k + 1.0), k=k)


# -- what a target throughput needs at k steps -------------------------------------------------


@dataclass(frozen=True)
class Reach:
    """What ``target_tps`` needs at ``steps`` draft steps of ``draft_ms`` each, and what would reach it.

    ``alpha`` is None when the needed accept length is above the ceiling ``steps + 1``;
    ``max_draft_ms`` is the most a draft step may cost for ``steps`` steps to reach the target (None:
    the fixed part of the cycle alone is too slow, no draft cost helps); ``min_steps`` is the fewest
    steps that reach it at ``draft_ms`` per step (None: no step count does, each step costs more time
    than the token it can add).
    """

    target_tps: float
    steps: int
    draft_ms: float
    fixed_ms: float  # verify + overhead, per cycle
    accept_length: float  # needed at ``steps``
    alpha: float | None
    max_draft_ms: float | None
    min_steps: int | None
    min_steps_accept_length: float | None
    min_steps_alpha: float | None
    growth_ms: float = 0.0  # how much the verify grows per drafted token (0: held at fixed_ms whatever k is)

    @property
    def cycle_ms(self) -> float:
        return self.fixed_ms + self.steps * self.draft_ms

    def cycle_at(self, m: int) -> float:
        """The cycle at ``m`` steps: the verify moved by ``growth_ms`` per step away from ``steps``."""
        return self.fixed_ms + (m - self.steps) * self.growth_ms + m * self.draft_ms

    @property
    def reachable(self) -> bool:
        return self.alpha is not None

    def to_json(self) -> dict:
        """Every figure :meth:`headline` and :meth:`remedy` print."""
        k = self.steps
        return {"tokens_per_s": self.target_tps, "steps": k, "draft_ms": self.draft_ms, "cycle_ms": self.cycle_ms,
                "accept_length": self.accept_length, "alpha": self.alpha, "reachable": self.reachable,
                "tokens_per_cycle_at_most": k + 1, "ceiling_tps": (k + 1) * 1000.0 / self.cycle_ms,
                "fixed_part_alone_tps": (k + 1) * 1000.0 / self.fixed_ms,
                "max_draft_ms": self.max_draft_ms, "min_steps": self.min_steps,
                "min_steps_cycle_ms": self.cycle_at(self.min_steps) if self.min_steps is not None else None,
                "min_steps_accept_length": self.min_steps_accept_length, "min_steps_alpha": self.min_steps_alpha,
                "min_steps_tokens_per_cycle_at_most": self.min_steps + 1 if self.min_steps is not None else None}

    def headline(self) -> str:
        """What the target needs at these steps, or that it is out of reach there."""
        t, k = f"{self.target_tps:g} tok/s", self.steps
        costs = f"k = {k} draft steps of {self.draft_ms:.2f} ms, cycle {self.cycle_ms:.1f} ms"
        if self.accept_length <= 1:
            return f"{t} is reached by any drafter ({costs}): one token per cycle already gives it."
        if self.reachable:
            return f"{t} needs accept length {self.accept_length:.2f} ({costs}; per-token acceptance {self.alpha:.0%})."
        ceiling = (k + 1) * 1000.0 / self.cycle_ms
        return (f"{t} is out of reach at {costs}: it needs accept length {self.accept_length:.2f}, but {k} steps emit "
                f"at most {k + 1} tokens per cycle ({ceiling:.0f} tok/s).")

    def remedy(self) -> str:
        """For an unreachable target: what draft cost at these steps, or how many steps, would reach it."""
        if self.reachable:
            return ""
        k = self.steps
        if self.max_draft_ms is None:
            out = (f"No draft cost fixes that at k = {k}: the verify part alone ({self.fixed_ms:.1f} ms) allows "
                   f"{(k + 1) * 1000.0 / self.fixed_ms:.0f} tok/s.")
        else:
            out = f"At k = {k} a draft step would have to cost at most {self.max_draft_ms:.2f} ms."
        if self.min_steps is None:
            grows = f" and a verify growing {self.growth_ms:.2f} ms per drafted token" if self.growth_ms else ""
            return out + f" No number of steps reaches it at {self.draft_ms:.2f} ms per step{grows}."
        m = self.min_steps
        held = (f"with the verify held at {self.fixed_ms:.3g} ms whatever it verifies" if not self.growth_ms else
                f"with the verify growing {self.growth_ms:.2f} ms per drafted token")
        return out + (f" At {self.draft_ms:.2f} ms per step, {held}, it takes k = {m} (cycle "
                      f"{self.cycle_at(m):.1f} ms) and accept length "
                      f"{self.min_steps_accept_length:.2f} of at most {m + 1} (per-token acceptance "
                      f"{self.min_steps_alpha:.0%}).")

    def sentence(self) -> str:
        return " ".join(p for p in (self.headline(), self.remedy()) if p)


def reach(target_tps: float, *, verify_ms: float, steps: int, draft_ms: float = 0.0,
          overhead_ms: float = 0.0, verify_growth_ms: float = 0.0) -> Reach:
    """What ``target_tps`` needs with ``steps`` draft steps of ``draft_ms`` each (see :class:`Reach`).

    The cycle is ``verify + overhead + k x draft``; k steps emit at most k + 1 tokens. So k reaches
    T tok/s when ``T x (fixed + k x draft) / 1000 <= k + 1``: solved for the draft cost at this k, and
    for the smallest k at this draft cost (none when ``T x draft / 1000 >= 1`` and k = 1 fails).

    ``verify_growth_ms``: the verify (``verify_ms`` at ``steps``) grows that much per drafted token, as on
    a mixture-of-experts target (the slope of :mod:`eaglekit.core.serving.costmodel`'s verify). At m steps the cycle
    is ``fixed + (m - steps) x growth + m x draft``: the same solution with ``fixed - steps x growth`` and
    ``draft + growth``.
    """
    t = _positive(target_tps, "target throughput", "tok/s")
    k = check_steps(steps)
    if k is None:
        raise InputError("reach needs the number of draft steps k: the ceiling is k + 1 tokens per cycle")
    fixed = _positive(verify_ms, "verify time", "ms") + _non_negative(overhead_ms, "overhead", "ms")
    draft_ms = _non_negative(draft_ms, "draft time per step", "ms")
    g = _non_negative(verify_growth_ms, "verify growth", "ms per drafted token")
    if verify_ms - (k - 1) * g <= 0:
        raise InputError(f"a verify of {verify_ms:g} ms at k = {k} growing {g:g} ms per drafted token leaves the verify "
                         "of one draft at 0 ms or less: lower the growth")
    cycle = fixed + k * draft_ms
    need = needed_accept_length(t, cycle_ms=cycle)
    spare = ((k + 1) * 1000.0 / t - fixed) / k  # the draft cost per step at which k steps just reach it
    start, step = fixed - k * g, draft_ms + g  # the cycle at m steps is start + m x step
    a = t * step / 1000.0  # tokens a step's time (drafting and verify growth) is worth at the target rate
    base = t * start / 1000.0 - 1.0
    if needed_accept_length(t, cycle_ms=start + step) <= 2.0:
        m: int | None = 1
    elif a < 1:
        m = max(1, math.ceil(base / (1.0 - a) - 1e-9))
        m = m if m <= MAX_STEPS else None
    else:
        m = None
    m_need = needed_accept_length(t, cycle_ms=start + m * step) if m is not None else None
    return Reach(t, k, float(draft_ms), fixed, need, _alpha_within(need, k), spare if spare >= 0 else None, m, m_need,
                 _alpha_within(m_need, m) if m is not None else None, g)


# -- records ------------------------------------------------------------------------------------


def _steps(k: int | None) -> str:
    return "unbounded chain" if k is None else f"k = {k}"


@dataclass(frozen=True)
class Scenario:
    """A serving setup: baseline decode speed and the cost of one draft-verify cycle (times in ms)."""

    baseline_tps: float
    verify_ms: float
    draft_ms: float = 0.0
    steps: int | None = None
    overhead_ms: float = 0.0
    verify_growth_ms: float = 0.0  # the verify's growth per drafted token away from ``steps`` (0: held constant)

    def __post_init__(self) -> None:
        _positive(self.baseline_tps, "baseline throughput", "tok/s")
        cycle_ms(self.verify_ms, draft_ms=self.draft_ms, steps=self.steps, overhead_ms=self.overhead_ms)
        _non_negative(self.verify_growth_ms, "verify growth", "ms per drafted token")

    def verify_at(self, k: int) -> float:
        """The verify of ``k`` drafts: ``verify_ms`` at the scenario's steps, moved by the growth per step."""
        return self.verify_ms + (k - (self.steps or k)) * self.verify_growth_ms

    def at_steps(self, k: int) -> Scenario:
        """The same deployment drafting ``k`` steps: its verify moved to :meth:`verify_at` ``k`` (the growth
        keeps its anchor at the new k)."""
        return replace(self, steps=k, verify_ms=self.verify_at(k))

    @classmethod
    def seed(cls) -> Scenario:
        """The seed account: 82 tok/s baseline, 30 ms verify per cycle, unbounded-chain arithmetic."""
        return cls(baseline_tps=82.0, verify_ms=30.0)

    @property
    def cycle_ms(self) -> float:
        return cycle_ms(self.verify_ms, draft_ms=self.draft_ms, steps=self.steps, overhead_ms=self.overhead_ms)

    @property
    def break_even_accept_length(self) -> float:
        return break_even_accept_length(baseline_tps=self.baseline_tps, cycle_ms=self.cycle_ms)


@dataclass(frozen=True)
class Target:
    """What a target throughput needs: accept length, and alpha (None when k steps cannot reach it)."""

    tokens_per_s: float
    accept_length: float
    alpha: float | None


@dataclass(frozen=True)
class Estimate:
    """Throughput of a :class:`Scenario` at one accept length; renders as text and as HTML."""

    scenario: Scenario
    cycle_ms: float
    accept_length: float
    alpha: float  # i.i.d. per-token acceptance at the scenario's k (1.0 when L = k + 1)
    tokens_per_s: float
    speedup: float
    break_even_accept_length: float
    target: Target | None = None

    @property
    def drafting_counted_free(self) -> bool:
        """True when the cycle holds no drafting time (unbounded chain, or draft_ms 0): break-even is then
        understated by the drafter's share of the cycle."""
        return self.scenario.steps is None or self.scenario.draft_ms == 0

    def reach(self) -> Reach:
        """What the target throughput needs at the scenario's k (verify growth included); the text and the
        JSON both read it from here. Needs a target and a step count."""
        s, t = self.scenario, self.target
        if t is None or s.steps is None:
            raise InputError("reach needs a target throughput and the scenario's draft steps k")
        return reach(t.tokens_per_s, verify_ms=s.verify_ms, steps=s.steps, draft_ms=s.draft_ms,
                     overhead_ms=s.overhead_ms, verify_growth_ms=s.verify_growth_ms)

    def to_json(self) -> dict:
        """The ``eaglekit speedup --json`` object: every figure the text prints."""
        s = self.scenario
        target = None
        if self.target is not None:
            t = self.target
            target = {"tokens_per_s": t.tokens_per_s, "accept_length": t.accept_length, "alpha": t.alpha}
            if s.steps is not None:
                target.update(self.reach().to_json())
        return {
            "baseline_tps": s.baseline_tps, "verify_ms": s.verify_ms, "draft_ms": s.draft_ms, "steps": s.steps,
            "overhead_ms": s.overhead_ms, "drafting_counted_free": self.drafting_counted_free,
            "cycle_ms": self.cycle_ms,
            "tokens_per_s": self.tokens_per_s,
            "speedup": self.speedup,
            "break_even_accept_length": self.break_even_accept_length,
            "alpha": self.alpha,
            "accept_length": self.accept_length,
            "target": target,
        }

    def rows(self) -> list[tuple[str, str]]:
        s = self.scenario
        if s.steps is None:
            how = f"verify {s.verify_ms:g} + overhead {s.overhead_ms:g}; unbounded chain, drafting counted free"
        else:
            how = f"verify {s.verify_ms:.4g} + {s.steps} x draft {s.draft_ms:.3g} + overhead {s.overhead_ms:.4g}"
        rows = [
            ("cycle", f"{self.cycle_ms:.2f} ms ({how})"),
            ("accept length", f"{self.accept_length:.2f} tokens/cycle (alpha {self.alpha:.3f}, {_steps(s.steps)})"),
            ("throughput", f"{self.tokens_per_s:.1f} tok/s"),
            ("speedup", f"{self.speedup:.2f}x over {s.baseline_tps:g} tok/s baseline ({self.speedup - 1:+.0%})"),
            ("break-even", f"accept length {self.break_even_accept_length:.2f}" + (
                ": below 1, so any drafter pays (every cycle emits at least the bonus token); a cycle shorter than "
                "one baseline step: check the verify time" if self.break_even_accept_length < 1 else "")),
        ]
        if s.steps is not None and s.draft_ms == 0:
            rows.append(("drafting", "counted free (no draft time given): break-even and throughput leave out "
                                     f"the {s.steps} draft steps per cycle"))
        if self.target is not None:
            t = self.target
            if s.steps is not None:
                r = self.reach()
                rows.append(("target", r.headline()))
                if not r.reachable:
                    rows.append(("to reach it", r.remedy()))
            else:
                rows.append(("target", f"{t.tokens_per_s:g} tok/s needs accept length {t.accept_length:.2f} "
                                       f"(alpha {t.alpha:.3f}, unbounded chain, drafting counted free)"))
        return rows

    def __str__(self) -> str:
        return kv_text(self.rows(), title="Speculative decoding estimate")

    def _repr_html_(self) -> str:
        return kv_html(self.rows(), caption="Speculative decoding estimate")


def estimate(
    scenario: Scenario,
    *,
    accept_length: float | None = None,
    alpha: float | None = None,
    target_tps: float | None = None,
) -> Estimate:
    """Evaluate ``scenario`` at one accept length, given directly or as i.i.d. ``alpha`` (exactly one)."""
    if (accept_length is None) == (alpha is None):
        raise InputError("give exactly one of accept_length or alpha")
    k = scenario.steps
    if alpha is not None:
        alpha = check_alpha(alpha, k)
        L = expected_accept_length(alpha, k=k)
    else:
        L = check_accept_length(accept_length, k)
        alpha = alpha_for_accept_length(L, k=k)
    cycle = scenario.cycle_ms
    tps = throughput(L, cycle_ms=cycle)
    target = None
    if target_tps is not None:
        needed = needed_accept_length(target_tps, cycle_ms=cycle)
        target = Target(float(target_tps), needed, needed_alpha(target_tps, cycle_ms=cycle, k=k))
    return Estimate(
        scenario=scenario,
        cycle_ms=cycle,
        accept_length=L,
        alpha=alpha,
        tokens_per_s=tps,
        speedup=speedup(tps, baseline_tps=scenario.baseline_tps),
        break_even_accept_length=scenario.break_even_accept_length,
        target=target,
    )


@dataclass(frozen=True)
class Fit:
    """Cycle cost implied by measured throughputs (see :func:`fit_from_measurements`)."""

    baseline_tps: float
    spec_tps: float
    accept_length: float
    cycle_ms: float  # accept length / speculative tok/s
    baseline_step_ms: float  # 1 / baseline tok/s
    cycle_in_steps: float  # the cycle in baseline decode steps (= the break-even accept length)
    overhead_ms: float | None  # cycle - verify - steps x draft, when verify_ms was given

    @property
    def break_even_accept_length(self) -> float:
        return self.cycle_in_steps

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            ("measured", f"{self.spec_tps:g} tok/s at accept length {self.accept_length:g} "
                         f"(baseline {self.baseline_tps:g} tok/s)"),
            ("implied cycle", f"{self.cycle_ms:.2f} ms = {self.cycle_in_steps:.2f} baseline steps "
                              f"of {self.baseline_step_ms:.2f} ms"),
            ("break-even", f"accept length {self.break_even_accept_length:.2f}"),
        ]
        if self.overhead_ms is not None:
            rows.append(("unexplained", f"{self.overhead_ms:.2f} ms per cycle beyond verify and drafting"))
        return rows

    def __str__(self) -> str:
        return kv_text(self.rows(), title="Cycle implied by measurements")

    def _repr_html_(self) -> str:
        return kv_html(self.rows(), caption="Cycle implied by measurements")


def fit_from_measurements(
    baseline_tps: float,
    spec_tps: float,
    accept_length: float,
    *,
    verify_ms: float | None = None,
    draft_ms: float = 0.0,
    steps: int | None = None,
) -> Fit:
    """The cycle time measured throughput implies: ``cycle = accept length / speculative tok/s``.

    The seed's 60 tok/s at accept length 2.0 implies 33.3 ms per cycle, so with its 30 ms verify about
    3.3 ms per cycle goes to drafting and overhead, and the real break-even is 2.73, not 2.46. Given
    ``verify_ms`` (and ``draft_ms`` x ``steps``), ``overhead_ms`` is the remainder (negative when
    the measured cycle is shorter than the parts you gave).
    """
    b = _positive(baseline_tps, "baseline throughput", "tok/s")
    s = _positive(spec_tps, "speculative throughput", "tok/s")
    L = check_accept_length(accept_length, check_steps(steps))
    cycle = L * 1000.0 / s
    overhead = None
    if verify_ms is not None:
        overhead = cycle - cycle_ms(verify_ms, draft_ms=draft_ms, steps=steps)
    return Fit(b, s, L, cycle, 1000.0 / b, cycle * b / 1000.0, overhead)


# -- engine metrics -----------------------------------------------------------------------------


def accept_length_from_rate(rate: float, *, k: int) -> float:
    """Mean accept length from vLLM's acceptance rate (accepted / drafted) at ``k`` steps: ``1 + k rate``."""
    k = _required_steps(k)
    r = _number(rate, "acceptance rate")
    if not 0 <= r <= 1:
        raise InputError(f"acceptance rate must be in [0, 1] (accepted / drafted tokens), got {r:g}")
    return 1.0 + k * r


def rate_from_accept_length(accept_length: float, *, k: int) -> float:
    """vLLM's acceptance rate at ``k`` steps for a mean accept length: ``(L - 1) / k``."""
    k = _required_steps(k)
    return (check_accept_length(accept_length, k) - 1.0) / k


def position_rates_from_alpha(alpha: float, *, k: int) -> tuple[float, ...]:
    """Per-position acceptance rates under i.i.d. alpha: position i is accepted with ``alpha**i``."""
    k = _required_steps(k)
    a = check_alpha(alpha, k)
    return tuple(a**i for i in range(1, k + 1))


def conditional_rates(position_rates: tuple[float, ...] | list[float]) -> tuple[float, ...]:
    """Acceptance at position i given position i-1 was accepted: ``p_i / p_(i-1)`` (all alpha when i.i.d.)."""
    p = _check_position_rates(position_rates)
    return tuple(cur / prev if prev > 0 else 0.0 for prev, cur in zip((1.0, *p[:-1]), p))


def _required_steps(k: object) -> int:
    if k is None:
        raise InputError("engine metrics need the number of draft steps k (num_speculative_tokens)")
    return check_steps(k)  # type: ignore[return-value]


def _check_position_rates(rates: object) -> tuple[float, ...]:
    p = tuple(_number(r, "per-position acceptance rate") for r in rates)  # type: ignore[union-attr]
    if not p:
        raise InputError("per-position acceptance rates are empty: give one rate per draft position")
    if any(not 0 <= r <= 1 for r in p):
        raise InputError(f"per-position acceptance rates must lie in [0, 1], got {list(p)}")
    if any(b > a + 1e-12 for a, b in zip(p, p[1:])):
        raise InputError(
            f"per-position acceptance rates must not increase along the chain, got {list(p)}: "
            "position i+1 is only accepted when position i was; pass rates per position, not conditional ones"
        )
    return p


@dataclass(frozen=True)
class AcceptanceMetrics:
    """One drafter's acceptance in every engine's terms, at ``k`` draft steps.

    ``accept_length`` counts the bonus token (vLLM, SGLang, EAGLE tau); ``acceptance_rate`` is vLLM's
    accepted / drafted; ``alpha`` is the i.i.d. per-token acceptance that gives the same accept length
    at this k (Leviathan et al. 2023); ``position_rates`` are measured, or ``alpha**i`` when built from
    a single number (``iid`` True). Example: 51.78% at k=4 in vLLM is accept length 3.07, alpha 0.75.
    """

    k: int
    accept_length: float
    acceptance_rate: float
    alpha: float
    position_rates: tuple[float, ...]
    iid: bool

    @classmethod
    def from_accept_length(cls, accept_length: float, *, k: int) -> AcceptanceMetrics:
        k = _required_steps(k)
        L = check_accept_length(accept_length, k)
        alpha = alpha_for_accept_length(L, k=k)
        rates = tuple(alpha**i for i in range(1, k + 1))
        return cls(k, L, (L - 1.0) / k, alpha, rates, iid=True)

    @classmethod
    def from_alpha(cls, alpha: float, *, k: int) -> AcceptanceMetrics:
        k = _required_steps(k)
        return cls.from_accept_length(expected_accept_length(alpha, k=k), k=k)

    @classmethod
    def from_rate(cls, rate: float, *, k: int) -> AcceptanceMetrics:
        """From vLLM's "acceptance rate" (accepted / drafted), which is not alpha."""
        return cls.from_accept_length(accept_length_from_rate(rate, k=k), k=k)

    @classmethod
    def from_position_rates(cls, position_rates: tuple[float, ...] | list[float]) -> AcceptanceMetrics:
        p = _check_position_rates(position_rates)
        k, L = len(p), 1.0 + sum(p)
        return cls(k, L, (L - 1.0) / k, alpha_for_accept_length(L, k=k), p, iid=False)

    @classmethod
    def from_vllm_counters(
        cls,
        *,
        num_drafts: int,
        num_draft_tokens: int,
        num_accepted_tokens: int,
        accepted_per_position: tuple[int, ...] | list[int] | None = None,
    ) -> AcceptanceMetrics:
        """From vLLM's counters (``vllm:spec_decode_num_drafts`` and friends)."""
        if num_drafts <= 0 or num_draft_tokens <= 0 or num_accepted_tokens < 0:
            raise InputError("vLLM counters num_drafts and num_draft_tokens must be > 0, num_accepted_tokens >= 0")
        if num_draft_tokens % num_drafts:
            raise InputError(
                f"num_draft_tokens {num_draft_tokens} is not a multiple of num_drafts {num_drafts}: "
                "a fixed k drafts the same number of tokens each cycle"
            )
        k = num_draft_tokens // num_drafts
        if accepted_per_position is not None:
            if len(accepted_per_position) != k or sum(accepted_per_position) != num_accepted_tokens:
                raise InputError(
                    f"accepted_per_position must have k = {k} entries summing to num_accepted_tokens "
                    f"{num_accepted_tokens}, got {list(accepted_per_position)}"
                )
            return cls.from_position_rates([n / num_drafts for n in accepted_per_position])
        return cls.from_rate(num_accepted_tokens / num_draft_tokens, k=k)

    def rows(self) -> list[tuple[str, str]]:
        kind = "i.i.d. model" if self.iid else "measured"
        return [
            ("draft steps k", str(self.k)),
            ("accept length", f"{self.accept_length:.3f} tokens/cycle (bonus included: vLLM, SGLang, EAGLE tau)"),
            ("vLLM acceptance rate", f"{self.acceptance_rate:.2%} (accepted / drafted)"),
            ("i.i.d. alpha", f"{self.alpha:.3f} (per-token acceptance giving this accept length at k)"),
            (f"per-position ({kind})", " ".join(f"{r:.2f}" for r in self.position_rates)),
        ]

    def __str__(self) -> str:
        return kv_text(self.rows(), title="Acceptance metrics")

    def _repr_html_(self) -> str:
        return kv_html(self.rows(), caption="Acceptance metrics")
