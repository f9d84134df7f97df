"""``eaglekit.plan``: the serving plan of a drafter on a target, from measured per-step acceptance and a cost
model of the target's forward (fitted to measurements, or estimated from its config and a GPU table).

The maths lives in :mod:`eaglekit.core.serving.costmodel` (time of one forward) and :mod:`eaglekit.core.serving.plan`
(accept length, cycle, best k, vLLM's schedule); this module reads the inputs (files, the target's config and
checkpoint header by range) and holds the :class:`ServingPlan` record.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eaglekit.analysis.serving.target import drafter_step_shape, target_config, target_shape
from eaglekit.core import safejson
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.configs.block import BlockDrafterConfig, read_block_config
from eaglekit.core.errors import ConfigError
from eaglekit.core.serving.block import (
    BLOCK_FAMILIES,
    BlockCandidate,
    BlockFit,
    block_candidate,
    block_flags,
    block_prior,
    block_size,
)
from eaglekit.core.serving.capacity import Capacity, capacity
from eaglekit.core.serving.costmodel import (
    GPUS,
    MAX_BATCH,
    CostModel,
    ModelShape,
    Point,
    anchor_decodes,
    calibrate,
    check_parallel,
    check_point,
    estimate_model,
    extrapolation_note,
    fit_model,
    fitted_split,
    mtp_drafter,
    parse_split,
    split_name,
    split_verify,
)
from eaglekit.core.serving.costmodel import gpu as gpu_entry
from eaglekit.core.serving.cyclefit import (
    RUN_NOISE,
    CycleFit,
    Row,
    draft_prior,
    eagle3_drafter,
    fit_cycle,
    fit_without_each,
)
from eaglekit.core.serving.grid import (
    TreeConfig,
    monotone,
    next_measurement,
    price_grid,
)
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
    MAX_PLAN_STEPS,
    STEPS_HEADERS,
    Acceptance,
    BatchPlan,
    Cost,
    PlanTable,
    Ranges,
    constant_acceptance,
    schedule_dict,
    schedule_from_steps,
    steps_rows,
    stops_paying_at,
)
from eaglekit.core.serving.runs import Run, RunSet, make_run, merge_runs, parse_runs
from eaglekit.io.reader import load_config
from eaglekit.io.sources.local import read_local_file

__all__ = ["DEFAULT_BATCHES", "ServingPlan", "engine_config", "plan"]

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_VERIFY_HEADERS = ("k", "tokens", "distinct experts / layer", "target ms", "vs decode", "draft ms", "accept length",
                   "cycle ms", "tok/s (all, 95%)", "speedup (95%)")
_FITTED, _EXTRAPOLATED = "* from the cost model (not measured)", "^ acceptance past the measured steps repeats the last"


def engine_config(ranges: Ranges, *, drafter: str | None = None,
                  trees: Mapping[str, tuple[int, int, int]] | None = None) -> dict[str, Any]:
    """vLLM's ``speculative_config`` and SGLang's flags for a schedule (see docs/serving-plan.md for versions);
    ``trees`` maps a range ("lo-hi") to the tree (steps, topk, draft tokens) SGLang should run there instead."""
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
        steps, topk, n = (trees or {}).get(f"{lo}-{hi}", (k, 1, k + 1))
        flags = ("" if k == 0 else f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {model} "
                 f"--speculative-num-steps {steps} --speculative-eagle-topk {topk} --speculative-num-draft-tokens {n}")
        sglang.append({"batch": f"{lo}-{hi}", "steps": steps, "topk": topk, "draft_tokens": n, "flags": flags})
        if topk > 1:
            sglang[-1]["note"] = ("a dynamic tree beats the chain here; vLLM takes a static tree "
                                  "(speculative_token_tree) whose accept length has to be measured on its own")
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
    fit: CycleFit | None = None
    runs: RunSet = field(default_factory=lambda: RunSet(()))
    #: runs of another drafter than the acceptance given: they fit the cycle, their cells are not this plan's
    foreign_runs: tuple[Run, ...] = ()
    capacity: Capacity | None = None
    warnings: tuple[str, ...] = ()
    next_run: Mapping[str, Any] | None = None
    trees: tuple[TreeConfig, ...] = ()
    split: float = 0.0  # the verify's excess over bytes and FLOPs paid per forward (0: per verified token)
    split_source: str = ""  # "given", "default" or what set it
    readings: tuple[tuple[str, ServingPlan], ...] = field(default=(), repr=False)  # each end of the split, where open
    no_run_interval: str | None = None  # with no run: what one measurement would narrow the interval to
    blocks: tuple[BlockCandidate, ...] = ()  # block drafters priced beside the EAGLE-3 options
    block_fits: tuple[BlockFit, ...] = ()  # each block drafter's cycle terms (its prior, fitted where measured)
    assumed: str = ""  # what the plan assumed that the user did not give ("GPU H100-SXM, context 4096")

    # -- derived ------------------------------------------------------------------------------------
    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(p.batch for p in self.plans)

    @property
    def fitting(self) -> tuple[BatchPlan, ...]:
        """The batch sizes that fit in the GPUs' memory (all of them when capacity is not checked)."""
        return tuple(p for p in self.plans if p.fits)

    @property
    def best_steps(self) -> tuple[int, ...]:
        """The best EAGLE-3 steps at each batch size that fits (vLLM's per-batch-size schedule is EAGLE-3's; a block
        drafter's choice is :attr:`choices`)."""
        return tuple(p.best_eagle.steps for p in self.fitting)

    @property
    def choices(self) -> list[dict[str, Any]]:
        """With block drafters: ranges of batch sizes with one best option (family and configuration), each with its
        engines' flags. A server runs one drafter: serve the range you serve most."""
        out: list[dict[str, Any]] = []
        for p in self.fitting:
            b = p.best
            label = b.family_label()
            if out and out[-1]["label"] == label:
                out[-1]["batch"] = f"{out[-1]['batch'].split('-')[0]}-{p.batch}"
                out[-1]["verdicts"].append(p.verdict)
                continue
            entry: dict[str, Any] = {"batch": f"{1 if not out else p.batch}-{p.batch}", "label": label,
                                     "family": b.family if b.steps else None, "steps": b.steps,
                                     "verdicts": [p.verdict]}
            if b.block:
                cand = next(c for c in self.blocks if c.family == b.family)
                entry.update(block_flags(b.family, b.steps, cand.drafter))
            elif b.steps:
                model = self.drafter or "<drafter>"
                entry["sglang"] = (f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {model} "
                                   f"--speculative-num-steps {b.steps} --speculative-eagle-topk {b.topk} "
                                   f"--speculative-num-draft-tokens {b.verified_tokens}")
                entry["vllm"] = ({"method": "eagle3", "model": model, "num_speculative_tokens": b.steps}
                                 if b.topk <= 1 else None)
            out.append(entry)
        return out

    @property
    def largest_batch(self) -> int | None:
        return None if self.capacity is None else self.capacity.largest_batch

    @property
    def ranges(self) -> Ranges:
        fit = self.fitting
        if not fit:
            raise InputError("no planned batch size fits in the GPUs' memory: "
                             + (self.capacity.sentence() if self.capacity else "add GPUs or shorten the context"))
        return schedule_from_steps(tuple(p.batch for p in fit), self.best_steps)

    @property
    def schedule(self) -> dict[str, int]:
        """vLLM's ``num_speculative_tokens_per_batch_size`` (dict form), 0 where speculation does not pay."""
        return schedule_dict(self.ranges)

    @property
    def stops_paying_at(self) -> int | None:
        return stops_paying_at(self.plans)

    @property
    def engine_config(self) -> dict[str, Any]:
        trees = {}
        for lo, hi, k in self.ranges:
            p = next(p for p in self.fitting if p.batch == hi)
            if p.best_eagle.topk > 1:
                trees[f"{lo}-{hi}"] = (p.best_eagle.steps, p.best_eagle.topk, p.best_eagle.verified_tokens)
        out = engine_config(self.ranges, drafter=self.drafter, trees=trees)
        if self.blocks:
            out["choice"] = {"ranges": self.choices,
                             "note": "the best option per batch range across EAGLE-3 and the block drafters, with its "
                                     "engine flags; vllm and sglang above are the EAGLE-3 schedule. SGLang's "
                                     "--speculative-num-draft-tokens for DFlash includes the anchor (K + 1); vLLM's "
                                     "num_speculative_tokens is K"}
        return out

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

    def target_fit_json(self) -> dict[str, Any]:
        """The target forward's terms, the rows that set them and each row's residual."""
        m = self.model
        rows = [{"row": f"forward at batch {b}, {n} token(s)", "ms": ms, "predicted_ms": m.terms_ms(b, n),
                 "residual": m.terms_ms(b, n) / ms - 1} for (b, n), ms in sorted(self.measured.items())]
        labels = [r["row"] for r in rows]
        terms = [{"term": name, "value": value, "rows": labels if value else []}
                 for name, value in (("fixed_ms", m.fixed_ms), ("memory_factor", m.mem),
                                     ("compute_factor", m.compute), ("per_token_ms", m.per_token_ms))]
        return {"kind": m.kind, "terms": terms, "rows": rows,
                "noise": None if self.fit is None else self.fit.target_noise}

    # -- words --------------------------------------------------------------------------------------
    def headline(self) -> str:
        fit = self.fitting
        if not fit:
            return "No planned batch size fits in the GPUs' memory."
        stop = self.stops_paying_at
        p0 = fit[0]
        first = p0.best
        ch = p0.challenger
        if first.steps or ch is None:
            parts = [f"At batch {first.batch} the best is {first.label()} ({first.tps.text(0)} tok/s, "
                     f"{first.gain.text(2)}x no speculation: {p0.verdict})"]
        else:
            parts = [f"At batch {first.batch} the best is {first.label()} ({first.tps.text(0)} tok/s); the best "
                     f"with speculation, {ch.label()}, gives {ch.gain.text(2)}x no speculation: {p0.verdict}"]
        if stop is None:
            parts.append(f"speculation still pays at batch {fit[-1].batch}")
        else:
            parts.append(f"speculation stops paying at batch {stop}")
        if self.capacity is not None and len(fit) < len(self.plans):
            parts.append(f"batch sizes above {self.capacity.largest_batch} do not fit in memory")
        out = "; ".join(parts) + "."
        verdicts = {r: p.fitting[0].verdict for r, p in self.readings if p.fitting}
        if len(set(verdicts.values())) > 1:
            out += (" The two readings of the verify disagree (" + ", ".join(f"{r}: {v}" for r, v in verdicts.items())
                    + "): TOO CLOSE TO CALL until one measurement settles it.")
        if self.assumed:
            out += f" Assumed: {self.assumed}."
        return out

    def readings_words(self) -> list[tuple[str, str]]:
        """Both ends of the verify split, each with its best option and verdict at the first batch size, and the
        measurement that settles it."""
        if not self.readings:
            return []
        out = []
        for name, p in self.readings:
            if not p.fitting:
                continue
            b = p.fitting[0]
            ch = b.challenger
            best = b.best
            what = (f"best {best.label()} at {best.tps.text(0)} tok/s" + (
                "" if ch is None or ch is best else f"; best with speculation {ch.label()} "
                                                     f"{ch.tps.text(0)} tok/s, {ch.gain.text(2)}x"))
            out.append((f"verify read {name}", f"batch {b.batch}: {what}: {b.verdict}"))
        return out

    def settle_run(self) -> str | None:
        """The run that decides between the two readings of the verify (None where the plan prices one reading)."""
        if not self.readings:
            return None
        ref = max(n for (_, n) in self.measured if n > 1) if any(n > 1 for _, n in self.measured) else 3
        k = ref  # the verify at one more drafted token than the measured one: k + 1 = ref - 1 + 1
        return (f"the verify at k = {k} (or the same verify with CUDA graphs on): one decode and one verify go through "
                f"both readings, this one settles which holds; SGLang bench_speculative.py --steps {k} --topk 1 "
                f"--num_draft_tokens {k + 1}, vLLM `vllm bench latency` with num_speculative_tokens {k}; then give it "
                "with --costs (batch,tokens,ms) or a verify_ms column in the runs CSV")

    def next_runs(self) -> list[str]:
        """The next measurements, ranked: the run that can change the verdict first (the verify that settles the two
        readings, where they disagree), then the run that most narrows the open decisions, then the settling run
        where the readings agree (it still narrows every cell priced past the measured k)."""
        verdicts = {p.fitting[0].verdict for _, p in self.readings if p.fitting}
        settle = self.settle_run()
        narrow = (None if self.next_run is None else
                  f"{self.next_run['sentence']} (the one run that most narrows the decisions still open)")
        first = [settle] if settle and len(verdicts) > 1 else []
        rest = [narrow] + ([settle] if settle and len(verdicts) <= 1 else [])
        return [r for r in first + rest if r]

    def _pairs(self) -> list[tuple[str, str]]:
        a = self.acceptance
        ext = ("" if a.measured_steps >= self.max_steps else
               f"; k > {a.measured_steps} repeats step {a.measured_steps}'s {a.per_step[-1]:.3f} (extrapolated)")
        draft = self._draft_words()
        measured = len(self.measured)
        pairs = [
            ("plan", self.headline()),
            ("acceptance", ", ".join(f"{c:.3f}" for c in a.per_step) + f" per step ({a.source}){ext}"),
            ("target forward", self.model.describe()
             + (f"; {measured} (batch, tokens) pairs measured, used as they are" if measured else "")),
            ("drafting and overhead", draft),
            ("vLLM schedule", json.dumps(self.schedule)),
            ("stops paying at", "never in the planned batch sizes" if self.stops_paying_at is None
             else f"batch {self.stops_paying_at}"),
        ]
        if self.capacity is not None:
            pairs.append(("capacity", self.capacity.sentence()))
        if self.runs.runs:
            pairs.append(("measured runs", f"{len(self.runs.baseline)} without speculation, "
                                           f"{len(self.runs.speculative)} speculative; measured cells used as measured"))
        if self.split or self.readings or self.model.per_verify_ms:
            pairs.append(("verify split", f"{split_name(self.split)} ({self.split_source}): what the measured verify "
                                          "holds beyond bytes and FLOPs is read as a cost "
                                          + ("per verified token" if self.split == 0 else "per verify forward"
                                             if self.split == 1 else f"{self.split:.0%} per forward, the rest per "
                                                                     "verified token")))
        for cand, bf in zip(self.blocks, self.block_fits):
            pairs.append((f"{cand.name} drafter", self._block_words(cand, bf)))
        pairs += self.readings_words()
        if self.no_run_interval:
            pairs.append(("one measurement", self.no_run_interval))
        runs = self.next_runs()
        if runs:
            pairs.append(("next runs", " ".join(f"{i}. {r}" for i, r in enumerate(runs, start=1))
                          + (" (the first can change the verdict)" if len(runs) > 1 and runs[0] == self.settle_run()
                             else "")))
        pairs += [("warning", w) for w in self.warnings]
        ratio = self.uncalibrated_ratio()
        if ratio is not None:
            b, n, est, got = ratio
            pairs.append(("verify vs decode", f"from the config and header alone a {n}-token verify at batch {b} costs "
                                              f"{est:.2f}x a decode step (bytes and FLOPs, uniform routing); "
                                              f"measured {got:.2f}x"))
        pairs += [("note", n) for n in self.notes]
        return pairs

    def _draft_words(self) -> str:
        f = self.fit
        if f is None:
            return "free"
        d, per_row, o = f.value
        src = {0: f.set_by(0), 2: f.set_by(2)}
        src = {i: ("fitted" if v == "fitted" else "prior") for i, v in src.items()}
        return (f"{d:.2f} ms per draft step ({src[0]}) + {per_row * 1000:.2f} us per row, {o:.2f} ms per cycle beyond "
                f"the verify and the draft steps ({src[2]}); {f.prior.source}; noise {f.noise:.1%} per run")

    @staticmethod
    def _block_words(cand: BlockCandidate, f: BlockFit) -> str:
        lengths = ", ".join(f"K={k}: {cand.at(k).text(2)}" for k in range(1, cand.steps + 1))
        c, r, row = f.value
        return (f"{cand.drafter}, block {cand.block_size}; accept length ({cand.source}) {lengths}; a cycle at K is the "
                f"target's verify of K + 1 tokens + one block forward: {c:.2f} ms per forward + {r * 1000:.2f} us per "
                f"request + {row * 1000:.2f} us per block row ({'fitted' if f.rows else 'prior'}; {f.prior.source})")

    def family_rows(self) -> list[list[str]]:
        """Per batch size: the best EAGLE-3 option and each block drafter's best K, with intervals, the best overall
        and its verdict."""
        rows = []
        for p in self.plans:
            if not p.fits:
                rows.append([str(p.batch), "does not fit", "-", "-"] + ["-"] * (3 * len(self.blocks)) + ["-", "-"])
                continue
            e = p.best_eagle
            row = [str(p.batch), e.family_label(), e.tps.text(0), e.gain.text(2)]
            for cand in self.blocks:
                opts = [o for o in p.blocks if o.family == cand.family]
                top = max(o.tokens_per_s for o in opts)
                o = min((o for o in opts if o.tokens_per_s >= top * (1 - 0.01)), key=lambda o: o.steps)
                row += [o.family_label(), o.tps.text(0), o.gain.text(2)]
            rows.append(row + [p.best.family_label(), p.verdict])
        return rows

    def family_headers(self) -> list[str]:
        out = ["batch", "EAGLE-3 best", "tok/s (95%)", "speedup (95%)"]
        for cand in self.blocks:
            out += [f"{cand.name} best", "tok/s (95%)", "speedup (95%)"]
        return out + ["best", "verdict"]

    def choice_rows(self) -> list[list[str]]:
        out = []
        for c in self.choices:
            vllm = c.get("vllm")
            out.append([c["batch"], c["label"], c.get("sglang") or "-",
                        "-" if not vllm else "--speculative-config '" + json.dumps(vllm) + "'"])
        return out

    def uncalibrated_ratio(self) -> tuple[int, int, float, float] | None:
        """(batch, tokens, ratio from config and header alone, measured ratio) for the first measured verify
        beside a measured decode step at the same batch size; None without a target shape or such a pair."""
        if self.model.shape is None:
            return None
        raw = replace(self.model, fixed_ms=0.0, mem=1.0, compute=1.0, combine="max", kind="estimate", points=(),
                      per_token_ms=0.0, per_verify_ms=0.0)
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
                         f"{o.accept_length:.2f}", f"{o.cycle_ms:.2f}" + ("" if o.measured else " *"),
                         o.tps.text(1), o.gain.text(2)])
        return rows

    def __str__(self) -> str:
        b0 = self.batches[0]
        parts = [kv_text(self._pairs(), title="Serving plan"),
                 PlanTable(self.plans).text("Best k per batch size")]
        if self.blocks:
            parts += [text_table(self.family_headers(), self.family_rows(), title="EAGLE-3 and block drafters per batch "
                                 "size (best of each family, 95%)"),
                      text_table(["batch", "best", "SGLang", "vLLM"], self.choice_rows(),
                                 title="Engine flags for the best option per batch range")]
        parts += [
                 text_table(list(_VERIFY_HEADERS), self._verify_rows(), align=["right"] * 10,
                            title=f"Every k at batch {b0} (distinct experts under uniform routing)"),
                 f"{_FITTED}; {_EXTRAPOLATED}"]
        return "\n\n".join(parts)

    def svg(self) -> str:
        """A small inline chart (no script): the best option's speedup per batch size as bars with their 95%
        intervals, a line at 1x (no speculation); batch sizes that do not fit are labelled so."""
        w, h, left, bottom = 560, 190, 40, 34
        fit = self.fitting
        n = len(self.plans)
        smax = max([1.2] + [p.best.gain.high or p.best.speedup for p in fit])
        bw = (w - left - 10) / n
        stacked = bw < 64  # "k=2 1.33x" is about 55 px at 11 px: narrower bars take it on two lines
        top = 34 if stacked else 22
        Y = lambda v: h - bottom - (h - bottom - top) * v / smax
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" role="img" '
               'aria-label="speedup of the best draft steps per batch size" style="font:11px sans-serif">']
        for i, p in enumerate(self.plans):
            x, cx = left + i * bw + 3, left + i * bw + bw / 2
            out.append(f'<text x="{cx:.1f}" y="{h - bottom + 14}" text-anchor="middle">{p.batch}</text>')
            if not p.fits:
                out.append(f'<text x="{cx:.1f}" y="{Y(0.5):.1f}" text-anchor="middle" fill="#a00">no fit</text>')
                continue
            b = p.best
            y = Y(b.speedup)
            colour = "#2e8b57" if b.block else "#4169e1" if b.steps else "#9aa5b8"
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw - 6:.1f}" height="{Y(0) - y:.1f}" fill="{colour}"/>')
            lo, hi = b.gain.low, b.gain.high
            if lo is not None and hi is not None and hi > lo:
                out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{Y(lo):.1f}" y2="{Y(hi):.1f}" stroke="#222"/>')
            short = f"K={b.steps}B" if b.block else f"k={b.steps}"
            if stacked:
                out.append(f'<text x="{cx:.1f}" y="{Y(hi or b.speedup) - 15:.1f}" text-anchor="middle">'
                           f'<tspan>{short}</tspan><tspan x="{cx:.1f}" dy="12">{b.speedup:.2f}x</tspan></text>')
            else:
                out.append(f'<text x="{cx:.1f}" y="{Y(hi or b.speedup) - 3:.1f}" text-anchor="middle">{short} '
                           f'{b.speedup:.2f}x</text>')
        out.append(f'<line x1="{left}" x2="{w - 10}" y1="{Y(1):.1f}" y2="{Y(1):.1f}" stroke="#a00" '
                   'stroke-dasharray="4 3"/>')
        what = "; K=..B green: a block drafter's K" if self.blocks else ""
        out.append(f'<text x="{left}" y="{h - 4}">batch size; bars: speedup of the best k over no speculation '
                   f'(95% interval; dashed: 1x{what})</text></svg>')
        return "".join(out)

    def _repr_html_(self) -> str:
        b0 = self.batches[0]
        every = "".join(
            html_table(STEPS_HEADERS, steps_rows(p), align=["right"] * 7, caption=f"batch {p.batch}")
            for p in self.plans)
        fam = ""
        if self.blocks:
            fam = (html_table(self.family_headers(), self.family_rows(),
                              caption="EAGLE-3 and block drafters per batch size (best of each family, 95%)")
                   + html_table(["batch", "best", "SGLang", "vLLM"], self.choice_rows(),
                                caption="Engine flags for the best option per batch range"))
        return ("<div>" + kv_html(self._pairs(), caption="Serving plan")
                + PlanTable(self.plans).html("Best k per batch size") + fam + self.svg()
                + html_table(list(_VERIFY_HEADERS), self._verify_rows(), align=["right"] * 10,
                             caption=f"Every k at batch {b0} (distinct experts under uniform routing)")
                + f"<details><summary>every k at every batch size</summary>{every}</details>"
                + f"<p style='font-size:0.85em'>{_FITTED}; {_EXTRAPOLATED}</p></div>")

    def to_json(self) -> dict[str, Any]:
        """The ``eaglekit plan --json`` object; a list of more than :data:`~eaglekit.core.safejson.MAX_LISTED`
        items (a million measured forwards echoed) is summarised as its count, first and last items."""
        return safejson.summarised({
            "batches": [p.to_json() for p in self.plans],
            "schedule": self.schedule,
            "stops_paying_at": self.stops_paying_at,
            "engine_config": self.engine_config,
            "acceptance": {"per_step": list(self.acceptance.per_step), "source": self.acceptance.source,
                           "measured_steps": self.acceptance.measured_steps,
                           "accept_length_by_steps": [self.acceptance.at(k) for k in range(1, self.max_steps + 1)]},
            "cost_model": self.model.to_json(),
            "measured": [[b, n, ms] for (b, n), ms in sorted(self.measured.items())],
            "draft": None if self.draft is None else self.draft.to_json(),
            "drafting_free": False,
            "fit": {"target": self.target_fit_json(), "cycle": None if self.fit is None else self.fit.to_json()},
            "capacity": None if self.capacity is None else self.capacity.to_json(),
            "largest_batch": self.largest_batch,
            "next_measurement": None if self.next_run is None else dict(self.next_run),
            "next_runs": self.next_runs(), "assumed": self.assumed or None,
            "runs": [r.to_json() for r in self.runs.runs],
            "trees": [{"steps": t.steps, "topk": t.topk, "draft_tokens": t.draft_tokens,
                       "accept_length": t.accept_length} for t in self.trees],
            "warnings": list(self.warnings),
            "verify_by_steps": self.verify_by_steps(self.batches[0]),
            "verify_vs_decode": None if (r := self.uncalibrated_ratio()) is None else
            {"batch": r[0], "tokens": r[1], "from_config": r[2], "measured": r[3]},
            "max_steps": self.max_steps,
            "verify_split": {"fraction_per_forward": self.split, "reading": split_name(self.split),
                             "source": self.split_source},
            "verify_readings": [{"reading": r, "batches": [{"batch": b.batch, "best_steps": b.best.steps,
                                                             "verdict": b.verdict,
                                                             **(b.challenger.gain.fields("challenger_speedup")
                                                                if b.challenger is not None else {})}
                                                            for b in p.fitting]}
                                for r, p in self.readings],
            "one_measurement": self.no_run_interval,
            "notes": list(self.notes),
            **({"blocks": [{**c.to_json(), "fit": f.to_json()} for c, f in zip(self.blocks, self.block_fits)]}
               if self.blocks else {}),
        })


# -- inputs -----------------------------------------------------------------------------------------

PathLike = str | os.PathLike[str]

#: Repeats of one forward further apart than this factor contradict each other (refused, not averaged).
CONTRADICTION = 10.0
#: The largest relative scatter of measurements around their fit (100%) before the plan refuses them as not one
#: server's: past it every interval spans orders of magnitude (and exp(z x spread) overflows).
MAX_SCATTER = 1.0

#: The most batch sizes one plan prices (engines schedule a few dozen; 1..512 every one still fits).
MAX_BATCHES = 512
#: The most tree configurations one plan prices beside the chains (each at every batch size).
MAX_TREES = 64


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
    per_step = getattr(value, "per_step_acceptance", None)  # an AcceptanceResult: read as its JSON is (the CLI's)
    if per_step is not None:
        by_steps = [x for x in getattr(value, "accept_length_by_steps", ()) or () if x is not None]
        return acceptance_from_json({"per_step_acceptance": list(per_step), "steps": getattr(value, "steps", None),
                                     **({"accept_length_by_steps": by_steps} if by_steps else {})})
    if isinstance(value, Sequence):
        return Acceptance(tuple(value))
    raise InputError("acceptance must be per-step acceptances, an acceptance result (object or JSON file) or a "
                     "vLLM log file")


def _is_block(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("family") in BLOCK_FAMILIES


def _result_dict(value: Any) -> dict[str, Any]:
    """A block drafter's :class:`~eaglekit.AcceptanceResult` as the JSON fields the plan reads."""
    ivs = tuple(getattr(value, "accept_length_by_steps_interval", ()) or ())
    by = list(getattr(value, "accept_length_by_steps", ()) or ())
    return {"family": value.family, "block_size": getattr(value, "block_size", None),
            "steps": getattr(value, "steps", len(by)), "accept_length_by_steps": by,
            "accept_length_by_steps_low": [i.low if i is not None else None for i in ivs],
            "accept_length_by_steps_high": [i.high if i is not None else None for i in ivs],
            "drafter": getattr(value, "drafter", None)}


def split_acceptance(value: Any) -> tuple[Any, list[tuple[Mapping[str, Any], str]]]:
    """``acceptance`` as (the EAGLE-3 measurement or None, the block drafters' measurements with their names): one
    measurement, or a list of them (at most one EAGLE-3; a list of numbers is one per-step profile)."""
    if value is None or isinstance(value, Acceptance):
        return value, []
    if isinstance(value, Mapping):
        return (None, [(value, "acceptance result")]) if _is_block(value) else (value, [])
    if isinstance(value, (str, os.PathLike)):
        if Path(value).suffix.lower() != ".json":
            return value, []
        what = f"acceptance result {Path(value).name}"
        data = safejson.loads(_read_text(value, "acceptance file"), what=what, error=InputError)
        if _is_block(data):
            return None, [(data, what)]
        return acceptance_from_json(data, what=what), []
    if getattr(value, "family", "eagle3") in BLOCK_FAMILIES and hasattr(value, "accept_length_by_steps"):
        return None, [(_result_dict(value), f"acceptance result of {getattr(value, 'drafter', 'a block drafter')}")]
    if isinstance(value, Sequence) and not all(isinstance(v, (int, float)) for v in value):
        eagle, blocks = None, []
        for item in value:
            e, b = split_acceptance(item)
            if e is not None:
                if eagle is not None:
                    raise InputError("two EAGLE-3 acceptance measurements: the plan prices one EAGLE-3 drafter beside "
                                     "the block drafters; give one")
                eagle = e
            blocks += b
        return eagle, blocks
    return value, []


def _block_config(value: Any, *, endpoint: str | None, timeout: float | None,
                  token: str | bool | None) -> tuple[BlockDrafterConfig, str | None]:
    """A block drafter's config (a :class:`BlockDrafterConfig`, a parsed config.json, a config.json path or the
    drafter's location), and the location to name in the engines' flags."""
    if isinstance(value, BlockDrafterConfig):
        return value, None
    if isinstance(value, Mapping):
        return read_block_config(value, source="block drafter config"), None
    if not isinstance(value, (str, os.PathLike)):
        raise InputError("a block drafter's config is a config.json path, the drafter's location or a parsed config")
    text = os.fspath(value)
    raw = load_config(text, endpoint=endpoint, timeout=timeout, token=token)
    where = str(Path(text).parent) if text.endswith(".json") else text
    return read_block_config(raw, source=f"{text}"), (None if text.endswith(".json") else where)


def _blocks(measurements: Sequence[tuple[Mapping[str, Any], str]], configs: Any, *, shape: ModelShape | None,
            gpu: Any, tp: int, context: int, target_noise: float, endpoint: str | None, timeout: float | None,
            token: str | bool | None) -> tuple[tuple[BlockCandidate, ...], tuple[BlockFit, ...], list[str]]:
    """Each block measurement with its config's prior on the block cycle (no block run is read: see the docs)."""
    cands = [block_candidate(m, what=what) for m, what in measurements]
    if not cands:
        if configs is not None:
            raise InputError("a block drafter's config was given without its measurement: give the block drafter's "
                             "`eaglekit acceptance --json` result with --acceptance too")
        return (), (), []
    fams = [c.family for c in cands]
    if len(set(fams)) < len(fams):
        raise InputError("two measurements of one block family: the plan prices one drafter per family; give one")
    items = [] if configs is None else ([configs] if isinstance(configs, (str, os.PathLike, Mapping,
                                                                          BlockDrafterConfig)) else list(configs))
    if len(items) != len(cands):
        raise InputError(f"{len(cands)} block drafter measurement(s) and {len(items)} block drafter config(s): the plan "
                         "sizes a block forward from the drafter's config (layers, heads, hidden and intermediate "
                         "sizes); give one --block-drafter CONFIG per block measurement, in the same order")
    g = GPUS["H100-SXM"] if gpu is None else gpu_entry(gpu)
    notes = []
    fits = []
    out = []
    for cand, item in zip(cands, items):
        cfg, where = _block_config(item, endpoint=endpoint, timeout=timeout, token=token)
        if cfg.family != cand.family:
            raise InputError(f"{cand.source} measures a {cand.name} drafter but its config ({cfg.source}) is a "
                             f"{cfg.family_name} one: pair each measurement with its own drafter's config")
        if cfg.block_size != cand.block_size:
            notes.append(f"{cand.name}: the measurement's block size {cand.block_size} and the config's "
                         f"{cfg.block_size} differ; the plan prices blocks of K + 1 as engines run them")
        vocab = hidden = None
        if shape is not None and shape.hidden_size and shape.resident_extra_bytes:
            hidden = shape.hidden_size
            vocab = int(round(shape.resident_extra_bytes / 2.0 / hidden))
        size = block_size(cfg, vocab=vocab, target_hidden=hidden,
                          name=f"{cand.name} drafter ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size})")
        prior = block_prior(size, g, tp=tp, context=context, new_tokens=cand.at(cand.steps).value)
        if gpu is None:
            prior = replace(prior, source=prior.source + " (no --gpu: an H100-SXM's figures)")
        f = fit_cycle([], prior, target_noise=target_noise)
        fits.append(BlockFit(f.value, f.cov, f.prior, f.rows, f.noise, f.target_noise))
        if cand.drafter == "<drafter>" and where is not None:
            cand = replace(cand, drafter=where)
        out.append(cand)
        notes.append(f"{cand.name}: no measured run of the block drafter is read (the runs format has no method "
                     "column): its cycle beyond the verify is the prior, and its intervals say how little that pins "
                     "down")
    return tuple(out), tuple(fits), notes


def _points(costs: Any, *, need_two: bool = True) -> tuple[Point, ...]:
    """A ``batch,tokens,ms`` CSV, SGLang ``bench_one_batch`` results (``.jsonl``), or (batch, tokens, ms) rows."""
    if isinstance(costs, (str, os.PathLike)):
        text = _read_text(costs, "costs table")
        if Path(costs).suffix.lower() == ".jsonl":
            return parse_sglang_bench(text, what=Path(costs).name)[0]
        return parse_costs(text, what=Path(costs).name, need_two=need_two)
    pts = tuple(p if isinstance(p, Point) else Point(*p) for p in costs)
    if need_two and len({(p.batch, p.tokens) for p in pts}) < 2:
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


def _verify_column(text: str, what: str) -> tuple[str, list[Point]]:
    """A runs CSV with a ``verify_ms`` column: the CSV without it, and each speculative row's verify as a measured
    forward (batch, draft tokens, ms). Other text comes back as it is."""
    try:
        return _split_verify_column(text, what)
    except csv.Error as e:   # a field past the csv module's limit (131,072 characters), a NUL byte...
        raise InputError(f"{what}: not a CSV this plan reads ({e}); each field is a short number or name") from None


def _split_verify_column(text: str, what: str) -> tuple[str, list[Point]]:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines or lines[0].lstrip()[:1] in "{[":
        return text, []
    header = [h.strip().lower() for h in next(csv.reader([lines[0]]))]
    if "verify_ms" not in header:
        return text, []
    col = header.index("verify_ms")
    kept, points = [], []
    for i, row in enumerate(csv.reader(lines), 1):
        cells = [c.strip() for c in row]
        value = cells.pop(col) if col < len(cells) else ""
        kept.append(",".join(cells))
        if i == 1 or not value:
            continue
        d = dict(zip([h for j, h in enumerate(header) if j != col], cells))
        try:
            batch, steps, ms = int(d.get("batch", "")), int(d.get("steps", "")), float(value)
            n = int(d["draft_tokens"]) if d.get("draft_tokens") else steps + 1
        except ValueError:
            raise InputError(f"{what} row {i}: verify_ms {value[:40]!r} needs whole batch, steps and draft_tokens and "
                             "a number of milliseconds") from None
        if steps == 0:
            raise InputError(f"{what} row {i}: verify_ms is the verify of a speculative run; leave it empty at "
                             "steps 0 (the decode is the run itself)")
        check_point(batch, n, ms, where=f"{what} row {i} verify_ms")
        points.append(Point(batch, n, ms))
    return "\n".join(kept) + "\n", points


def _runs(measured: Any, verifies: list[Point] | None = None) -> RunSet:
    """Runs from paths (CSV or a bench tool's JSON / JSONL) or :class:`Run` / tuple rows; repeats averaged. A CSV's
    ``verify_ms`` column goes to ``verifies`` as measured forwards."""
    if measured is None:
        return RunSet(())
    items = [measured] if isinstance(measured, (str, os.PathLike)) else list(measured)
    runs: list[Run] = []
    rows: list[Any] = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            text, points = _verify_column(_read_text(item, "measured runs"), Path(item).name)
            if verifies is not None:
                verifies += points
            runs += parse_runs(text, what=Path(item).name)
        elif isinstance(item, Run):
            runs.append(item)
        else:
            rows.append(item)
    for i, r in enumerate(rows, 1):
        if not isinstance(r, Sequence) or isinstance(r, str) or len(r) != 6:
            raise InputError(f"measured row {i}: give (batch, steps, topk, draft_tokens, accept_length, tokens_per_s)")
        runs.append(make_run(*r, where=f"measured row {i}", source="measured rows"))
    return merge_runs(runs)


def _trees(trees: Any, runs: RunSet) -> tuple[TreeConfig, ...]:
    """Tree configurations: a JSON file or object with ``trees[]`` (steps, topk, draft_tokens, accept_length),
    a list of such objects, and every tree the runs measured (its accept length averaged over batch sizes)."""
    items: list[Any] = []
    if isinstance(trees, (str, os.PathLike)):
        data = safejson.loads(_read_text(trees, "tree accept lengths"), what=Path(trees).name, error=InputError)
        trees = data
    if isinstance(trees, Mapping):
        trees = trees.get("trees")
        if not isinstance(trees, list):
            raise InputError("tree accept lengths: expected an object with a trees list (steps, topk, draft_tokens, "
                             "accept_length)")
    items = list(trees or [])
    out: dict[tuple[int, int, int], list[float]] = {}
    for i, t in enumerate(items, 1):
        if not isinstance(t, Mapping):
            raise InputError(f"tree {i}: expected an object with steps, topk, draft_tokens, accept_length")
        r = make_run(1, t.get("steps"), t.get("topk"), t.get("draft_tokens"), t.get("accept_length"), 1.0,
                     where=f"tree {i}")
        out.setdefault(r.config, []).append(r.accept_length)  # a topk-1 entry is a chain, priced as given
    for r in runs.speculative:
        if r.topk > 1:
            out.setdefault(r.config, []).append(r.accept_length)
    if len(out) > MAX_TREES:
        raise InputError(f"{len(out):,} tree configurations (--trees and the runs' trees): one plan prices at most "
                         f"{MAX_TREES}; keep the trees you would serve")
    return tuple(TreeConfig(k, t, n, sum(v) / len(v)) for (k, t, n), v in sorted(out.items()))


def _acceptance_from_runs(runs: RunSet) -> Acceptance:
    chains: dict[int, list[float]] = {}
    for r in runs.speculative:
        if r.chain:
            chains.setdefault(r.steps, []).append(r.accept_length)
    if not chains and any(not r.chain for r in runs.speculative):
        return Acceptance((0.0,), "no chain (topk 1) run measured: only the measured trees are priced", ((1, 1.0),))
    if not chains:
        raise InputError("give the drafter's acceptance (--per-step, --acceptance, --per-position, --vllm-log or "
                         "--accept-length with --steps), or chain runs (topk 1) with their accept lengths")
    lengths = tuple((k, sum(v) / len(v)) for k, v in sorted(chains.items()))
    deepest, L = lengths[-1]
    base = constant_acceptance(L, deepest, source=f"the measured runs' accept length {L:.3f} at {deepest} steps")
    return Acceptance(base.per_step, base.source + "; measured accept lengths used at k = "
                      + ", ".join(str(k) for k, _ in lengths), lengths)


#: ``--drafter`` names for the target's own multi-token-prediction layer (DeepSeek-V3 / Kimi NextN and the like).
MTP_NAMES = ("mtp", "nextn")

#: How far (relative) a speculative row's cycle may sit from the fit of the other rows before it is named.
ROW_OFF = 0.2

#: How far a measured run's accept length may sit from the acceptance given at its k before the plan says so.
ACCEPTANCE_AGREE = 0.05


def _target_noise(model: CostModel, points: Sequence[Point]) -> float:
    """The forward's relative scatter: its points' residuals where they over-determine it, else the run noise;
    an uncalibrated roofline (a lower bound) gets a wide 25%."""
    if model.kind == "estimate":
        return 0.25
    distinct = {(p.batch, p.tokens) for p in points}
    free = sum(1 for v in (model.fixed_ms, model.mem, model.compute, model.per_token_ms) if v)
    if len(points) > free and len(distinct) > 1:
        resid = [(model.terms_ms(p.batch, p.tokens) - p.ms) / p.ms for p in points]
        return max(RUN_NOISE, math.sqrt(sum(e * e for e in resid) / (len(points) - free)))
    return RUN_NOISE


def plan(acceptance: Any = None, *, costs: Any = None, draft_costs: Any = None, target: Any = None, gpu: Any = None,
         tp: int = 1, context: int = 4096, calibrate_points: Sequence[Any] = (),
         batches: Sequence[int] = DEFAULT_BATCHES, max_steps: int = 8, drafter: str | None = None,
         endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None,
         measured: Any = None, trees: Any = None, extrapolate: bool = False,
         verify_split: float | str | None = None, block_drafter: Any = None) -> ServingPlan:
    """The serving plan of a drafter whose per-step acceptance is ``acceptance`` (floats, an
    :class:`~eaglekit.AcceptanceResult`, an ``acceptance --json`` file or dict, or a vLLM log file; None: from the
    chain runs in ``measured``).

    The target's forward comes from ``costs`` (a ``batch,tokens,ms`` CSV or (batch, tokens, ms) tuples) and the
    no-speculation rows of ``measured``, fitted with the target's shape when ``target`` is given, or is
    estimated from ``target`` on ``gpu`` x ``tp`` at ``context`` tokens and calibrated by ``calibrate_points``.
    Drafting and the per-cycle overhead are fitted to the speculative rows of ``measured`` (runs: CSV paths,
    bench tools' result files or (batch, steps, topk, draft_tokens, accept_length, tokens_per_s) rows) and
    ``draft_costs`` under a prior from the drafter (``drafter``'s header with ``gpu``, else an EAGLE-3 drafter
    of the target's hidden size); every cell carries a 95% interval. Steps past the measured acceptance only
    with ``extrapolate``. ``trees`` adds tree configurations with their accept lengths.

    ``verify_split``: what a measured verify holds beyond bytes and FLOPs is a cost per verified token
    (``per-token``, the default), per verify forward (``per-forward``) or this fraction per forward
    (:func:`~eaglekit.core.serving.costmodel.split_verify`). Where verifies at two or more token counts were
    measured they set it; where not, the plan also prices the other end (:attr:`ServingPlan.readings`) and says
    TOO CLOSE TO CALL where the two verdicts disagree.

    Block drafters (DFlash) are priced beside the EAGLE-3 options: ``acceptance`` may be a list of measurements
    (at most one EAGLE-3; block drafters' ``eaglekit acceptance --json`` results or records, ``family`` "dflash"), and
    ``block_drafter`` gives each block measurement's drafter config (a config.json path, the drafter's location, a
    parsed config or a :class:`~eaglekit.core.configs.block.BlockDrafterConfig`; a list, in the same order), which
    sizes the block forward (:mod:`eaglekit.core.serving.block`). Each batch size then names its best option across
    the families, with the engines' flags for it (:attr:`ServingPlan.choices`).
    """
    args = dict(acceptance=acceptance, costs=costs, draft_costs=draft_costs, target=target, gpu=gpu, tp=tp,
                context=context, calibrate_points=calibrate_points, batches=batches, max_steps=max_steps,
                drafter=drafter, endpoint=endpoint, timeout=timeout, token=token, measured=measured, trees=trees,
                extrapolate=extrapolate, block_drafter=block_drafter)
    split = 0.0 if verify_split is None else parse_split(verify_split)
    out = _plan(**args, verify_split=split, given=verify_split is not None)
    if not (out.model.per_token_ms or out.model.per_verify_ms) or out.split_source.startswith("set by"):
        return out
    readings = []
    for end in (0.0, 1.0):
        # each reading is its hypothesis whole: per-token carries its line past the measured verify (and says so)
        other = _plan(**args, verify_split=end, given=True, carry_excess=True)
        readings.append((split_name(end), other))
    return replace(out, readings=tuple(readings))


def _plan(acceptance: Any = None, *, costs: Any = None, draft_costs: Any = None, target: Any = None, gpu: Any = None,
          tp: int = 1, context: int = 4096, calibrate_points: Sequence[Any] = (),
          batches: Sequence[int] = DEFAULT_BATCHES, max_steps: int = 8, drafter: str | None = None,
          endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None,
          measured: Any = None, trees: Any = None, extrapolate: bool = False, verify_split: float = 0.0,
          given: bool = False, block_drafter: Any = None, carry_excess: bool = False) -> ServingPlan:
    check_parallel(tp, context)
    batches = tuple(batches)
    if len(batches) > MAX_BATCHES:
        raise InputError(f"{len(batches):,} batch sizes to plan: give at most {MAX_BATCHES} (each is priced at every "
                         "k and compared with every other for the next measurement)")
    verifies: list[Point] = []
    runs = _runs(measured, verifies)
    acceptance, block_meas = split_acceptance(acceptance)
    if acceptance is not None:
        acc = _acceptance(acceptance)
    elif block_meas and not any(r.speculative for r in runs.runs):
        acc = Acceptance((0.0,), "no EAGLE-3 measurement: only the block drafters are priced beside no speculation",
                         ((1, 1.0),))
    else:
        acc = _acceptance_from_runs(runs)
    notes: list[str] = []
    warnings: list[str] = list(runs.warnings)
    foreign: list[Run] = []  # runs of another drafter: they fit the cycle, their cells belong to that drafter
    if acceptance is not None:
        # a measured run's cell uses the run's accept length where it agrees with the profile: say when they disagree
        for r in runs.speculative:
            if r.chain and r.steps <= MAX_PLAN_STEPS:
                profile = acc.at(r.steps)
                if abs(r.accept_length / profile - 1) > ACCEPTANCE_AGREE:
                    if r.steps <= acc.measured_steps:  # past the profile the run is the only measurement of that k
                        foreign.append(r)
                    warnings.append(
                        f"acceptance-vs-run: {r.label()} measured accept length {r.accept_length:.2f}, the acceptance "
                        f"given ({acc.source}) {profile:.2f} at k = {r.steps} ({r.accept_length / profile - 1:+.0%}): "
                        "a different drafter, dataset or temperature than the runs? The run fits drafting and the "
                        + ("overhead; its cell is priced from the acceptance given (measured cells belong to the "
                           "drafter that was measured)" if r in foreign else
                           "overhead and, past the acceptance given, keeps its cell as measured"))
    shape: ModelShape | None = None
    if target is not None:
        shape = target_shape(target, endpoint=endpoint, timeout=timeout, token=token)
        notes += list(shape.notes)
    g = None if gpu is None else gpu_entry(gpu)
    points: list[Point] = []
    if costs is not None:
        if calibrate_points:
            raise InputError("calibration points go with the estimate (--target, --gpu); with a costs table add them "
                             "to the table as rows")
        points += _points(costs, need_two=not runs.baseline)
    points += [p if isinstance(p, Point) else Point(*p) for p in calibrate_points]
    points += verifies  # a runs CSV's verify_ms column: measured verifies beside the runs
    points += [Point(r.batch, 1, r.cycle_ms) for r in runs.baseline]
    fwd: dict[tuple[int, int], list[float]] = {}
    for p in points:
        fwd.setdefault((p.batch, p.tokens), []).append(p.ms)
    for (b, n), times in fwd.items():
        if max(times) > CONTRADICTION * min(times):
            raise InputError(f"the forward at batch {b}, {n} token(s) is measured at {min(times):g} ms and {max(times):g} ms "
                             f"(more than {CONTRADICTION:g}x apart, across --costs, --calibrate and the no-speculation "
                             "runs): they contradict each other; check the units and keep one server's measurements")
    measured_fwd = {key: sum(v) / len(v) for key, v in sorted(fwd.items())}
    base = CostModel(shape, g if shape is not None else None, tp, context)
    if shape is not None and g is not None and not points:
        model = estimate_model(shape, g, tp=tp, context=context)
        notes.append("uncalibrated estimate: the roofline of the config on the GPU table is a lower bound on time; "
                     "one or two measured forwards (--calibrate B,N,MS) or no-speculation runs calibrate it")
    elif not points:
        raise InputError("give a costs table (batch,tokens,ms), no-speculation runs (--measured, steps 0), or the "
                         "target's config and a GPU (--target, --gpu) for an estimate")
    elif len(measured_fwd) == 1:
        if shape is None:
            (b, n), ms = next(iter(measured_fwd.items()))
            model = replace(base, fixed_ms=ms, mem=0.0, compute=0.0, combine="sum", kind="calibrated",
                            points=tuple(points))
            notes.append(f"one measured forward (batch {b}): without the target's config the plan cannot say how the "
                         "forward grows with batch size, so it holds it constant; give --target")
        else:
            model = calibrate(base if g is None else estimate_model(shape, g, tp=tp, context=context), points)
    else:
        model = fit_model(base, points, kind="fitted" if costs is not None or runs.baseline else "calibrated")
        if shape is None:
            notes.append("no target config: the forward is fitted as fixed + per-token time (a dense target's "
                         "shape); give the target for the expert term")
    if not any(n > 1 for _, n in measured_fwd) and not runs.speculative:
        notes.append("no verify was measured (no forward at more than one token per request, no speculative run): what "
                     "a verify costs beyond a decode step is the model's bytes and FLOPs alone, a lower bound; measure "
                     "a speculative run (--measured) or a verify forward (--costs / --calibrate B,k+1,MS)")
    if shape is not None and not shape.dense:
        notes.append("uniform routing: real routers favour some experts, so distinct experts (and verify cost at "
                     "large batch x tokens) are overestimated")

    # decode rows cannot tell a cost per request from compute per token row (both grow with B): the fit takes
    # the first; the other reading is what the rows leave open, and half the gap is one standard deviation
    alt = None
    if model.per_request_ms > 0:
        try:
            alt = fit_model(base, points, per_request=False)
        except InputError:
            alt = None
    tnoise = _target_noise(model, points)
    if tnoise > MAX_SCATTER:
        raise InputError(f"the target forward's measurements scatter by {tnoise * 100:.3g}% around the best fit through them "
                         f"(more than {MAX_SCATTER:.0%}): rows that far apart (a baseline 1000x off, ms for seconds) "
                         "are not one server's forwards; check the units and the rows")
    # where a decode step was measured at a batch size, a verify there is that decode plus what the terms add for
    # the extra tokens: the terms' miss at that batch (launches, scheduling, what the bench timed) is a cost per
    # forward, not per token, so a verify never comes out cheaper than the decode measured beside it
    decodes = {b: ms for (b, n), ms in measured_fwd.items() if n == 1}
    model = anchor_decodes(model, decodes)
    alt = None if alt is None else anchor_decodes(alt, decodes)
    # the verify's excess over bytes and FLOPs: per verified token, per verify forward, or a share of each
    set_split = fitted_split(model)
    if set_split is not None:
        split, split_source = set_split, "set by the verifies measured at several token counts"
    else:
        split, split_source = verify_split, ("given" if given else "the default; one verify cannot tell")
    model = replace(split_verify(model, split), carry_excess=carry_excess)
    alt = None if alt is None else replace(split_verify(alt, split), carry_excess=carry_excess)

    def target_cost(b: int, n: int) -> Cost:
        if (b, n) in measured_fwd:
            return Cost(measured_fwd[(b, n)], True)
        return Cost(model.ms(b, n), False)

    def other_reading(b: int, n: int) -> float:
        """The forward under the other reading, capped by physics: n tokens of each of b requests cost no more
        than a decode step of b x n requests (the same expert and GEMM work, less KV cache read, fewer
        requests to schedule and sample)."""
        ms = (model if alt is None else alt).ms(b, n)
        return min(ms, target_cost(min(b * n, MAX_BATCH), 1).ms) if n > 1 else ms

    def target_sd(b: int, n: int) -> float:
        """The target forward's standard deviation (ms): at a batch size whose decode was measured only what the
        model adds for the verify's extra tokens is uncertain; elsewhere the whole forward."""
        v = target_cost(b, n).ms
        gap = 0.0 if alt is None else abs(other_reading(b, n) - v) / 2
        if b in decodes:
            return math.hypot(tnoise * (v - decodes[b]), gap)
        return math.hypot(tnoise * v, gap)

    blocks, block_fits, block_notes = _blocks(block_meas, block_drafter, shape=shape, gpu=g, tp=tp, context=context,
                                              target_noise=tnoise, endpoint=endpoint, timeout=timeout, token=token)
    notes += block_notes
    block_grid = tuple(zip(blocks, block_fits))
    # drafting: a prior from the drafter, fitted to draft tables and speculative runs
    dshape: ModelShape | None = None
    if drafter is not None and str(drafter).lower() in MTP_NAMES:
        if target is None:
            raise InputError("--drafter mtp is the target's own MTP layer: give the target (--target)")
        dshape = mtp_drafter(target_config(target, endpoint=endpoint, timeout=timeout, token=token),
                             name=f"MTP layer of {shape.name if shape is not None else 'the target'}")
    elif drafter is not None and g is not None:
        dshape = drafter_step_shape(drafter, endpoint=endpoint, timeout=timeout, token=token)
    elif shape is not None and shape.hidden_size:
        dshape = eagle3_drafter(shape)
    prior = draft_prior(dshape, g or GPUS["H100-SXM"], tp=tp, context=context)
    if g is None and dshape is not None:
        prior = replace(prior, source=prior.source + " (no --gpu: an H100-SXM's figures)")
    dt = _draft(draft_costs)
    rows: list[Row] = []
    if dt is not None:
        rows += [Row(f"draft step at batch {b}", (1.0, float(b), 0.0), ms, 0.0) for b, ms in dt.measured.items()]
    for r in runs.speculative:
        t = target_cost(r.batch, r.draft_tokens)
        rows.append(Row(r.label(), CycleFit.features(r.batch, r.steps, r.topk), r.cycle_ms, t.ms))
        if r.cycle_ms < t.ms * (1 - 3 * RUN_NOISE):
            warnings.append(f"cycle-shorter-than-verify: {r.label()} implies a {r.cycle_ms:.2f} ms cycle, shorter than "
                            f"the {t.ms:.2f} ms target forward of {r.draft_tokens} tokens alone; the row and the "
                            "forward's measurements disagree (a different server, context or run)")
    fit = fit_cycle(rows, prior, target_noise=tnoise)
    # a row far off the fit of the others is named and left out of the fit (its cell stays measured): the others'
    # scatter is the noise, not the scatter it would add
    off: list[int] = []
    if len(rows) >= 2:
        for i, (row, (value, noise)) in enumerate(zip(rows, fit_without_each(rows, prior))):
            pred = row.target_ms + sum(a * b for a, b in zip(row.x, value))
            miss = row.cycle_ms / pred - 1
            if abs(miss) > max(ROW_OFF, 4 * noise):
                off.append(i)
                warnings.append(f"row-off-the-fit: {row.label}: its cycle {row.cycle_ms:.2f} ms is {miss:+.0%} from "
                                f"the {pred:.2f} ms the other rows fit; left out of the fit (its cell stays as "
                                "measured): a different server, context or setting?")
        if off and len(off) < len(rows):
            fit = fit_cycle([r for i, r in enumerate(rows) if i not in off], prior, target_noise=tnoise)
    for words in fit.off_prior():
        hint = ("" if any(n > 1 for _, n in measured_fwd) else
                "; no verify was measured, so the run's cycle beyond the modelled verify lands here: give the "
                "verify (a verify_ms column in the runs CSV, or --costs B,k+1,MS), or read it as a verify dearer than "
                "its bytes")
        warnings.append(f"fitted-term-off-prior: {words}{hint}")
    if fit.noise > MAX_SCATTER:
        raise InputError(f"the speculative runs scatter by {fit.noise * 100:.3g}% around the best fit of drafting and overhead "
                         f"(more than {MAX_SCATTER:.0%}): runs that far apart are not one server's; check the units "
                         "(tokens_per_s over the whole batch) and the rows")
    if not runs.speculative and dt is None:
        what = (f"{dshape.name}" if dshape is not None else "an 8B-class EAGLE-3 drafter")
        notes.append(f"no speculative run or draft table: drafting and the per-cycle overhead come from a prior "
                     f"({what}; {prior.source}); the intervals say how little that pins down. Measure a "
                     "speculative run (--measured) to narrow them")
    # steps: the measured depth unless asked to extrapolate
    depth = 0 if acc.per_step == (0.0,) and acc.lengths == ((1, 1.0),) else acc.measured_steps
    depth = max([depth] + [r.steps for r in runs.speculative if r.chain])  # a measured run's k is priced too
    top = max_steps if extrapolate else min(max_steps, depth)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or not 0 <= max_steps <= MAX_PLAN_STEPS:
        raise InputError(f"max steps must be a whole number from 0 to {MAX_PLAN_STEPS}, got {max_steps!r}")
    if not extrapolate and max_steps > depth:
        notes.append(f"acceptance measured to {depth} step(s): the plan stops there (--extrapolate prices k up to "
                     f"{max_steps} by repeating the last per-step acceptance, past what the drafter was measured at)")
    elif depth < top:
        notes.append(f"acceptance measured for {depth} step(s); k = {depth + 1} .. {top} repeat the last per-step "
                     "acceptance (extrapolated, marked ^)")
    cap = None
    if shape is not None and g is not None and g.memory_gb:
        cap = capacity(shape, dshape, memory_gb=g.memory_gb, tp=tp, context=context)

    def fits(b: int) -> tuple[bool, float | None]:
        return (True, None) if cap is None else (cap.fits(b), cap.need_gb(b))

    tree_cfgs = _trees(trees, runs)
    deep = sorted({t.steps for t in tree_cfgs if t.steps > max_steps})
    if deep:   # --max-steps bounds trees too: a tree of more steps is not planned
        tree_cfgs = tuple(t for t in tree_cfgs if t.steps <= max_steps)
        notes.append(f"trees of {', '.join(map(str, deep))} steps are past max steps {max_steps}: left out of the plan")
    own = RunSet(tuple(r for r in runs.runs if r not in foreign), runs.warnings) if foreign else runs
    plans = monotone(price_grid(tuple(batches), acc, target_cost, fit, max_steps=top, runs=own,
                                draft_measured=dict(dt.measured) if dt is not None else {}, trees=tree_cfgs,
                                fits=fits, target_sd=target_sd,
                                spec_batches=tuple(r.batch for r in runs.speculative), blocks=block_grid))
    past = sorted({o.verified_tokens for p in plans for o in (*p.options, *p.trees, *p.blocks)
                   if not o.verify.measured and model.extrapolated_excess(o.verified_tokens)})
    if past:
        notes.append(extrapolation_note(model, past))
    if cap is not None:
        out = [p.batch for p in plans if not p.fits]
        if out:
            notes.append(f"capacity: batch {', '.join(str(b) for b in out)} do not fit ({cap.sentence()}); they get "
                         "no k")
    no_run = None
    if (model.kind == "estimate" and plans and plans[0].fits and plans[0].challenger is not None
            and not plans[0].challenger.block):
        # with no run at all: the same plan with the forward calibrated (its spread that of a fit, not a roofline's)
        def calibrated_sd(b: int, n: int) -> float:
            return RUN_NOISE * target_cost(b, n).ms
        b0 = plans[0].batch
        narrowed = price_grid((b0,), acc, target_cost, fit, max_steps=top, runs=own, trees=tree_cfgs,
                              target_sd=calibrated_sd)[0]
        o = plans[0].challenger
        # and a speculative run there too: the draft terms' covariance after one more row (at the prior's value)
        run_row = Row("a run", CycleFit.features(b0, o.steps, o.topk), o.cycle_ms,
                      target_cost(b0, o.verified_tokens).ms)
        fit_more = fit_cycle([*rows, run_row], prior, target_noise=RUN_NOISE)
        more = price_grid((b0,), acc, target_cost, fit_more, max_steps=top, trees=tree_cfgs,
                          target_sd=calibrated_sd)[0]
        n, m = narrowed.challenger, more.options[o.steps] if o.topk <= 1 else more.challenger
        if n is not None and m is not None:
            no_run = (f"no forward was measured: at batch {b0} {o.label()} reads {o.tps.text(0)} tok/s "
                      f"({o.tps.high / o.tps.low:.1f}x wide: the roofline's 25% and the draft prior); one decode "
                      f"step measured there (--calibrate {b0},1,MS) narrows it to about {n.tps.high / n.tps.low:.1f}x, "
                      f"and one speculative run at {o.label()} beside it (--measured) to about "
                      f"{m.tps.high / m.tps.low:.2f}x")
    return ServingPlan(acc, model, measured_fwd, dt, plans, top, drafter, tuple(notes), fit=fit, runs=runs,
                       foreign_runs=tuple(foreign), capacity=cap, warnings=tuple(warnings), next_run=next_measurement(plans, fit),
                       trees=tree_cfgs, split=split, split_source=split_source, no_run_interval=no_run, blocks=blocks,
                       block_fits=block_fits)
