"""The floors of eaglekit/__init__.py hold: import-linter's contracts (pyproject.toml) pass on the package
as it is, and break when a lower floor imports an upper one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_contracts_hold():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 6 kept, 0 broken." in done.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path):
    shutil.copytree(ROOT / "eaglekit", tmp_path / "eaglekit", ignore=shutil.ignore_patterns("__pycache__", "*.woff2"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    vocab = tmp_path / "eaglekit" / "core" / "tokens" / "vocab.py"
    vocab.write_text(vocab.read_text() + "\n\ndef _plot():\n    from eaglekit.view.figures import heatmap  # upward\n")
    done = _lint(tmp_path)
    assert done.returncode == 1
    assert "floors point down" in done.stdout and "BROKEN" in done.stdout
    assert "eaglekit.core.tokens.vocab -> eaglekit.view.figures" in done.stdout


def test_the_demo_and_the_views_stay_independent(tmp_path):
    shutil.copytree(ROOT / "eaglekit", tmp_path / "eaglekit", ignore=shutil.ignore_patterns("__pycache__", "*.woff2"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    world = tmp_path / "eaglekit" / "demo" / "world.py"
    world.write_text(world.read_text() + "\n\ndef _page():\n    from eaglekit.view.report import build_report\n")
    done = _lint(tmp_path)
    assert done.returncode == 1 and "eaglekit.demo.world -> eaglekit.view.report" in done.stdout
