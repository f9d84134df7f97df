"""``eaglekit.plan``: the serving plan of a drafter on a target, from measured per-step acceptance and a cost
model of the target's forward (fitted to measurements, or estimated from its config and a GPU table).

The maths lives in :mod:`eaglekit.core.serving.costmodel` (time of one forward) and :mod:`eaglekit.core.serving.plan`
(accept length, cycle, best k, vLLM's schedule); this module reads the inputs (files, the target's config and
checkpoint header by range) and holds the :class:`ServingPlan` record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eaglekit.io.sources.local import read_local_file
from eaglekit.analysis.serving.target import drafter_step_shape, target_shape
from eaglekit.core import safejson
from eaglekit.core.serving.costmodel import (
    CostModel,
    ModelShape,
    Point,
    calibrate,
    check_parallel,
    estimate_model,
    fit_model,
)
from eaglekit.core.serving.costmodel import gpu as gpu_entry
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.serving.inputs import (
    DraftEstimate,
    DraftTable,
    acceptance_from_json,
    acceptance_from_vllm_log,
    parse_costs,
    parse_draft_costs,
    parse_sglang_bench,
)
from eaglekit.core.serving.plan import (
    STEPS_HEADERS,
    Acceptance,
    BatchPlan,
    Cost,
    PlanTable,
    Ranges,
    plan_batches,
    schedule_dict,
    schedule_from_steps,
    steps_rows,
    stops_paying_at,
)

__all__ = ["DEFAULT_BATCHES", "ServingPlan", "engine_config", "plan"]

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_VERIFY_HEADERS = ("k", "tokens", "distinct experts / layer", "target ms", "vs decode", "draft ms", "accept length",
                   "cycle ms", "tok/s (all)", "speedup")
_FITTED, _EXTRAPOLATED = "* from the cost model (not measured)", "^ acceptance past the measured steps repeats the last"


def engine_config(ranges: Ranges, *, drafter: str | None = None) -> dict[str, Any]:
    """vLLM's ``speculative_config`` and SGLang's flags for a schedule (see docs/serving-plan.md for versions)."""
    top = max(k for _, _, k in ranges)
    model = drafter or "<drafter>"
    if top == 0:
        vllm: dict[str, Any] = {"speculative_config": None,
                                "note": "speculation does not pay at any planned batch size: serve without it"}
    else:
        spec: dict[str, Any] = {"method": "eagle3", "model": model, "num_speculative_tokens": top}
        if len({k for _, _, k in ranges}) > 1:
            spec["num_speculative_tokens_per_batch_size"] = [[lo, hi, k] for lo, hi, k in ranges]
        vllm = {"speculative_config": spec, "schedule_dict_form": schedule_dict(ranges),
                "note": "num_speculative_tokens is the startup maximum; the per-batch-size list is the current form "
                        "(releases with PR #32374's first form take the dict form instead); gaps inherit the previous "
                        "range's k; not with --data-parallel-size > 1"}
    sglang = []
    for lo, hi, k in ranges:
        flags = ("" if k == 0 else f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {model} "
                 f"--speculative-num-steps {k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}")
        sglang.append({"batch": f"{lo}-{hi}", "steps": k, "flags": flags})
    return {"vllm": vllm, "sglang": {"ranges": sglang,
                                     "note": "SGLang takes one step count per server; run the range you serve most "
                                             "(k = 0: leave the speculative flags out)"}}


@dataclass(frozen=True)
class ServingPlan:
    """The plan: every (batch size, k) cell, the best k per batch size, vLLM's schedule and the engines' configs.

    Renders as text (``str``) and HTML; ``to_json()`` is the ``eaglekit plan --json`` object. Figures:
    :func:`eaglekit.plan_throughput_figure` and :func:`eaglekit.plan_steps_figure`; :class:`eaglekit.PlanWidget`.
    """

    acceptance: Acceptance
    model: CostModel
    measured: Mapping[tuple[int, int], float]
    draft: DraftTable | DraftEstimate | None
    plans: tuple[BatchPlan, ...]
    max_steps: int
    drafter: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    # -- derived ------------------------------------------------------------------------------------
    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(p.batch for p in self.plans)

    @property
    def best_steps(self) -> tuple[int, ...]:
        return tuple(p.best.steps for p in self.plans)

    @property
    def ranges(self) -> Ranges:
        return schedule_from_steps(self.batches, self.best_steps)

    @property
    def schedule(self) -> dict[str, int]:
        """vLLM's ``num_speculative_tokens_per_batch_size`` (dict form), 0 where speculation does not pay."""
        return schedule_dict(self.ranges)

    @property
    def stops_paying_at(self) -> int | None:
        return stops_paying_at(self.plans)

    @property
    def engine_config(self) -> dict[str, Any]:
        return engine_config(self.ranges, drafter=self.drafter)

    def target_ms(self, batch: int, tokens: int) -> Cost:
        if (batch, tokens) in self.measured:
            return Cost(self.measured[(batch, tokens)], True)
        return Cost(self.model.ms(batch, tokens), False)

    def verify_by_steps(self, batch: int = 1) -> list[dict[str, Any]]:
        """The target forward at ``batch`` for k = 0 .. max steps, with the distinct experts behind it."""
        base = self.target_ms(batch, 1).ms
        shape = self.model.shape
        rows = []
        for k in range(self.max_steps + 1):
            c = self.target_ms(batch, k + 1)
            rows.append({"steps": k, "tokens": k + 1, "verify_ms": c.ms, "measured": c.measured,
                         "ratio_to_decode": c.ms / base,
                         "distinct_experts": None if shape is None or shape.dense else
                         shape.distinct_experts(batch * (k + 1))})
        return rows

    # -- words --------------------------------------------------------------------------------------
    def headline(self) -> str:
        stop = self.stops_paying_at
        first = self.plans[0].best
        parts = [f"At batch {first.batch} the best is k = {first.steps} ({first.tokens_per_s:.0f} tok/s, "
                 f"{first.speedup:.2f}x no speculation)"]
        if stop is None:
            parts.append(f"speculation still pays at batch {self.batches[-1]}")
        else:
            parts.append(f"speculation stops paying at batch {stop}")
        return "; ".join(parts) + "."

    def _pairs(self) -> list[tuple[str, str]]:
        a = self.acceptance
        ext = ("" if a.measured_steps >= self.max_steps else
               f"; k > {a.measured_steps} repeats step {a.measured_steps}'s {a.per_step[-1]:.3f} (extrapolated)")
        if self.draft is None:
            draft = "free (no draft costs given: the plan counts drafting as free)"
        elif isinstance(self.draft, DraftEstimate):
            draft = self.draft.describe()
        else:
            draft = ("measured at batch " + ", ".join(str(b) for b in self.draft.measured)
                     + (f"; elsewhere {self.draft.fixed_ms:.3g} + {self.draft.per_request_ms:.3g} x B ms"
                        if len(self.draft.measured) > 1 else
                        "; one row, so its time is used at every batch size (marked * elsewhere)"))
        measured = len(self.measured)
        pairs = [
            ("plan", self.headline()),
            ("acceptance", ", ".join(f"{c:.3f}" for c in a.per_step) + f" per step ({a.source}){ext}"),
            ("target forward", self.model.describe()
             + (f"; {measured} (batch, tokens) pairs measured, used as they are" if measured else "")),
            ("draft step", draft),
            ("vLLM schedule", json.dumps(self.schedule)),
            ("stops paying at", "never in the planned batch sizes" if self.stops_paying_at is None
             else f"batch {self.stops_paying_at}"),
        ]
        ratio = self.uncalibrated_ratio()
        if ratio is not None:
            b, n, est, got = ratio
            pairs.append(("verify vs decode", f"from the config and header alone a {n}-token verify at batch {b} costs "
                                              f"{est:.2f}x a decode step (bytes and FLOPs, uniform routing); "
                                              f"measured {got:.2f}x"))
        pairs += [("note", n) for n in self.notes]
        return pairs

    def uncalibrated_ratio(self) -> tuple[int, int, float, float] | None:
        """(batch, tokens, ratio from config and header alone, measured ratio) for the first measured verify
        beside a measured decode step at the same batch size; None without a target shape or such a pair."""
        if self.model.shape is None:
            return None
        raw = replace(self.model, fixed_ms=0.0, mem=1.0, compute=1.0, combine="max", kind="estimate", points=())
        for (b, n), ms in sorted(self.measured.items()):
            if n > 1 and (b, 1) in self.measured:
                return b, n, raw.ms(b, n) / raw.ms(b, 1), ms / self.measured[(b, 1)]
        return None

    def _verify_rows(self) -> list[list[str]]:
        shape = self.model.shape
        rows = []
        for o in self.plans[0].options:
            experts = "-" if shape is None or shape.dense else f"{shape.distinct_experts(o.batch * (o.steps + 1)):.1f}"
            rows.append([str(o.steps) + (" ^" if o.extrapolated else ""), str(o.steps + 1), experts,
                         f"{o.verify.ms:.2f}" + ("" if o.verify.measured else " *"),
                         f"{o.verify.ms / self.plans[0].options[0].verify.ms:.2f}x",
                         f"{o.draft.ms:.2f}" + ("" if o.draft.measured or o.draft.ms == 0 else " *"),
                         f"{o.accept_length:.2f}", f"{o.cycle_ms:.2f}", f"{o.tokens_per_s:.1f}", f"{o.speedup:.2f}x"])
        return rows

    def __str__(self) -> str:
        b0 = self.batches[0]
        parts = [kv_text(self._pairs(), title="Serving plan"),
                 PlanTable(self.plans).text("Best k per batch size"),
                 text_table(list(_VERIFY_HEADERS), self._verify_rows(), align=["right"] * 10,
                            title=f"Every k at batch {b0} (distinct experts under uniform routing)"),
                 f"{_FITTED}; {_EXTRAPOLATED}"]
        return "\n\n".join(parts)

    def svg(self) -> str:
        """A small inline chart (no script): the best k per batch size as bars, the speedup over each."""
        w, h, left, bottom, top = 560, 180, 40, 34, 22
        n, kmax = len(self.plans), max(1, max(self.best_steps))
        bw = (w - left - 10) / n
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" role="img" '
               'aria-label="best draft steps per batch size" style="font:11px sans-serif">']
        for i, p in enumerate(self.plans):
            b = p.best
            x, bar = left + i * bw + 3, (h - bottom - top) * b.steps / kmax
            y = h - bottom - bar
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw - 6:.1f}" height="{bar:.1f}" fill="#4169e1"/>')
            out.append(f'<text x="{x + (bw - 6) / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">k={b.steps} '
                       f'{b.speedup:.2f}x</text>')
            out.append(f'<text x="{x + (bw - 6) / 2:.1f}" y="{h - bottom + 14}" text-anchor="middle">{p.batch}</text>')
        out.append(f'<text x="{left}" y="{h - 4}">batch size; bars: best draft steps k, labels: speedup over no '
                   'speculation</text></svg>')
        return "".join(out)

    def _repr_html_(self) -> str:
        b0 = self.batches[0]
        every = "".join(
            html_table(STEPS_HEADERS, steps_rows(p), align=["right"] * 7, caption=f"batch {p.batch}")
            for p in self.plans)
        return ("<div>" + kv_html(self._pairs(), caption="Serving plan")
                + PlanTable(self.plans).html("Best k per batch size") + self.svg()
                + html_table(list(_VERIFY_HEADERS), self._verify_rows(), align=["right"] * 10,
                             caption=f"Every k at batch {b0} (distinct experts under uniform routing)")
                + f"<details><summary>every k at every batch size</summary>{every}</details>"
                + f"<p style='font-size:0.85em'>{_FITTED}; {_EXTRAPOLATED}</p></div>")

    def to_json(self) -> dict[str, Any]:
        """The ``eaglekit plan --json`` object."""
        return {
            "batches": [p.to_json() for p in self.plans],
            "schedule": self.schedule,
            "stops_paying_at": self.stops_paying_at,
            "engine_config": self.engine_config,
            "acceptance": {"per_step": list(self.acceptance.per_step), "source": self.acceptance.source,
                           "measured_steps": self.acceptance.measured_steps},
            "cost_model": self.model.to_json(),
            "measured": [[b, n, ms] for (b, n), ms in sorted(self.measured.items())],
            "draft": None if self.draft is None else self.draft.to_json(),
            "drafting_free": self.draft is None,
            "verify_by_steps": self.verify_by_steps(self.batches[0]),
            "verify_vs_decode": None if (r := self.uncalibrated_ratio()) is None else
            {"batch": r[0], "tokens": r[1], "from_config": r[2], "measured": r[3]},
            "max_steps": self.max_steps,
            "notes": list(self.notes),
        }


# -- inputs -----------------------------------------------------------------------------------------

PathLike = str | os.PathLike[str]


def _read_text(path: PathLike, what: str) -> str:
    data = read_local_file(path, limit=16 * 2**20, what=what)  # regular files only, 16 MiB at most
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{what} {str(path)!r} is not UTF-8 text ({e.reason} at byte {e.start})") from e


def read_acceptance(path: str | os.PathLike[str], *, kind: str | None = None) -> Acceptance:
    """Per-step acceptance from a file: an ``eaglekit acceptance --json`` result (``kind="json"``) or a vLLM
    log's last "Per-position acceptance rate" line (``kind="log"``); by its suffix when ``kind`` is None."""
    text = _read_text(path, "acceptance file")
    if kind == "json" or (kind is None and Path(path).suffix.lower() == ".json"):
        what = f"acceptance result {Path(path).name}"
        return acceptance_from_json(safejson.loads(text, what=what, error=InputError), what=what)
    return acceptance_from_vllm_log(text, what=f"vLLM log {Path(path).name}")


def _acceptance(value: Any) -> Acceptance:
    if isinstance(value, Acceptance):
        return value
    if isinstance(value, Mapping):
        return acceptance_from_json(value)
    if isinstance(value, (str, os.PathLike)):
        return read_acceptance(value)
    per_step = getattr(value, "per_step_acceptance", None)  # an AcceptanceResult
    if per_step is not None:
        return acceptance_from_json({"per_step_acceptance": list(per_step), "steps": getattr(value, "steps", None)})
    if isinstance(value, Sequence):
        return Acceptance(tuple(value))
    raise InputError("acceptance must be per-step acceptances, an acceptance result (object or JSON file) or a "
                     "vLLM log file")


def _points(costs: Any) -> tuple[Point, ...]:
    """A ``batch,tokens,ms`` CSV, SGLang ``bench_one_batch`` results (``.jsonl``), or (batch, tokens, ms) rows."""
    if isinstance(costs, (str, os.PathLike)):
        text = _read_text(costs, "costs table")
        if Path(costs).suffix.lower() == ".jsonl":
            return parse_sglang_bench(text, what=Path(costs).name)[0]
        return parse_costs(text, what=Path(costs).name)
    pts = tuple(p if isinstance(p, Point) else Point(*p) for p in costs)
    if len({(p.batch, p.tokens) for p in pts}) < 2:
        raise InputError("the costs table needs at least two (batch, tokens) measurements (a decode and a verify)")
    return pts


def _draft(draft_costs: Any) -> DraftTable | None:
    if draft_costs is None or isinstance(draft_costs, DraftTable):
        return draft_costs
    if isinstance(draft_costs, (str, os.PathLike)):
        return parse_draft_costs(_read_text(draft_costs, "draft costs table"), what=Path(draft_costs).name)
    if isinstance(draft_costs, Mapping):
        text = "batch,ms\n" + "\n".join(f"{b},{ms}" for b, ms in draft_costs.items())
        return parse_draft_costs(text, what="draft costs")
    raise InputError("draft costs must be a batch,ms CSV path or a {batch: ms} mapping")


def plan(acceptance: Any, *, costs: Any = None, draft_costs: Any = None, target: Any = None, gpu: Any = None,
         tp: int = 1, context: int = 4096, calibrate_points: Sequence[Any] = (),
         batches: Sequence[int] = DEFAULT_BATCHES, max_steps: int = 8, drafter: str | None = None,
         endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None) -> ServingPlan:
    """The serving plan of a drafter whose per-step acceptance is ``acceptance`` (floats, an
    :class:`~eaglekit.AcceptanceResult`, an ``acceptance --json`` file or dict, or a vLLM log file).

    The target's forward costs come from ``costs`` (a ``batch,tokens,ms`` CSV or (batch, tokens, ms) tuples;
    measured cells used as they are, the rest fitted, with the target's shape when ``target`` is given), or
    are estimated from ``target`` (a config.json path, a checkpoint location, a parsed config or a published
    name such as ``"kimi-k25-int4"``; bytes per expert from the header when there is one) on ``gpu`` x ``tp``
    at ``context`` tokens, calibrated by ``calibrate_points``. ``draft_costs`` (``batch,ms`` CSV or {batch: ms}) prices a draft step; without it,
    ``drafter`` (its checkpoint location) with ``gpu`` estimates one from the drafter's header; with neither,
    drafting counts as free and the plan says so. ``drafter`` also names the drafter in the engine configs.
    """
    acc = _acceptance(acceptance)
    check_parallel(tp, context)
    notes: list[str] = []
    shape: ModelShape | None = None
    if target is not None:
        shape = target_shape(target, endpoint=endpoint, timeout=timeout, token=token)
        notes += list(shape.notes)
    measured: dict[tuple[int, int], float] = {}
    if costs is not None:
        if calibrate_points:
            raise InputError("calibration points go with the estimate (--target, --gpu); with a costs table add them "
                             "to the table as rows")
        points = _points(costs)
        measured = {(p.batch, p.tokens): p.ms for p in points}
        base = CostModel(shape, None if gpu is None or shape is None else gpu_entry(gpu), tp, context)
        model = fit_model(base, points)
        if shape is None:
            notes.append("no target config: the table is fitted as fixed + per-token time (a dense target's shape); "
                         "give the target for the expert term")
    else:
        if shape is None or gpu is None:
            raise InputError("give a costs table (batch,tokens,ms), or the target's config and a GPU (--target, --gpu) "
                             "for an estimate")
        model = estimate_model(shape, gpu, tp=tp, context=context)
        pts = tuple(p if isinstance(p, Point) else Point(*p) for p in calibrate_points)
        if pts:
            model = calibrate(model, pts)
            measured = {(p.batch, p.tokens): p.ms for p in pts}
        else:
            notes.append("uncalibrated estimate: the roofline of the config on the GPU table is a lower bound on time; "
                         "one or two measured forwards (--calibrate B,N,MS) calibrate it")
    if shape is not None and not shape.dense:
        notes.append("uniform routing: real routers favour some experts, so distinct experts (and verify cost at "
                     "large batch x tokens) are overestimated")
    dt: DraftTable | DraftEstimate | None = _draft(draft_costs)
    if dt is None and drafter is not None and gpu is not None:
        dshape = drafter_step_shape(drafter, endpoint=endpoint, timeout=timeout, token=token)
        dt = DraftEstimate(estimate_model(dshape, gpu, tp=tp, context=context))

    def target_cost(b: int, n: int) -> Cost:
        if (b, n) in measured:
            return Cost(measured[(b, n)], True)
        return Cost(model.ms(b, n), False)

    def draft_cost(b: int) -> Cost:
        ms, was_measured = dt.ms(b)
        return Cost(ms, was_measured)

    plans = plan_batches(tuple(batches), acc, target_cost, None if dt is None else draft_cost, max_steps=max_steps)
    if acc.measured_steps < max_steps:
        notes.append(f"acceptance measured for {acc.measured_steps} step(s); k = {acc.measured_steps + 1} .. "
                     f"{max_steps} repeat the last per-step acceptance (extrapolated, marked ^)")
    return ServingPlan(acc, model, measured, dt, plans, max_steps, drafter, tuple(notes))
