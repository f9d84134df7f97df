"""What a measurement on training dumps found, with every accept-length convention users compare.

Tools print different figures from the same cycles (vLLM issue 42508); one result shows them all,
each labelled with who prints it:

* pooled accept length, ``generated / cycles`` over all requests: vLLM's "Mean acceptance length"
  (``vllm/v1/spec_decode/metrics.py``: ``1 + accepted / num_drafts``) and SGLang's server "accept len";
* the mean of per-request accept lengths: SpecForge's benchmark client (it averages requests, and
  counts each request's first, prefill-made token as well: both shown);
* SpecForge's evaluator ``acc_len = a1 + a1 a2 + ...`` (conditional step acceptances over every position, no
  bonus token): a per-position figure, so it can exceed the pooled accept length - 1 (cycles never start inside
  an accepted run, and each request's last cycle is cut);
* vLLM's "Per-position acceptance rate": ``accepted_per_pos[i] / num_drafts``, the share of cycles
  whose first i + 1 drafts were accepted (they sum to the pooled accept length - 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eaglekit.analysis.acceptance.measure import AcceptanceResult
from eaglekit.core.redact import shown
from eaglekit.core.render import kv_html, kv_text
from eaglekit.core.uncertainty import Interval


def conventions(per_request: Sequence[tuple[float, float]], per_position: Sequence[float], *, steps: int,
                per_step: Sequence[float | None]) -> dict[str, Any]:
    """The other conventions from the same cycles: ``per_request`` = (generated tokens, cycles) of each request
    (one prefill token each), ``per_position`` = the share of cycles whose drafts 1..j were accepted."""
    req = [g / c for g, c in per_request if c]
    req_pre = [(g + 1) / c for g, c in per_request if c]
    acc, run = 0.0, 1.0
    for c in per_step:
        if c is None:
            break
        run *= c
        acc += run
    return {"mean_request_accept_length": sum(req) / len(req) if req else None,
            "mean_request_accept_length_prefill_included": sum(req_pre) / len(req_pre) if req_pre else None,
            "specforge_acc_len": acc,
            "vllm_per_position_acceptance": tuple(per_position),
            "vllm_draft_acceptance_rate": sum(per_position) / steps if per_position else None}


def ratio_interval(pairs: Sequence[tuple[int, int]], *, population: int, z: float = 1.96
                   ) -> tuple[float, float] | None:
    """95% interval of the pooled ratio sum(g) / sum(c) from a random sample of requests (the ratio
    estimator's linearised variance, with the finite-population correction); None under 2 requests."""
    pairs = [(g, c) for g, c in pairs if c]
    n = len(pairs)
    if n < 2:
        return None
    G, C = sum(g for g, _ in pairs), sum(c for _, c in pairs)
    r = G / C
    var = sum((g - r * c) ** 2 for g, c in pairs) / (n - 1)
    fpc = max(0.0, 1 - n / population) if population else 1.0
    se = math.sqrt(var / n * fpc) / (C / n)
    return (r - z * se, r + z * se)


def _no_nan(value, key: str = ""):
    """JSON never holds a bare NaN: an undefined figure is null, with a reason beside it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[k] = _no_nan(v, k)
            if isinstance(v, float) and not math.isfinite(v):
                out.setdefault(f"{k}_reason", "undefined: no cycle was evaluated")
        return out
    if isinstance(value, (list, tuple)):
        return [_no_nan(v) for v in value]
    return value


@dataclass(frozen=True)
class DumpAcceptance:
    """A drafter measured on a training pipeline's dump: :attr:`result` (the accept length, per-step
    acceptance and K curve, as ``--target`` reports them) plus the dump's facts and every convention.

    ``to_json()`` is ``eaglekit acceptance --hidden-states DIR --json``."""

    result: AcceptanceResult
    dump: str
    format: str
    writer: str
    final_norm: str
    aux_layers: tuple[int, ...]
    files_total: int
    files_read: int
    files_skipped: int
    nonfinite_rows: int
    assistant_tokens: int
    consistent_tokens: int
    spans: int
    sampled: bool
    interval: tuple[float, float] | None
    where: str
    masked_by: str
    mean_request_accept_length: float | None
    mean_request_accept_length_prefill_included: float | None
    specforge_acc_len: float
    vllm_per_position_acceptance: tuple[float, ...]
    vllm_draft_acceptance_rate: float | None
    extra_notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def accept_length(self) -> float:
        return self.result.accept_length

    @property
    def accept_length_interval(self) -> Interval:
        """The pooled accept length with its interval: a bootstrap that resamples samples (their assistant turns
        are the requests); how it was estimated is ``result.estimator``."""
        return self.result.interval

    @property
    def coverage(self) -> float | None:
        """Share of assistant tokens that follow the target's greedy choice."""
        return self.consistent_tokens / self.assistant_tokens if self.assistant_tokens else None

    def to_json(self) -> dict[str, Any]:
        out = self.result.to_json()
        out["dump"] = {"path": shown(self.dump), "format": self.format, "writer": self.writer,
                       "final_norm": self.final_norm, "aux_layers": list(self.aux_layers),
                       "files": self.files_total, "files_read": self.files_read, "files_skipped": self.files_skipped,
                       "nonfinite_positions": self.nonfinite_rows, "assistant_tokens": self.assistant_tokens,
                       "greedy_consistent_tokens": self.consistent_tokens, "coverage": self.coverage,
                       "coverage_reason": None if self.assistant_tokens else "no assistant tokens were read",
                       "assistant_tokens_from": self.masked_by, "spans": self.spans, "sampled": self.sampled,
                       "accept_length_95ci": list(self.interval) if self.interval else None, "ran_on": self.where}
        out["conventions"] = {
            "pooled_accept_length": {"value": self.accept_length, "interval": self.accept_length_interval.to_json(),
                                     "printed_by": "vLLM 'Mean acceptance length', SGLang server 'accept len'"},
            "mean_request_accept_length": {"value": self.mean_request_accept_length,
                                           "printed_by": "SpecForge benchmark client (prefill token excluded)"},
            "mean_request_accept_length_prefill_included": {
                "value": self.mean_request_accept_length_prefill_included,
                "printed_by": "SpecForge/SGLang benchmark clients (completion tokens / verify count)"},
            "specforge_acc_len": {"value": self.specforge_acc_len,
                                  "printed_by": "SpecForge evaluator (a1 + a1*a2 + ..., no bonus token)"},
            "vllm_per_position_acceptance": {"value": list(self.vllm_per_position_acceptance),
                                             "printed_by": "vLLM 'Per-position acceptance rate'"},
            "vllm_draft_acceptance_rate": {"value": self.vllm_draft_acceptance_rate,
                                           "printed_by": "vLLM 'Avg Draft acceptance rate'"},
        }
        return _no_nan(out)

    def _pairs(self) -> list[tuple[str, Any]]:
        def f(x):
            return "n/a" if x is None else f"{x:.3f}"

        cov = self.coverage
        pairs: list[tuple[str, Any]] = [
            ("dump", f"{shown(self.dump)} ({self.format}: {self.writer})"),
            ("files", f"{self.files_read} of {self.files_total} read"
             + (f", {self.files_skipped} skipped (NaN/Inf)" if self.files_skipped else "")
             + (" (random sample)" if self.sampled else "")),
            ("aux layers (assumed unless given)", f"{list(self.aux_layers)} ({self.result.aux_convention})"),
            ("final hidden state", self.final_norm),
            ("coverage", "n/a" if cov is None else
             f"{cov:.1%} of {self.assistant_tokens} assistant tokens follow the target's greedy token "
             f"({self.spans} spans; assistant tokens from {self.masked_by})"),
            ("accept length, pooled (vLLM, SGLang server)", self._accept_length_text()),
            ("mean per-request accept length (SpecForge bench client)",
             (f"{f(self.mean_request_accept_length)} ({f(self.mean_request_accept_length_prefill_included)} "
             "with each request's prefill token)")),
            ("acc_len (SpecForge evaluator, no bonus)", f"{f(self.specforge_acc_len)} (per position, not per cycle: "
             "cycles never start inside an accepted run and the last one is cut, so this can exceed the pooled "
             "accept length - 1)"),
            ("per-position acceptance (vLLM)", ", ".join(f"{p:.3f}" for p in self.vllm_per_position_acceptance)),
            ("ran on", self.where),
        ]
        return pairs

    def _accept_length_text(self) -> str:
        i = self.accept_length_interval
        out = i.text(3) + (f" ({i.method}; each assistant turn is one request)" if i.has_interval else "")
        if self.interval:
            out += (f"; over the {self.files_total} files the sample was drawn from: 95% interval "
                    f"{self.interval[0]:.3f}-{self.interval[1]:.3f}")
        return out

    def __str__(self) -> str:
        return (kv_text(self._pairs(), title="From the dumps your training already wrote") + "\n\n"
                + str(self.result))

    def _repr_html_(self) -> str:
        return ("<div>" + kv_html(self._pairs(), caption="From the dumps your training already wrote")
                + self.result._repr_html_() + "</div>")
