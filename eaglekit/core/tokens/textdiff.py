"""Diffs of two chat templates, or of one prompt rendered by two, in bounded time and memory.

``difflib.SequenceMatcher`` is quadratic in the worst case, and a template is a file someone else wrote
(a 400,000-character word, two 1 MiB templates). Both diffs here first strip what the two texts share at
the start and at the end (linear), then compare only the differing middle, and only when it is small:

- :func:`unified_lines`: the unified diff of two templates, line by line, cut to ``limit`` lines as it is
  produced (never built whole first); a middle longer than :data:`MAX_DIFF_LINES` lines a side is shown
  as removed and added lines without matching; every shown line is cut to :data:`MAX_LINE_CHARS`.
- :func:`added_text`: the text only one rendering has, character by character for a middle of at most
  :data:`MAX_CHARS` characters, word by word up to :data:`MAX_WORDS` words a side, else the whole middle;
  each piece cut to :data:`MAX_PIECE_CHARS` for display.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from itertools import islice

#: Lines a side of the differing middle compared line by line.
MAX_DIFF_LINES = 5_000
#: Characters of one shown diff line.
MAX_LINE_CHARS = 1_000
#: Characters a side compared character by character.
MAX_CHARS = 2_000
#: Words (and runs of spaces) a side compared word by word.
MAX_WORDS = 2_000
#: Characters of one piece of added text shown.
MAX_PIECE_CHARS = 200

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@$")


def _common_prefix(a: Sequence, b: Sequence) -> int:
    """Length of the common prefix, by halving (slices compare in C: O(n log n), no Python loop per item)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: Sequence, b: Sequence, prefix: int) -> int:
    lo, hi = 0, min(len(a), len(b)) - prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:len(a) - lo] == b[len(b) - mid:len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut(line: str, most: int) -> str:
    return line if len(line) <= most else f"{line[:most]}... ({len(line):,} characters)"


def unified_lines(a: str, b: str, *, fromfile: str, tofile: str, limit: int, context: int = 1) -> tuple[str, ...]:
    """The unified diff of ``a`` and ``b`` (``n=context``), at most ``limit`` lines and a last line saying how
    many more there are; bounded in time and memory whatever the texts hold."""
    x, y = a.splitlines(), b.splitlines()
    if len(x) <= MAX_DIFF_LINES and len(y) <= MAX_DIFF_LINES:  # small: difflib's own diff, cut as it streams
        return _first(difflib.unified_diff(x, y, fromfile=fromfile, tofile=tofile, lineterm="", n=context), limit)
    p = _common_prefix(x, y)
    q = _common_suffix(x, y, p)
    lo = max(0, p - context)                                  # keep the context lines around the middle
    xa, ya = x[lo:len(x) - max(0, q - context)], y[lo:len(y) - max(0, q - context)]
    if len(xa) <= MAX_DIFF_LINES and len(ya) <= MAX_DIFF_LINES:
        lines: Iterator[str] = _shifted(difflib.unified_diff(xa, ya, fromfile=fromfile, tofile=tofile, lineterm="",
                                                             n=context), lo)
    else:  # too many lines to match: the middle as removed, then added, lines
        xm, ym = x[p:len(x) - q], y[p:len(y) - q]
        lines = iter([f"--- {fromfile}", f"+++ {tofile}",
                      f"@@ -{p + 1},{len(xm)} +{p + 1},{len(ym)} @@ (too many lines to match line by line)",
                      *("-" + ln for ln in islice(xm, limit)), *("+" + ln for ln in islice(ym, limit))])
        extra = max(0, len(xm) - limit) + max(0, len(ym) - limit)
        lines = _then_count(lines, extra)
    return _first(lines, limit)


def _first(lines: Iterator[str], limit: int) -> tuple[str, ...]:
    """The first ``limit`` lines (each cut to :data:`MAX_LINE_CHARS`), and a count of the rest."""
    shown = [_cut(ln, MAX_LINE_CHARS) for ln in islice(lines, limit)]
    more = sum(1 for _ in lines)          # counted, never kept
    if more:
        shown.append(f"... {more} more diff lines")
    return tuple(shown)


def _shifted(lines: Iterator[str], offset: int) -> Iterator[str]:
    """Hunk headers renumbered for a diff of lines starting at ``offset``."""
    for ln in lines:
        m = _HUNK.match(ln) if offset and ln.startswith("@@") else None
        if m:
            ln = f"@@ -{int(m.group(1)) + offset}{m.group(2) or ''} +{int(m.group(3)) + offset}{m.group(4) or ''} @@"
        yield ln


def _then_count(lines: Iterator[str], extra: int) -> Iterator[str]:
    yield from lines
    for _ in range(extra):
        yield ""


def added_text(a: str, b: str, *, keep: int = 8) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Text only ``a`` has and text only ``b`` has (at most ``keep`` pieces each), in bounded time."""
    if len(a) + len(b) <= 2 * MAX_CHARS:  # short: the whole texts, character by character
        pieces_a, pieces_b = _pieces(a, b)
        return tuple(pieces_a[:keep]), tuple(pieces_b[:keep])
    p = _common_prefix(a, b)
    q = _common_suffix(a, b, p)
    xm, ym = a[p:len(a) - q], b[p:len(b) - q]
    if len(xm) <= MAX_CHARS and len(ym) <= MAX_CHARS:
        # the characters around the middle take part, as in a diff of the whole texts
        lo = max(0, p - 64)
        xa, ya = a[lo:len(a) - max(0, q - 64)], b[lo:len(b) - max(0, q - 64)]
        pieces_a, pieces_b = _pieces(xa, ya)
    else:
        xw, yw = re.findall(r"\s+|\S+", xm[:MAX_WORDS * 64]), re.findall(r"\s+|\S+", ym[:MAX_WORDS * 64])
        if len(xw) <= MAX_WORDS and len(yw) <= MAX_WORDS and "".join(xw) == xm and "".join(yw) == ym:
            pieces_a, pieces_b = _pieces(xw, yw, join=True)
        else:
            pieces_a, pieces_b = [xm] if xm.strip() else [], [ym] if ym.strip() else []
    return (tuple(_cut(t, MAX_PIECE_CHARS) for t in pieces_a[:keep]),
            tuple(_cut(t, MAX_PIECE_CHARS) for t in pieces_b[:keep]))


def _pieces(a, b, *, join: bool = False) -> tuple[list[str], list[str]]:
    only_a, only_b = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        x = "".join(a[i1:i2]) if join else a[i1:i2]
        y = "".join(b[j1:j2]) if join else b[j1:j2]
        if tag in ("delete", "replace") and x.strip():
            only_a.append(x)
        if tag in ("insert", "replace") and y.strip():
            only_b.append(y)
    return only_a, only_b


__all__ = ["MAX_CHARS", "MAX_DIFF_LINES", "added_text", "unified_lines"]
