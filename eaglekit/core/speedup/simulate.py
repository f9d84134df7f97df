"""Monte Carlo simulation of the draft-verify loop, to check the closed forms in :mod:`eaglekit.core.speedup.specmath`.

One cycle: the drafter proposes up to k tokens; the target accepts them left to right while each
passes (position i passes with probability ``rates[i]`` given that all before it passed; i.i.d.
alpha means every conditional rate is alpha) and stops at the first rejection; then it emits one
bonus token. The cycle's accept length is accepted + 1 (the convention of vLLM, SGLang and EAGLE).
An unbounded chain never runs out of draft tokens, so its accepted count is geometric.

The simulator also keeps vLLM's counters (num_drafts, num_draft_tokens, num_accepted_tokens,
accepted per position), so the engine-metric conversions can be checked against counted data.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglekit.core.errors import InputError
from eaglekit.core.speedup.specmath import AcceptanceMetrics, check_alpha, check_steps

__all__ = ["Simulation", "simulate"]


@dataclass(frozen=True)
class Simulation:
    """What :func:`simulate` counted over ``cycles`` draft-verify cycles."""

    k: int | None  # None: unbounded chain
    cycles: int
    mean_accept_length: float  # bonus token included
    stderr: float  # standard error of the mean accept length
    num_accepted_tokens: int  # drafted tokens the target accepted, over all cycles
    accepted_per_position: tuple[int, ...]  # cycles that accepted position i (empty when unbounded)

    def metrics(self) -> AcceptanceMetrics:
        """The counts as vLLM would report them, converted to every engine's terms."""
        if self.k is None:
            raise InputError("an unbounded chain has no vLLM acceptance rate: simulate with a finite k")
        return AcceptanceMetrics.from_vllm_counters(
            num_drafts=self.cycles,
            num_draft_tokens=self.cycles * self.k,
            num_accepted_tokens=self.num_accepted_tokens,
            accepted_per_position=self.accepted_per_position,
        )

    def __str__(self) -> str:
        steps = "unbounded chain" if self.k is None else f"k = {self.k}"
        return f"accept length {self.mean_accept_length:.4f} +/- {self.stderr:.4f} ({self.cycles} cycles, {steps})"


def simulate(
    alpha: float | None = None,
    *,
    k: int | None = None,
    conditional_rates: tuple[float, ...] | list[float] | None = None,
    cycles: int = 100_000,
    seed: int = 0,
) -> Simulation:
    """Simulate ``cycles`` draft-verify cycles with a seeded numpy Generator (vectorised, no Python loop).

    Give either i.i.d. ``alpha`` (with ``k`` steps, or ``k=None`` for an unbounded chain) or
    ``conditional_rates``, one acceptance probability per draft position given the previous ones
    passed (then k = len(conditional_rates)). Real drafters decay along the chain; i.i.d. is a model.
    """
    import numpy as np

    if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 2:
        raise InputError(f"cycles must be a whole number >= 2, got {cycles!r}")
    rng = np.random.default_rng(seed)
    if (alpha is None) == (conditional_rates is None):
        raise InputError("give exactly one of alpha or conditional_rates")
    if conditional_rates is not None:
        if k is not None and k != len(conditional_rates):
            raise InputError(f"k = {k} does not match {len(conditional_rates)} conditional rates")
        rates = np.array([float(r) for r in conditional_rates])
        if rates.size == 0 or not np.all((rates >= 0) & (rates <= 1)):
            raise InputError(f"conditional rates must be one probability in [0, 1] per position, got {list(rates)}")
        k = int(rates.size)
    else:
        k = check_steps(k)
        a = check_alpha(alpha, k)
        if k is None:
            accepted = rng.geometric(1.0 - a, size=cycles) - 1  # trials up to the first rejection, minus it
            return _summarise(accepted, None, ())
        rates = np.full(k, a)
    passes = rng.random((cycles, k)) < rates  # (cycles, k): would position i pass on its own
    reached = np.cumprod(passes, axis=1, dtype=np.int8)  # (cycles, k): accepted only if all before passed
    accepted = reached.sum(axis=1)  # (cycles,)
    per_position = tuple(int(n) for n in reached.sum(axis=0))
    return _summarise(accepted, k, per_position)


def _summarise(accepted, k: int | None, per_position: tuple[int, ...]) -> Simulation:
    tokens = accepted + 1  # the bonus token
    n = int(tokens.size)
    return Simulation(
        k=k,
        cycles=n,
        mean_accept_length=float(tokens.mean()),
        stderr=float(tokens.std(ddof=1) / n**0.5),
        num_accepted_tokens=int(accepted.sum()),
        accepted_per_position=per_position,
    )
