"""What the serving plan reads, parsed from text: cost tables, acceptance results, vLLM's log line.

- ``COSTS.csv``: header ``batch,tokens,ms``, one forward of the target per row (tokens 1 = a decode step,
  k + 1 = a verify of k drafts). Repeated (batch, tokens) rows are averaged.
- ``DRAFT.csv``: header ``batch,ms``, one draft step per row.
- an ``eaglekit acceptance --json`` result: ``per_step_acceptance`` (null where nothing conditioned a step),
  else ``accept_length_by_steps``.
- SGLang's ``python -m sglang.bench_one_batch ... --result-filename F.jsonl`` records (one JSON object per
  run: ``batch_size``, ``input_len``, ``median_decode_latency`` in seconds, ``python/sglang/bench_one_batch.py``):
  decode steps (tokens 1) at each batch size.
- vLLM's periodic log line (``vllm/v1/spec_decode/metrics.py``): "SpecDecoding metrics: ... Per-position
  acceptance rate: 0.712, 0.503, 0.338", each rate accepted-at-position-i / drafts (unconditional).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglekit.core import safejson
from eaglekit.core.serving.costmodel import MAX_BATCH, MAX_MS, MIN_MS, CostModel, Point
from eaglekit.core.errors import InputError
from eaglekit.core.serving.plan import Acceptance

__all__ = ["DraftEstimate", "DraftTable", "acceptance_from_json", "acceptance_from_vllm_log", "parse_costs", "parse_draft_costs",
           "parse_numbers", "parse_sglang_bench"]


def _rows(text: str, what: str, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """Rows of a small CSV whose header names exactly ``columns``, in any order (blank and # lines skipped)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{what} is empty: expected a header {','.join(columns)} and one row per measurement")
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header = [h.strip().lower() for h in next(reader)]
    if sorted(header) != sorted(columns):
        raise InputError(f"{what}: the header must be {','.join(columns)}, got {','.join(header)!r}")
    out = []
    for i, row in enumerate(reader, 2):
        if len(row) != len(columns):
            raise InputError(f"{what} row {i}: expected {len(columns)} values ({','.join(header)}), got {len(row)}")
        out.append((i, dict(zip(header, (c.strip() for c in row)))))
    return out


def _whole(value: str, what: str, name: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise InputError(f"{what}: {name} must be a whole number, got {value!r}") from None
    if not 1 <= n <= MAX_BATCH:
        raise InputError(f"{what}: {name} must be from 1 to {MAX_BATCH:,}, got {value[:40]!r}")
    return n


def _ms(value: str, what: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(f"{what}: ms must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise InputError(f"{what}: ms must be finite, got {value!r}")
    if x < 0:
        raise InputError(f"{what}: time {x:g} ms is negative; times are milliseconds per forward, above 0")
    if x == 0:
        raise InputError(f"{what}: time 0 ms: a forward takes some time; check the measurement")
    if not MIN_MS <= x <= MAX_MS:
        raise InputError(f"{what}: {x:g} ms is outside {MIN_MS:g} to {MAX_MS:g} ms, what one forward or draft step "
                         "can take; check the unit (milliseconds)")
    return x


def parse_costs(text: str, *, what: str = "COSTS.csv") -> tuple[Point, ...]:
    """Measured target forwards from ``batch,tokens,ms`` text; at least two rows (a decode and a verify)."""
    sums: dict[tuple[int, int], list[float]] = {}
    for i, row in _rows(text, what, ("batch", "tokens", "ms")):
        where = f"{what} row {i}"
        key = (_whole(row["batch"], where, "batch"), _whole(row["tokens"], where, "tokens"))
        sums.setdefault(key, []).append(_ms(row["ms"], where))
    if len(sums) < 2:
        raise InputError(f"{what} has {len(sums)} distinct row: the plan needs at least two (batch, tokens) "
                         "measurements, e.g. a decode step (tokens 1) and a verify (tokens k + 1) at batch 1")
    return tuple(Point(b, n, sum(v) / len(v)) for (b, n), v in sorted(sums.items()))


def parse_sglang_bench(text: str, *, what: str = "bench_one_batch results") -> tuple[tuple[Point, ...], int]:
    """Decode steps from SGLang ``bench_one_batch`` result lines: ((batch, 1, median decode ms), ...) and the
    input length they ran at (the context). Runs at several input lengths are refused: one context per table."""
    sums: dict[int, list[float]] = {}
    lengths: set[int] = set()
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        rec = safejson.loads(line, what=f"{what} line {i} (bench_one_batch --result-filename lines)",
                             error=InputError)
        if not isinstance(rec, Mapping) or "median_decode_latency" not in rec:
            continue  # a run with output_len 1 has no decode latency
        b, sec, n = rec.get("batch_size"), rec.get("median_decode_latency"), rec.get("input_len")
        where = f"{what} line {i}"
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise InputError(f"{where}: batch_size must be a whole number >= 1, got {b!r}")
        if isinstance(sec, bool) or not isinstance(sec, (int, float)) or not math.isfinite(sec) or sec <= 0:
            raise InputError(f"{where}: median_decode_latency must be a positive number of seconds, got {sec!r}")
        if isinstance(n, int) and not isinstance(n, bool):
            lengths.add(n)
        sums.setdefault(b, []).append(sec * 1000.0)
    if len(lengths) > 1:
        raise InputError(f"{what} holds runs at input lengths {sorted(lengths)}: keep one context length per table "
                         "(the plan's --context)")
    if len(sums) < 2:
        raise InputError(f"{what} has decode steps at {len(sums)} batch size: the plan needs at least two rows")
    points = tuple(Point(b, 1, sum(v) / len(v)) for b, v in sorted(sums.items()))
    return points, (lengths.pop() if lengths else 0)


@dataclass(frozen=True)
class DraftTable:
    """Measured draft steps by batch size; between and beyond them a straight line ``fixed + per-request x B`` (one
    row: its time at every batch size)."""

    measured: Mapping[int, float]
    fixed_ms: float
    per_request_ms: float

    def ms(self, batch: int) -> tuple[float, bool]:
        if batch in self.measured:
            return self.measured[batch], True
        return self.fixed_ms + self.per_request_ms * batch, False

    def to_json(self) -> dict[str, Any]:
        return {"measured": {str(b): t for b, t in sorted(self.measured.items())}, "fixed_ms": self.fixed_ms,
                "per_request_ms": self.per_request_ms}


@dataclass(frozen=True)
class DraftEstimate:
    """A draft step estimated from the drafter's header on the GPU table (n = 1 row per request per step)."""

    model: CostModel

    def ms(self, batch: int) -> tuple[float, bool]:
        return self.model.ms(batch, 1), False

    @property
    def per_request_ms(self) -> float:
        """The slope between batch 1 and 256 (the widget draws drafting as a straight line)."""
        return (self.model.ms(256, 1) - self.model.ms(1, 1)) / 255.0

    @property
    def fixed_ms(self) -> float:
        return self.model.ms(1, 1) - self.per_request_ms

    @property
    def measured(self) -> dict[int, float]:
        return {}

    def describe(self) -> str:
        return (f"estimated from {self.model.shape.name}'s header on {self.model.gpu.name} x {self.model.tp}: "
                f"{self.model.ms(1, 1):.3g} ms at batch 1, {self.model.ms(256, 1):.3g} ms at batch 256 (roofline, a "
                "lower bound)")

    def to_json(self) -> dict[str, Any]:
        return {"estimate": self.model.to_json()}


def parse_draft_costs(text: str, *, what: str = "DRAFT.csv") -> DraftTable:
    """Draft steps from ``batch,ms`` text, with a non-negative straight-line fit when there are two or more."""
    sums: dict[int, list[float]] = {}
    for i, row in _rows(text, what, ("batch", "ms")):
        where = f"{what} row {i}"
        sums.setdefault(_whole(row["batch"], where, "batch"), []).append(_ms(row["ms"], where))
    measured = {b: sum(v) / len(v) for b, v in sorted(sums.items())}
    if not measured:
        raise InputError(f"{what} has no rows: add one draft step time per batch size (batch,ms)")
    if len(measured) == 1:
        (t,) = measured.values()
        return DraftTable(measured, t, 0.0)
    xs, ys = list(measured), list(measured.values())
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    slope = max(slope, 0.0)
    fixed = my - slope * mx
    if fixed < 0:
        fixed, slope = 0.0, sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    del n
    return DraftTable(measured, fixed, slope)


def parse_numbers(text: str, what: str) -> tuple[float, ...]:
    """``0.8,0.7,0.6`` -> floats (for --per-step and --per-position)."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            out.append(float(part))
        except ValueError:
            raise InputError(f"{what}: {part!r} is not a number (give comma-separated values, e.g. 0.8,0.7,0.6)") from None
    return tuple(out)


def acceptance_from_json(data: Any, *, what: str = "acceptance result") -> Acceptance:
    """Per-step acceptance from an ``eaglekit acceptance --json`` object."""
    if not isinstance(data, Mapping):
        raise InputError(f"{what}: expected the JSON object `eaglekit acceptance --json` prints")
    steps = data.get("per_step_acceptance")
    if isinstance(steps, list) and steps:
        values = []
        for c in steps:
            if c is None:
                break  # nothing conditioned this step: the profile ends at the last measured one
            values.append(c)
        if not values:
            raise InputError(f"{what}: no step was ever reached (per_step_acceptance is all null): nothing to plan")
        return Acceptance(tuple(values), f"{what} (measured at K = {data.get('steps', len(steps))})")
    by_steps = data.get("accept_length_by_steps")
    if isinstance(by_steps, list) and by_steps:
        prev, rates = 1.0, []
        for L in by_steps:
            if isinstance(L, bool) or not isinstance(L, (int, float)):
                raise InputError(f"{what}: accept_length_by_steps holds {L!r}, not a number")
            rates.append(L - prev)
            prev = L
        return Acceptance.from_positions(rates, source=what)
    raise InputError(f"{what}: it has neither per_step_acceptance nor accept_length_by_steps; is it the output of "
                     "`eaglekit acceptance --json`?")


_VLLM = re.compile(r"Per-position acceptance rate:[ \t]*([0-9.eE+\-, \t]+)")  # one line: a timestamp may follow


def acceptance_from_vllm_log(text: str, *, what: str = "vLLM log") -> Acceptance:
    """Per-step acceptance from the last "Per-position acceptance rate: ..." line of a vLLM log."""
    found = _VLLM.findall(text)
    if not found:
        raise InputError(f"{what}: no 'Per-position acceptance rate:' line (vLLM logs it every stats interval with "
                         "speculative decoding on; keep --disable-log-stats off)")
    rates = parse_numbers(found[-1].strip().rstrip(","), what)
    return Acceptance.from_positions(rates, source=f"{what} (vLLM per-position rates, last line)")
