"""``eaglekit ARGS`` in a fresh interpreter under an address-space limit (RLIMIT_AS, 1 GiB by default) and a
wall-clock cap: an input that makes eaglekit allocate without bound dies there (MemoryError, or killed),
and the test sees it. A plain module: ``from bounded_cli import run_limited``."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


@dataclass(frozen=True)
class Limited:
    rc: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_limited(*args: str, tmp: Path, memory: int | None = GIB, limit_s: float = 60,
                env: dict[str, str] | None = None, stdin: str | None = None) -> Limited:
    """Run the CLI with ``args``; killed after ``limit_s`` (rc -9, and the test fails on it)."""
    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    full_env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp / "hf"),
                "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    full_env.pop("HF_TOKEN", None)
    try:
        p = subprocess.run([sys.executable, "-m", "eaglekit", *args], capture_output=True, text=True, env=full_env,
                           cwd=tmp, timeout=limit_s, preexec_fn=limit, input=stdin)
        return Limited(p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Limited(-9, "", err + f"\n[killed after {limit_s} s]")
