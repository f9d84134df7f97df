"""The record a drift run returns: the drafter's view, the per-layer map, and how it was measured.

Renders as text (terminal, ``print``) and HTML (last line of a notebook cell); :meth:`DriftReport.to_json`
is what ``eaglekit drift --json`` prints. Figures live in :mod:`eaglekit.view.drift_figures`; this
module never imports a plotting library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from eaglekit.analysis.drift.stats import SampleEstimate
from eaglekit.analysis.drift.hidden import HiddenDrift
from eaglekit.core.render import Html, format_bytes, html_table, kv_html, kv_text, text_table


@dataclass(frozen=True)
class DriftFigure:
    """Cosine, relative change ||b-a||/||a|| and the fraction of rows moved, over one stratum (or several),
    each an :class:`SampleEstimate` (a point in full mode); ``units`` read of ``units_total``."""

    name: str
    layer: int | None
    component: str | None
    cosine: SampleEstimate
    relative: SampleEstimate
    moved: SampleEstimate
    units: int
    units_total: int
    rows: int

    @property
    def exact(self) -> bool:
        return self.units >= self.units_total

    def to_json(self) -> dict[str, Any]:
        def est(e: SampleEstimate) -> dict[str, float | None]:
            return {"value": _num(e.value), "low": _num(e.low), "high": _num(e.high)}

        return {"name": self.name, "layer": self.layer, "component": self.component, "cosine": est(self.cosine),
                "relative_change": est(self.relative), "moved_fraction": est(self.moved), "units": self.units,
                "units_total": self.units_total, "rows": self.rows}


@dataclass(frozen=True)
class Feed:
    """One aux layer id as an engine reads it: the decoder layer whose output feeds the drafter, that
    layer's drift and the drift of every layer up to it, over weight matrices (norms left out), None
    where the layer is not in both targets."""

    engine: str
    aux_id: int
    layer: int
    own: DriftFigure | None
    through: DriftFigure | None


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _show(e: SampleEstimate, digits: int = 4, exact: bool = False) -> str:
    if not math.isfinite(e.value):
        return "n/a"
    if exact or not math.isfinite(e.low):
        return f"{e.value:.{digits}f}"
    return f"{e.value:.{digits}f} [{e.low:.{digits}f}, {e.high:.{digits}f}]"


@dataclass(frozen=True)
class DriftReport:
    a: str
    b: str
    mode: str  # "full" | "sampled"
    confidence: float
    budget: int | None
    where: str
    tol: float
    strata: tuple[DriftFigure, ...]
    whole: DriftFigure
    embedding: DriftFigure | None
    embedding_moved: tuple[int, ...]
    embedding_decoded: tuple[str, ...] | None
    draft_lm_head: DriftFigure | None
    draft_moved: tuple[int, ...]
    feeds: tuple[Feed, ...]
    aux_ids: tuple[int, ...] | None
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    mismatched: tuple
    bytes_read: tuple[float, float]
    bytes_total: tuple[float, float]
    seconds: float
    hidden: HiddenDrift | None = None  # hidden-state drift per layer, when two dumps were given
    #: How the drafter does not fit the targets ("vocab size 8,016 vs the targets' 10,240"); empty when it fits.
    drafter_misfit: tuple[str, ...] = ()
    #: Weights with rows skipped because they hold NaN or Inf after dequantisation (NaN scales, FP8 NaN
    #: codes): (weight, rows skipped, in the rows read). Their figures cover the finite rows only.
    not_finite: tuple[tuple[str, int], ...] = ()

    @property
    def not_finite_note(self) -> str | None:
        """A plain sentence when rows were skipped as NaN/Inf, else None."""
        if not self.not_finite:
            return None
        total = sum(n for _, n in self.not_finite)
        where = ", ".join(f"{name} ({n:,})" for name, n in self.not_finite[:5])
        more = f" and {len(self.not_finite) - 5} more weights" if len(self.not_finite) > 5 else ""
        return (f"{total:,} rows hold NaN or Inf after dequantisation (NaN or Inf scales, FP8 NaN codes) and were "
                f"skipped, not counted as moved: {where}{more}. Figures cover the finite rows; a stratum "
                "with none shows n/a.")

    @property
    def drafter_note(self) -> str | None:
        """A plain sentence when the drafter given does not fit these targets, else None."""
        if not self.drafter_misfit:
            return None
        what = "; ".join(self.drafter_misfit)
        if any(m.startswith("vocab") for m in self.drafter_misfit):
            return (f"the drafter does not fit these targets ({what}): its draft ids belong to another "
                    "tokenizer and its aux layer ids to another target, so neither is shown.")
        return (f"the drafter does not fit these targets ({what}): it cannot serve them as it is. It shares "
                "their vocabulary, so the rows it drafts and the layers its aux ids name are shown.")

    def figure(self, name: str) -> DriftFigure:
        """The figure of one stratum by name (``"embedding"``, ``"layer 3 routed experts"``, ...)."""
        for f in self.strata:
            if f.name == name:
                return f
        if name == self.whole.name:
            return self.whole
        raise KeyError(f"no stratum {name!r}; strata: {', '.join(f.name for f in self.strata)}")

    @property
    def summary(self) -> str:
        """A few sentences answering "did the target move where the drafter looks?"."""
        exact = self.mode == "full"
        out = [f"Whole target: cosine {_show(self.whole.cosine, exact=exact)}, "
               f"||b-a||/||a|| {_show(self.whole.relative, exact=exact)}."]
        if self.drafter_note:
            out.append(self.drafter_note[0].upper() + self.drafter_note[1:])
        if self.not_finite_note:
            out.append(self.not_finite_note)
        if self.embedding is not None:
            n = len(self.embedding_moved)
            out.append(f"Embedding (the drafter's frozen copy): {n} of {self.embedding.rows} rows moved"
                       + ("" if exact else " among the rows read; estimated fraction "
                          + _show(self.embedding.moved, 4)) + ".")
        if self.draft_lm_head is not None:
            out.append(f"lm_head rows of the draft vocabulary: cosine {_show(self.draft_lm_head.cosine, exact=exact)}.")
        by_engine: dict[str, list[str]] = {}
        for f in self.feeds:
            if f.own is not None:
                by_engine.setdefault(f.engine, []).append(f"layer {f.layer} {f.own.cosine.value:.4f}")
        for engine, parts in by_engine.items():
            out.append(f"Layers feeding the drafter ({engine}): cosine " + ", ".join(parts) + ".")
        if self.hidden is not None:
            parts = [f"output of layer {l.index - 1}: cosine {l.cosine:.3f}, CKA {l.cka:.3f}" if l.cosine is not None
                     else f"output of layer {l.index - 1}: CKA {l.cka:.3f}" for l in self.hidden.layers]
            out.append(f"Hidden states on {self.hidden.positions} shared positions: " + "; ".join(parts) + ".")
        return " ".join(out)

    # -- summary lines ------------------------------------------------------------------------------
    def _how(self) -> str:
        read = sum(self.bytes_read)
        total = sum(self.bytes_total)
        mode = "every byte" if self.mode == "full" else \
            f"sampled under a {format_bytes(self.budget or 0)} budget, {self.confidence:.0%} intervals"
        if self.mode == "sampled" and self.budget and read > self.budget * 1.001:
            mode += " (over budget: every stratum needs its minimum of units)"
        return (f"{mode}; read {format_bytes(read)} of {format_bytes(total)} ({read / total:.2%}) "
                f"on {self.where} in {self.seconds:.1f} s")

    def _view_lines(self) -> list[tuple[str, str]]:
        exact = self.mode == "full"
        out = [("drafter", self.drafter_note)] if self.drafter_note else []
        if self.not_finite_note:
            out.append(("not finite", self.not_finite_note))
        out += [("whole target: cosine", _show(self.whole.cosine, exact=exact)),
                ("whole target: ||b-a||/||a||", _show(self.whole.relative, exact=exact))]
        if self.embedding is not None:
            e = self.embedding
            seen = "moved" if exact else "moved among the rows read"
            toks = ""
            if self.embedding_moved:
                shown = self.embedding_decoded or tuple(str(i) for i in self.embedding_moved[:50])
                toks = ": " + ", ".join(shown[:12]) + (" ..." if len(self.embedding_moved) > 12 else "")
            n = len(self.embedding_moved)
            moved = (f"{n} of {e.rows} rows (fraction {_show(e.moved, 4, exact)})" if exact else
                     f"fraction {_show(e.moved, 4, exact)} of the {e.rows} rows (estimated); {n} {seen}")
            out += [("embedding: cosine", _show(e.cosine, exact=exact)),
                    ("embedding: rows moved", moved + toks)]
        if self.draft_lm_head is not None:
            d = self.draft_lm_head
            out += [("lm_head, draft rows: cosine", _show(d.cosine, exact=exact)),
                    ("lm_head, draft rows moved", f"fraction {_show(d.moved, 4, exact)} of the {d.rows} draft "
                                                  "tokens' rows" + ("" if exact else " (estimated)"))]
        for f in self.feeds:
            if f.own is None:
                what = "the token embeddings (see embedding)" if f.layer < 0 else \
                    f"output of layer {f.layer}: not in both targets"
                out.append((f"{f.engine} aux id {f.aux_id}", what))
            else:
                out.append((f"{f.engine} aux id {f.aux_id}",
                            f"output of layer {f.layer}: layer cosine {_show(f.own.cosine, exact=exact)}; "
                            f"layers 0..{f.layer} {_show(f.through.cosine, exact=exact)}"))
        if self.only_a or self.only_b or self.mismatched:
            out.append(("not compared", f"{len(self.only_a)} only in A, {len(self.only_b)} only in B, "
                                        f"{len(self.mismatched)} of different shapes"))
        return out

    def _map_rows(self) -> list[list[str]]:
        exact = self.mode == "full"
        return [[f.name, _show(f.cosine, exact=exact), _show(f.relative, exact=exact), _show(f.moved, 3, exact),
                 f"{f.units}/{f.units_total}"] for f in self.strata]

    _HEAD = ["stratum", "cosine", "||b-a||/||a||", "rows moved", "units read"]

    def __str__(self) -> str:
        head = kv_text(self._view_lines(), title=f"Target drift: {self.a} -> {self.b}\n{self._how()}")
        states = f"\n\n{self.hidden}" if self.hidden is not None else ""
        return head + states + "\n\n" + text_table(self._HEAD, self._map_rows(), title="Drift map (per layer)")

    def _repr_html_(self) -> str:
        caption = Html(f"<b>Target drift</b>: <code>{_esc(self.a)}</code> &rarr; <code>{_esc(self.b)}</code>"
                       f"<br><span style='font-weight:400'>{_esc(self._how())}</span>")
        return (kv_html(self._view_lines(), caption=caption) +
                (self.hidden._repr_html_() if self.hidden is not None else "") +
                html_table(self._HEAD, self._map_rows(), caption="Drift map (per layer)",
                           align=["left", "right", "right", "right", "right"]))

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "mode": self.mode, "confidence": self.confidence, "budget": self.budget,
            "where": self.where, "moved_tolerance": self.tol, "whole": self.whole.to_json(),
            "embedding": self.embedding.to_json() if self.embedding else None,
            "embedding_moved_rows": list(self.embedding_moved),
            "embedding_moved_tokens": list(self.embedding_decoded) if self.embedding_decoded else None,
            "draft_lm_head": self.draft_lm_head.to_json() if self.draft_lm_head else None,
            "draft_moved_target_ids": list(self.draft_moved), "aux_layer_ids": list(self.aux_ids or ()) or None,
            "feeds": [{"engine": f.engine, "aux_id": f.aux_id, "output_of_layer": f.layer,
                       "layer": f.own.to_json() if f.own else None,
                       "through": f.through.to_json() if f.through else None} for f in self.feeds],
            "strata": [f.to_json() for f in self.strata],
            "only_a": list(self.only_a), "only_b": list(self.only_b),
            "mismatched": [{"name": n, "shape_a": list(sa), "shape_b": list(sb)} for n, sa, sb in self.mismatched],
            "bytes_read": list(self.bytes_read), "bytes_total": list(self.bytes_total), "seconds": self.seconds,
            "hidden_states": self.hidden.to_json() if self.hidden is not None else None,
            "drafter_misfit": list(self.drafter_misfit),
            "not_finite_rows": [{"weight": name, "rows": n} for name, n in self.not_finite],
        }


def _esc(text: str) -> str:
    from html import escape

    return escape(text)

