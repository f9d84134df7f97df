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
accepted | steps 1..j-1 accepted)``, pooled over every compared position of the dump (a Kaplan-Meier product
over the censored match lengths). The expected cycles follow backwards without sampling
(``C[i] = 1 + sum_a P_i(a) C[i + a + 1]``, :func:`~eaglekit.analysis.acceptance.measure.expected_counts`'s
recursion), and the accept length is generated tokens / expected cycles, pooled over requests.

On text the target generated greedily nothing is completed and the figure is ``--target``'s, exactly; on
dataset text it is the figure ``--target`` would give had the target written these samples, with requests as
long as the samples' assistant turns. :attr:`SpanEstimate.estimator` says which held.

The interval is a percentile bootstrap over samples (requests of one sample stay together) in which each
resample also draws the conditional acceptances from their own bootstrap, so the completion's uncertainty is
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
             "conditional acceptances")
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


def _observed(req: Request, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(seen (K, G) bool, accepted (K, G) float) at each offset and step of one request."""
    G = req.generated
    seen = np.zeros((steps, G), bool)
    acc = np.zeros((steps, G))
    # a draft past the request's end is never kept (the last cycle is capped): nothing to complete there
    seen |= np.arange(1, steps + 1)[:, None] > G - np.arange(G)[None, :]
    for s in req.spans:
        for n in range(s.generated):
            i = s.base + n - (req.start - 1)                   # offset of this base in the request
            if not 0 <= i < G or (n == 0 and s.open_start):
                continue
            c = min(steps, s.generated - n)                   # drafts with a token to compare with
            m = min(int(s.matches[n]), c)
            seen[:c, i] = True
            acc[:m, i] = 1.0
    return seen, acc


def _cycles(seen: np.ndarray, acc: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected cycles (R,) and expected cycles accepting draft j (R, K) of one request, capped at its end, for
    conditional acceptances ``a`` (R, K) where ``seen`` is False."""
    R, K = a.shape
    G = seen.shape[1]
    cycles = np.zeros((R, G + K + 2))
    per_pos = np.zeros((R, K, G + K + 2))
    steps = np.arange(K + 1)
    for i in range(G - 1, -1, -1):
        p_step = np.where(seen[:, i][None, :], acc[:, i][None, :], a)          # (R, K)
        reach = np.concatenate([np.ones((R, 1)), np.cumprod(p_step, axis=1)], axis=1)   # (R, K + 1)
        exactly = reach.copy()
        exactly[:, :-1] -= reach[:, 1:]
        cap = np.minimum(steps, G - i - 1)                                       # accepted drafts kept
        nxt = i + steps + 1
        cycles[:, i] = 1.0 + (exactly * cycles[:, nxt]).sum(1)
        kept = (cap[None, :] >= np.arange(1, K + 1)[:, None]).astype(float)    # (K, K + 1): draft j kept
        per_pos[:, :, i] = exactly @ kept.T + np.einsum("ra,rja->rj", exactly, per_pos[:, :, nxt])
    return cycles[:, 0], per_pos[:, :, 0]


def estimate_requests(requests: Sequence[Request], steps: int, *, seed: int = 0, resamples: int = RESAMPLES,
                      level: float = LEVEL, draws: int = ACCEPT_DRAWS) -> SpanEstimate:
    """The accept length of ``requests`` at K = 1..``steps`` (module docstring)."""
    reqs = [r for r in requests if r.generated > 0]
    samples = list(dict.fromkeys(r.sample for r in reqs))
    index = {s: n for n, s in enumerate(samples)}
    S = len(samples)
    cond = np.zeros((S, steps))
    accd = np.zeros((S, steps))
    for r in reqs:
        for s in r.spans:
            cond[index[r.sample]] += s.conditioned[:steps]
            accd[index[r.sample]] += s.accepted[:steps]
    unmeasured = tuple(j + 1 for j in range(steps) if cond[:, j].sum() == 0)
    rng = np.random.default_rng(seed)

    def rates(c, x):
        return np.where(c > 0, x / np.where(c > 0, c, 1), 0.0)

    # the conditional acceptances: the point estimate, then draws from their bootstrap over samples
    point = rates(cond.sum(0), accd.sum(0))[None]
    if S >= 2:
        picks = rng.integers(0, S, size=(draws, S))
        a_all = np.concatenate([point, rates(cond[picks].sum(1), accd[picks].sum(1))])   # (1 + draws, K)
    else:
        a_all = point
    observed = [_observed(r, steps) for r in reqs]
    completed = sum(int((~seen).sum()) for seen, _ in observed)
    total = sum(seen.size for seen, _ in observed)
    gen = np.array([r.generated for r in reqs], float)
    member = np.array([index[r.sample] for r in reqs])
    out, names = [], []
    counts: tuple = ()
    per_position: tuple = ()
    for k in range(1, steps + 1):
        cyc = np.zeros((len(a_all), len(reqs)))
        pos = np.zeros((len(reqs), k))
        for n, (seen, acc) in enumerate(observed):
            sk, ak = seen[:k], acc[:k]
            if sk.all():                                     # nothing completed: the same for every draw
                c, p = _cycles(sk, ak, a_all[:1, :k])
                cyc[:, n] = c[0]
            else:
                c, p = _cycles(sk, ak, a_all[:, :k])
                cyc[:, n] = c
            pos[n] = p[0]
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
            iv = percentile_interval(value, ratios[np.isfinite(ratios)], level=level, how=f"bootstrap over {S} samples")
        else:
            iv = Interval(value, None, None, "one sample: no interval")
        out.append(iv)
        names.append(name)
        if k == steps:
            counts = tuple((int(g), float(c)) for g, c in zip(gen, cyc[0]))
            per_position = tuple(float(x) for x in pos.sum(0) / cyc[0].sum())
    return SpanEstimate(tuple(out), tuple(names), counts, tuple(int(r.sample) for r in reqs), per_position,
                        completed / total if total else 0.0, unmeasured)
