"""The JavaScript of eaglekit's widgets (anywidget front ends): each widget's module with the shared DOM
helpers (``dom.js``) put before it, so the calculator and the serving plan build their elements one way."""

from __future__ import annotations

from pathlib import Path

DOM = Path(__file__).resolve().parent / "dom.js"


def esm(module: Path) -> str:
    """The ES module a widget ships: ``dom.js`` then ``module`` (both in the package)."""
    return DOM.read_text(encoding="utf-8") + "\n" + module.read_text(encoding="utf-8")


__all__ = ["esm"]
