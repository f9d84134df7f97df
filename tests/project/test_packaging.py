"""environment.yml and pyproject.toml promise the same dependencies; the CLI starts without heavy imports."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["notebooks"]
    return {Requirement(r).name.lower(): Requirement(r) for r in reqs}


def _environment() -> dict[str, Requirement]:
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- pip:")
    specs = [line.strip()[2:] for line in lines[start + 1:] if line.strip().startswith("- ")]
    assert "-e .[notebooks]" in specs, "environment.yml must install the package with its notebook extras"
    return {Requirement(s).name.lower(): Requirement(s) for s in specs if not s.startswith("-e")}


def test_environment_lists_the_pyproject_dependencies():
    py, env = _pyproject(), _environment()
    assert set(py) == set(env)
    for name, req in env.items():
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        if pinned:  # torch: the pinned CPU build must satisfy pyproject's range
            assert py[name].specifier.contains(pinned[0]), f"{name}=={pinned[0]} is outside {py[name].specifier}"
        else:
            assert req.specifier == py[name].specifier, f"{name}: {req.specifier} != {py[name].specifier}"


def test_import_and_help_stay_light():
    code = ("import sys, eaglekit.cli; eaglekit.cli.build_parser(); "
            "heavy = [m for m in ('torch', 'plotly', 'ipywidgets', 'huggingface_hub', 'pandas') if m in sys.modules]; "
            "print(','.join(heavy))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == ""


def test_every_command_is_registered():
    r = subprocess.run([sys.executable, "-m", "eaglekit", "--help"], capture_output=True, text=True, check=True)
    for command in ("search", "inspect", "diff", "compat", "similarity", "speedup", "demo", "serve-hub"):
        assert command in r.stdout


def test_the_package_never_caps_torch():
    """The CPU build is pinned by the Makefile and environment.yml only: an upper bound in the package's own
    dependencies would make pip downgrade a GPU user's newer torch."""
    torch = _pyproject()["torch"]
    assert all(s.operator in (">=", ">") for s in torch.specifier), torch
    assert "torch==2.13.0" in (ROOT / "Makefile").read_text()
