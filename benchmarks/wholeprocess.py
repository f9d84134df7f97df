"""One whole ``eaglekit ... --json`` process, timed: what the benchmarks that compare whole commands share."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time


def run_json(cmd: list[str], env: dict[str, str] | None = None) -> tuple[dict, float, float]:
    """(JSON printed, wall seconds, peak RSS in MiB) of one whole process (its own rusage, from wait4)."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {code}")
        out.seek(0)
        return json.loads(out.read()), wall, usage.ru_maxrss / 1024
