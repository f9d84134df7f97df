"""Tables and colour for records that show themselves: aligned text in a terminal, HTML in Jupyter.

Every eaglekit record renders through these few helpers, so a ConfigDiff, an Inventory and a
compatibility report look alike. Pure string building: no I/O except asking whether a stream is a
terminal. Colour follows the https://no-color.org convention: ANSI escapes only when the stream is a
tty and ``NO_COLOR`` is unset (``FORCE_COLOR`` forces them on).

Text cells may already carry ANSI escapes (from :func:`ansi`); widths are measured without them.
HTML cells are escaped unless wrapped in :class:`Html` (for badges built by :func:`html_badge`).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO

Align = Literal["left", "right"]
Colour = Literal["red", "green", "yellow", "blue", "magenta", "cyan", "grey", "bold"]

_ANSI_CODES: dict[str, str] = {
    "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36",
    "grey": "90", "bold": "1",
}
# Colours that read on both light and dark Jupyter themes (foreground, background tint).
_HTML_COLOURS: dict[str, tuple[str, str]] = {
    "red": ("#b42318", "rgba(217, 45, 32, 0.12)"),
    "green": ("#067647", "rgba(23, 178, 106, 0.12)"),
    "yellow": ("#b54708", "rgba(247, 144, 9, 0.14)"),
    "blue": ("#175cd3", "rgba(46, 144, 250, 0.12)"),
    "magenta": ("#c11574", "rgba(238, 70, 188, 0.12)"),
    "cyan": ("#0e7090", "rgba(6, 174, 212, 0.12)"),
    "grey": ("#667085", "rgba(152, 162, 179, 0.12)"),
    "bold": ("inherit", "transparent"),
}
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


class Html(str):
    """A string that is already HTML: :func:`html_table` inserts it without escaping."""

    __slots__ = ()


def use_colour(stream: TextIO | None = None) -> bool:
    """Whether to emit ANSI colour on ``stream`` (default stdout): a tty, and NO_COLOR unset."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def ansi(text: str, colour: Colour | None, *, enabled: bool = True) -> str:
    """Wrap ``text`` in the ANSI escape for ``colour``; unchanged when disabled or colour is None."""
    if not enabled or colour is None:
        return text
    return f"\x1b[{_ANSI_CODES[colour]}m{text}\x1b[0m"


def strip_ansi(text: str) -> str:
    """``text`` without ANSI colour escapes."""
    return _ANSI_RE.sub("", text)


def html_colour(colour: Colour) -> str:
    """The CSS foreground colour for ``colour``."""
    return _HTML_COLOURS[colour][0]


def html_tint(colour: Colour) -> str:
    """A translucent CSS background for rows of ``colour`` (readable on light and dark themes)."""
    return _HTML_COLOURS[colour][1]


def html_badge(text: str, colour: Colour) -> Html:
    """A small coloured label, e.g. a difference class or a verdict."""
    fg, bg = _HTML_COLOURS[colour]
    return Html(
        f'<span style="color:{fg};background:{bg};border-radius:4px;padding:0 6px;'
        f'font-weight:600;white-space:nowrap">{html.escape(text)}</span>'
    )


def format_value(value: Any) -> str:
    """A config value as one line: strings as they are, everything else in JSON spelling."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return str(value)


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` visible characters, ending in an ellipsis when cut."""
    if width < 1 or len(text) <= width:
        return text
    return text[: width - 1] + "…"


def text_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    align: Sequence[Align] | None = None,
    max_width: int | None = None,
    title: str | None = None,
) -> str:
    """Aligned plain-text table; cells may hold ANSI colour, widths ignore it.

    ``align`` gives one entry per column (default: left). ``max_width`` cuts plain cells longer than
    that many characters (coloured cells are never cut, so their escapes stay balanced).
    """
    ncols = len(headers)
    align = list(align) if align is not None else ["left"] * ncols
    if len(align) != ncols:
        raise ValueError(f"align has {len(align)} entries for {ncols} columns")
    cells: list[list[str]] = []
    for row in rows:
        if len(row) != ncols:
            raise ValueError(f"a row has {len(row)} cells for {ncols} columns: {row!r}")
        line = []
        for value in row:
            text = value if isinstance(value, str) else format_value(value)
            text = text.replace("\n", " ")
            if max_width and "\x1b[" not in text:
                text = truncate(text, max_width)
            line.append(text)
        cells.append(line)
    widths = [len(h) for h in headers]
    for line in cells:
        for j, text in enumerate(line):
            widths[j] = max(widths[j], len(strip_ansi(text)))

    def fmt(line: Sequence[str]) -> str:
        parts = []
        for j, text in enumerate(line):
            pad = " " * (widths[j] - len(strip_ansi(text)))
            parts.append(pad + text if align[j] == "right" else text + pad)
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out.append(fmt(list(headers)))
    out.append("  ".join("-" * w for w in widths))
    out.extend(fmt(line) for line in cells)
    return "\n".join(out)


def _cell_html(value: Any) -> str:
    if isinstance(value, Html):
        return str(value)
    text = value if isinstance(value, str) else format_value(value)
    return html.escape(text)


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    classes: Sequence[str] | None = None,
    row_styles: Sequence[str | None] | None = None,
    caption: str | Html | None = None,
    align: Sequence[Align] | None = None,
) -> str:
    """An HTML ``<table>``; every cell and the caption are escaped unless they are :class:`Html`.

    ``classes`` are CSS class names for the table; ``row_styles`` one inline style (or None) per row,
    e.g. ``f"background:{html_tint('red')}"``.
    """
    ncols = len(headers)
    if row_styles is not None and len(row_styles) != len(rows):
        raise ValueError(f"row_styles has {len(row_styles)} entries for {len(rows)} rows")
    aligns = list(align) if align is not None else ["left"] * ncols
    cls = " ".join(["eaglekit", *(classes or ())])
    out = [f'<table class="{html.escape(cls)}" style="border-collapse:collapse;font-size:0.9em">']
    if caption is not None:
        out.append(f'<caption style="text-align:left;font-weight:600;padding:4px 0">'
                   f"{_cell_html(caption)}</caption>")
    th = "".join(
        f'<th style="text-align:{a};padding:2px 8px;border-bottom:1px solid #98a2b3">{html.escape(h)}</th>'
        for h, a in zip(headers, aligns)
    )
    out.append(f"<thead><tr>{th}</tr></thead><tbody>")
    for i, row in enumerate(rows):
        if len(row) != ncols:
            raise ValueError(f"a row has {len(row)} cells for {ncols} columns: {row!r}")
        style = row_styles[i] if row_styles is not None else None
        attr = f' style="{html.escape(style)}"' if style else ""
        tds = "".join(
            f'<td style="text-align:{a};padding:2px 8px;vertical-align:top;font-family:monospace">'
            f"{_cell_html(v)}</td>"
            for v, a in zip(row, aligns)
        )
        out.append(f"<tr{attr}>{tds}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def kv_text(pairs: Sequence[tuple[str, Any]], *, title: str | None = None) -> str:
    """A two-column key/value listing for small records."""
    return text_table(["field", "value"], [(k, v) for k, v in pairs], title=title)


def kv_html(pairs: Sequence[tuple[str, Any]], *, caption: str | None = None) -> str:
    """The HTML twin of :func:`kv_text`."""
    return html_table(["field", "value"], [(k, v) for k, v in pairs], caption=caption)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units, as file sizes are usually read)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


@dataclass(frozen=True)
class Conclusion:
    """A verdict and the sentences that support it: a bulleted list in a terminal, a headed list in HTML."""

    verdict: str
    sentences: tuple[str, ...]

    def __str__(self) -> str:
        return "\n".join(f"- {s}" for s in self.sentences)

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html.escape(s)}</li>" for s in self.sentences)
        return f"<div class='eaglekit-conclusion'><h3>Conclusion</h3><ul>{items}</ul></div>"
