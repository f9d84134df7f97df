"""Measured serving runs: one row per (batch size, draft configuration) with its accept length and throughput.

The plan's ``--measured RUNS`` reads them from:

- a CSV with the header ``batch,steps,topk,draft_tokens,accept_length,tokens_per_s`` (steps 0: no speculation,
  accept_length empty there; tokens_per_s = output tokens per second over the whole batch; topk and
  draft_tokens empty for a chain, which means topk 1 and draft_tokens = steps + 1);
- SGLang ``scripts/playground/bench_speculative.py`` output (JSONL, one record per configuration, keys
  ``batch_size, steps, topk, num_draft_tokens, acc_length, step_time, speed, completion_tokens``, written at
  the end of its ``run_one``; ``speed = acc_length / step_time`` is per sequence, so the batch's rate is
  ``speed x batch_size``; steps 0 is its baseline);
- SpecForge ``benchmarks/bench_eagle3.py`` output (one JSON document ``{"model": ..., "<benchmark>": [{batch_size,
  steps, topk, num_draft_tokens, metrics: [{latency, output_throughput, accept_length, ...}]}]}``; its
  ``output_throughput`` is output tokens over the run's wall time, all requests together);
- ``vllm bench serve --save-result`` JSON (``vllm/benchmarks/serve.py``: ``output_throughput``, ``max_concurrency``
  (else the ``max_concurrent_requests`` the run reached),
  and with speculation ``spec_decode_acceptance_length`` (1 + accepted / drafts), ``spec_decode_num_drafts``,
  ``spec_decode_draft_tokens``; steps = draft tokens / drafts; several objects when ``--append-result``);
- ``eaglekit live --json`` (``kind: eaglekit-live``: ``batch`` the running requests per engine, ``steps``,
  ``accept_length``, ``generation_tokens_per_s`` over the window: the live reading as one measured run);
- SGLang ``python -m sglang.bench_one_batch --result-filename`` lines (``batch_size``,
  ``median_decode_latency`` in seconds): baseline rows, ``batch_size / median_decode_latency`` tok/s.

Formats as the tools' sources write them: sgl-project/sglang ``scripts/playground/bench_speculative.py`` (the
``record = {...}`` written per configuration, commits 01d2a3d0 and 96fd6bf0) and ``python/sglang/bench_one_batch.py``
(``measurement_results``, commit 00944150); sgl-project/SpecForge ``benchmarks/bench_eagle3.py`` (``results[...]
.append(dict(...))``, commit 1d666725) with ``benchmarks/benchmarker/utils.py`` (``BenchmarkMetrics``, commit
91160488); vllm-project/vllm ``vllm/benchmarks/serve.py`` (``result["spec_decode_*"]`` and the saved
``result_json``, commit 009e6d4a).

Every number is checked: whole numbers where counts are meant, finite positive rates within physical bounds,
a speculative row's accept length between 1 and steps + 1, a chain's draft tokens = steps + 1. Repeated
configurations are averaged; repeats that disagree by more than :data:`REPEAT_SPREAD` are named in a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eaglekit.core import safejson
from eaglekit.core.errors import InputError
from eaglekit.core.serving.inputs import check_number, csv_rows

__all__ = ["MAX_RUNS", "REPEAT_SPREAD", "Run", "RunSet", "merge_runs", "parse_runs"]

#: Repeats of one configuration that differ by more than this (relative) are named in a warning.
REPEAT_SPREAD = 0.15
#: Repeats further apart than this factor are refused: no mean of them describes one server.
CONTRADICTION = 10.0
#: The most distinct runs (batch size x configuration, repeats averaged) one plan reads: each is a row of the
#: drafting fit, refitted without it to name outliers (work that grows as the square of the runs).
MAX_RUNS = 1024
_MAX_BATCH, _MAX_STEPS, _MAX_TOPK, _MAX_DRAFT_TOKENS, _MAX_TPS = 1 << 20, 64, 64, 4096, 1e9
RUN_COLUMNS = ("batch", "steps", "topk", "draft_tokens", "accept_length", "tokens_per_s")


@dataclass(frozen=True)
class Run:
    """One measured run: ``tokens_per_s`` output tokens per second over ``batch`` concurrent requests, drafting
    ``steps`` steps of ``topk`` branches and verifying ``draft_tokens`` tokens per request (a chain: topk 1,
    draft_tokens = steps + 1; steps 0: no speculation) at ``accept_length`` tokens per cycle (bonus included)."""

    batch: int
    steps: int
    topk: int
    draft_tokens: int
    accept_length: float
    tokens_per_s: float
    source: str = ""

    @property
    def speculative(self) -> bool:
        return self.steps > 0

    @property
    def chain(self) -> bool:
        return self.topk <= 1

    @property
    def config(self) -> tuple[int, int, int]:
        return (self.steps, self.topk, self.draft_tokens)

    @property
    def cycle_ms(self) -> float:
        """One step of the engine: a decode step (steps 0) or a draft-verify cycle, from the batch's rate."""
        return self.batch * self.accept_length * 1000.0 / self.tokens_per_s

    def label(self) -> str:
        what = "no speculation" if not self.steps else (
            f"steps {self.steps}" if self.chain else f"steps {self.steps} topk {self.topk} draft tokens "
                                                     f"{self.draft_tokens}")
        return f"batch {self.batch}, {what}"

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "steps": self.steps, "topk": self.topk, "draft_tokens": self.draft_tokens,
                "accept_length": self.accept_length, "tokens_per_s": self.tokens_per_s, "source": self.source}


@dataclass(frozen=True)
class RunSet:
    """Runs with repeats averaged, and the warnings reading them raised (``name: sentence``)."""

    runs: tuple[Run, ...]
    warnings: tuple[str, ...] = ()

    def get(self, batch: int, config: tuple[int, int, int]) -> Run | None:
        index = self.__dict__.get("_index")
        if index is None:   # built once: the grid asks for every batch size x k, and runs may number thousands
            index = {}
            for r in self.runs:
                index.setdefault((r.batch, r.config), r)
            object.__setattr__(self, "_index", index)
        return index.get((batch, config))

    @property
    def baseline(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if not r.speculative)

    @property
    def speculative(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.speculative)


def _count(value: Any, what: str, name: str, low: int, high: int, *, empty: int | None = None) -> int:
    return int(check_number(value, what, name, low, high, whole=True, empty=empty))


def _rate(value: Any, what: str, name: str, low: float, high: float, *, empty: float | None = None) -> float:
    return check_number(value, what, name, low, high, whole=False, empty=empty)


def make_run(batch: Any, steps: Any, topk: Any, draft_tokens: Any, accept_length: Any, tokens_per_s: Any, *,
             where: str, source: str = "") -> Run:
    """One checked :class:`Run` (``where`` names it in errors)."""
    b = _count(batch, where, "batch", 1, _MAX_BATCH)
    k = _count(steps, where, "steps", 0, _MAX_STEPS)
    tps = _rate(tokens_per_s, where, "tokens_per_s", 1e-3, _MAX_TPS)
    if k == 0:
        topk_v = _count(topk, where, "topk", 0, _MAX_TOPK, empty=0)
        n = _count(draft_tokens, where, "draft_tokens", 0, _MAX_DRAFT_TOKENS, empty=0)
        if topk_v > 1 or n > 1:
            raise InputError(f"{where}: steps 0 (no speculation) with topk {topk_v} / draft_tokens {n}: leave them "
                             "empty or 0 for a baseline row")
        L = _rate(accept_length, where, "accept_length", 1.0, 1.0, empty=1.0)
        return Run(b, 0, 0, 0, L, tps, source)
    topk_v = _count(topk, where, "topk", 1, _MAX_TOPK, empty=1)
    n = _count(draft_tokens, where, "draft_tokens", 2, _MAX_DRAFT_TOKENS, empty=k + 1 if topk_v <= 1 else None)
    if accept_length is None or (isinstance(accept_length, str) and not accept_length.strip()):
        raise InputError(f"{where}: a speculative row (steps {k}) needs its accept length (tokens per cycle, bonus "
                         "included; SGLang's 'accept len', vLLM's 'Mean acceptance length')")
    L = _rate(accept_length, where, "accept_length", 1.0, k + 1.0)
    if n and L > n:   # a cycle emits at most the draft tokens it verifies (the bonus token among them)
        raise InputError(f"{where}: accept length {L:g} is more than the {n} draft tokens a cycle verifies (steps {k}, "
                         f"topk {topk_v}, draft_tokens {n}): impossible; check the row's columns")
    if topk_v <= 1 and n != k + 1:
        raise InputError(f"{where}: a chain (topk 1) of {k} steps verifies {k + 1} draft tokens, got draft_tokens {n}; "
                         f"fix draft_tokens (SGLang forces --speculative-num-draft-tokens {k + 1} with topk 1)")
    pool = 1 + topk_v + (k - 1) * topk_v * topk_v  # the root, the first level, topk^2 candidates per further step
    if topk_v > 1 and n > pool:
        raise InputError(f"{where}: a tree of {k} steps x topk {topk_v} holds at most {pool} draft tokens (the root, "
                         f"{topk_v} first-level nodes and {topk_v * topk_v} candidates per further step), got {n}")
    return Run(b, k, max(topk_v, 1), n, L, tps, source)


def merge_runs(runs: Sequence[Run]) -> RunSet:
    """Average repeats of one (batch, configuration); name those that disagree beyond :data:`REPEAT_SPREAD`."""
    groups: dict[tuple[int, tuple[int, int, int]], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.batch, r.config), []).append(r)
    if len(groups) > MAX_RUNS:
        raise InputError(f"{len(groups):,} distinct runs (batch size x configuration, repeats averaged): one plan "
                         f"reads at most {MAX_RUNS:,}; keep the batch sizes and configurations you serve")
    out, warnings = [], []
    for (b, _), rs in sorted(groups.items()):
        tps = [r.tokens_per_s for r in rs]
        mean = sum(tps) / len(tps)
        if max(tps) > CONTRADICTION * min(tps):
            raise InputError(f"{len(rs)} runs of {rs[0].label()} give {min(tps):g} to {max(tps):g} tok/s, more than "
                             f"{CONTRADICTION:g}x apart: they contradict each other (a unit or column mix-up?); keep one "
                             "server's runs")
        if len(rs) > 1 and (max(tps) - min(tps)) / mean > REPEAT_SPREAD:
            warnings.append(f"contradicting-repeats: {len(rs)} runs of {rs[0].label()} give {min(tps):g} to "
                            f"{max(tps):g} tok/s (more than {REPEAT_SPREAD:.0%} apart); their mean is used and the "
                            "spread widens every interval")
        L = sum(r.accept_length for r in rs) / len(rs)
        r0 = rs[0]
        out.append(Run(b, r0.steps, r0.topk, r0.draft_tokens, L, mean, r0.source))
    return RunSet(tuple(out), tuple(warnings))


# -- readers ------------------------------------------------------------------------------------------


def _csv_runs(text: str, what: str) -> list[Run]:
    return [make_run(d["batch"], d["steps"], d["topk"], d["draft_tokens"], d["accept_length"], d["tokens_per_s"],
                     where=f"{what} row {i}", source=what) for i, d in csv_rows(text, what, RUN_COLUMNS)]


def _json_records(text: str, what: str) -> list[tuple[str, Any]]:
    """Whole-document JSON, else one JSON value per line (JSONL; vLLM's --append-result puts one per line)."""
    stripped = text.strip()
    try:
        return [(what, safejson.loads(stripped, what=what, error=InputError))]
    except InputError:
        pass
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            out.append((f"{what} line {i}", safejson.loads(line, what=f"{what} line {i}", error=InputError)))
    return out


def _from_record(rec: Any, where: str, what: str) -> list[Run]:
    if not isinstance(rec, Mapping):
        raise InputError(f"{where}: expected a JSON object from bench_speculative.py, bench_eagle3.py, "
                         "`vllm bench serve --save-result` or bench_one_batch")
    if "acc_length" in rec and "speed" in rec:  # SGLang scripts/playground/bench_speculative.py
        b = _count(rec.get("batch_size"), where, "batch_size", 1, _MAX_BATCH)
        speed = _rate(rec.get("speed"), where, "speed", 1e-3, _MAX_TPS)
        steps = rec.get("steps")
        return [make_run(b, steps, rec.get("topk"), rec.get("num_draft_tokens"),
                         rec.get("acc_length") if steps else None, speed * b, where=where,
                         source=f"{what} (bench_speculative.py)")]
    if rec.get("kind") == "eaglekit-live":  # eaglekit live --json: the engine's own counters over a window
        if rec.get("steps") is None or rec.get("batch") is None:
            raise InputError(f"{where}: a live reading without the served steps or the concurrency: read it again "
                             "with `eaglekit live ... --steps K --batch N --json`")
        return [make_run(rec.get("batch"), rec.get("steps"), 1, None, rec.get("accept_length"),
                         rec.get("generation_tokens_per_s"), where=where, source=f"{what} (eaglekit live)")]
    if "median_decode_latency" in rec:  # SGLang bench_one_batch
        b = _count(rec.get("batch_size"), where, "batch_size", 1, _MAX_BATCH)
        sec = _rate(rec.get("median_decode_latency"), where, "median_decode_latency", 1e-7, 1e4)
        return [make_run(b, 0, None, None, None, b / sec, where=where, source=f"{what} (bench_one_batch)")]
    if "output_throughput" in rec and ("max_concurrency" in rec or "completed" in rec):  # vllm bench serve
        b = rec.get("max_concurrency")
        if b is None:  # releases before max_concurrency was saved: the peak concurrency the run reached
            b = rec.get("max_concurrent_requests")
        if b is None:
            raise InputError(f"{where}: a `vllm bench serve` result without max_concurrency: run it with "
                             "--max-concurrency B so the batch size is known")
        tps = rec.get("output_throughput")
        if rec.get("spec_decode_num_drafts"):
            drafts = _rate(rec.get("spec_decode_num_drafts"), where, "spec_decode_num_drafts", 1, 1e15)
            drafted = _rate(rec.get("spec_decode_draft_tokens"), where, "spec_decode_draft_tokens", 1, 1e18)
            k = drafted / drafts
            if abs(k - round(k)) > 1e-6:
                raise InputError(f"{where}: spec_decode_draft_tokens / spec_decode_num_drafts = {k:g} is not a whole "
                                 "number of steps (a dynamic schedule?): run one num_speculative_tokens per result")
            return [make_run(b, int(round(k)), 1, None, rec.get("spec_decode_acceptance_length"), tps, where=where,
                             source=f"{what} (vllm bench serve)")]
        return [make_run(b, 0, None, None, None, tps, where=where, source=f"{what} (vllm bench serve)")]
    runs: list[Run] = []
    for key, value in rec.items():  # SpecForge bench_eagle3.py: {"model": ..., "<benchmark>": [...]}
        if key == "model" or not isinstance(value, list):
            continue
        for j, item in enumerate(value):
            w = f"{where} {key}[{j}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("metrics"), list) or not item["metrics"]:
                raise InputError(f"{w}: expected batch_size, steps, topk, num_draft_tokens and metrics "
                                 "(SpecForge bench_eagle3.py)")
            for m, metric in enumerate(item["metrics"]):
                if not isinstance(metric, Mapping):
                    raise InputError(f"{w} metrics[{m}]: expected an object with output_throughput, accept_length")
                steps = item.get("steps")
                runs.append(make_run(item.get("batch_size"), steps, item.get("topk"), item.get("num_draft_tokens"),
                                     metric.get("accept_length") if steps else None, metric.get("output_throughput"),
                                     where=f"{w} metrics[{m}]", source=f"{what} (bench_eagle3.py)"))
    if not runs:
        raise InputError(f"{where}: not a result this plan reads (CSV {','.join(RUN_COLUMNS)}; SGLang "
                         "bench_speculative.py or bench_one_batch JSONL; SpecForge bench_eagle3.py JSON; "
                         "`vllm bench serve --save-result` JSON)")
    return runs


def parse_runs(text: str, *, what: str = "RUNS") -> tuple[Run, ...]:
    """Runs from a CSV (header :data:`RUN_COLUMNS`) or an engine bench tool's JSON / JSONL (see the module)."""
    if not text.strip():
        raise InputError(f"{what} is empty: expected the header {','.join(RUN_COLUMNS)} and one row per run, or a "
                         "bench tool's result file")
    if text.lstrip()[:1] in "{[":
        runs: list[Run] = []
        for where, rec in _json_records(text, what):
            for item in (rec if isinstance(rec, list) else [rec]):
                runs.extend(_from_record(item, where, what))
        return tuple(runs)
    return tuple(_csv_runs(text, what))
