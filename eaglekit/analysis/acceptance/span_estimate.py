"""Accept length from training text: ``--target``'s cycle simulation on every request of the dump, the drafts
the text cannot show completed with the measured per-step conditional acceptances.

Dataset text departs from the target's greedy choice here and there (docs/acceptance.md, "Text the target did
not write"); chains can be compared only inside spans of greedy-consistent tokens
(:mod:`~eaglekit.analysis.acceptance.spans`). Round 4 counted a cycle only where all K drafts could be compared
and left out the first cycle of every span: short spans then hold no cycle at all (112 spans under 5 tokens at
K = 4 gave ``accept_length`` null).

Here each assistant turn of a sample is one request, as a prompt is for ``--target``: its first token is the
prefill token, the ``G`` after it are generated, and the cycles run from its start to its end with the last one
capped there (a closing token the target did not choose, SpecForge's ``<|im_end|>`` in its loss mask, is not
part of the generation: :func:`~eaglekit.analysis.acceptance.spans.requests`). At each offset ``i`` and draft
step ``j`` the acceptance is what the text shows where the draft could be compared (inside a span: 1 or 0),
and where it could not (past a span's end, in the stretches where the text departs, and for the first cycle
after a departure, which drafts from a context the target would not have written) it is ``a_j = P(step j
accepted | steps 1..j-1 accepted)`` at the starts of the cycles the spans show (a Kaplan-Meier product over
their censored match lengths; over every compared position for a step fewer than :data:`MIN_CYCLE_STARTS`
cycle starts reached). Cycle starts, not all positions: where acceptance comes in easy and hard stretches,
cycles start more often in the hard ones, and all-position rates then read high (on a synthetic text of such
stretches with 35% of the drafts unseen, 2.84 against the full text's 2.62 at K = 4; cycle-start rates 2.66). The expected cycles follow backwards without sampling
(``C[i] = 1 + sum_a P_i(a) C[i + a + 1]``, :func:`~eaglekit.analysis.acceptance.measure.expected_counts`'s
recursion), and the accept length is generated tokens / expected cycles, pooled over requests.

On text the target generated greedily nothing is completed and the figure is ``--target``'s, exactly; on
dataset text it is the figure ``--target`` would give had the target written these samples, with requests as
long as the samples' assistant turns. :attr:`SpanEstimate.estimator` says which held.

The interval is a percentile bootstrap over samples (requests of one sample stay together; a dump of one sample
resamples its turns) in which each resample also draws the conditional acceptances from their own bootstrap, so the completion's uncertainty is
in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eaglekit.analysis.acceptance.measure import SampleStats
from eaglekit.core.uncertainty import LEVEL, RESAMPLES, Interval, percentile_interval

#: The estimators, in the words results print
CYCLES = "cycle simulation (every draft compared with the text)"
COMPLETED = ("cycle simulation over each request, drafts the text cannot show completed with the per-step "
             "conditional acceptances at cycle starts")
#: Draws of the conditional acceptances the bootstrap cycles through
ACCEPT_DRAWS = 40


@dataclass(frozen=True)
class Request:
    """One assistant turn of a sample: its prefill token at ``start`` (a position of the sample), the generated
    tokens after it up to ``end`` (inclusive), and the spans inside it (their ``base`` = first cycle's base)."""

    sample: int
    start: int
    end: int
    spans: tuple[SampleStats, ...]

    @property
    def generated(self) -> int:
        return max(self.end - self.start, 0)


@dataclass(frozen=True)
class SpanEstimate:
    """The accept length at K = 1..steps with its interval, the estimator used, per request (generated tokens,
    expected cycles) at K = steps, and vLLM's per-position acceptance on the same cycles."""

    by_steps: tuple[Interval, ...]
    estimators: tuple[str, ...]
    request_counts: tuple[tuple[int, float], ...]
    request_samples: tuple[int, ...]
    per_position: tuple[float, ...]
    completed_share: float                 # share of the (offset, step) acceptances that were completed
    unmeasured_steps: tuple[int, ...]      # steps no position could compare (counted as rejected)

    @property
    def interval(self) -> Interval:
        return self.by_steps[-1]

    @property
    def estimator(self) -> str:
        return self.estimators[-1]


def _observed(req: Request, steps: int, soft: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(seen (K, G) bool, accepted (K, G)) at each offset and step of one request: 1 or 0, or with ``soft`` the
    expected acceptance ``sum_v min(p, q)`` along the greedy continuation (0 where the greedy draft left it)."""
    G = req.generated
    j = np.arange(1, steps + 1)[:, None]
    # a draft past the request's end is never kept (the last cycle is capped): nothing to complete there
    seen = j > G - np.arange(G)[None, :]
    acc = np.zeros((steps, G))
    for s in req.spans:
        n = np.arange(s.generated)
        i = s.base + n - (req.start - 1)                      # offsets of its bases in the request
        keep = (i >= 0) & (i < G) & ~((n < AFTER_DEPARTURE) & s.open_start)
        n, i = n[keep], i[keep]
        c = np.minimum(steps, s.generated - n)                # drafts with a token to compare with
        m = np.minimum(np.asarray(s.matches)[n], c)
        seen[:, i] |= j <= c[None, :]
        if soft:
            acc[:, i] = np.where(j <= c[None, :], np.asarray(s.soft)[:steps, n], 0.0)
        else:
            acc[:, i] = j <= m[None, :]
    return seen, acc


#: Bases this close after a departure draft from a context the target would not have written: not taken as seen
AFTER_DEPARTURE = 1
#: Cycle starts a step must have been compared at for its acceptance to be taken at cycle starts
MIN_CYCLE_STARTS = 20


def _cycle_start_counts(s: SampleStats, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(compared, accepted) per draft step at the starts of the cycles a span shows: cycles run from its first
    base (a span right after a departure leaves that one out), each step counted where it had a token to compare
    with and the steps before it were accepted (a Kaplan-Meier risk set)."""
    cond, acc = np.zeros(steps), np.zeros(steps)
    i, G, first = 0, s.generated, True
    while i < G:
        c = min(steps, G - i)
        m = min(int(s.matches[i]), c)
        if not (s.open_start and i < AFTER_DEPARTURE):
            cond[:min(m + 1, c)] += 1
            acc[:m] += 1
        first = False
        i += m + 1
    return cond, acc


#: Requests whose recursions run side by side (memory: draws x requests x longest request floats)
BATCH = 256


def _cycles(observed: Sequence[tuple[np.ndarray, np.ndarray]], a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected cycles (R, N) of N requests, each capped at its end, for conditional acceptances ``a`` (R, K)
    where a request's ``seen`` is False; and for the first row of ``a`` the expected cycles accepting draft j
    (N, K). Run backwards from each request's end, all requests at once: by tokens remaining ``r``, a cycle
    with ``r`` tokens to go that accepts ``x`` drafts keeps ``min(x, r - 1)`` and leaves ``r - x - 1``."""
    R, K = a.shape
    N = len(observed)
    G = np.array([seen.shape[1] for seen, _ in observed], int)
    Gmax = int(G.max()) if N else 0
    seen_r = np.ones((N, K, Gmax), bool)
    acc_r = np.zeros((N, K, Gmax))
    for n, (seen, acc) in enumerate(observed):
        seen_r[n, :, :G[n]] = seen[:K, ::-1]                  # column r - 1: the offset with r tokens to go
        acc_r[n, :, :G[n]] = acc[:K, ::-1]
    off = K + 1                                               # buffer index of r = 0 (r < 0 reads zeros too)
    cyc = np.zeros((R, N, Gmax + off + 1))
    pos = np.zeros((N, K, Gmax + off + 1))
    xs = np.arange(K + 1)
    js = np.arange(1, K + 1)
    for r in range(1, Gmax + 1):
        p = np.where(seen_r[None, :, :, r - 1], acc_r[None, :, :, r - 1], a[:, None, :])      # (R, N, K)
        reach = np.concatenate([np.ones((R, N, 1)), np.cumprod(p, axis=-1)], axis=-1)      # (R, N, K + 1)
        exactly = reach.copy()
        exactly[..., :-1] -= reach[..., 1:]
        nxt = r - 1 - xs + off                                                              # r - x - 1
        cyc[:, :, r + off] = 1.0 + (exactly * cyc[:, :, nxt]).sum(-1)
        kept = (np.minimum(xs, r - 1)[None, :] >= js[:, None]).astype(float)                # (K, K + 1)
        e0 = exactly[0]                                                                     # (N, K + 1)
        pos[:, :, r + off] = e0 @ kept.T + np.einsum("nx,njx->nj", e0, pos[:, :, nxt])
    at = G + off
    rows = np.arange(N)
    return cyc[:, rows, at], pos[rows, :, at]


def estimate_requests(requests: Sequence[Request], steps: int, *, seed: int = 0, resamples: int = RESAMPLES,
                      level: float = LEVEL, draws: int = ACCEPT_DRAWS, soft: bool = False) -> SpanEstimate:
    """The accept length of ``requests`` at K = 1..``steps`` (module docstring). ``soft``: at temperature > 0, the
    expected accept length on the same cycles, each seen draft accepted with its expected acceptance
    ``sum_v min(p, q)`` (the spans' ``soft``), the unseen ones with the expected acceptance per step over every
    compared position."""
    reqs = [r for r in requests if r.generated > 0]
    unit = "samples"
    if len({r.sample for r in reqs}) < 2 <= len(reqs):    # one sample of several turns: resample its turns
        reqs = [Request(n, r.start, r.end, r.spans) for n, r in enumerate(reqs)]
        unit = "requests"
    samples = list(dict.fromkeys(r.sample for r in reqs))
    index = {s: n for n, s in enumerate(samples)}
    S = len(samples)
    cond = np.zeros((S, steps))
    accd = np.zeros((S, steps))
    for r in reqs:
        for s in r.spans:
            cond[index[r.sample]] += s.conditioned[:steps]
            accd[index[r.sample]] += (s.soft_sum if soft else s.accepted)[:steps]
    unmeasured = tuple(j + 1 for j in range(steps) if cond[:, j].sum() == 0)
    rng = np.random.default_rng(seed)

    def rates(c, x):
        return np.where(c > 0, x / np.where(c > 0, c, 1), 0.0)

    picks = rng.integers(0, S, size=(draws, S)) if S >= 2 else None

    def acceptances(k: int) -> np.ndarray:
        """The conditional acceptances at K = k: the point estimate, then draws from their bootstrap over samples.
        Per step, at the starts of the cycles the spans show where enough were seen, else over every position."""
        cc, ca = np.zeros((S, k)), np.zeros((S, k))
        for r in reqs:
            for sp in r.spans:
                x, y = _cycle_start_counts(sp, k)
                cc[index[r.sample]] += x
                ca[index[r.sample]] += y
        use = (cc.sum(0) >= MIN_CYCLE_STARTS) & (not soft)       # (k,)
        c_, a_ = np.where(use, cc, cond[:, :k]), np.where(use, ca, accd[:, :k])
        point = rates(c_.sum(0), a_.sum(0))[None]
        if picks is None:
            return point
        return np.concatenate([point, rates(c_[picks].sum(1), a_[picks].sum(1))])    # (1 + draws, k)

    observed = [_observed(r, steps, soft) for r in reqs]
    completed = sum(int((~seen).sum()) for seen, _ in observed)
    total = sum(seen.size for seen, _ in observed)
    gen = np.array([r.generated for r in reqs], float)
    member = np.array([index[r.sample] for r in reqs])
    out, names = [], []
    counts: tuple = ()
    per_position: tuple = ()
    for k in range(1, steps + 1):
        a_all = acceptances(k)
        cyc = np.zeros((len(a_all), len(reqs)))
        pos = np.zeros((len(reqs), k))
        for lo in range(0, len(reqs), BATCH):
            part = [(seen[:k], acc[:k]) for seen, acc in observed[lo:lo + BATCH]]
            cyc[:, lo:lo + BATCH], pos[lo:lo + BATCH] = _cycles(part, a_all)
        value = float(gen.sum() / cyc[0].sum())
        name = COMPLETED if any(not seen[:k].all() for seen, _ in observed) else CYCLES
        if S >= 2:
            g_s = np.zeros(S)
            np.add.at(g_s, member, gen)
            c_s = np.zeros((len(a_all), S))
            for d in range(len(a_all)):
                np.add.at(c_s[d], member, cyc[d])
            boot = rng.integers(0, S, size=(resamples, S))
            which = 1 + np.arange(resamples) % max(len(a_all) - 1, 1) if len(a_all) > 1 else np.zeros(resamples, int)
            ratios = g_s[boot].sum(1) / c_s[which[:, None], boot].sum(1)
            iv = percentile_interval(value, ratios[np.isfinite(ratios)], level=level, how=f"bootstrap over {S} {unit}")
        else:
            iv = Interval(value, None, None, "one request: no interval")
        out.append(iv)
        names.append(name)
        if k == steps:
            counts = tuple((int(g), float(c)) for g, c in zip(gen, cyc[0]))
            per_position = tuple(float(x) for x in pos.sum(0) / cyc[0].sum())
    return SpanEstimate(tuple(out), tuple(names), counts, tuple(int(r.sample) for r in requests if r.generated > 0),
                        per_position,
                        completed / total if total else 0.0, unmeasured)
