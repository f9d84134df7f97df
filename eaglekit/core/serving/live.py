"""An engine's acceptance, read live: two scrapes of its Prometheus ``/metrics``, and their difference.

Counters are cumulative since each series was created, and Prometheus counters reset **per series**: vLLM
exports one series per engine (``engine`` label), and one engine restarting, or vLLM's elastic scale-up
re-creating its loggers (every series reset, new ``engine`` labels), leaves the sums free to grow all the same.
So :func:`difference` differences each series, then sums: a series that went down reset (its after-value is its
increase: it counts from zero), a series new in ``after`` counts from zero, and the reading names every series
that reset. An engine's counters restart together, so a series group (the labels but ``position``) where any
counter went down, or whose ``_created`` timestamp changed (prometheus_client writes one beside every counter
series: a re-created series, even one that has already passed its old value), is read as reset whole. Pages are read by :mod:`eaglekit.core.serving.promtext` (bounded, each
series once, prometheus_client's parser); every sample is checked (a finite number >= 0).

vLLM (V1 engine; vllm-project/vllm ``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingProm`` and
``vllm/v1/metrics/loggers.py`` ``PrometheusStatLogger``, labels ``model_name`` and ``engine``):

- ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total``;
- ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` (i from 0: drafts whose first i + 1 draft
  tokens were all accepted);
- ``vllm:generation_tokens_total`` and the gauge ``vllm:num_requests_running`` (per engine: their sum is the
  server's running requests, one ``engine`` label per engine).

The accept length is vLLM's "Mean acceptance length", 1 + accepted / drafts (bonus token in, the prefill token
out: the convention of :mod:`eaglekit.core.speedup.specmath` and of ``eaglekit acceptance``).

SGLang (sgl-project/sglang ``python/sglang/srt/metrics/collector.py``; ``observability/metrics_collector.py`` in
later releases): ``sglang:generation_tokens_total``, ``sglang:num_requests_total`` and
``sglang:spec_verify_calls_total`` are counted when a request finishes, so a fresh server has no such series until
its first request finishes (absent before, present after: counted from zero). Accept length = (generation tokens
- requests) / verify calls. The scheduler gauges (``sglang:spec_accept_length``, ``spec_accept_rate``,
``spec_num_steps``, ``spec_num_draft_tokens``, ``num_running_reqs``; ``multiprocess_mode="mostrecent"``) are one
per scheduler (labels ``tp_rank``, ``pp_rank``, ``dp_rank``; ``num_running_reqs`` also by ``priority``, ``""``
holding the total): combined as what they are (:func:`per_engine`), never summed across ranks. SGLang counts a
verify's draft tokens as ``speculative_num_draft_tokens - 1`` (the tree's nodes but its root: EAGLE's
``draft_forward`` keeps ``topk(score_list, speculative_num_draft_tokens - 1)``), so its acceptance rate is accepted
/ (verify calls x (num_draft_tokens - 1)), not / (verify calls x steps).

Bounds: no engine serves more than :data:`MAX_STEPS` draft steps (tokens per draft) or a tree of more than
:data:`MAX_TREE_TOKENS` draft tokens; counters that imply more are refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from eaglekit.core.errors import InputError
from eaglekit.core.redact import shown
from eaglekit.core.serving.livereading import Engine, LiveReading, _whole
from eaglekit.core.serving.promtext import MAX_FAMILIES, LabelKey, label_key, samples, series_name
from eaglekit.core.serving.sglanglog import parse_sglang_log
from eaglekit.core.uncertainty import Interval

__all__ = ["CounterReset", "LiveReading", "Snapshot", "difference", "parse_metrics", "parse_sglang_log",
           "per_engine", "MAX_FAMILIES", "MAX_POSITIONS", "MAX_STEPS", "MAX_TREE_TOKENS"]

#: Draft positions a per-position counter may name (vLLM's num_speculative_tokens is a handful).
MAX_POSITIONS = 64
#: The most draft steps (draft tokens per draft of a chain) any engine serves; EAGLE-3 serves 1 to 8.
MAX_STEPS = 64
#: The most draft tokens of one SGLang tree (``speculative_num_draft_tokens``; EAGLE-2's default is 60).
MAX_TREE_TOKENS = 1024

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
_SGLANG_RUNNING = "sglang:num_running_reqs"
_SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:spec_num_steps",
                  "sglang:spec_num_draft_tokens", _SGLANG_RUNNING, "sglang:gen_throughput")
_PER_POS = "per_pos"
_Z95 = 1.959963984540054

Series = Mapping[LabelKey, float]


class CounterReset(InputError):
    """The server changed between two scrapes (another engine answers): the difference means nothing."""


@dataclass(frozen=True)
class Snapshot:
    """One scrape: each speculative counter's series (``series[kind][labels]``; the per-position counter under
    ``"per_pos"``, its ``position`` among the labels) and the gauges' series, as the page lists them."""

    engine: Engine
    series: Mapping[str, Series]
    gauges: Mapping[str, Series] = field(default_factory=dict)
    models: tuple[str, ...] = ()
    created: Mapping[str, Series] = field(default_factory=dict)

    @property
    def counters(self) -> dict[str, float]:
        """Each counter summed over its series (a figure to show, never to difference)."""
        return {k: sum(v.values()) for k, v in self.series.items() if k != _PER_POS}

    @property
    def per_position(self) -> tuple[float, ...]:
        """Accepted tokens by position, summed over series."""
        return _by_position(self.series.get(_PER_POS, {}))


def _by_position(series: Series) -> tuple[float, ...]:
    out: dict[int, float] = {}
    for key, v in series.items():
        pos = int(dict(key)["position"])
        out[pos] = out.get(pos, 0.0) + v
    return tuple(out.get(i, 0.0) for i in range(max(out) + 1)) if out else ()


def _value(sample, what: str) -> float:
    v = float(sample.value)
    if not math.isfinite(v) or v < 0:
        raise InputError(f"{what}: {sample.name} is {v!r}; a counter is a finite number >= 0 (the server's "
                         "metrics are broken).")
    return v


def _position(labels: Mapping[str, str], name: str, what: str) -> str:
    """The ``position`` label as ASCII digits of at most two characters, below :data:`MAX_POSITIONS`."""
    pos = labels.get("position")
    if pos is None or not (pos.isascii() and pos.isdigit() and len(pos) <= 2 and int(pos) < MAX_POSITIONS):
        said = "no position label" if pos is None else f"position {shown(pos)[:20]!r}"
        raise InputError(f"{what}: {name} has {said}; vLLM labels draft positions 0 to num_speculative_tokens - 1 "
                         f"(at most {MAX_POSITIONS - 1}).")
    return str(int(pos))


def parse_metrics(text: str, *, model: str | None = None, what: str = "metrics") -> Snapshot:
    """The speculative-decoding series of one ``/metrics`` text; with ``model``, only the series whose
    ``model_name`` is ``model``."""
    series: dict[str, dict[LabelKey, float]] = {}
    gauges: dict[str, dict[LabelKey, float]] = {}
    models: dict[str, None] = {}
    names = {**{v: k for k, v in _VLLM.items()}, **{v: k for k, v in _SGLANG.items()}, _VLLM_PER_POS: _PER_POS}
    created_names = {k.removesuffix("_total") + "_created": v for k, v in names.items()}
    created: dict[str, dict[LabelKey, float]] = {}
    seen_prefix = set()
    for s in samples(text, what):
        name = s.name
        if name.startswith("vllm:"):
            seen_prefix.add("vllm")
        elif name.startswith("sglang:"):
            seen_prefix.add("sglang")
        if name not in names and name != _VLLM_RUNNING and name not in _SGLANG_GAUGES and name not in created_names:
            continue
        m = s.labels.get("model_name")
        if m is not None and len(models) < 64:
            models[shown(m)[:200]] = None
        if model is not None and m != model:
            continue
        v = _value(s, what)
        labels = dict(s.labels)
        if name in (_VLLM_PER_POS, _VLLM_PER_POS.removesuffix("_total") + "_created"):
            labels["position"] = _position(labels, name, what)
        if name in created_names:
            created.setdefault(created_names[name], {})[label_key(labels)] = v
            continue
        target = series.setdefault(names[name], {}) if name in names else gauges.setdefault(name, {})
        target[label_key(labels)] = v
    if model is not None and not series and not gauges:
        raise InputError(f"{what}: no speculative counters for model {shown(model)!r}; the server's models: "
                         f"{', '.join(models) or 'none labelled'}.")
    engine = _engine(series, seen_prefix, what)
    per_pos = _by_position(series.get(_PER_POS, {}))
    if per_pos and any(not any(dict(k)["position"] == str(i) for k in series[_PER_POS]) for i in range(len(per_pos))):
        have = sorted({int(dict(k)["position"]) for k in series[_PER_POS]})
        raise InputError(f"{what}: {_VLLM_PER_POS} positions {have} are not 0 to {len(per_pos) - 1}.")
    return Snapshot(engine, series, gauges, tuple(models), created)


def _engine(series: Mapping[str, Series], seen_prefix: set[str], what: str) -> Engine:
    if "drafts" in series or _PER_POS in series:
        missing = [_VLLM[k] for k in ("drafts", "draft_tokens", "accepted") if k not in series]
        if missing:
            raise InputError(f"{what}: {', '.join(missing)} missing; the counters come together in every vLLM "
                             "release that has them.")
        return "vllm"
    if "accepted" in series or "draft_tokens" in series:
        raise InputError(f"{what}: vLLM counters without vllm:spec_decode_num_drafts_total: the V0 engine's metrics "
                         "(no drafts counted, so no accept length per draft); eaglekit reads the V1 engine's "
                         "(vLLM 0.8 and later, VLLM_USE_V1=1).")
    if "vllm" in seen_prefix:
        raise InputError(f"{what}: a vLLM server without vllm:spec_decode_* counters: it serves no speculative "
                         "decoding (start it with --speculative-config).")
    if "sglang" in seen_prefix:  # SGLang's counters appear when the first request finishes: from zero until then
        missing = [_SGLANG[k] for k in ("generation_tokens", "requests") if "verify_calls" in series and k not in series]
        if missing:
            raise InputError(f"{what}: {', '.join(missing)} missing beside sglang:spec_verify_calls_total; SGLang "
                             "counts them together when a request finishes.")
        return "sglang"
    raise InputError(f"{what}: neither vLLM's nor SGLang's metrics; point at the engine's /metrics endpoint.")


def per_engine(series: Series) -> dict[str, float]:
    """An SGLang scheduler gauge, one value per engine (data-parallel rank, ``dp_rank``; one engine without it).
    With a ``priority`` label the total (``priority=""``) is kept, else the priorities are added; the tensor- and
    pipeline-parallel ranks of one engine report one scheduler's figure, so their largest is kept. vLLM's
    gauges carry ``engine``: one value per engine label."""
    keyed = [dict(k) for k in series]
    totals = any(d.get("priority") == "" for d in keyed)
    by: dict[str, dict[str, float]] = {}  # engine -> rank -> value
    for k, v in series.items():
        d = dict(k)
        if "priority" in d and totals and d["priority"] != "":
            continue
        eng = d.get("dp_rank", d.get("engine", "0"))
        rank = ",".join(f"{n}={d[n]}" for n in ("tp_rank", "pp_rank", "moe_ep_rank") if n in d)
        by.setdefault(eng, {})[rank] = by.get(eng, {}).get(rank, 0.0) + v
    return {eng: max(ranks.values()) for eng, ranks in by.items()}


# -- the difference -----------------------------------------------------------------------------------


def _group(key: LabelKey) -> LabelKey:
    """A series' engine: its labels but ``position`` (an engine's counters restart together)."""
    return tuple(p for p in key if p[0] != "position")


def _increases(before: Snapshot, after: Snapshot) -> tuple[dict[str, dict[LabelKey, float]], list[str]]:
    """Each series' increase over the window, and notes naming the series that reset, appeared or went away."""
    reset: set[LabelKey] = set()
    for kind, ser in after.series.items():
        b = before.series.get(kind, {})
        reset.update(_group(k) for k, v in ser.items() if k in b and v < b[k])
        born_b, born_a = before.created.get(kind, {}), after.created.get(kind, {})
        reset.update(_group(k) for k in ser if k in b and k in born_b and k in born_a and born_b[k] != born_a[k])
    had = {_group(k) for ser in before.series.values() for k in ser}
    has = {_group(k) for ser in after.series.values() for k in ser}
    out: dict[str, dict[LabelKey, float]] = {}
    for kind, ser in after.series.items():
        b = before.series.get(kind, {})
        out[kind] = {k: v if _group(k) in reset or k not in b else v - b[k] for k, v in ser.items()}
    notes = []
    for label, groups in (("reset during the window (a restart; counted from zero)", reset),
                          ("new in the second scrape (counted from zero)", has - had),
                          ("gone from the second scrape (their last increase is lost)", had - has)):
        if groups:
            named = sorted(series_name("", g) for g in groups)
            notes.append(f"series {label}: " + ", ".join(named[:8]) + (f" and {len(named) - 8} more"
                                                                         if len(named) > 8 else ""))
    return out, notes


def _total(series: Mapping[LabelKey, float] | None) -> int | None:
    return None if series is None else _whole(sum(series.values()))


def _engines(after: Snapshot) -> int:
    if after.engine == "vllm":
        return max(1, len({dict(k).get("engine") for k in after.series.get("drafts", {})}))
    return max(1, len(per_engine(after.gauges.get(_SGLANG_RUNNING, {}))))


def _running(snapshot: Snapshot) -> float | None:
    g = snapshot.gauges.get(_VLLM_RUNNING if snapshot.engine == "vllm" else _SGLANG_RUNNING)
    return None if not g else sum(per_engine(g).values())


def difference(before: Snapshot, after: Snapshot, window_s: float, *, source: str = "") -> LiveReading:
    """The reading over the window between two scrapes of one server: each series differenced (a reset or new
    series counts from zero), then summed. Raises :class:`CounterReset` when another engine answers the second
    scrape, InputError when nothing was drafted in the window or the counters are impossible."""
    if before.engine != after.engine:
        raise CounterReset(f"the server changed from {before.engine} to {after.engine} between two scrapes.")
    if not (math.isfinite(window_s) and window_s > 0):
        raise InputError(f"the window must be a positive number of seconds, got {window_s!r}.")
    inc, notes = _increases(before, after)
    d = {k: _total(v) for k, v in inc.items() if k != _PER_POS}
    per_pos = [_whole(x) for x in _by_position(inc.get(_PER_POS, {}))]
    running = [_running(s) for s in (before, after)]
    running_mean = sum(running) / 2 if all(r is not None for r in running) else None  # type: ignore[misc]
    gen = d.get("generation_tokens")
    tps = None if gen is None else gen / window_s
    if len(after.models) > 1:
        notes.append(f"summed over the models {', '.join(after.models)}; select one with --model")
    engines = _engines(after)
    if after.engine == "vllm":
        reading = _vllm_reading(d, per_pos, window_s, source, running_mean, tps, after, notes)
    else:
        reading = _sglang_reading(d, window_s, source, running_mean, tps, after, notes)
    return replace(reading, engines=engines)
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


def _vllm_reading(d, per_pos, window_s, source, running, tps, after: Snapshot, notes) -> LiveReading:
    drafts, drafted, accepted = d["drafts"], d["draft_tokens"], d["accepted"]
    if drafts <= 0:
        raise InputError(f"no drafts in the {window_s:.1f} s window: the server was idle. Send it traffic, or "
                         "lengthen --window.")
    if drafted < drafts or accepted > drafted:
        raise InputError(f"inconsistent counters over the window: {drafts} drafts, {drafted} draft tokens, "
                         f"{accepted} accepted (each draft drafts >= 1 token, at most all are accepted).")
    if drafted > MAX_STEPS * drafts:
        raise InputError(f"impossible counters over the window: {drafted:,} draft tokens in {drafts:,} drafts is more "
                         f"than {MAX_STEPS} per draft, past any engine's num_speculative_tokens.")
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


def _one(after: Snapshot, name: str, top: int, what: str) -> int | None:
    """A configuration gauge of SGLang's schedulers (the same on every engine): a whole number from 1 to ``top``."""
    values = set(per_engine(after.gauges.get(name, {})).values())
    if not values or values == {0.0}:
        return None
    v = max(values)
    if len(values) > 1 or v != int(v) or not 1 <= v <= top:
        shown_values = ", ".join(f"{x:g}" for x in sorted(values)[:4])
        raise InputError(f"{what}: {name} reads {shown_values}; a served config is one whole number from 1 to {top} "
                         "on every scheduler.")
    return int(v)


def _sglang_reading(d, window_s, source, running, tps, after: Snapshot, notes) -> LiveReading:
    verify, gen, reqs = d.get("verify_calls", 0), d.get("generation_tokens", 0), d.get("requests", 0)
    if verify <= 0:
        raise InputError(f"no speculative request finished in the {window_s:.1f} s window (SGLang counts verify "
                         "calls when a request finishes; speculation may be off). Send it traffic, or lengthen "
                         "--window.")
    steps = _one(after, "sglang:spec_num_steps", MAX_STEPS, source or "the server")
    tree = _one(after, "sglang:spec_num_draft_tokens", MAX_TREE_TOKENS, source or "the server")
    per_verify = tree - 1 if tree is not None else steps  # SGLang's draft tokens per verify
    accepted = gen - reqs - verify
    most = min(x for x in (steps, per_verify, MAX_STEPS) if x is not None)
    if accepted < 0 or accepted > most * verify:
        raise InputError(f"inconsistent counters over the window: {gen} generation tokens, {reqs} requests, {verify} "
                         f"verify calls (a finished request emits one prefill token and 1 to {most + 1} per verify).")
    L = 1.0 + accepted / verify
    interval = Interval(L, None, None, "no interval: SGLang's counters give totals only (no per-draft spread); "
                                       "its log's accept-len lines give one (eaglekit live --log)")
    gauges = {}
    for name in ("sglang:spec_accept_length", "sglang:spec_accept_rate"):
        values = per_engine(after.gauges.get(name, {}))
        if values:
            gauges[name.removeprefix("sglang:")] = sum(values.values()) / len(values)
    if len(per_engine(after.gauges.get(_SGLANG_RUNNING, {}))) > 1 and gauges:
        notes.append("the spec_accept_* gauges are each scheduler's last log interval: their mean over the engines "
                     "is shown")
    spec = {k: v for k, v in (("spec_num_steps", steps), ("spec_num_draft_tokens", tree)) if v is not None}
    if tree is None and steps is not None:
        notes.append("draft tokens taken as verify calls x steps (a chain); SGLang's spec_num_draft_tokens gauge "
                     "gives a tree's")
    notes.append("SGLang counts a request's tokens and verify calls when it finishes: the window holds the "
                 "requests that finished in it, whole")
    drafted = None if per_verify is None else verify * per_verify
    return LiveReading("sglang", source, window_s, verify, drafted, accepted, (), gen, interval, reqs, running, steps,
                       after.models, spec, gauges, gen / verify, tps, tuple(notes))
