"""The serving plan: for each batch size and each number of draft steps k = 0..K, what a cycle costs and
emits, the best k per batch size, where speculation stops paying, and the engines' configs.

Definitions (the ``eaglekit plan --json`` contract):

- accept length at k steps: ``1 + sum_{j<=k} prod_{i<=j} c_i`` from the per-step acceptances
  ``c_i = P(step i accepted | steps 1..i-1 accepted)`` (bonus token included, vLLM's convention); k = 0
  emits one token per step. Steps past the measured ones repeat the last measured acceptance, and the
  plan marks them as extrapolated.
- cycle at k steps and batch B: ``target(B, k + 1) + k x draft(B)``; k = 0 is a decode step ``target(B, 1)``.
- per-request tok/s = accept length / cycle; total tok/s = B x per-request; speedup against k = 0 at the same B.
- best k at B: the highest total tok/s (ties to the fewer steps); speculation stops paying at the smallest
  planned batch size from which the best k is 0 at every larger planned size.
- vLLM's ``num_speculative_tokens_per_batch_size``: inclusive batch-size ranges, gaps inherit the previous
  range's k, sizes past the last range inherit its k, the first range starts at 1 (vLLM PR #32374,
  ``vllm/v1/spec_decode/dynamic/utils.py``). Its first form was a dict ``{"1-16": 3}``; current releases
  take a list ``[[1, 16, 3], ...]`` (``docs/features/speculative_decoding/dynamic_speculative_decoding.md``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, text_table
from eaglekit.core.uncertainty import Interval, verdict

__all__ = [
    "STEPS_HEADERS",
    "TIE",
    "Acceptance",
    "BatchPlan",
    "Cost",
    "PlanTable",
    "StepOption",
    "accept_length",
    "best_steps",
    "check_batches",
    "constant_acceptance",
    "expand_schedule",
    "overlaps",
    "parse_schedule",
    "plan_batches",
    "schedule_dict",
    "schedule_from_steps",
    "steps_rows",
    "stops_paying_at",
    "stops_paying_from",
]

MAX_PLAN_STEPS = 16


@dataclass(frozen=True)
class Acceptance:
    """Measured per-step acceptance ``c_1..c_m`` and where it came from."""

    per_step: tuple[float, ...]
    source: str = "typed in"
    #: accept lengths measured directly at some k (runs, an engine's log): used there instead of the profile
    lengths: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if not self.per_step:
            raise InputError("the acceptance profile is empty: give at least one per-step acceptance")
        for j, c in enumerate(self.per_step, 1):
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or not 0 <= c <= 1:
                raise InputError(f"per-step acceptance {j} is {c!r}: each must be a probability in [0, 1] "
                                 "(P(step j accepted | steps 1..j-1 accepted))")

    @classmethod
    def from_positions(cls, rates: Sequence[float], *, source: str = "per-position rates") -> Acceptance:
        """From vLLM's per-position rates (accepted at position i / drafts): ``c_i = p_i / p_(i-1)``."""
        prev, out = 1.0, []
        for i, p in enumerate(rates, 1):
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0 <= p <= 1:
                raise InputError(f"per-position acceptance rate {i} is {p!r}: each must be in [0, 1]")
            if p > prev + 1e-9:
                raise InputError(f"per-position acceptance rate {i} ({p:g}) is above rate {i - 1} ({prev:g}): position i "
                                 "is reached only when position i-1 was accepted, so the rates cannot rise")
            if prev == 0:
                break
            out.append(min(p / prev, 1.0))
            prev = p
        return cls(tuple(out), source)

    @property
    def measured_steps(self) -> int:
        return max(len(self.per_step), max((k for k, _ in self.lengths), default=0))

    def at(self, k: int) -> float:
        """Accept length at ``k`` steps (bonus included): measured where :attr:`lengths` holds k, else from the
        per-step profile."""
        for j, L in self.lengths:
            if j == k:
                return L
        return accept_length(self.per_step, k)

    def extrapolated(self, k: int) -> bool:
        return k > self.measured_steps


def constant_acceptance(length: float, steps: int, *, source: str = "") -> Acceptance:
    """The constant per-step acceptance c with ``1 + c + ... + c^steps = length`` (what one accept length at k
    steps, SGLang's logged "accept len", allows), labelled as such."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_PLAN_STEPS:
        raise InputError(f"--steps must be a whole number from 1 to {MAX_PLAN_STEPS}, got {steps!r}")
    if (isinstance(length, bool) or not isinstance(length, (int, float)) or not math.isfinite(length)
            or not 1 <= length <= steps + 1):
        raise InputError(f"accept length {length!r} at {steps} steps must be a number from 1 to {steps + 1} (tokens "
                         "per cycle, bonus included)")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if accept_length((mid,), steps) < length:
            lo = mid
        else:
            hi = mid
    c = (lo + hi) / 2
    what = source or f"accept length {length:g} at {steps} steps"
    return Acceptance((c,) * steps, f"{what}: a constant per-step acceptance {c:.3f} (one accept length cannot say "
                                    "how acceptance falls with depth)", ((steps, float(length)),))


def accept_length(per_step: Sequence[float], k: int) -> float:
    """``1 + sum_{j<=k} prod_{i<=j} c_i``; steps past ``len(per_step)`` repeat the last one."""
    total, run = 1.0, 1.0
    for j in range(k):
        run *= per_step[min(j, len(per_step) - 1)]
        total += run
    return total


@dataclass(frozen=True)
class Cost:
    """A time in ms and whether it was measured (else the fitted or estimated model gave it)."""

    ms: float
    measured: bool


@dataclass(frozen=True)
class StepOption:
    """One (batch size, steps) cell of the plan."""

    batch: int
    steps: int
    accept_length: float
    verify: Cost  # the target forward: decode (k = 0) or verify at k + 1 tokens
    draft: Cost  # one draft step (0 when drafting is counted free)
    cycle_ms: float
    per_request_tokens_per_s: float
    tokens_per_s: float
    speedup: float
    extrapolated: bool  # accept length uses acceptance past the measured steps
    tokens_per_s_interval: Interval | None = None
    speedup_interval: Interval | None = None
    measured: bool = False  # a measured run gave this (batch, configuration)
    overhead_ms: float = 0.0
    topk: int = 1
    draft_tokens: int = 0  # 0: a chain, steps + 1
    family: str = "eagle3"  # or a block drafter's ("dflash"): K drafts from one forward over a block of K + 1
    accept_length_interval: Interval | None = None  # a block measurement's interval at this K

    @property
    def block(self) -> bool:
        return self.family != "eagle3"

    @property
    def tps(self) -> Interval:
        return self.tokens_per_s_interval or Interval(self.tokens_per_s)

    @property
    def gain(self) -> Interval:
        return self.speedup_interval or Interval(self.speedup)

    @property
    def verified_tokens(self) -> int:
        return self.draft_tokens or self.steps + 1

    def label(self) -> str:
        if self.block:
            return self.family_label()
        if self.topk <= 1:
            return f"k = {self.steps}"
        return f"steps {self.steps} topk {self.topk} draft tokens {self.verified_tokens}"

    def family_label(self) -> str:
        """The option named with its family: "EAGLE-3 chain k=3", "tree 6:10:60", "DFlash K=7 (block 8)"."""
        if self.block:
            return f"{BLOCK_NAMES.get(self.family, self.family)} K={self.steps} (block {self.steps + 1})"
        if not self.steps:
            return "no speculation"
        if self.topk <= 1:
            return f"EAGLE-3 chain k={self.steps}"
        return f"tree {self.steps}:{self.topk}:{self.verified_tokens}"

    def to_json(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.block:
            L = self.accept_length_interval or Interval(self.accept_length)
            extra = {"family": self.family, "block": self.steps + 1, "label": self.family_label(),
                     **L.fields("accept_length")}
        return {**self._json(), **extra}

    def _json(self) -> dict[str, Any]:
        return {"steps": self.steps, "topk": self.topk, "draft_tokens": self.verified_tokens if self.steps else 0,
                "accept_length": self.accept_length, "verify_ms": self.verify.ms,
                "verify_measured": self.verify.measured, "draft_ms": self.draft.ms,
                "draft_measured": self.draft.measured, "overhead_ms": self.overhead_ms, "cycle_ms": self.cycle_ms,
                **self.tps.fields("tokens_per_s"), "per_request_tokens_per_s": self.per_request_tokens_per_s,
                **self.gain.fields("speedup"), "measured": self.measured, "extrapolated": self.extrapolated}


#: display names of the block families
BLOCK_NAMES = {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}


@dataclass(frozen=True)
class BatchPlan:
    """Every k at one batch size, and the best."""

    batch: int
    options: tuple[StepOption, ...]  # k = 0 .. max steps (chains)
    trees: tuple[StepOption, ...] = ()  # tree configurations priced at this batch size
    fits: bool = True  # weights, KV cache and drafter fit in the GPUs' memory
    memory_gb: float | None = None  # what this batch size needs per GPU
    choice: int | None = None  # the chain k the schedule takes (None: the best by throughput)
    blocks: tuple[StepOption, ...] = ()  # block drafters' options at K = 1..measured (one family after another)

    @property
    def best_chain(self) -> StepOption:
        k = self.choice if self.choice is not None else best_steps([o.tokens_per_s for o in self.options])
        return self.options[k]

    @property
    def best_eagle(self) -> StepOption:
        """The best EAGLE-3 option: the chain the schedule takes, or a tree that beats it by more than :data:`TIE`."""
        b = self.best_chain
        for t in self.trees:
            if t.tokens_per_s > b.tokens_per_s * (1 + TIE):
                b = t
        return b

    @property
    def best_block(self) -> StepOption | None:
        """The fastest block option (ties within :data:`TIE` to fewer drafts), or None without block drafters."""
        if not self.blocks:
            return None
        top = max(o.tokens_per_s for o in self.blocks)
        return min((o for o in self.blocks if o.tokens_per_s >= top * (1 - TIE)), key=lambda o: (o.steps, -o.tokens_per_s))

    @property
    def best(self) -> StepOption:
        """The best option: the best EAGLE-3 one, or a block drafter's that beats it by more than :data:`TIE`."""
        b = self.best_eagle
        blk = self.best_block
        if blk is not None and blk.tokens_per_s > b.tokens_per_s * (1 + TIE):
            return blk
        return b

    @property
    def challenger(self) -> StepOption | None:
        """The best option with speculation: the best itself, or where that is k = 0 the fastest chain, tree or block
        with drafts (whose interval the verdict reads)."""
        b = self.best
        if b.steps:
            return b
        return max([*self.options[1:], *self.trees, *self.blocks], key=lambda o: o.tokens_per_s, default=None)

    @property
    def rival(self) -> StepOption | None:
        """With block drafters: the best of the other family (EAGLE-3 against a block, or the reverse)."""
        if not self.blocks:
            return None
        b = self.best
        return self.best_eagle if b.block else self.best_block

    @property
    def overlapping(self) -> tuple[int, ...]:
        """Chain k other than the best whose speedup interval (against no speculation at this batch size, so the
        target forward's error they share cancels) overlaps the best's; k = 0 when the best's reaches 1."""
        b = self.best
        return tuple(o.steps for o in self.options if o is not b and overlaps(o, b))

    @property
    def verdict(self) -> str:
        """GO / NO-GO / TOO CLOSE TO CALL for speculation at this batch size (the best option's speedup
        interval against 1)."""
        spec = self.challenger
        return "NO-GO" if spec is None else verdict(spec.gain, 1.0)

    def to_json(self) -> dict[str, Any]:
        blocks = {"blocks": [o.to_json() for o in self.blocks]} if self.blocks else {}
        if not self.fits:
            return {"batch": self.batch, "fits": False, "memory_gb_per_gpu": self.memory_gb, "best_steps": None,
                    "steps": [o.to_json() for o in self.options], "trees": [t.to_json() for t in self.trees], **blocks}
        b = self.best
        if self.blocks:
            r = self.rival
            blocks.update({"best_family": b.family if b.steps else None, "best_label": b.family_label(),
                           "rival": None if r is None else {"label": r.family_label(), **r.tps.fields("tokens_per_s"),
                                                            **r.gain.fields("speedup"),
                                                            "overlaps_best": overlaps(r, b)}})
        return {"batch": self.batch, "fits": True, "memory_gb_per_gpu": self.memory_gb, "best_steps": b.steps,
                "best_topk": b.topk, "best_draft_tokens": b.verified_tokens if b.steps else 0,
                "accept_length": b.accept_length, "cycle_ms": b.cycle_ms,
                **b.tps.fields("tokens_per_s"), "per_request_tokens_per_s": b.per_request_tokens_per_s,
                **b.gain.fields("speedup"), "verdict": self.verdict, "overlapping_steps": list(self.overlapping),
                "fitted": not (b.measured or (b.verify.measured and (b.draft.measured or b.draft.ms == 0))),
                "extrapolated": b.extrapolated, "steps": [o.to_json() for o in self.options],
                "trees": [t.to_json() for t in self.trees], **blocks}


def overlaps(a: StepOption, b: StepOption) -> bool:
    """Whether two options' speedup intervals overlap (k = 0's is exactly 1)."""
    a_lo, a_hi = (1.0, 1.0) if a.steps == 0 else (a.gain.low or a.speedup, a.gain.high or a.speedup)
    b_lo, b_hi = (1.0, 1.0) if b.steps == 0 else (b.gain.low or b.speedup, b.gain.high or b.speedup)
    return a_hi >= b_lo and b_hi >= a_lo


#: Throughputs within this fraction of the best are ties, and ties go to fewer steps.
TIE = 0.01


def best_steps(tokens_per_s: Sequence[float], *, tie: float = TIE) -> int:
    """Index of the highest throughput; an option within ``tie`` (relative) of it with fewer steps wins."""
    top = max(range(len(tokens_per_s)), key=lambda k: (tokens_per_s[k], -k))
    return next(k for k in range(top + 1) if tokens_per_s[k] >= tokens_per_s[top] * (1 - tie))


TargetCost = Callable[[int, int], Cost]
DraftCost = Callable[[int], Cost]


def plan_batches(batches: Sequence[int], acceptance: Acceptance, target: TargetCost, draft: DraftCost | None, *,
                 max_steps: int = 8, overhead_ms: float = 0.0) -> tuple[BatchPlan, ...]:
    """The plan for each batch size: k = 0 .. ``max_steps`` (see the module docstring for the definitions), point
    values only (the widget's twin; :func:`eaglekit.core.serving.grid.price_grid` adds the intervals);
    ``overhead_ms`` per speculative cycle."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 0 <= max_steps <= MAX_PLAN_STEPS:
        raise InputError(f"max steps must be a whole number from 0 to {MAX_PLAN_STEPS}, got {max_steps!r}")
    check_batches(batches)
    out = []
    for b in batches:
        d = draft(b) if draft is not None else Cost(0.0, False)
        options: list[StepOption] = []
        base = 0.0
        for k in range(max_steps + 1):
            v = target(b, k + 1)
            L = acceptance.at(k)
            cycle = v.ms + k * d.ms + (overhead_ms if k else 0.0)
            if not (math.isfinite(cycle) and cycle > 0):
                raise InputError(f"batch {b}, k = {k}: the cycle (verify {v.ms:g} ms + {k} draft steps of {d.ms:g} ms) "
                                 "is not a positive finite time; check the costs")
            per_request = L * 1000.0 / cycle
            total = b * per_request
            if k == 0:
                base = total
            options.append(StepOption(b, k, L, v, d if k else Cost(0.0, True), cycle, per_request, total,
                                      total / base, acceptance.extrapolated(k), overhead_ms=overhead_ms if k else 0.0))
        out.append(BatchPlan(b, tuple(options)))
    return tuple(out)


#: Largest batch size planned (the cost model's bound on one forward).
MAX_PLAN_BATCH = 1 << 24


def check_batches(batches: Sequence[int]) -> None:
    if not batches:
        raise InputError("no batch sizes to plan: give at least one (e.g. --batch 1,2,4,8)")
    prev = 0
    for b in batches:
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_PLAN_BATCH:
            raise InputError(f"batch sizes must be whole numbers from 1 to {MAX_PLAN_BATCH:,}, got "
                             f"{str(b)[:40]}{'...' if len(str(b)) > 40 else ''}")
        if b <= prev:
            raise InputError(f"batch sizes must rise: {b} follows {prev}")
        prev = b


def stops_paying_at(plans: Sequence[BatchPlan]) -> int | None:
    """The smallest planned batch size (of those that fit in memory) from which the best k is 0 at every larger
    planned size too, or None: a plan whose best k is 0 at batch 1 and 2 at batch 64 has not stopped paying."""
    fitting = [p for p in plans if p.fits]
    return stops_paying_from([p.batch for p in fitting], [p.best.steps for p in fitting])


def stops_paying_from(batches: Sequence[int], steps: Sequence[int]) -> int | None:
    """The first of the batch sizes from which every best k (``steps``, one per batch size) is 0, or None."""
    stop = None
    for b, k in zip(reversed(batches), reversed(steps)):
        if k != 0:
            break
        stop = b
    return stop


# -- the schedule ---------------------------------------------------------------------------------

Ranges = tuple[tuple[int, int, int], ...]  # (first batch, last batch, k), inclusive


def schedule_from_steps(batches: Sequence[int], steps: Sequence[int]) -> Ranges:
    """Ranges of equal best k over the planned batch sizes: each from its first planned size (1 for the first
    range) to its last; vLLM fills the gaps with the previous range's k."""
    check_batches(batches)
    ranges: list[list[int]] = []
    for b, k in zip(batches, steps):
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = b
        else:
            ranges.append([1 if not ranges else b, b, k])
    return tuple((lo, hi, k) for lo, hi, k in ranges)


def schedule_dict(ranges: Ranges) -> dict[str, int]:
    """vLLM's first form, ``{"1-16": 3, ...}``."""
    return {f"{lo}-{hi}": k for lo, hi, k in ranges}


_RANGE = re.compile(r"^\s*(\d+)(?:\s*-\s*(\d+))?\s*$")


def parse_schedule(schedule: Mapping[str, Any] | Sequence[Any]) -> Ranges:
    """A ``num_speculative_tokens_per_batch_size`` value in either of vLLM's forms, validated as vLLM does
    (positive, start <= end, sorted without overlap, first range at 1, k >= 0)."""
    entries: list[tuple[int, int, int]] = []
    if isinstance(schedule, Mapping):
        for key, k in schedule.items():
            m = _RANGE.fullmatch(str(key))
            if m is None:
                raise InputError(f"schedule range {key!r}: expected 'N' or 'N-M'")
            entries.append((int(m.group(1)), int(m.group(2) or m.group(1)), _k(k, key)))
    elif isinstance(schedule, Sequence) and not isinstance(schedule, str):
        for item in schedule:
            if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 3:
                raise InputError(f"schedule entry {item!r}: expected [first batch, last batch, k]")
            lo, hi, k = item
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)):
                raise InputError(f"schedule entry {item!r}: batch sizes must be whole numbers")
            entries.append((lo, hi, _k(k, item)))
    else:
        raise InputError("a schedule is a JSON object {\"1-16\": 3, ...} or a list [[1, 16, 3], ...]")
    if not entries:
        raise InputError("the schedule is empty")
    entries.sort()
    prev = 0
    for lo, hi, _ in entries:
        if lo < 1 or hi < lo:
            raise InputError(f"schedule range {lo}-{hi}: batch sizes must be positive with start <= end")
        if lo <= prev:
            raise InputError(f"schedule range {lo}-{hi} overlaps the one before it")
        prev = hi
    if entries[0][0] != 1:
        raise InputError("the schedule's first range must start at batch size 1")
    return tuple(entries)


def _k(k: Any, where: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InputError(f"schedule {where!r}: k must be a whole number >= 0, got {k!r}")
    return k


def expand_schedule(ranges: Ranges, batch: int) -> int:
    """The k vLLM runs at ``batch``: the range holding it, else the last range that starts below it."""
    k = ranges[0][2]
    for lo, hi, steps in ranges:
        if lo > batch:
            break
        k = steps
    return k


# -- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanTable:
    """The per-batch rows the record renders (best k at each batch size)."""

    plans: tuple[BatchPlan, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def families(self) -> bool:
        """Whether block drafters are priced beside EAGLE-3 (then the best is named with its family)."""
        return any(p.blocks for p in self.plans)

    def headers(self) -> list[str]:
        return ["batch", "best" if self.families else "best k", "accept length", "cycle ms", "tok/s (all, 95%)",
                "speedup (95%)", "verdict", "also within"]

    def rows(self) -> list[list[str]]:
        out = []
        for p in self.plans:
            if not p.fits:
                need = "" if p.memory_gb is None else f"{p.memory_gb:.0f} GB per GPU"
                out.append([str(p.batch), "-", "-", "-", f"does not fit ({need})", "-", "-", "-"])
                continue
            b = p.best
            mark = "" if b.measured else " *"
            ext = " ^" if b.extrapolated else ""
            k = str(b.steps) if b.topk <= 1 else f"{b.steps}/{b.topk}/{b.verified_tokens}"
            also = ", ".join(str(k) for k in p.overlapping) or "-"
            length = f"{b.accept_length:.2f}"
            if self.families:
                k = b.family_label()
                within = [f"k={j}" for j in p.overlapping]
                r = p.rival
                if r is not None and r.block and overlaps(r, b):
                    within.append(r.family_label())
                also = ", ".join(within) or "-"
                if b.accept_length_interval is not None:
                    length = b.accept_length_interval.text(2)
            out.append([str(p.batch), f"{k}{ext}", length, f"{b.cycle_ms:.1f}{mark}",
                        b.tps.text(0), b.gain.text(2), p.verdict, also])
        return out

    def text(self, title: str) -> str:
        return text_table(self.headers(), self.rows(), align=["right"] * 8, title=title)

    def html(self, caption: str) -> str:
        return html_table(self.headers(), self.rows(), align=["right"] * 8, caption=caption)


def steps_rows(plan: BatchPlan) -> list[list[str]]:
    """Every k at one batch size: accept length, verify and draft ms (``*``: from the model), cycle, tok/s."""
    rows = []
    for o in plan.options:
        rows.append([str(o.steps) + (" ^" if o.extrapolated else ""), f"{o.accept_length:.2f}",
                     f"{o.verify.ms:.2f}" + ("" if o.verify.measured else " *"),
                     f"{o.draft.ms:.2f}" + ("" if o.draft.measured or o.draft.ms == 0 else " *"),
                     f"{o.cycle_ms:.1f}" + ("" if o.measured else " *"), o.tps.text(1), o.gain.text(2)])
    return rows


STEPS_HEADERS = ["k", "accept length", "target ms", "draft ms", "cycle ms", "tok/s (all, 95%)", "speedup (95%)"]

