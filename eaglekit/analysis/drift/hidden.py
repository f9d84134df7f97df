"""Hidden-state drift: how differently two targets represent the same tokens, layer by layer.

Two hidden-state dumps (``eaglekit dump-hidden``, :mod:`eaglekit.io.dumps.native`) of the same prompts,
one per target, are compared at every ``output_hidden_states`` index both hold, on the positions whose
tokens agree (each prompt, and the greedy continuation up to where the two targets first pick different
tokens: a hidden state at position t depends on tokens 0..t only). Two measures per layer:

* cosine: the mean over positions of cos(h_a(t), h_b(t)) (same width only), and its 5th percentile;
* linear CKA (Kornblith et al. 2019, "Similarity of Neural Network Representations Revisited", eq. 5):
  ||Y_c^T X_c||_F^2 / (||X_c^T X_c||_F ||Y_c^T Y_c||_F) over centred [n, H] matrices. Invariant to
  rotations and isotropic scaling, so it says whether the *information* is still there even when the
  basis moved; 1 = the same up to rotation and scale. Computed on at most ``max_tokens`` positions
  drawn at random (seeded) from all compared ones, in whichever of the [n, n] or [H, H] forms is smaller.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, text_table
from eaglekit.io.dumps.native import HiddenStateDump, open_dump


@dataclass(frozen=True)
class LayerDrift:
    """One ``output_hidden_states`` index: the OUTPUT of decoder layer ``index - 1``."""

    index: int
    cosine: float | None  # mean over compared positions
    cosine_p05: float | None
    cka: float
    positions: int


@dataclass(frozen=True)
class HiddenDrift:
    a: str
    b: str
    layers: tuple[LayerDrift, ...]
    samples: int
    positions: int
    prompt_positions: int
    cka_positions: int

    def layer(self, index: int) -> LayerDrift:
        for l in self.layers:
            if l.index == index:
                return l
        raise KeyError(f"no hidden-state index {index}; the dumps share {[l.index for l in self.layers]}")

    def _rows(self) -> list[list[str]]:
        def f(x):
            return "n/a" if x is None else f"{x:.4f}"
        return [[str(l.index), f"output of layer {l.index - 1}" if l.index else "embeddings", f(l.cosine),
                 f(l.cosine_p05), f(l.cka)] for l in self.layers]

    _HEAD = ["index", "tensor", "mean cosine", "5% cosine", "linear CKA"]

    def _title(self) -> str:
        return (f"Hidden-state drift: {self.a} -> {self.b}: {self.samples} prompts, {self.positions} positions "
                f"compared ({self.prompt_positions} in prompts), CKA on {self.cka_positions}")

    def __str__(self) -> str:
        return text_table(self._HEAD, self._rows(), title=self._title())

    def _repr_html_(self) -> str:
        return html_table(self._HEAD, self._rows(), caption=self._title(),
                          align=["right", "left", "right", "right", "right"])

    def to_json(self) -> dict:
        """Strict JSON: a measure that is not a number is null, with the reason in ``not_a_number``."""
        return {"a": self.a, "b": self.b, "samples": self.samples, "positions": self.positions,
                "prompt_positions": self.prompt_positions, "cka_positions": self.cka_positions,
                "layers": [_layer_json(l) for l in self.layers]}


def _layer_json(l: LayerDrift) -> dict:
    values = {"cosine": l.cosine, "cosine_p05": l.cosine_p05, "cka": l.cka}
    bad = [k for k, v in values.items() if v is not None and not math.isfinite(v)]
    out = {"index": l.index, "output_of_layer": l.index - 1,
           **{k: None if k in bad else v for k, v in values.items()}, "positions": l.positions}
    if bad:
        out["not_a_number"] = (f"{', '.join(bad)}: the hidden states hold NaN or Inf, or do not vary across "
                               "positions (CKA is undefined for constant states)")
    return out


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of two [n, d_x], [n, d_y] matrices (rows are the same inputs), in float64."""
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    x = x - x.mean(axis=0)
    y = y - y.mean(axis=0)
    if x.shape[0] <= max(x.shape[1], y.shape[1]):
        k, l = x @ x.T, y @ y.T  # (n, n)
        num, dx, dy = (k * l).sum(), np.linalg.norm(k), np.linalg.norm(l)
    else:
        num = np.linalg.norm(y.T @ x) ** 2
        dx, dy = np.linalg.norm(x.T @ x), np.linalg.norm(y.T @ y)
    return float(num / (dx * dy)) if dx > 0 and dy > 0 else float("nan")


def hidden_drift(a, b, *, max_tokens: int = 2048, seed: int = 0, progress: bool = True) -> HiddenDrift:
    """Compare two dumps (folders or opened :class:`~eaglekit.io.dumps.native.HiddenStateDump`)."""
    from tqdm.auto import tqdm


    da = a if isinstance(a, HiddenStateDump) else open_dump(os.fspath(a))
    db = b if isinstance(b, HiddenStateDump) else open_dump(os.fspath(b))
    if not isinstance(max_tokens, int) or max_tokens < 2:
        raise InputError(f"max_tokens must be an integer of at least 2, got {max_tokens!r}.")
    common = sorted(set(da.layers) & set(db.layers))
    if not common:
        raise InputError(f"the dumps share no hidden-state index ({list(da.layers)} vs {list(db.layers)}); "
                         "dump the same --layers from both targets.")
    n = min(len(da), len(db))
    if n == 0:
        raise InputError("a dump holds no samples.")
    same_width = da.manifest.hidden_size == db.manifest.hidden_size
    ka = [da.layers.index(i) for i in common]
    kb = [db.layers.index(i) for i in common]
    # pass 1: which positions agree, per sample
    spans, prompt_positions = [], 0
    for i in range(n):
        sa, sb = da[i], db[i]
        t = min(sa.length, sb.length)
        diff = np.flatnonzero(sa.input_ids[:t] != sb.input_ids[:t])
        first = int(diff[0]) if diff.size else t
        if first < min(sa.prompt_len, sb.prompt_len):
            raise InputError(f"sample {i}: the two dumps hold different prompts (token {first} differs); dump the "
                             "same prompts file from both targets.")
        spans.append(first)
        prompt_positions += min(sa.prompt_len, sb.prompt_len)
    total = int(sum(spans))
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(total, size=min(total, max_tokens), replace=False))
    offsets = np.concatenate([[0], np.cumsum(spans)])
    cos_all: list[list[np.ndarray]] = [[] for _ in common]
    xs: list[list[np.ndarray]] = [[] for _ in common]
    ys: list[list[np.ndarray]] = [[] for _ in common]
    for i in tqdm(range(n), desc="hidden drift", unit="prompt", disable=not progress, leave=False):
        sa, sb = da[i], db[i]
        t = spans[i]
        local = pick[(pick >= offsets[i]) & (pick < offsets[i + 1])] - offsets[i]
        for j in range(len(common)):
            ha = sa.hidden_states[ka[j], :t]  # (t, H_a)
            hb = sb.hidden_states[kb[j], :t]  # (t, H_b)
            if same_width:
                num = np.einsum("th,th->t", ha, hb, dtype=np.float64)
                den = np.linalg.norm(ha, axis=1) * np.linalg.norm(hb, axis=1)
                cos_all[j].append(np.where(den > 0, num / np.where(den > 0, den, 1), 0.0))
            xs[j].append(ha[local])
            ys[j].append(hb[local])
    layers = []
    for j, index in enumerate(common):
        c = np.concatenate(cos_all[j]) if same_width else None
        layers.append(LayerDrift(index, float(c.mean()) if c is not None else None,
                                 float(np.percentile(c, 5)) if c is not None else None,
                                 linear_cka(np.concatenate(xs[j]), np.concatenate(ys[j])), total))
    return HiddenDrift(da.manifest.target, db.manifest.target, tuple(layers), n, total, prompt_positions, len(pick))
