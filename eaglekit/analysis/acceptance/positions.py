"""Accept length by context position: where in a sequence a drafter stops paying.

Every accept-length path (target runs, dumps, trees, block drafters) keeps the cycles it counted as a
:class:`CycleLog`: for each cycle, the request it belongs to, the **position** at which it starts (the context
length then: prompt tokens plus the tokens generated so far, the prefill token included), the drafts it accepted
and the drafts that had a target token to compare with. :func:`by_position` pools them in buckets of position:

* accept length = tokens the bucket's cycles emitted (accepted drafts plus the bonus token) / its cycles, vLLM's
  convention, pooled as the headline figure is, with a percentile bootstrap over the requests that have cycles in
  the bucket (:func:`~eaglekit.core.uncertainty.bootstrap_ratio`);
* per-step acceptance ``c_j`` = P(step j accepted | steps 1..j-1 accepted) over the bucket's **cycle starts**
  (the headline per-step figure counts every position; a bucket counts only where cycles start, so its figures
  read together with its accept length);
* against a break-even accept length, a verdict per bucket (:func:`~eaglekit.core.uncertainty.verdict`) and the
  first position from which the drafter stops paying (the first NO-GO bucket).

The drafter's own range (:class:`PositionRange`: its trained length, ``max_position_embeddings`` and a YaRN
``rope_scaling`` range) is read from its config so a figure can draw it (drafters are trained on short samples
and read at positions they never saw). Pure: numpy and the interval helpers only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.records import register
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.uncertainty import Interval, Verdict, bootstrap_ratio, verdict

#: how the per-bucket figures are defined, said once in every rendering
BUCKET_CONVENTION = ("accept length = (accepted + bonus) / cycles of the cycles starting in the bucket (vLLM); "
                     "position = context length when the cycle starts (prompt + tokens generated so far)")
#: config keys a training record may state the trained sequence length under (SpecForge's --max-length, TRL's
#: max_seq_length, and eaglekit's own)
TRAINED_LENGTH_KEYS = ("trained_length", "training_max_length", "max_length", "max_seq_length", "train_seq_len")


@dataclass(frozen=True)
class CycleLog:
    """The cycles a measurement counted at K = ``steps``, one column per field (same length)."""

    steps: int
    request: tuple[int, ...] = ()
    position: tuple[int, ...] = ()
    accepted: tuple[int, ...] = ()
    drafted: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.request)
        if not (len(self.position) == len(self.accepted) == len(self.drafted) == n):
            raise InputError("a cycle log needs one request, position, accepted and drafted count per cycle.")

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, int, int, int]], steps: int) -> CycleLog:
        """From ``(request, position, accepted, drafted)`` rows."""
        cols = list(zip(*rows))
        if not cols:
            return cls(steps)
        return cls(steps, *(tuple(int(x) for x in c) for c in cols))

    def __len__(self) -> int:
        return len(self.request)

    def by_position(self, buckets: int | Sequence[int] = 8, *, break_even: float | None = None, seed: int = 0,
                    drafter_range: PositionRange | None = None) -> PositionProfile:
        """See :func:`by_position`."""
        return by_position(self, buckets=buckets, break_even=break_even, seed=seed, drafter_range=drafter_range)


@dataclass(frozen=True)
class PositionRange:
    """The positions a drafter was built for: its trained sequence length (where a config or training record
    says it), ``max_position_embeddings``, and a YaRN (or other) ``rope_scaling``: its type, factor and the
    original length it scales (``original * factor`` is the range it claims)."""

    trained_length: int | None = None
    max_position_embeddings: int | None = None
    rope_type: str | None = None
    rope_factor: float | None = None
    original_max_position_embeddings: int | None = None

    @property
    def scaled_range(self) -> int | None:
        """``original_max_position_embeddings x factor``: the range a scaled RoPE claims."""
        if self.rope_factor is None or self.original_max_position_embeddings is None:
            return None
        return int(self.original_max_position_embeddings * self.rope_factor)

    def lines(self) -> list[tuple[str, int]]:
        """The positions a figure draws, each with its label."""
        out = []
        if self.trained_length:
            out.append(("trained length", self.trained_length))
        if self.original_max_position_embeddings and self.rope_type:
            out.append((f"{self.rope_type} original length", self.original_max_position_embeddings))
        if self.max_position_embeddings:
            out.append(("max_position_embeddings", self.max_position_embeddings))
        scaled = self.scaled_range
        if scaled and scaled != self.max_position_embeddings:
            out.append((f"{self.rope_type} range", scaled))
        return out

    def text(self) -> str:
        return ", ".join(f"{name} {at}" for name, at in self.lines()) or "not stated in the drafter's config"


def position_range(config: Mapping[str, Any], *, trained_length: int | None = None) -> PositionRange:
    """Read a drafter's :class:`PositionRange` from its config.json (a nested ``text_config`` or
    ``transformer_layer_config`` is read too, as speculators writes it). ``trained_length`` given here wins over a
    config key (:data:`TRAINED_LENGTH_KEYS`)."""
    layers = [config] + [config[k] for k in ("transformer_layer_config", "text_config") if isinstance(config.get(k), Mapping)]

    def first(key: str) -> Any:
        return next((c[key] for c in layers if c.get(key) is not None), None)

    def count(value: Any) -> int | None:
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None

    rope = first("rope_scaling")
    rope = rope if isinstance(rope, Mapping) else {}
    kind = rope.get("rope_type") or rope.get("type")
    factor = rope.get("factor")
    if trained_length is None:
        trained_length = next((count(first(k)) for k in TRAINED_LENGTH_KEYS if count(first(k))), None)
    return PositionRange(
        trained_length=trained_length, max_position_embeddings=count(first("max_position_embeddings")),
        rope_type=str(kind) if kind and kind != "default" else None,
        rope_factor=float(factor) if isinstance(factor, (int, float)) and not isinstance(factor, bool) else None,
        original_max_position_embeddings=count(rope.get("original_max_position_embeddings")))


@dataclass(frozen=True)
class PositionBucket:
    """The cycles starting at positions ``start <= p < end``."""

    start: int
    end: int
    cycles: int
    requests: int
    accept_length: Interval
    #: P(step j accepted | steps 1..j-1 accepted) over the bucket's cycle starts; None where nothing conditions it
    per_step_acceptance: tuple[float | None, ...]
    verdict: Verdict | None = None
    #: the mean position at which the bucket's cycles start (where a figure places the bucket)
    mean_position: float | None = None

    def label(self) -> str:
        return f"{self.start}-{self.end - 1}"

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "cycles": self.cycles, "requests": self.requests,
                **self.accept_length.fields("accept_length"), "accept_length_interval": self.accept_length.method,
                "per_step_acceptance": list(self.per_step_acceptance), "verdict": self.verdict,
                "mean_position": self.mean_position}


@dataclass(frozen=True, repr=False)
class PositionProfile:
    """Accept length by context position (:func:`by_position`); renders as text, HTML and JSON."""

    steps: int
    buckets: tuple[PositionBucket, ...]
    break_even: float | None = None
    drafter_range: PositionRange = field(default_factory=PositionRange)

    @property
    def stops_paying_at(self) -> int | None:
        """The first position of the first bucket whose whole interval is below break-even (NO-GO); None when
        no break-even was given or no bucket is NO-GO."""
        return next((b.start for b in self.buckets if b.verdict == "NO-GO"), None)

    def to_json(self) -> dict[str, Any]:
        r = self.drafter_range
        return {"steps": self.steps, "convention": BUCKET_CONVENTION, "break_even": self.break_even,
                "stops_paying_at": self.stops_paying_at, "buckets": [b.to_json() for b in self.buckets],
                "drafter_range": {"trained_length": r.trained_length,
                                  "max_position_embeddings": r.max_position_embeddings, "rope_type": r.rope_type,
                                  "rope_factor": r.rope_factor,
                                  "original_max_position_embeddings": r.original_max_position_embeddings,
                                  "scaled_range": r.scaled_range}}

    def _pairs(self) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = [("steps K", self.steps), ("convention", BUCKET_CONVENTION),
                                        ("drafter's range", self.drafter_range.text())]
        if self.break_even is not None:
            at = self.stops_paying_at
            pairs.append(("break-even accept length", f"{self.break_even:.2f}"))
            pairs.append(("stops paying", "in no bucket (no bucket's interval is wholly below break-even)"
                          if at is None else f"from position {at} (the first bucket wholly below break-even)"))
        return pairs

    def _headers(self) -> list[str]:
        return (["positions", "cycles", "requests", "accept length (95%)"]
                + [f"c{j}" for j in range(1, self.steps + 1)] + (["verdict"] if self.break_even is not None else []))

    def _rows(self) -> list[list[str]]:
        rows = []
        for b in self.buckets:
            row = [b.label(), str(b.cycles), str(b.requests), b.accept_length.text()]
            row += ["-" if c is None else f"{c:.2f}" for c in b.per_step_acceptance]
            rows.append(row + ([b.verdict or "-"] if self.break_even is not None else []))
        return rows

    def __str__(self) -> str:
        return (kv_text(self._pairs(), title="Accept length by context position") + "\n\n"
                + text_table(self._headers(), self._rows(), align=["right"] * len(self._headers())))

    __repr__ = __str__  # a notebook's plain-text view is the text

    def _repr_html_(self) -> str:
        return ("<div>" + kv_html(self._pairs(), caption="Accept length by context position")
                + html_table(self._headers(), self._rows(), align=["right"] * len(self._headers())) + "</div>")


def bucket_edges(positions: Sequence[int], buckets: int | Sequence[int]) -> list[int]:
    """Edges ``e_0 < e_1 < ... < e_n``: ``buckets`` as given (ascending positions), or that many equal-width
    buckets from the first cycle's position to past the last one."""
    if isinstance(buckets, bool):
        raise InputError(f"buckets is a count or a list of positions, got {buckets!r}.")
    if isinstance(buckets, int):
        if buckets < 1:
            raise InputError(f"the number of position buckets must be at least 1, got {buckets}.")
        lo, hi = min(positions), max(positions) + 1
        width = max(1, math.ceil((hi - lo) / buckets))
        return [lo + i * width for i in range(buckets)] + [hi]
    edges = [int(e) for e in buckets]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])) or edges[0] < 0:
        raise InputError(f"bucket edges must be at least two ascending positions >= 0, got {list(buckets)}.")
    return edges


def by_position(log: CycleLog, *, buckets: int | Sequence[int] = 8, break_even: float | None = None, seed: int = 0,
                drafter_range: PositionRange | None = None) -> PositionProfile:
    """Accept length and per-step acceptance in buckets of the position where each cycle starts (module doc).
    ``buckets``: a count of equal-width buckets, or their edges; a bucket without cycles is left out.
    ``break_even``: the accept length a cycle must reach to pay; each bucket then carries a verdict."""
    import numpy as np

    if not len(log):
        raise InputError("this measurement kept no cycle positions (a result read from an older cache or another "
                         "tool): measure it again with eaglekit to read accept length by position.")
    if break_even is not None and not math.isfinite(break_even):
        raise InputError(f"the break-even accept length must be a finite number, got {break_even!r}.")
    req, pos = np.asarray(log.request), np.asarray(log.position)
    acc, dra = np.asarray(log.accepted), np.asarray(log.drafted)
    edges = bucket_edges(log.position, buckets)
    out = []
    for lo, hi in zip(edges, edges[1:]):
        sel = (pos >= lo) & (pos < hi)
        if not sel.any():
            continue
        owners, where = np.unique(req[sel], return_inverse=True)
        tokens = np.bincount(where, weights=acc[sel] + 1)
        cycles = np.bincount(where)
        interval = bootstrap_ratio(tokens, cycles, seed=seed, unit="requests")
        a, d = acc[sel], dra[sel]
        per_step = []
        for j in range(1, log.steps + 1):
            n = int(((a >= j - 1) & (d >= j)).sum())
            per_step.append(float((a >= j).sum() / n) if n else None)
        call = verdict(interval, break_even) if break_even is not None else None
        out.append(PositionBucket(lo, hi, int(sel.sum()), len(owners), interval, tuple(per_step), call,
                                  float(pos[sel].mean())))
    return PositionProfile(log.steps, tuple(out), break_even, drafter_range or PositionRange())


register(CycleLog)
