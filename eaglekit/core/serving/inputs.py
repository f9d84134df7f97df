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
from eaglekit.core.errors import InputError
from eaglekit.core.serving.costmodel import MAX_BATCH, MAX_MS, MIN_MS, CostModel, Point
from eaglekit.core.serving.plan import Acceptance

__all__ = [
    "DraftEstimate",
    "DraftTable",
    "MAX_TABLE_ROWS",
    "acceptance_from_json",
    "acceptance_from_vllm_log",
    "check_number",
    "csv_rows",
    "parse_costs",
    "parse_draft_costs",
    "parse_numbers",
    "parse_sglang_bench",
]


def csv_rows(text: str, what: str, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """Rows of a small CSV whose header names exactly ``columns``, in any order (blank and # lines skipped)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{what} is empty: expected a header {','.join(columns)} and one row per measurement")
    reader = csv.reader(io.StringIO("\n".join(lines)))
    try:
        header = [h.strip().lower() for h in next(reader)]
        if sorted(header) != sorted(columns):
            shown = ",".join(header)
            raise InputError(f"{what}: the header must be {','.join(columns)}, got "
                             f"{shown if len(shown) <= 200 else shown[:200] + '...'!r}")
        out = []
        for i, row in enumerate(reader, 2):
            if len(row) != len(columns):
                raise InputError(f"{what} row {i}: expected {len(columns)} values ({','.join(header)}), got {len(row)}")
            out.append((i, dict(zip(header, (c.strip() for c in row)))))
    except csv.Error as e:   # a field past the csv module's limit (131,072 characters), a NUL byte...
        raise InputError(f"{what} row {max(reader.line_num, 1)}: not a CSV row this table takes ({e}); each field is a "
                         "short number") from None
    return out


def _whole(value: str, what: str, name: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise InputError(f"{what}: {name} must be a whole number, got {value!r}") from None
    if not 1 <= n <= MAX_BATCH:
        raise InputError(f"{what}: {name} must be from 1 to {MAX_BATCH:,}, got {value[:40]!r}")
    return n


def check_number(value: Any, what: str, name: str, low: float, high: float, *, whole: bool,
            empty: float | None = None) -> float:
    """``value`` (a JSON number or CSV text) checked as a whole number or a finite number in ``[low, high]``;
    ``empty`` stands for a blank. Text longer than any real figure is refused before it is converted."""
    kind = "a whole number" if whole else "a number"
    if value is None or (isinstance(value, str) and not value.strip()):
        if empty is not None:
            return empty
        raise InputError(f"{what}: {name} is empty; give {kind} from {low:g} to {high:g}")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > (12 if whole else 40):
            raise InputError(f"{what}: {name} {text[:20]!r}... is not {kind} from {low:g} to {high:g}")
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            raise InputError(f"{what}: {name} must be {kind}, got {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what}: {name} must be {kind}, got {value!r}")
    try:
        x = float(value)
    except OverflowError:
        raise InputError(f"{what}: {name} {str(value)[:20]}... is not {kind} from {low:g} to {high:g}") from None
    if not math.isfinite(x):
        raise InputError(f"{what}: {name} must be a finite number, got {value!r}")
    if whole and not x.is_integer():
        raise InputError(f"{what}: {name} must be a whole number, got {value!r}")
    if x < 0 and low >= 0:
        raise InputError(f"{what}: {name} {x:g} is negative")
    if not low <= x <= high:
        unit = {"ms": "; check the units (milliseconds per forward)",
                "tokens_per_s": "; check the units (output tokens per second over the whole batch)",
                "accept_length": "; check the units (tokens per cycle, bonus included)"}.get(name, "")
        raise InputError(f"{what}: {name} {x:g} is outside {low:g}..{high:g}{unit}")
    return x


def _ms(value: str, what: str) -> float:
    x = check_number(value, what, "ms", 0.0, 1e9, whole=False)
    if x == 0:
        raise InputError(f"{what}: time 0 ms: a forward takes some time; check the measurement")
    if not MIN_MS <= x <= MAX_MS:
        raise InputError(f"{what}: {x:g} ms is outside {MIN_MS:g} to {MAX_MS:g} ms, what one forward or draft step "
                         "can take; check the unit (milliseconds)")
    return x


#: Repeated rows further apart than this factor contradict each other: refused, never averaged.
CONTRADICTION = 10.0


def _refuse_contradictions(sums: Mapping[Any, list[float]], what: str, name: Any) -> None:
    for key, times in sums.items():
        if max(times) > CONTRADICTION * min(times):
            raise InputError(f"{what}: the rows at {name(key)} give {min(times):g} ms and {max(times):g} ms, more than "
                             f"{CONTRADICTION:g}x apart: they contradict each other; check the units and keep one "
                             "server's measurements")


#: The most distinct rows a cost table may hold ((batch, tokens) for the target, batch sizes for the draft step):
#: each draft row is a row of the drafting fit, refitted without it to name outliers (work that grows as the
#: square of the rows); a forward table of more points than this says nothing a few dozen do not.
MAX_TABLE_ROWS = 1024


def _check_rows(count: int, what: str, unit: str) -> None:
    if count > MAX_TABLE_ROWS:
        raise InputError(f"{what} has {count:,} distinct {unit}: a table holds at most {MAX_TABLE_ROWS:,}; keep the "
                         "batch sizes you serve (a few dozen pin the fit)")


def parse_costs(text: str, *, what: str = "COSTS.csv", need_two: bool = True) -> tuple[Point, ...]:
    """Measured target forwards from ``batch,tokens,ms`` text; at least two rows (a decode and a verify) unless
    ``need_two`` is off (measured runs give the decode steps)."""
    sums: dict[tuple[int, int], list[float]] = {}
    for i, row in csv_rows(text, what, ("batch", "tokens", "ms")):
        where = f"{what} row {i}"
        key = (_whole(row["batch"], where, "batch"), _whole(row["tokens"], where, "tokens"))
        sums.setdefault(key, []).append(_ms(row["ms"], where))
    _check_rows(len(sums), what, "(batch, tokens) rows")
    _refuse_contradictions(sums, what, lambda key: f"batch {key[0]}, {key[1]} token(s)")
    if len(sums) < (2 if need_two else 1):
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
    _check_rows(len(sums), what, "batch sizes")
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
    for i, row in csv_rows(text, what, ("batch", "ms")):
        where = f"{what} row {i}"
        sums.setdefault(_whole(row["batch"], where, "batch"), []).append(_ms(row["ms"], where))
    _check_rows(len(sums), what, "batch sizes")
    _refuse_contradictions(sums, what, lambda b: f"batch {b}")
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
    by_steps = data.get("accept_length_by_steps")
    lengths: tuple[tuple[int, float], ...] = ()
    if isinstance(by_steps, list) and by_steps:
        for L in by_steps:
            if isinstance(L, bool) or not isinstance(L, (int, float)) or not math.isfinite(L) or L < 1:
                raise InputError(f"{what}: accept_length_by_steps holds {L!r}, not an accept length (a number >= 1)")
        lengths = tuple((k, float(L)) for k, L in enumerate(by_steps, 1))
    if isinstance(steps, list) and steps:
        values = []
        for c in steps:
            if c is None:
                break  # nothing conditioned this step: the profile ends at the last measured one
            values.append(c)
        if not values:
            raise InputError(f"{what}: no step was ever reached (per_step_acceptance is all null): nothing to plan")
        K = data.get("steps", len(steps))
        source = f"{what} (measured at K = {K})"
        if lengths:
            from eaglekit.core.serving.plan import accept_length

            k = min(len(values), len(lengths))
            from_steps, simulated = accept_length(values, k), lengths[k - 1][1]
            gap = from_steps / simulated - 1
            source += (f"; basis: accept length at each k from its cycle-by-cycle simulation (what an engine logs: "
                       f"1 + accepted / drafts), {simulated:.3f} at k = {k}; the per-step acceptances, counted over "
                       f"every position, give {from_steps:.3f} there ({gap:+.1%}"
                       + ("" if abs(gap) < 0.02 else
                          ": positions inside a cycle are not cycle starts, so the two bases differ")
                       + "); steps past the simulated ones follow the per-step profile")
        else:
            source += "; basis: per-step acceptance over every position"
        source += _vllm_basis(data.get("vllm_per_position_acceptance"), lengths)
        return Acceptance(tuple(values), source, lengths)
    if lengths:
        prev, rates = 1.0, []
        for _, L in lengths:
            rates.append(L - prev)
            prev = L
        acc = Acceptance.from_positions(rates, source=f"{what}; basis: accept length at each k (cycle by cycle)")
        return Acceptance(acc.per_step, acc.source, lengths[:len(acc.per_step)])
    raise InputError(f"{what}: it has neither per_step_acceptance nor accept_length_by_steps; is it the output of "
                     "`eaglekit acceptance --json`?")


def _vllm_basis(rates: Any, lengths: tuple[tuple[int, float], ...]) -> str:
    """How the result's vLLM per-position rates (what ``--per-position`` takes from the same run: accepted at
    position i / drafts at the result's K) compare with the simulated accept length at each k."""
    if isinstance(rates, Mapping):
        rates = rates.get("value")
    if not lengths or not isinstance(rates, list) or not rates:
        return ""
    if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) for r in rates):
        return ""
    gaps, total = [], 1.0
    for (k, L), r in zip(lengths, rates):
        total += r
        gaps.append((k, total / L - 1))
    k, worst = max(gaps, key=lambda g: abs(g[1]))
    if abs(worst) < 0.02:
        return "; its vLLM per-position rates (--per-position) give the same accept lengths within 2%"
    return (f"; its vLLM per-position rates (--per-position) give {worst:+.1%} at k = {k}: they count positions of "
            f"cycles drafting {lengths[-1][0]} tokens, so at fewer steps they leave out the cycles that would restart "
            "earlier; the plan uses the simulation at each k")


_VLLM = re.compile(r"Per-position acceptance rate:[ \t]*([0-9.eE+\-, \t]+)")  # one line: a timestamp may follow


def acceptance_from_vllm_log(text: str, *, what: str = "vLLM log") -> Acceptance:
    """Per-step acceptance from the last "Per-position acceptance rate: ..." line of a vLLM log."""
    found = _VLLM.findall(text)
    if not found:
        raise InputError(f"{what}: no 'Per-position acceptance rate:' line (vLLM logs it every stats interval with "
                         "speculative decoding on; keep --disable-log-stats off)")
    rates = parse_numbers(found[-1].strip().rstrip(","), what)
    return Acceptance.from_positions(rates, source=f"{what} (vLLM per-position rates, last line)")
