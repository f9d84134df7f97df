"""An engine's own acceptance, read live: two scrapes of its Prometheus ``/metrics``, and their difference.

Counters are cumulative since the server started, so a reading over a window is the difference of two
scrapes (:func:`difference`); a counter that went down means the server restarted in between
(:class:`CounterReset`: read again). Parsing is prometheus_client's text parser
(``text_string_to_metric_families``), never by hand; every sample is checked (a finite number >= 0).

vLLM (V1 engine; vllm-project/vllm ``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingProm`` and
``vllm/v1/metrics/loggers.py`` ``PrometheusStatLogger``, labels ``model_name`` and ``engine``):

- ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total``;
- ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` (i from 0: drafts whose first i + 1 draft
  tokens were all accepted);
- ``vllm:generation_tokens_total`` and the gauge ``vllm:num_requests_running``.

The accept length is vLLM's "Mean acceptance length", 1 + accepted / drafts (bonus token in, the prefill token
out: the convention of :mod:`eaglekit.core.speedup.specmath` and of ``eaglekit acceptance``); the per-position
acceptance is accepted at position i / drafts (vLLM's "Per-position acceptance rate"), the conditional one
position i / position i - 1. Its interval comes from the per-position counts: they give how many drafts
accepted exactly j tokens, hence the spread of accepted tokens per draft (a normal interval over the drafts).

SGLang (sgl-project/sglang ``python/sglang/srt/metrics/collector.py``; ``observability/metrics_collector.py`` in
later releases): ``sglang:generation_tokens_total``, ``sglang:num_requests_total`` and
``sglang:spec_verify_calls_total`` are counted when a request finishes (``observe_one_finished_request``: its
completion tokens and its ``spec_verify_ct``). A finished request's tokens are one from prefill plus, per verify,
the accepted drafts and the bonus token, so over a window accept length = (generation tokens - requests) /
verify calls (vLLM's convention) and generation tokens / verify calls is the "prefill included" figure SGLang's
benchmark clients print. The gauges ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate`` hold the
scheduler's last log interval and are shown beside, never used. SGLang's server log prints the same figure per
``decode_log_interval`` batches: ``Decode batch. #running-req: N, ... accept len: 2.35, ...``
(``scheduler_metrics_mixin.py`` ``log_decode_stats``); :func:`parse_sglang_log` reads those lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from eaglekit.core.errors import InputError
from eaglekit.core.redact import shown
from eaglekit.core.render import kv_html, kv_text
from eaglekit.core.uncertainty import Interval, bootstrap_ratio

__all__ = ["CounterReset", "LiveReading", "Snapshot", "difference", "parse_metrics", "parse_sglang_log",
           "MAX_FAMILIES", "MAX_POSITIONS"]

Engine = Literal["vllm", "sglang"]

#: Metric families a /metrics text may hold before it is refused (vLLM serves about 60, SGLang about 100).
MAX_FAMILIES = 20_000
#: Label sets (samples) in all.
MAX_SAMPLES = 200_000
#: Draft positions a per-position counter may name (vLLM's num_speculative_tokens is a handful).
MAX_POSITIONS = 64
#: Lines of a log read for "accept len" (the rest is ignored, and said so).
MAX_LOG_LINES = 2_000_000

_VLLM = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
}
_VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_VLLM_RUNNING = "vllm:num_requests_running"
_SGLANG = {
    "verify_calls": "sglang:spec_verify_calls_total",
    "generation_tokens": "sglang:generation_tokens_total",
    "requests": "sglang:num_requests_total",
}
_SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:spec_num_steps",
                  "sglang:spec_num_draft_tokens", "sglang:num_running_reqs", "sglang:gen_throughput")
_SPEC_INFO = ("sglang:speculative_config_info", "speculative_config_info")
_Z95 = 1.959963984540054


class CounterReset(InputError):
    """A counter went down between two scrapes: the server restarted, so the difference means nothing."""


@dataclass(frozen=True)
class Snapshot:
    """One scrape: the speculative counters summed over the selected label sets."""

    engine: Engine
    counters: Mapping[str, float]
    per_position: tuple[float, ...] = ()
    gauges: Mapping[str, float] = field(default_factory=dict)
    models: tuple[str, ...] = ()
    spec_config: Mapping[str, str] = field(default_factory=dict)


def _families(text: str, what: str):
    from prometheus_client.parser import text_string_to_metric_families  # loaded on use: start-up stays fast

    families = samples = 0
    try:
        for fam in text_string_to_metric_families(text):
            families += 1
            if families > MAX_FAMILIES:
                raise InputError(f"{what}: more than {MAX_FAMILIES:,} metric families; not an engine's /metrics "
                                 "(vLLM and SGLang serve about 100).")
            for s in fam.samples:
                samples += 1
                if samples > MAX_SAMPLES:
                    raise InputError(f"{what}: more than {MAX_SAMPLES:,} samples; not an engine's /metrics.")
                yield s
    except InputError:
        raise
    except Exception as e:  # the parser raises ValueError, KeyError, IndexError on malformed lines
        raise InputError(f"{what}: not Prometheus text exposition format ({type(e).__name__}: "
                         f"{shown(str(e))[:120]}); point at the engine's /metrics endpoint.") from e


def _value(sample, what: str) -> float:
    v = float(sample.value)
    if not math.isfinite(v) or v < 0:
        raise InputError(f"{what}: {sample.name} is {v!r}; a counter is a finite number >= 0 (the server's "
                         "metrics are broken).")
    return v


def parse_metrics(text: str, *, model: str | None = None, what: str = "metrics") -> Snapshot:
    """The speculative-decoding counters of one ``/metrics`` text, summed over label sets (``engine``,
    ``model_name``, ...); with ``model``, only the label sets whose ``model_name`` is ``model``."""
    counters: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    gauges: dict[str, float] = {}
    models: dict[str, None] = {}
    spec: dict[str, str] = {}
    names = {**{v: k for k, v in _VLLM.items()}, **{v: k for k, v in _SGLANG.items()}}
    seen_prefix = set()
    for s in _families(text, what):
        name = s.name
        if name.startswith("vllm:"):
            seen_prefix.add("vllm")
        elif name.startswith("sglang:"):
            seen_prefix.add("sglang")
        if name in _SPEC_INFO:
            spec.update({k: shown(v)[:200] for k, v in list(s.labels.items())[:32] if k != "model_name"})
            continue
        wanted = name in names or name == _VLLM_PER_POS or name == _VLLM_RUNNING or name in _SGLANG_GAUGES
        if not wanted:
            continue
        m = s.labels.get("model_name")
        if m is not None and len(models) < 64:
            models[shown(m)[:200]] = None
        if model is not None and m != model:
            continue
        v = _value(s, what)
        if name in names:
            counters[names[name]] = counters.get(names[name], 0.0) + v
        elif name == _VLLM_PER_POS:
            pos = s.labels.get("position")
            if pos is None or not pos.isdigit() or int(pos) >= MAX_POSITIONS:
                raise InputError(f"{what}: {name} has {'no position label' if pos is None else f'position {shown(pos)[:20]!r}'}"
                                 f"; vLLM labels draft positions 0 to num_speculative_tokens - 1.")
            per_pos[int(pos)] = per_pos.get(int(pos), 0.0) + v
        else:
            gauges[name] = gauges.get(name, 0.0) + v
    if model is not None and not counters:
        raise InputError(f"{what}: no speculative counters for model {shown(model)!r}; the server's models: "
                         f"{', '.join(models) or 'none labelled'}.")
    if "drafts" in counters or per_pos:
        engine: Engine = "vllm"
        missing = [_VLLM[k] for k in ("drafts", "draft_tokens", "accepted") if k not in counters]
    elif "verify_calls" in counters:
        engine = "sglang"
        missing = [_SGLANG[k] for k in ("generation_tokens", "requests") if k not in counters]
    elif "accepted" in counters or "draft_tokens" in counters:
        raise InputError(f"{what}: vLLM counters without vllm:spec_decode_num_drafts_total: the V0 engine's metrics "
                         "(no drafts counted, so no accept length per draft); eaglekit reads the V1 engine's "
                         "(vLLM 0.8 and later, VLLM_USE_V1=1).")
    elif "vllm" in seen_prefix:
        raise InputError(f"{what}: a vLLM server without vllm:spec_decode_* counters: it serves no speculative "
                         "decoding (start it with --speculative-config).")
    elif "sglang" in seen_prefix:
        raise InputError(f"{what}: an SGLang server without sglang:spec_verify_calls_total: no speculative request "
                         "has finished yet, speculation is off, or the release predates the counter (start it with "
                         "--enable-metrics and --speculative-algorithm; or read its log with --log).")
    else:
        raise InputError(f"{what}: neither vLLM's nor SGLang's metrics; point at the engine's /metrics endpoint.")
    if missing:
        raise InputError(f"{what}: {', '.join(missing)} missing; the counters come together in every "
                         f"{engine} release that has them.")
    if per_pos and sorted(per_pos) != list(range(len(per_pos))):
        raise InputError(f"{what}: {_VLLM_PER_POS} positions {sorted(per_pos)} are not 0 to {len(per_pos) - 1}.")
    positions = tuple(per_pos[i] for i in range(len(per_pos)))
    return Snapshot(engine, counters, positions, gauges, tuple(models), spec)


# -- the difference -----------------------------------------------------------------------------------


def _whole(x: float) -> int:
    return int(round(x))


@dataclass(frozen=True)
class LiveReading:
    """The engine's acceptance over a window (or over a log's lines). Counts are differences of cumulative
    counters; ``None`` where the engine does not count it. ``to_json()`` is ``eaglekit live --json``."""

    engine: Engine
    source: str
    window_s: float | None
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    accepted_per_position: tuple[int, ...]
    generation_tokens: int | None
    accept_length: Interval
    requests_finished: int | None = None
    running_requests: float | None = None
    steps: int | None = None
    models: tuple[str, ...] = ()
    spec_config: Mapping[str, Any] = field(default_factory=dict)
    engine_gauges: Mapping[str, float] = field(default_factory=dict)
    accept_length_prefill_included: float | None = None
    generation_tokens_per_s: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def per_position_acceptance(self) -> tuple[float, ...]:
        """Accepted at position i / drafts (vLLM's per-position acceptance rate); empty when not counted."""
        if not self.drafts or not self.accepted_per_position:
            return ()
        return tuple(c / self.drafts for c in self.accepted_per_position)

    @property
    def conditional_acceptance(self) -> tuple[float | None, ...]:
        """P(position i accepted | position i - 1 accepted): position i / position i - 1 (None where the earlier
        position accepted nothing). Comparable with ``eaglekit acceptance``'s per-step acceptance."""
        prev: float | None = float(self.drafts or 0)
        out: list[float | None] = []
        for c in self.accepted_per_position:
            out.append(c / prev if prev else None)
            prev = c
        return tuple(out)

    @property
    def acceptance_rate(self) -> float | None:
        """vLLM's "Avg Draft acceptance rate": accepted / drafted (not alpha)."""
        if not self.draft_tokens or self.accepted_tokens is None:
            return None
        return self.accepted_tokens / self.draft_tokens

    def to_json(self) -> dict[str, Any]:
        def fin(x):
            return x if x is None or (isinstance(x, (int, float)) and math.isfinite(x)) else None
        return {
            "kind": "eaglekit-live",
            "engine": self.engine, "source": self.source, "window_s": fin(self.window_s),
            "drafts": self.drafts, "draft_tokens": self.draft_tokens, "accepted_tokens": self.accepted_tokens,
            **self.accept_length.fields("accept_length"),
            "accept_length_interval": self.accept_length.method,
            "accept_length_convention": "1 + accepted / drafts (vLLM 'Mean acceptance length': bonus token in, "
                                        "prefill token out)",
            "accept_length_prefill_included": fin(self.accept_length_prefill_included),
            "per_position_acceptance": list(self.per_position_acceptance),
            "per_step_acceptance": list(self.conditional_acceptance),
            "accepted_per_position": list(self.accepted_per_position),
            "acceptance_rate": fin(self.acceptance_rate),
            "generation_tokens": self.generation_tokens,
            "generation_tokens_per_s": fin(self.generation_tokens_per_s),
            "requests_finished": self.requests_finished,
            "running_requests": fin(self.running_requests),
            "batch": None if self.running_requests is None else max(1, _whole(self.running_requests)),
            "steps": self.steps, "models": list(self.models), "spec_config": dict(self.spec_config),
            "engine_gauges": {k: fin(v) for k, v in self.engine_gauges.items()},
            "notes": list(self.notes),
        }

    def rows(self) -> list[tuple[str, Any]]:
        def n(x):
            return "n/a" if x is None else f"{x:,}"
        rows: list[tuple[str, Any]] = [
            ("engine", f"{self.engine} ({self.source})" + (f", models {', '.join(self.models)}" if self.models else "")),
            ("window", "n/a" if self.window_s is None else f"{self.window_s:.1f} s"),
            ("accept length", f"{self.accept_length.text()} tokens/cycle, 1 + accepted / drafts ({self.accept_length.method})"),
        ]
        if self.accept_length_prefill_included is not None:
            rows.append(("  prefill token included", f"{self.accept_length_prefill_included:.2f} (what SGLang's "
                                                      "benchmark clients print)"))
        rows += [("drafts", n(self.drafts)), ("draft tokens", n(self.draft_tokens)),
                 ("accepted tokens", n(self.accepted_tokens))]
        if self.acceptance_rate is not None:
            rows.append(("acceptance rate", f"{self.acceptance_rate:.1%} (accepted / drafted)"))
        if self.per_position_acceptance:
            rows.append(("per-position acceptance", " ".join(f"{p:.3f}" for p in self.per_position_acceptance)))
            rows.append(("per-step (conditional)", " ".join("n/a" if c is None else f"{c:.3f}"
                                                            for c in self.conditional_acceptance)))
        if self.generation_tokens_per_s is not None:
            rows.append(("generation", f"{self.generation_tokens_per_s:,.1f} tokens/s"
                         + (f" over {self.running_requests:.1f} running requests" if self.running_requests else "")))
        rows.append(("served steps", "unknown" if self.steps is None else str(self.steps)))
        if self.spec_config:
            rows.append(("speculative config", ", ".join(f"{k}={v}" for k, v in self.spec_config.items())))
        for k, v in self.engine_gauges.items():
            rows.append((f"{k} (gauge)", f"{v:.3f}"))
        rows += [("note", x) for x in self.notes]
        return rows

    def __str__(self) -> str:
        return kv_text(self.rows(), title="The engine's acceptance, read live")

    def _repr_html_(self) -> str:
        return kv_html(self.rows(), caption="The engine's acceptance, read live")


def _per_draft_interval(drafts: int, accepted: int, per_pos: Sequence[int], steps: int | None) -> Interval:
    """1 + accepted / drafts with a normal interval from the per-position counts: c_i drafts accepted at least
    i + 1 tokens, so sum (2i + 1) c_i is the sum of squared accepted counts, hence their spread."""
    L = 1.0 + accepted / drafts
    if not per_pos or drafts < 2:
        return Interval(L, None, None, "no interval: no per-position counts" if not per_pos else "one draft: no interval")
    mean = accepted / drafts
    square = sum((2 * i + 1) * c for i, c in enumerate(per_pos)) / drafts
    var = max(square - mean * mean, 0.0) * drafts / (drafts - 1)
    half = _Z95 * math.sqrt(var / drafts)
    top = 1.0 + (steps if steps is not None else len(per_pos))
    return Interval(L, max(1.0, L - half), min(top, L + half),
                    f"normal over {drafts:,} drafts from the per-position counts, 95% (drafts taken as independent; "
                    "drafts of one request are correlated, so the true interval is somewhat wider)")


def difference(before: Snapshot, after: Snapshot, window_s: float, *, source: str = "") -> LiveReading:
    """The reading over the window between two scrapes of one server. Raises :class:`CounterReset` when a
    counter went down (a restart), InputError when nothing was drafted in the window."""
    if before.engine != after.engine:
        raise CounterReset(f"the server changed from {before.engine} to {after.engine} between two scrapes.")
    if not (math.isfinite(window_s) and window_s > 0):
        raise InputError(f"the window must be a positive number of seconds, got {window_s!r}.")
    d: dict[str, int] = {}
    for k, v in after.counters.items():
        b = before.counters.get(k, 0.0)
        if v < b:
            raise CounterReset(f"{k.replace('_', ' ')} went down ({b:g} to {v:g}): the server restarted during "
                               "the window.")
        d[k] = _whole(v - b)
    if len(before.per_position) > len(after.per_position):
        raise CounterReset("per-position counters disappeared between scrapes: the server restarted.")
    per_pos: list[int] = []
    for i, v in enumerate(after.per_position):
        b = before.per_position[i] if i < len(before.per_position) else 0.0
        if v < b:
            raise CounterReset(f"accepted tokens at position {i} went down ({b:g} to {v:g}): the server restarted.")
        per_pos.append(_whole(v - b))
    running = [g.get(_VLLM_RUNNING if after.engine == "vllm" else "sglang:num_running_reqs")
               for g in (before.gauges, after.gauges)]
    running_mean = sum(running) / 2 if all(r is not None for r in running) else None
    gen = d.get("generation_tokens")
    tps = None if gen is None else gen / window_s
    notes: list[str] = []
    if len(after.models) > 1:
        notes.append(f"summed over the models {', '.join(after.models)}; select one with --model")
    if after.engine == "vllm":
        return _vllm_reading(d, per_pos, window_s, source, running_mean, tps, after, notes)
    return _sglang_reading(d, window_s, source, running_mean, tps, after, notes)


def _vllm_reading(d, per_pos, window_s, source, running, tps, after: Snapshot, notes) -> LiveReading:
    drafts, drafted, accepted = d["drafts"], d["draft_tokens"], d["accepted"]
    if drafts <= 0:
        raise InputError(f"no drafts in the {window_s:.1f} s window: the server was idle. Send it traffic, or "
                         "lengthen --window.")
    if drafted < drafts or accepted > drafted:
        raise InputError(f"inconsistent counters over the window: {drafts} drafts, {drafted} draft tokens, "
                         f"{accepted} accepted (each draft drafts >= 1 token, at most all are accepted).")
    steps = len(per_pos) or None
    if drafted % drafts == 0:
        steps = steps or drafted // drafts
        if steps != drafted // drafts:
            notes.append(f"draft tokens / drafts = {drafted // drafts} but the server counts {steps} positions")
    else:
        notes.append(f"draft tokens / drafts = {drafted / drafts:.2f} is not whole: drafts were shortened (near "
                     "the context limit) or the number of draft tokens varies")
    if per_pos:
        if per_pos[0] > drafts or any(b > a for a, b in zip(per_pos, per_pos[1:])):
            raise InputError(f"inconsistent per-position counters {per_pos} over {drafts} drafts: position i + 1 is "
                             "only accepted where position i was.")
        if sum(per_pos) != accepted:
            notes.append(f"the per-position counts sum to {sum(per_pos)}, the accepted counter says {accepted}")
    return LiveReading("vllm", source, window_s, drafts, drafted, accepted, tuple(per_pos), d.get("generation_tokens"),
                       _per_draft_interval(drafts, accepted, per_pos, steps), None, running, steps, after.models,
                       {"num_speculative_tokens": steps, "from": "positions counted by the server"} if steps else {},
                       {}, None, tps, tuple(notes))


def _sglang_reading(d, window_s, source, running, tps, after: Snapshot, notes) -> LiveReading:
    verify, gen, reqs = d["verify_calls"], d["generation_tokens"], d["requests"]
    if verify <= 0:
        raise InputError(f"no speculative request finished in the {window_s:.1f} s window (SGLang counts verify "
                         "calls when a request finishes). Send it traffic, or lengthen --window.")
    accepted = gen - reqs - verify
    if accepted < 0 or accepted > 64 * verify:
        raise InputError(f"inconsistent counters over the window: {gen} generation tokens, {reqs} requests, {verify} "
                         "verify calls (a finished request emits one prefill token and 1 to steps + 1 per verify).")
    steps_g = after.gauges.get("sglang:spec_num_steps")
    spec = dict(after.spec_config)
    steps = None
    for v in (spec.get("spec_num_steps"), steps_g):
        try:
            if v is not None and int(float(v)) > 0:
                steps = int(float(v))
                break
        except ValueError:
            pass
    L = 1.0 + accepted / verify
    interval = Interval(L, None, None, "no interval: SGLang's counters give totals only (no per-draft spread); "
                                       "its log's accept-len lines give one (eaglekit live --log)")
    gauges = {k.removeprefix("sglang:"): v for k, v in after.gauges.items()
              if k in ("sglang:spec_accept_length", "sglang:spec_accept_rate")}
    notes.append("SGLang counts a request's tokens and verify calls when it finishes: the window holds the "
                 "requests that finished in it, whole")
    return LiveReading("sglang", source, window_s, verify, None if steps is None else verify * steps, accepted, (),
                       gen, interval, reqs, running, steps, after.models, spec, gauges, gen / verify, tps, tuple(notes))


# -- SGLang's log -------------------------------------------------------------------------------------

_LOG_LINE = re.compile(r"Decode batch[^\n]*?#running-req:\s*(\d+)[^\n]*?accept len:\s*([0-9]+(?:\.[0-9]+)?)")
_LOG_TPS = re.compile(r"gen throughput \(token/s\):\s*([0-9]+(?:\.[0-9]+)?)")
_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def parse_sglang_log(text: str, *, source: str = "log", steps: int | None = None, seed: int = 0) -> LiveReading:
    """The accept length of SGLang's "Decode batch ... accept len: X" log lines: each line's figure over its
    ``decode_log_interval`` batches (verified tokens / verify calls, bonus token in: vLLM's convention), pooled
    weighted by the line's running requests (the lines do not print their verify count; running requests x
    the interval is its size up to requests finishing mid-interval), with a bootstrap over the lines."""
    nums: list[float] = []
    dens: list[float] = []
    tps: list[float] = []
    times: list[datetime] = []
    lines = text.splitlines()
    notes: list[str] = []
    if len(lines) > MAX_LOG_LINES:
        notes.append(f"only the last {MAX_LOG_LINES:,} of {len(lines):,} lines were read")
        lines = lines[-MAX_LOG_LINES:]
    top = None if steps is None else steps + 1
    for line in lines:
        m = _LOG_LINE.search(line)
        if not m:
            continue
        running, L = int(m.group(1)), float(m.group(2))
        if running <= 0 or L <= 0:  # an idle interval prints accept len 0
            continue
        if L < 1 or (top is not None and L > top + 0.005) or L > 65:
            raise InputError(f"{source}: 'accept len: {m.group(2)}' is outside 1..{top or 65}; not SGLang's decode log "
                             "(or --steps is wrong).")
        nums.append(L * running)
        dens.append(float(running))
        t = _LOG_TPS.search(line)
        if t:
            tps.append(float(t.group(1)))
        ts = _LOG_TIME.match(line)
        if ts:
            times.append(datetime.strptime(ts.group(1), "%Y-%m-%d %H:%M:%S"))
    if not nums:
        raise InputError(f"{source}: no 'Decode batch ... accept len: X' line with running requests; is it the log of "
                         "an SGLang server with speculative decoding (the scheduler logs one every "
                         "--decode-log-interval batches)?")
    interval = bootstrap_ratio(nums, dens, seed=seed, unit="log lines")
    interval = Interval(interval.value, interval.low, interval.high,
                        interval.method + " (each line weighted by its running requests)")
    window = (max(times) - min(times)).total_seconds() if len(times) > 1 else None
    notes.append(f"{len(nums)} decode log lines; SGLang's 'accept len' counts the bonus token")
    return LiveReading("sglang", source, window, None, None, None, (), None, interval, None,
                       sum(dens) / len(dens), steps, (), {}, {}, None,
                       sum(tps) / len(tps) if tps else None, tuple(notes))
