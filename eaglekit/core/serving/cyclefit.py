"""What a speculative cycle costs beyond the target's forward, fitted to measured runs, with its uncertainty.

A cycle of ``steps`` draft steps at batch B, ``topk`` branches per step and ``n`` verified tokens per request is

    cycle(B) = target(B, n) + steps x (draft + draft_per_row x B x topk) + overhead

``target`` is the cost model of the target's forward (:mod:`eaglekit.core.serving.costmodel`), fitted to the
no-speculation rows and measured forwards; ``draft`` is a draft step's latency floor (kernel launches, the
drafter's bytes, collectives: it does not vanish at batch 1), ``draft_per_row`` what each row adds, and
``overhead`` the per-cycle work beyond the verify and the draft steps (the draft-extend pass over the accepted
tokens, sampling, tree and mask building). Speculative runs give ``cycle - target`` at their configuration, so
the three draft terms are a linear least-squares problem; a Gaussian prior on each (:class:`DraftPrior`)
keeps it well posed with any number of rows (the fit never divides by a zero-width term) and is what the
plan says when no speculative row was measured.

Uncertainty: the posterior covariance of the three terms (the spread the rows leave them), the relative
scatter of the fit's rows (at least :data:`RUN_NOISE`, the run-to-run spread of a bench tool) for a new run,
and the target forward's own scatter. Intervals are 95% (:data:`Z`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.serving.costmodel import Gpu, ModelShape

__all__ = ["RUN_NOISE", "CycleFit", "DraftPrior", "Z", "draft_prior", "eagle3_drafter", "fit_cycle", "fit_without_each"]

#: Relative run-to-run spread assumed for a measured throughput when the rows cannot tell it (bench tools
#: repeated on one server differ by a few percent; a fit's own scatter replaces it when larger).
RUN_NOISE = 0.03
#: two-sided 95% normal quantile
Z = 1.96
TERMS = ("draft_ms", "draft_ms_per_row", "overhead_ms")

#: Kernels one EAGLE-3 draft step launches: the decoder layer (two norms, fused qkv, rotary, attention, o_proj,
#: residual, norm, gate_up, activation, down, residual), the final norm, lm_head, softmax / top-k, the d2t
#: lookup and the engine's bookkeeping between steps (counted from SGLang's llama_eagle3.py forward and its
#: eagle worker's draft loop; vLLM's llama_eagle3.py is the same layer).
DRAFT_KERNELS = 24
#: Kernels a MoE MLP adds to a draft step (router GEMM, top-k, token permute, two grouped expert GEMMs, combine),
#: and an MLA attention (q_a / kv_a projections, their norms, q_b / kv_b), counted from SGLang's deepseek_v2.py.
MOE_KERNELS, MLA_KERNELS = 6, 5
#: Microseconds per kernel in a captured graph's step, launch gap included, on a datacenter GPU.
KERNEL_US = 20.0
#: Microseconds per tensor-parallel all-reduce of one hidden-state row (two per layer when TP > 1).
ALLREDUCE_US = 25.0
#: The fraction of HBM bandwidth a small GEMV reads at.
SMALL_READ_EFFICIENCY = 0.6
#: Sampling, accepted-token bookkeeping and mask building per cycle, beyond one drafter pass (ms).
CYCLE_BOOKKEEPING_MS = 0.3
#: The engine's work per drafted row per step beyond the drafter's FLOPs (draft-extend rows, tree and mask
#: building, sampling): SGLang's speedup falls from 1.81x at batch 2 to 1.38x at 64 in the EAGLE-3 paper's Table 3
#: (Llama-3.1-8B, one H100, chain of 3: about 0.03 ms per request per step beyond the roofline), and AngelSlim #163's
#: tree (4, 4, 16) grows about 0.06 ms per drafted row per step from batch 1 to 64.
ENGINE_ROW_MS = 0.03
#: The per-cycle overhead's prior spread, in units of its mean: published cycles hold from about 1 ms beyond the
#: verify and the steps (vLLM #20780, Llama-3.1-8B) to about 6 ms (SGLang on Qwen3-30B-A3B, SpecForge #339 and
#: AngelSlim #163: the cycle grows well under 0.5 ms per added step, yet sits 5-7 ms above the decode at 3 steps).
OVERHEAD_SPREAD = 3.0


def eagle3_drafter(target: ModelShape, *, draft_vocab: int = 32000) -> ModelShape:
    """A Llama-style EAGLE-3 drafter of ``target``'s hidden size (SpecForge's configs: one decoder layer with the
    target's heads and intermediate size, fc from three hidden states, a 32k-row head; bf16): Kimi-K2's is about
    1.19 B parameters, Llama-3.1-8B's about 0.42 B. A dense shape read once per draft step."""
    H = target.hidden_size
    if H <= 0:
        raise InputError(f"{target.name}: the shape has no hidden size, so no drafter can be sized from it; give "
                         "--drafter or a draft table")
    heads = target.attention_heads or max(1, H // 128)
    hd = 128
    kv = heads if target.kv_heads is None else min(target.kv_heads, heads)
    inter = target.intermediate_size or 4 * H
    params = (3 * H * H + 2 * H * heads * hd + 2 * (2 * H * kv * hd) + heads * hd * H + 3 * H * inter
              + draft_vocab * H + 4 * H)
    return ModelShape(f"EAGLE-3 drafter sized from {target.name} (hidden {H})", 1, 0, 0, 0, 0.0, 0.0, params * 2.0,
                      float(params), 2.0 * kv * hd * 2.0, kv, 4.0 * heads * hd, "bf16", "config", (), H, inter, heads)


@dataclass(frozen=True)
class DraftPrior:
    """Prior means and standard deviations of (draft ms per step, ms per row per step, overhead ms per cycle)."""

    mean: tuple[float, float, float]
    sd: tuple[float, float, float]
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"mean": dict(zip(TERMS, self.mean)), "sd": dict(zip(TERMS, self.sd)), "source": self.source}


def draft_prior(drafter: ModelShape | None, gpu: Gpu | None, *, tp: int = 1, context: int = 4096) -> DraftPrior:
    """The prior on the draft terms from a drafter's shape on a GPU.

    Latency floor per step: :data:`DRAFT_KERNELS` x :data:`KERNEL_US` (+ two all-reduces per layer under TP) + the
    drafter's bytes per GPU read at :data:`SMALL_READ_EFFICIENCY` of the bandwidth. Per row: its FLOPs at half the
    dense bf16 rate, its KV cache over the context and :data:`ENGINE_ROW_MS`. Overhead per cycle: one more drafter
    pass (the draft-extend over the accepted tokens) + :data:`CYCLE_BOOKKEEPING_MS`. For an 8B-class drafter on an H100
    that is about 0.9 ms per step and 1.2 ms per cycle, the size of what published vLLM and SGLang profiles
    show (about 1 ms per draft step and about 1 ms per cycle beyond the verify). Each term's standard
    deviation is its mean, the overhead's :data:`OVERHEAD_SPREAD` times its mean: the prior says "about this
    size", not more. Without a drafter or a GPU: the 8B-class figures on an H100.
    """
    if drafter is None or gpu is None:
        return DraftPrior((0.9, 0.004 + ENGINE_ROW_MS, 1.2), (0.9, 0.004 + ENGINE_ROW_MS, OVERHEAD_SPREAD * 1.2),
                          "prior: an 8B-class EAGLE-3 drafter on an H100 (about 0.9 ms per step, 1.2 ms per cycle; "
                          f"no drafter shape or GPU given), sd = mean ({OVERHEAD_SPREAD:g} x for the overhead)")
    kernels = DRAFT_KERNELS + (MOE_KERNELS if drafter.moe_layers else 0) + (MLA_KERNELS if drafter.kv_heads is None
                                                                             else 0)
    launch = kernels * KERNEL_US / 1000.0 + (2 * drafter.layers * ALLREDUCE_US / 1000.0 if tp > 1 else 0.0)
    # a MoE drafter's step reads the experts one row routes to (shared ones are in always_bytes); each further row
    # of a step adds the experts it routes to that the others did not (the mean over 1 to 16 rows)
    step_bytes = drafter.weight_bytes(1)
    read = step_bytes / tp / 1e9 / (gpu.hbm_tb_s * SMALL_READ_EFFICIENCY)
    step = launch + read
    flop_ms = 2.0 * drafter.active_params / tp / (gpu.bf16_tflops * 0.5 * 1e12) * 1000.0
    kv_ms = context * drafter.kv_bytes_per_token / max(1, min(tp, drafter.kv_heads or 1)) / 1e9 / gpu.hbm_tb_s
    expert_ms = ((drafter.weight_bytes(16) - step_bytes) / 15 / tp / 1e9 / (gpu.hbm_tb_s * SMALL_READ_EFFICIENCY)
                 if drafter.moe_layers else 0.0)
    per_row = flop_ms + kv_ms + expert_ms + ENGINE_ROW_MS
    overhead = step + CYCLE_BOOKKEEPING_MS
    return DraftPrior((step, per_row, overhead), (step, per_row, OVERHEAD_SPREAD * overhead),
                      f"prior from {drafter.name} on {gpu.name} x {tp}: {step:.2f} ms per step "
                      f"({launch:.2f} launch floor + {read:.2f} reading {step_bytes / 1e9:.2f} GB / {tp}), "
                      f"{per_row * 1000:.2f} us per row, {overhead:.2f} ms per cycle; sd = mean "
                      f"({OVERHEAD_SPREAD:g} x for the overhead)")


@dataclass(frozen=True)
class Row:
    """One speculative run as the fit sees it: the cycle's features and what it measured beyond the forward."""

    label: str
    x: tuple[float, float, float]
    cycle_ms: float
    target_ms: float

    @property
    def y(self) -> float:
        return self.cycle_ms - self.target_ms


@dataclass(frozen=True)
class CycleFit:
    """The fitted draft terms (:data:`TERMS`), their covariance, the rows' residuals and the noise level."""

    value: tuple[float, float, float]
    cov: tuple[tuple[float, float, float], ...]
    prior: DraftPrior
    rows: tuple[Row, ...]
    noise: float  # relative scatter of a run's cycle
    target_noise: float  # relative scatter of the target forward's fit

    def draft_ms(self, batch: int, topk: int = 1) -> float:
        """One draft step at ``batch``: one batched pass per level (the step's floor is paid once per level,
        whatever ``topk``), its ``batch x topk`` rows each adding the per-row cost. AngelSlim #163's tree (4, 4, 16)
        grows about 0.06 ms per drafted row (batch x topk) per step from batch 1 to 64, so the branches' rows are
        priced as rows (benchmarks/RESULTS.md: without that the sweep's batch 32 is predicted 2x fast)."""
        return self.value[0] + self.value[1] * batch * max(topk, 1)

    @staticmethod
    def features(batch: int, steps: int, topk: int = 1) -> tuple[float, float, float]:
        """(steps, steps x batch x topk, 1 if any step): one floor per level, every drafted row (:meth:`draft_ms`)."""
        return (float(steps), float(steps * batch * max(topk, 1)), 1.0 if steps else 0.0)

    def extra_ms(self, batch: int, steps: int, topk: int = 1) -> float:
        """Drafting and overhead of one cycle (0 at steps 0)."""
        x = self.features(batch, steps, topk)
        return sum(a * b for a, b in zip(x, self.value))

    def extra_var(self, x: Sequence[float], y: Sequence[float] | None = None) -> float:
        y = x if y is None else y
        return sum(x[i] * self.cov[i][j] * y[j] for i in range(3) for j in range(3))

    def set_by(self, i: int) -> str:
        """"fitted" when the runs narrowed term ``i`` to under half its prior spread or moved it by more than half
        that spread from the prior's mean, else "prior"."""
        narrowed = math.sqrt(max(self.cov[i][i], 0.0)) < 0.5 * self.prior.sd[i]
        moved = abs(self.value[i] - self.prior.mean[i]) > 0.5 * self.prior.sd[i]
        return "fitted" if narrowed or moved else "prior"

    def off_prior(self) -> list[str]:
        """The terms the rows put outside their prior's 95% range, each as a sentence."""
        out = []
        for i, name in enumerate(("the draft step", "the cost per drafted row", "the per-cycle overhead")):
            m, sd, v = self.prior.mean[i], self.prior.sd[i], self.value[i]
            lo, hi = max(0.0, m - Z * sd), m + Z * sd
            if not lo <= v <= hi:
                out.append(f"{name} fitted to {v:.3g} ms, {v / m:.1f}x its prior {m:.3g} ms (the prior's 95% range "
                           f"{lo:.3g}-{hi:.3g} ms)")
        return out

    def to_json(self) -> dict[str, Any]:
        terms = []
        for i, name in enumerate(TERMS):
            rows = [r.label for r in self.rows if r.x[i]]
            terms.append({"term": name, "value": self.value[i], "sd": math.sqrt(max(self.cov[i][i], 0.0)),
                          "prior_mean": self.prior.mean[i], "prior_sd": self.prior.sd[i], "set_by": self.set_by(i),
                          "rows": rows})
        return {"terms": terms, "noise": self.noise, "target_noise": self.target_noise, "prior": self.prior.to_json(),
                "rows": [{"row": r.label, "cycle_ms": r.cycle_ms, "target_ms": r.target_ms,
                          "predicted_cycle_ms": r.target_ms + sum(a * b for a, b in zip(r.x, self.value)),
                          "residual": (r.target_ms + sum(a * b for a, b in zip(r.x, self.value))) / r.cycle_ms - 1}
                         for r in self.rows]}


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gauss-Jordan for a small positive-definite system (the prior keeps it so)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for i in range(n):
        piv = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[piv] = m[piv], m[i]
        d = m[i][i]
        m[i] = [v / d for v in m[i]]
        for r in range(n):
            if r != i:
                f = m[r][i]
                m[r] = [x - f * z for x, z in zip(m[r], m[i])]
    return [m[i][n] for i in range(n)]


def _inverse(a: list[list[float]]) -> list[list[float]]:
    n = len(a)
    cols = [_solve(a, [1.0 if i == j else 0.0 for i in range(n)]) for j in range(n)]
    return [[cols[j][i] for j in range(n)] for i in range(n)]


@dataclass(frozen=True)
class _Sums:
    """What the fit reads of its rows, weighted by 1 / cycle^2 (relative errors): sums of x x^T, x y and y^2, and
    the count. A row's share is subtracted in O(1), so leaving each row out in turn stays linear in the rows."""

    xx: tuple[tuple[float, float, float], ...]
    xy: tuple[float, float, float]
    yy: float
    n: int

    @classmethod
    def of(cls, rows: Sequence[Row]) -> _Sums:
        xx = [[0.0] * 3 for _ in range(3)]
        xy = [0.0] * 3
        yy = 0.0
        for r in rows:
            w = 1.0 / r.cycle_ms ** 2
            y = r.y
            for i in range(3):
                xy[i] += w * r.x[i] * y
                for j in range(3):
                    xx[i][j] += w * r.x[i] * r.x[j]
            yy += w * y * y
        return cls(tuple(tuple(v) for v in xx), tuple(xy), yy, len(rows))  # type: ignore[arg-type]

    def without(self, r: Row) -> _Sums:
        w = 1.0 / r.cycle_ms ** 2
        xx = tuple(tuple(self.xx[i][j] - w * r.x[i] * r.x[j] for j in range(3)) for i in range(3))
        xy = tuple(self.xy[i] - w * r.x[i] * r.y for i in range(3))
        return _Sums(xx, xy, max(self.yy - w * r.y * r.y, 0.0), self.n - 1)  # type: ignore[arg-type]

    def residual_ss(self, theta: Sequence[float]) -> float:
        """Sum over the rows of ((x . theta - y) / cycle)^2."""
        quad = sum(theta[i] * self.xx[i][j] * theta[j] for i in range(3) for j in range(3))
        return max(quad - 2.0 * sum(t * v for t, v in zip(theta, self.xy)) + self.yy, 0.0)


def _posterior(sums: _Sums, prior: DraftPrior, noise: float,
               free: Sequence[int]) -> tuple[list[float], list[list[float]]]:
    """MAP with ``free`` terms fitted and the others held at 0: weighted normal equations plus the prior."""
    idx = list(free)
    k = 1.0 / noise ** 2
    a = [[k * sums.xx[i][j] for j in idx] for i in idx]
    b = [k * sums.xy[i] for i in idx]
    for p, i in enumerate(idx):
        a[p][p] += 1.0 / prior.sd[i] ** 2
        b[p] += prior.mean[i] / prior.sd[i] ** 2
    sol = _solve(a, b)
    full = [0.0, 0.0, 0.0]
    for p, i in enumerate(idx):
        full[i] = sol[p]
    return full, a


def _objective(sums: _Sums, prior: DraftPrior, noise: float, theta: Sequence[float]) -> float:
    data = sums.residual_ss(theta) / noise ** 2
    return data + sum(((t - m) / s) ** 2 for t, m, s in zip(theta, prior.mean, prior.sd))


def _map(sums: _Sums, prior: DraftPrior, noise: float) -> list[float]:
    """The non-negative MAP: the best of the 8 free/zero patterns whose solution is feasible."""
    best: tuple[float, list[float]] | None = None
    for mask in range(8):
        free = [i for i in range(3) if mask >> i & 1]
        theta = _posterior(sums, prior, noise, free)[0] if free else [0.0, 0.0, 0.0]
        if any(t < -1e-12 for t in theta):
            continue
        theta = [max(t, 0.0) for t in theta]
        obj = _objective(sums, prior, noise, theta)
        if best is None or obj < best[0] - 1e-12:
            best = (obj, theta)
    assert best is not None  # all-zero is always feasible
    return best[1]


def _fit(sums: _Sums, prior: DraftPrior) -> tuple[list[float], list[list[float]], float]:
    """(terms, covariance, noise) of the rows summed in ``sums`` (see :func:`fit_cycle`)."""
    for p in prior.sd:
        if not (math.isfinite(p) and p > 0):
            raise InputError("the draft prior needs a positive spread for every term")
    noise = RUN_NOISE
    theta = _map(sums, prior, noise)
    if sums.n > 0:
        _, a = _posterior(sums, prior, noise, [0, 1, 2])
        inv = _inverse(a)
        # effective parameters the rows determine: trace of the hat matrix
        used = sum(inv[i][j] * sums.xx[i][j] for i in range(3) for j in range(3)) / noise ** 2
        dof = sums.n - used
        if dof > 0.5:
            noise = max(RUN_NOISE, math.sqrt(sums.residual_ss(theta) / dof))
        theta = _map(sums, prior, noise)
    _, a = _posterior(sums, prior, noise, [0, 1, 2])
    return theta, _inverse(a), noise


def fit_cycle(rows: Sequence[Row], prior: DraftPrior, *, target_noise: float = 0.0) -> CycleFit:
    """Fit the draft terms to speculative rows under ``prior`` (no rows: the prior itself).

    Noise: the rows' relative scatter around the fit (with the degrees of freedom the prior leaves), never
    below :data:`RUN_NOISE`; the covariance is the inverse of the weighted normal matrix with the prior's
    precision added (positive definite whatever the rows), evaluated at that noise."""
    theta, cov, noise = _fit(_Sums.of(rows), prior)
    return CycleFit(tuple(theta), tuple(tuple(r) for r in cov), prior, tuple(rows), noise,  # type: ignore[arg-type]
                    target_noise)


def fit_without_each(rows: Sequence[Row], prior: DraftPrior) -> list[tuple[tuple[float, float, float], float]]:
    """For each row, the (terms, noise) the other rows fit: as :func:`fit_cycle` of the rest, in time linear in
    the rows (each fit subtracts one row's share of the sums)."""
    sums = _Sums.of(rows)
    out = []
    for r in rows:
        theta, _, noise = _fit(sums.without(r), prior)
        out.append((tuple(theta), noise))
    return out  # type: ignore[return-value]
