"""The outcome of :func:`eaglekit.similarity`: records that render as a table and export to JSON.

A :class:`TensorSimilarity` keeps the four float64 sums of every grid cell (``sum a*a``, ``sum b*b``,
``sum a*b``, ``sum (a-b)^2``), so every measure, per cell, per row band or per tensor, is derived exactly
from them: cosine ``ab / sqrt(aa bb)``, relative difference ``||a-b|| / ||a||`` and norm ratio
``||b|| / ||a||``. Pure: numpy only; :mod:`eaglekit.view.figures` draws these records (records never import plots).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from eaglekit.core.render import Colour, ansi, format_bytes, html_badge, html_table, html_tint, text_table, use_colour
from eaglekit.core.errors import InputError

Measure = Literal["cosine", "rel_diff", "norm_ratio"]
MEASURES: tuple[Measure, ...] = ("cosine", "rel_diff", "norm_ratio")
#: Index of each sum in the last axis of :attr:`TensorSimilarity.sums`.
AA, BB, AB, DD = 0, 1, 2, 3


def measures_from_sums(sums: np.ndarray) -> dict[Measure, np.ndarray]:
    """cosine, rel_diff and norm_ratio from sums ``[..., 4]`` (NaN where a norm is zero)."""
    s = np.asarray(sums, dtype=np.float64)
    aa, bb, ab, dd = s[..., AA], s[..., BB], s[..., AB], s[..., DD]
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.clip(ab / np.sqrt(aa * bb), -1.0, 1.0)
        rel = np.sqrt(dd / aa)
        ratio = np.sqrt(bb / aa)
    bad = aa <= 0
    return {"cosine": np.where(bad | (bb <= 0), np.nan, cosine), "rel_diff": np.where(bad, np.nan, rel),
            "norm_ratio": np.where(bad, np.nan, ratio)}


@dataclass(frozen=True, eq=False, repr=False)
class TensorSimilarity:
    """One compared tensor, or one meaningful part of it (``fc.weight[high: aux layer 58]``).

    Rows and columns are those of the tensor viewed as a matrix ([N] -> [N, 1]); ``cols`` is the
    column range of the part within the tensor. ``aligned`` rows are lm_head rows paired by target
    token: row position k of the grid is the k-th shared token (``row_edges`` count those positions).
    """

    name: str
    tensor: str
    shape_a: tuple[int, ...]
    shape_b: tuple[int, ...]
    rows_compared: int
    cols: tuple[int, int]
    row_edges: tuple[int, ...]
    col_edges: tuple[int, ...]
    sums: np.ndarray  # (grid rows, grid cols, 4) float64: aa, bb, ab, dd per cell
    aligned: bool = False

    def __repr__(self) -> str:
        return (f"TensorSimilarity({self.name!r}, cosine={self.cosine:.4f}, rel_diff={self.rel_diff:.4f}, "
                f"norm_ratio={self.norm_ratio:.4f}, grid={self.grid_shape[0]}x{self.grid_shape[1]})")

    @property
    def totals(self) -> np.ndarray:
        return self.sums.reshape(-1, 4).sum(axis=0)  # (4,)

    def _total(self, measure: Measure) -> float:
        return float(measures_from_sums(self.totals)[measure])

    @property
    def cosine(self) -> float:
        return self._total("cosine")

    @property
    def rel_diff(self) -> float:
        return self._total("rel_diff")

    @property
    def norm_ratio(self) -> float:
        return self._total("norm_ratio")

    @property
    def grid_shape(self) -> tuple[int, int]:
        return len(self.row_edges) - 1, len(self.col_edges) - 1

    def grid(self, measure: Measure = "cosine") -> np.ndarray:
        """The measure per grid cell, shape ``grid_shape``."""
        return measures_from_sums(self.sums)[check_measure(measure)]

    def row_profile(self, measure: Measure = "cosine") -> np.ndarray:
        """The measure per band of grid rows (all columns together), shape ``(grid rows,)``."""
        return measures_from_sums(self.sums.sum(axis=1))[check_measure(measure)]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "cosine": _num(self.cosine), "rel_diff": _num(self.rel_diff),
                "norm_ratio": _num(self.norm_ratio),
                "grid": [[_num(v) for v in row] for row in self.grid("cosine")],
                "rows_compared": self.rows_compared}


@dataclass(frozen=True)
class BufferComparison:
    """An integer or bool buffer (d2t, t2d, ...): compared by equality, never by cosine."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    equal: bool
    differing: int  # elements that differ

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "equal": self.equal,
                "differing": self.differing}


@dataclass(frozen=True)
class Mismatch:
    """A tensor both sides have but that cannot be compared, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class Incomparable:
    """A family of tensors the two drafters both have but built differently (Llama q/k/v against MLA
    q_a/kv_a/kv_b; a MoE MLP against a dense one; fused against per-expert experts): not compared, and why."""

    family: str
    reason: str
    a: tuple[str, ...] = ()
    b: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "reason": self.reason, "a": list(self.a), "b": list(self.b)}

    def __str__(self) -> str:
        return f"{self.reason} ({len(self.a)} tensors in A, {len(self.b)} in B not compared)"


@dataclass(frozen=True)
class LmHeadAlignment:
    """How lm_head rows were paired: by target token (``i + d2t[i]``) or, without d2t, by row index.
    ``full_a`` / ``full_b``: that side has no d2t/t2d (a full-vocabulary drafter: row i drafts token i)."""

    shared_rows: int
    draft_vocab_a: int
    draft_vocab_b: int
    method: Literal["target token", "row index"] = "target token"
    full_a: bool = False
    full_b: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"shared_rows": self.shared_rows, "draft_vocab_a": self.draft_vocab_a,
                "draft_vocab_b": self.draft_vocab_b, "method": self.method, "full_vocabulary_a": self.full_a,
                "full_vocabulary_b": self.full_b}

    def __str__(self) -> str:
        sides = [f"{s}: full vocabulary, no d2t/t2d (row i drafts token i)" if f else f"{s}: d2t/t2d map"
                 for s, f in (("A", self.full_a), ("B", self.full_b))]
        return (f"lm_head rows paired by {self.method}: {self.shared_rows:,} shared of "
                f"{self.draft_vocab_a:,} (A) and {self.draft_vocab_b:,} (B); {'; '.join(sides)}")


@dataclass(frozen=True, repr=False)
class SimilarityReport:
    """Weight similarity of drafter B against drafter A (see :func:`eaglekit.similarity`)."""

    a: str
    b: str
    grid: tuple[int, int]
    tensors: tuple[TensorSimilarity, ...]
    buffers: tuple[BufferComparison, ...] = ()
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    mismatched: tuple[Mismatch, ...] = ()
    lm_head_alignment: LmHeadAlignment | None = None
    bytes_read: tuple[int, int] = (0, 0)
    seconds: float = 0.0
    incomparable: tuple[Incomparable, ...] = ()

    def __repr__(self) -> str:
        return (f"SimilarityReport(a={self.a!r}, b={self.b!r}, {len(self.tensors)} tensors, "
                f"{len(self.buffers)} buffers, only_a={list(self.only_a)}, only_b={list(self.only_b)})")

    # -- lookup -------------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> TensorSimilarity:
        for t in self.tensors:
            if t.name == name:
                return t
        parts = [t for t in self.tensors if t.tensor == name]
        if len(parts) == 1:
            return parts[0]
        hint = f"; it was split into {', '.join(t.name for t in parts)}" if parts else ""
        raise KeyError(f"{name!r} is not a compared tensor of this report{hint}")

    def __iter__(self) -> Iterator[TensorSimilarity]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors)

    # -- export -------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The object ``eaglekit similarity --json`` prints (``grid`` holds the cosine per cell)."""
        return {"a": self.a, "b": self.b,
                "tensors": [t.to_json() for t in self.tensors],
                "only_a": list(self.only_a), "only_b": list(self.only_b),
                "lm_head_alignment": self.lm_head_alignment.to_json() if self.lm_head_alignment else None,
                "buffers": [b.to_json() for b in self.buffers],
                "mismatched": [{"name": m.name, "reason": m.reason} for m in self.mismatched],
                "incomparable": [x.to_json() for x in self.incomparable]}

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame([{"tensor": t.name, "rows_compared": t.rows_compared, "cosine": t.cosine,
                              "rel_diff": t.rel_diff, "norm_ratio": t.norm_ratio,
                              "worst_cell_cosine": _nanmin(t.grid("cosine"))} for t in self.tensors])

    # -- rendering ----------------------------------------------------------------------------------
    def summary(self) -> str:
        read = format_bytes(sum(self.bytes_read))
        return (f"Weight similarity of {self.b} (B) against {self.a} (A): {len(self.tensors)} compared, "
                f"grid up to {self.grid[0]}x{self.grid[1]}; read {read} in {self.seconds:.1f} s")

    _HEADERS = ("tensor", "rows", "cosine", "rel diff", "norm ratio", "worst cell")
    _ALIGN = ("left", "right", "right", "right", "right", "right")

    def _row(self, t: TensorSimilarity) -> list[str]:
        return [t.name, f"{t.rows_compared:,}", _fmt(t.cosine), _fmt(t.rel_diff), _fmt(t.norm_ratio),
                _fmt(_nanmin(t.grid("cosine")))]

    def _notes(self) -> list[str]:
        notes = []
        if self.lm_head_alignment:
            notes.append(str(self.lm_head_alignment))
        for buf in self.buffers:
            shape = "[" + ", ".join(map(str, buf.shape)) + "]"
            state = "equal" if buf.equal else f"differ in {buf.differing:,} of {math.prod(buf.shape):,} elements"
            notes.append(f"{buf.name} ({buf.dtype} {shape}): {state}")
        notes += [str(x) for x in self.incomparable]
        notes += [f"{m.name}: not compared ({m.reason})" for m in self.mismatched]
        if self.only_a:
            notes.append("only in A: " + ", ".join(self.only_a))
        if self.only_b:
            notes.append("only in B: " + ", ".join(self.only_b))
        return notes

    def __str__(self) -> str:
        colour = use_colour()
        rows = []
        for t in self.tensors:
            row = self._row(t)
            row[2] = ansi(row[2], cosine_colour(t.cosine), enabled=colour)
            rows.append(row)
        lines = [text_table(self._HEADERS, rows, align=self._ALIGN, title=self.summary())]
        lines += self._notes()
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows, styles = [], []
        for t in self.tensors:
            row: list[Any] = self._row(t)
            row[2] = html_badge(row[2], cosine_colour(t.cosine))
            rows.append(row)
            styles.append(f"background:{html_tint(cosine_colour(t.cosine))}")
        table = html_table(self._HEADERS, rows, row_styles=styles, caption=self.summary(), align=self._ALIGN)
        notes = "".join(f"<li>{_escape(n)}</li>" for n in self._notes())
        return table + (f'<ul style="font-size:0.9em">{notes}</ul>' if notes else "")


def cosine_colour(cosine: float) -> Colour:
    """green: nearly the same weights (>= 0.9); yellow: related (>= 0.5); red: unrelated or opposed."""
    if not math.isfinite(cosine):
        return "grey"
    return "green" if cosine >= 0.9 else "yellow" if cosine >= 0.5 else "red"


def check_measure(measure: str) -> Measure:
    if measure not in MEASURES:

        raise InputError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}.")
    return measure  # type: ignore[return-value]


def _num(value: float) -> float | None:
    """JSON has no NaN: undefined measures (a zero norm) export as null."""
    value = float(value)
    return value if math.isfinite(value) else None


def _fmt(value: float) -> str:
    return f"{value:.4f}" if math.isfinite(value) else "n/a"


def _nanmin(grid: np.ndarray) -> float:
    finite = grid[np.isfinite(grid)]
    return float(finite.min()) if finite.size else float("nan")


def _escape(text: str) -> str:
    from html import escape

    return escape(text)

