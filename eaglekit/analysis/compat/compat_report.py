"""The record ``eaglekit compat`` returns: the verdict, its reasons, tensor by tensor, and what a warm start takes.

Shared by the EAGLE-3 comparison (:mod:`eaglekit.analysis.compat.pair`) and the block drafters'
(:mod:`eaglekit.analysis.compat.block_pair`), so both render and serialise alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any, Literal

from eaglekit.core.configs.diff import ConfigDiff
from eaglekit.core.redact import visible
from eaglekit.core.render import ansi, html_badge, html_table, kv_html, kv_text, text_table, use_colour

Verdict = Literal["compatible", "compatible-after-remap", "incompatible"]
Status = Literal["match", "shape-mismatch", "dtype-mismatch", "only-a", "only-b", "expected-absent"]
EXIT_CODES: Mapping[str, int] = {"compatible": 0, "compatible-after-remap": 3, "incompatible": 4}
_VERDICT_COLOUR = {"compatible": "green", "compatible-after-remap": "yellow", "incompatible": "red"}
_STATUS_COLOUR = {"match": "green", "expected-absent": "grey", "dtype-mismatch": "yellow",
                  "shape-mismatch": "red", "only-a": "red", "only-b": "red"}


@dataclass(frozen=True)
class TensorMatch:
    name: str  # normalised (SpecForge spelling)
    status: Status
    a: tuple[str, tuple[int, ...]] | None  # (dtype, shape)
    b: tuple[str, tuple[int, ...]] | None
    note: str = ""

    def to_json(self) -> dict:
        side = lambda s: None if s is None else {"dtype": s[0], "shape": list(s[1])}  # noqa: E731
        return {"name": self.name, "status": self.status, "a": side(self.a), "b": side(self.b), "note": self.note}


Take = Literal["take", "take after remap", "cannot", "not needed"]
_TAKE_COLOUR = {"take": "green", "take after remap": "yellow", "cannot": "red", "not needed": "grey"}


@dataclass(frozen=True)
class WarmStartPart:
    """One family of tensors (fc, attention, mlp, norms, lm_head, vocab map) and whether a warm start of B
    can take it from A: ``take`` (same shapes), ``take after remap`` (lm_head rows re-aligned by target
    token), ``cannot`` (another architecture or shape: trained from scratch), ``not needed``."""

    family: str
    take: Take
    why: str
    tensors: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"family": self.family, "take": self.take, "why": self.why, "tensors": list(self.tensors)}


@dataclass(frozen=True)
class TargetCheck:
    field: str
    drafter: str
    value: int | None
    target: int
    ok: bool


@dataclass(frozen=True)
class CompatReport:
    a_name: str
    b_name: str
    verdict: Verdict
    reasons: tuple[str, ...]
    tensors: tuple[TensorMatch, ...]
    vocab: Mapping[str, Any]
    aux_layers: Mapping[str, Any]
    config_diff: ConfigDiff | None
    target_checks: tuple[TargetCheck, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    warm_start: tuple[WarmStartPart, ...] = ()
    engines: Mapping[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def takes(self, *kinds: Take) -> tuple[str, ...]:
        """The families a warm start of B takes from A as ``kinds`` (default: take or take after remap)."""
        kinds = kinds or ("take", "take after remap")
        return tuple(p.family for p in self.warm_start if p.take in kinds)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "reasons": list(self.reasons),
                "warm_start": [p.to_json() for p in self.warm_start], "engines": dict(self.engines),
                "tensors": [t.to_json() for t in self.tensors], "vocab": dict(self.vocab),
                "aux_layers": dict(self.aux_layers),
                "config_diff": self.config_diff.to_json() if self.config_diff else [],
                "target": [vars(c) for c in self.target_checks], "warnings": list(self.warnings)}

    def _tensor_rows(self) -> list[tuple[str, str, str, str, str]]:
        show = lambda s: "-" if s is None else f"{s[0]} [{', '.join(map(str, s[1]))}]"  # noqa: E731
        return [(t.name, t.status, show(t.a), show(t.b), t.note) for t in self.tensors]

    def _facts(self) -> list[tuple[str, str]]:
        """The vocabulary map and aux-layer findings as (field, value) pairs."""
        v = self.vocab
        if "note" in v:  # block drafters: no vocabulary map, said in words
            vocab = v["note"]
        elif v.get("comparable") is False:
            vocab = "not comparable: different target vocabularies (different tokenizers); no remap offered"
        elif v.get("full_a") and v.get("full_b"):
            vocab = "both full vocabulary: no d2t/t2d, every target token can be drafted (lm_head row i = token i)"
        elif v.get("valid_a") and v.get("valid_b"):
            vocab = ("equal" if v["equal"] else
                     f"differ: {v['overlap']:,} shared target tokens ({v['overlap_fraction']:.1%} of the smaller); "
                     f"{v['rows_remapped']:,} lm_head rows point at different tokens")
        else:
            vocab = "invalid: " + "; ".join(v.get("problems", []))
        pairs = [("vocabulary map (d2t/t2d by value)", vocab)]
        for key, name in (("a", self.a_name), ("b", self.b_name)):
            if v.get(f"full_{key}"):
                pairs.append((f"vocabulary {name}", "full vocabulary: no d2t/t2d, every target token can be drafted"))
        for name, per in self.engines.items():
            pairs.append((f"engines {name}", "; ".join(w for _, w in sorted(per.items()))))
        for key, name in (("a", self.a_name), ("b", self.b_name)):
            aux = self.aux_layers.get(key)
            if aux:
                pairs.append((f"aux layers {name}", aux["explanation"]))
        pairs += [(f"target {c.field} ({c.drafter})", f"{c.value} vs {c.target}: {'ok' if c.ok else 'MISMATCH'}")
                  for c in self.target_checks]
        return pairs

    def __str__(self) -> str:
        colour = use_colour()
        v = lambda text: visible(text, newlines=False)  # noqa: E731  (names from files: controls shown)
        head = f"{v(self.a_name)} vs {v(self.b_name)}: {ansi(self.verdict, _VERDICT_COLOUR[self.verdict], enabled=colour)}"
        lines = [head] + [f"  - {v(r)}" for r in self.reasons] + [f"  ! {v(w)}" for w in self.warnings]
        rows = [(v(n), ansi(s, _STATUS_COLOUR[s], enabled=colour), v(a), v(b), v(note))
                for n, s, a, b, note in self._tensor_rows()]
        lines += ["", kv_text(self._facts())]
        if self.warm_start:
            lines += ["", text_table(["family", f"warm start of {v(self.b_name)} from {v(self.a_name)}", "why"],
                                     [(p.family, ansi(p.take, _TAKE_COLOUR[p.take], enabled=colour), v(p.why))
                                      for p in self.warm_start], max_width=96)]
        lines += ["", text_table(["tensor", "status", self.a_name, self.b_name, "note"], rows, max_width=48)]
        if self.config_diff is not None and not self.config_diff.identical:
            lines += ["", str(self.config_diff)]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        reasons = "".join(f"<li>{escape(r)}</li>" for r in self.reasons)
        warnings = "".join(f"<li style='color:#8a6d00'>{escape(w)}</li>" for w in self.warnings)
        rows = [(n, html_badge(s, _STATUS_COLOUR[s]), a, b, note) for n, s, a, b, note in self._tensor_rows()]
        parts = [f"<div class='eaglekit-compat'><p><b>{escape(self.a_name)}</b> vs <b>{escape(self.b_name)}</b>: "
                 f"{html_badge(self.verdict, _VERDICT_COLOUR[self.verdict])}</p><ul>{reasons}{warnings}</ul>",
                 kv_html(self._facts(), caption="Vocabulary map, aux layers, target"),
                 html_table(["family", "warm start", "why"],
                            [(p.family, html_badge(p.take, _TAKE_COLOUR[p.take]), p.why) for p in self.warm_start],
                            caption=f"What a warm start of {self.b_name} can take from {self.a_name}")
                 if self.warm_start else "",
                 html_table(["tensor", "status", self.a_name, self.b_name, "note"], rows, caption="Tensors")]
        if self.config_diff is not None:
            parts.append(f"<details><summary>{escape(self.config_diff.summary)}</summary>"
                         f"{self.config_diff._repr_html_()}</details>")
        return "".join(parts) + "</div>"


__all__ = ["CompatReport", "EXIT_CODES", "Take", "TargetCheck", "TensorMatch", "Verdict", "WarmStartPart"]


def match_tensors(inv_a: Inventory, inv_b: Inventory, normalize, expected_absent) -> tuple[TensorMatch, ...]:
    """Tensor by tensor under ``normalize(name)``; ``expected_absent(name)``: why a tensor on one side only is
    expected there (its note), else None (then it is ``only-a`` / ``only-b``)."""
    a = {normalize(t.name): t for t in inv_a}
    b = {normalize(t.name): t for t in inv_b}
    out = []
    for name in sorted(a.keys() | b.keys()):
        ta, tb = a.get(name), b.get(name)
        sa = (ta.dtype, ta.shape) if ta else None
        sb = (tb.dtype, tb.shape) if tb else None
        if ta is None or tb is None:
            note = expected_absent(name)
            if note is not None:
                out.append(TensorMatch(name, "expected-absent", sa, sb, note))
            else:
                out.append(TensorMatch(name, "only-a" if tb is None else "only-b", sa, sb))
        elif ta.shape != tb.shape:
            out.append(TensorMatch(name, "shape-mismatch", sa, sb))
        elif ta.dtype != tb.dtype:
            out.append(TensorMatch(name, "dtype-mismatch", sa, sb, "castable: same shape"))
        else:
            out.append(TensorMatch(name, "match", sa, sb))
    return tuple(out)
