"""docs/architecture.md draws the tree as it is: every module of the core, io, analysis and view floors
(and every room of the analysis, core and io floors) is named in its picture, and nothing it names is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()
PICTURE = DOC.split("```")[1]


def _modules(floor: str) -> set[str]:
    base = ROOT / "eaglekit" / floor
    out = {p.stem for p in base.glob("*.py") if p.stem != "__init__"}
    for sub in (p for p in base.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        out.add(sub.name + "/")
        if floor in ("analysis", "core", "io"):  # a room's modules are drawn inside it
            out |= {p.stem for p in sub.glob("*.py") if p.stem != "__init__"}
    return out


def test_every_module_is_in_the_picture():
    for floor in ("core", "io", "analysis", "view"):
        missing = [m for m in sorted(_modules(floor)) if not re.search(rf"\b{re.escape(m.rstrip('/'))}\b", PICTURE)]
        assert not missing, f"docs/architecture.md does not draw {floor}/{missing}"


def test_every_file_the_picture_names_exists():
    names = set(re.findall(r"\b([a-z_]+)\.py\b", PICTURE))
    existing = {p.stem for p in (ROOT / "eaglekit").rglob("*.py")}
    assert names <= existing, names - existing


def test_the_core_is_in_rooms():
    """Issue 35: at least four rooms in core/, at most nine modules at its top, none of the account,
    serving, tokens or configs left there."""
    core = ROOT / "eaglekit" / "core"
    rooms = [p for p in core.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    top = [p.stem for p in core.glob("*.py")]
    assert len(rooms) >= 4 and len(top) <= 9, (rooms, top)
    for gone in ("account", "specmath", "costmodel", "servingplan", "servinginputs", "vocab", "tokendiff",
                 "config", "configdiff", "layers"):
        assert gone not in top
    for room in rooms:
        assert (room / "__init__.py").read_text().strip().startswith('"""'), f"{room.name} says what it holds"
