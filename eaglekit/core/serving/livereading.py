"""The engine's acceptance over a window, as one record: counts, the accept length with its interval, and what the
server said of itself (its engines, its running requests, its speculative config). Text, HTML and ``--json``.

``running_requests`` is the total over the server's engines (vLLM's ``engine`` label, SGLang's data-parallel
ranks); ``batch`` in ``--json`` is per engine (the total / ``engines``): the concurrency one engine decodes at,
which is what ``eaglekit plan --measured`` takes as a run's batch. ``batch_total`` is beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from eaglekit.core.render import kv_html, kv_text
from eaglekit.core.uncertainty import Interval

__all__ = ["Engine", "LiveReading"]

Engine = Literal["vllm", "sglang"]


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
    engines: int | None = None

    @property
    def batch_per_engine(self) -> float | None:
        """Running requests per engine (the total over ``engines``)."""
        if self.running_requests is None:
            return None
        return self.running_requests / max(1, self.engines or 1)

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
        """accepted / drafted (vLLM's "Avg Draft acceptance rate", SGLang's ``spec_accept_rate``; not alpha)."""
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
            "engines": self.engines,
            "batch": None if self.running_requests is None else max(1, _whole(self.batch_per_engine)),
            "batch_per": "engine",
            "batch_total": None if self.running_requests is None else max(1, _whole(self.running_requests)),
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
            rows.append(("generation", f"{self.generation_tokens_per_s:,.1f} tokens/s"))
        if self.running_requests is not None:
            n = self.engines or 1
            rows.append(("running requests", f"{self.running_requests:.1f} in all" + (
                f", {self.batch_per_engine:.1f} per engine over {n} engines" if n > 1 else ", one engine")))
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
