"""One standalone HTML page: a title, HTML blocks (tables, notes) and plotly figures, plotly.js inlined
once so the file opens offline from disk. Every ``--html`` page of the CLI is made here."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from typing import Any

from eaglekit.io.write import write_atomic

_STYLE = "body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px}.figure{margin:24px 0}"


def standalone_page(title: str, *, before: Sequence[str] = (), figures: Sequence[Any] = (),
                    after: Sequence[str] = ()) -> str:
    """``title`` (plain text, escaped here), then the HTML blocks ``before`` (already safe HTML), each
    plotly figure in its own div, then ``after``."""
    divs = [f.to_html(full_html=False, include_plotlyjs=(i == 0), config={"responsive": True})
            for i, f in enumerate(figures)]
    body = "\n".join([*before, *(f'<div class="figure">{d}</div>' for d in divs), *after])
    t = html.escape(title)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{t}</title>'
            f"<style>{_STYLE}</style></head><body><h1>{t}</h1>\n{body}\n</body></html>\n")


def write_page(text: str, path: str | os.PathLike[str]) -> None:
    """Write a page made by :func:`standalone_page` (UTF-8), through a fresh temporary file renamed into
    place; a link at ``path`` is refused, never followed (:func:`~eaglekit.io.write.write_atomic`)."""
    write_atomic(path, text, what="an --html page")


__all__ = ["standalone_page", "write_page"]
