"""The priced grid: every (batch size, draft configuration) cell with its throughput interval, the best per batch
size with ties to fewer steps and a schedule that does not climb on near-ties, and the one run that would
narrow the decision most.

A cell's cycle is ``target(B, n) + extra``, ``extra`` the fitted drafting and overhead
(:class:`~eaglekit.core.serving.cyclefit.CycleFit`). Its variance adds the fit's covariance, the target
forward's relative scatter and a new run's scatter; throughput is ``B x accept length / cycle`` and its
interval the cycle's, on a log scale (never negative). The speedup's interval counts the target forward's error
once for both cycles (it is the same model). Measured cells are used as measured, with the run noise as their
interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from eaglekit.core.serving.block import BlockCandidate, BlockFit, accept_sd_log
from eaglekit.core.serving.cyclefit import RUN_NOISE, CycleFit, Z
from eaglekit.core.serving.plan import (
    Acceptance,
    BatchPlan,
    Cost,
    StepOption,
    check_batches,
    overlaps,
)
from eaglekit.core.serving.runs import Run, RunSet
from eaglekit.core.uncertainty import Interval

__all__ = ["TreeConfig", "monotone", "next_measurement", "price_grid"]

TargetCost = Callable[[int, int], Cost]
#: The log spread a speculative cell gains per doubling of batch size past the largest speculative run: a batch
#: sweep of an MTP target (one NextN MoE layer as drafter) predicted from batch 1 and 2 runs came out 37-78% fast
#: at batch 16-64 (published SGLang figures), what the cycle's terms cannot see from small batches (scheduling,
#: graphs captured up to a batch size, the drafter's experts touched per row).
EXTRAPOLATION_PER_DOUBLING = 0.07


@dataclass(frozen=True)
class TreeConfig:
    """A tree (SGLang's three flags) with its measured accept length."""

    steps: int
    topk: int
    draft_tokens: int
    accept_length: float


def _cell(batch: int, steps: int, topk: int, n: int, L: float, target: TargetCost, fit: CycleFit,
          draft_measured: Mapping[int, float], run: Run | None, base: tuple[float, float, bool] | None,
          extrapolated: bool, target_sd: Callable[[int, int], float] | None = None, widen: float = 0.0,
          accept_sd: float = 0.0) -> tuple[StepOption, tuple[float, float, bool]]:
    """One cell, and (cycle, target ms, measured) for the speedup's baseline; ``accept_sd``: the standard deviation of
    log accept length (a measurement's interval), added to the throughput's and the speedup's log spread."""
    v = target(batch, n if steps else 1)
    extra = fit.extra_ms(batch, steps, topk)
    d_ms = draft_measured.get(batch) if topk <= 1 else None
    draft = Cost(0.0, True) if not steps else Cost(d_ms if d_ms is not None else fit.draft_ms(batch, topk),
                                                   d_ms is not None)
    overhead = fit.value[2] if steps else 0.0
    if d_ms is not None and steps:
        extra = steps * d_ms + overhead
    noise, tn = fit.noise, (0.0 if v.measured else fit.target_noise)
    if run is not None:  # a measured cell keeps its measurement: the run-to-run spread, not the fit's scatter
        L, cycle = run.accept_length, run.cycle_ms
        var_log, t_share = RUN_NOISE ** 2, 0.0
    else:
        cycle = v.ms + extra
        x = fit.features(batch, steps, topk)
        if v.measured:
            t_var = 0.0
        elif target_sd is not None:
            t_var = target_sd(batch, n if steps else 1) ** 2
        else:
            t_var = (tn * v.ms) ** 2
        var = fit.extra_var(x) + t_var + (noise * cycle) ** 2
        var_log, t_share = var / cycle ** 2 + (widen ** 2 if steps else 0.0), math.sqrt(t_var) / cycle
    var_log += accept_sd ** 2 if run is None else 0.0
    tps = batch * L * 1000.0 / cycle
    sd = math.sqrt(var_log)
    how = "measured run, run-to-run noise" if run is not None else "fit of the cycle's terms, 95%"
    tps_iv = Interval(tps, tps * _exp(-Z * sd), tps * _exp(Z * sd), how)
    if base is None:
        base = (cycle, t_share, run is not None)
        gain = Interval(1.0, 1.0, 1.0, "the baseline itself")
    else:
        c0, t0, m0 = base
        # log speedup = log L + log c0 - log c: the target model's share is common to both cycles
        var_s = var_log + (RUN_NOISE ** 2 if m0 else (noise ** 2 + t0 ** 2)) - 2 * t0 * t_share
        s = L * c0 / cycle
        sd_s = math.sqrt(max(var_s, 0.0))
        gain = Interval(s, s * _exp(-Z * sd_s), s * _exp(Z * sd_s), how)
    opt = StepOption(batch, steps, L, v, draft, cycle, L * 1000.0 / cycle, tps, gain.value,
                     extrapolated and run is None, tps_iv,
                     gain, run is not None, overhead, topk, n if steps else 0)
    return opt, base


def _exp(x: float) -> float:
    """exp, infinite past a float's range instead of OverflowError (an interval's bound, never a figure itself)."""
    return math.exp(x) if x < 709.0 else math.inf


def price_grid(batches: Sequence[int], acceptance: Acceptance, target: TargetCost, fit: CycleFit, *,
               max_steps: int, runs: RunSet | None = None, draft_measured: Mapping[int, float] | None = None,
               trees: Sequence[TreeConfig] = (), fits: Callable[[int], tuple[bool, float | None]] | None = None,
               target_sd: Callable[[int, int], float] | None = None,
               spec_batches: Sequence[int] = (),
               blocks: Sequence[tuple[BlockCandidate, BlockFit]] = ()) -> tuple[BatchPlan, ...]:
    """Every batch size's chain k = 0 .. ``max_steps`` and the given trees, priced with intervals;
    ``target_sd(B, n)``: the standard deviation (ms) of an unmeasured target forward (its fit's scatter and what
    its terms leave open); without it, the fit's relative scatter ``fit.target_noise``. ``spec_batches``: the batch
    sizes speculative runs were measured at; a speculative cell past the largest is an extrapolation, its log
    spread widened by :data:`EXTRAPOLATION_PER_DOUBLING` per doubling past it. ``blocks``: block drafters with their
    fitted cycle terms (:mod:`eaglekit.core.serving.block`), each priced at K = 1..its measured K beside the chains, its
    accept length's interval carried into the cell's."""
    check_batches(batches)
    runs = runs or RunSet(())
    dm = dict(draft_measured or {})
    out = []
    top = max(spec_batches, default=None)
    for b in batches:
        widen = 0.0 if top is None or b <= top else EXTRAPOLATION_PER_DOUBLING * math.log2(b / top)
        base = None
        options = []
        for k in range(max_steps + 1):
            run = runs.get(b, (k, 1, k + 1) if k else (0, 0, 0))
            opt, base0 = _cell(b, k, 1, k + 1, acceptance.at(k), target, fit, dm, run, base,
                               acceptance.extrapolated(k), target_sd, widen)
            base = base if base is not None else base0
            options.append(opt)
        tree_opts = []
        for t in trees:
            run = runs.get(b, (t.steps, t.topk, t.draft_tokens))
            tree_opts.append(_cell(b, t.steps, t.topk, t.draft_tokens, t.accept_length, target, fit, dm, run, base,
                                   False, target_sd, widen)[0])
        block_opts = []
        for cand, bfit in blocks:
            for k in range(1, cand.steps + 1):
                L = cand.at(k)
                opt = _cell(b, k, 1, k + 1, L.value, target, bfit, {}, None, base, False, target_sd, widen,
                            accept_sd_log(L))[0]
                block_opts.append(replace(opt, family=cand.family, accept_length_interval=L,
                                          draft=Cost(bfit.extra_ms(b, k), False), overhead_ms=0.0))
        ok, need = fits(b) if fits is not None else (True, None)
        out.append(BatchPlan(b, tuple(options), tuple(tree_opts), ok, need, blocks=tuple(block_opts)))
    return tuple(out)


def monotone(plans: Sequence[BatchPlan]) -> tuple[BatchPlan, ...]:
    """Where the best k rises with batch size but the previous batch size's k is within this one's interval
    (overlapping speedup intervals), take the previous k: engines' schedules fall with batch size, and a climb
    the figures cannot tell from a tie is noise."""
    out: list[BatchPlan] = []
    prev: int | None = None
    for p in plans:
        if not p.fits:
            out.append(p)
            continue
        k = p.best_chain.steps
        if prev is not None and k > prev:
            if overlaps(p.options[prev], p.options[k]):
                p = replace(p, choice=prev)
                k = prev
        out.append(p)
        prev = k
    return tuple(out)


def next_measurement(plans: Sequence[BatchPlan], fit: CycleFit) -> dict[str, Any] | None:
    """The one unmeasured chain cell whose run would most narrow the decisions still open (batch sizes where
    another k's interval overlaps the best's): the rank-one update of the draft terms' covariance that a run
    there adds, scored by the summed variance of log(cycle best / cycle other) over the open decisions."""
    open_pairs = [(p, p.best_chain, p.options[k]) for p in plans if p.fits for k in p.overlapping]
    if not open_pairs:
        return None
    cov = [list(r) for r in fit.cov]

    def score(c: list[list[float]]) -> float:
        total = 0.0
        for p, a, o in open_pairs:
            xa, xo = fit.features(p.batch, a.steps), fit.features(p.batch, o.steps)
            d = [xa[i] / a.cycle_ms - xo[i] / o.cycle_ms for i in range(3)]
            total += sum(d[i] * c[i][j] * d[j] for i in range(3) for j in range(3))
        return total

    best: tuple[float, int, int] | None = None
    for p in plans:
        if not p.fits:
            continue
        for o in p.options[1:]:
            if o.measured:
                continue
            x = fit.features(p.batch, o.steps)
            sx = [sum(cov[i][j] * x[j] for j in range(3)) for i in range(3)]
            denom = (fit.noise * o.cycle_ms) ** 2 + sum(x[i] * sx[i] for i in range(3))
            updated = [[cov[i][j] - sx[i] * sx[j] / denom for j in range(3)] for i in range(3)]
            s = score(updated)
            if best is None or s < best[0] - 1e-15:
                best = (s, p.batch, o.steps)
    if best is None:
        return None
    before = score(cov)
    return {"batch": best[1], "steps": best[2], "sentence": f"run steps {best[2]} at batch {best[1]}",
            "narrows_by": 0.0 if before <= 0 else 1 - best[0] / before}
