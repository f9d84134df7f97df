"""Benchmark: `eaglekit plan` on hostile-sized inputs (issue 40): many measured batch sizes, many --batch sizes,
and many distinct cost rows; wall time, CPU time and the size of the JSON printed.

1. ``runs``: a runs CSV with N batch sizes, each a decode (steps 0) and a chain run (66,606 rows at the
   default N = 33,303; before the bisection of the decode offsets and the runs' index, 90-120 s).
2. ``batches``: --batch 1..M (at most 512; 20,000 took 90 s before the cap and is now refused at once).
3. ``costs``: a COSTS.csv of R distinct (batch, tokens) rows (a million printed more than 128 MB of JSON
   before lists were summarised).

    python benchmarks/bench_plan_inputs.py                      # all three, default sizes
    python benchmarks/bench_plan_inputs.py --part costs --rows 1000000
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str]) -> tuple[float, float, int, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "eaglekit", "plan", *args], capture_output=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, len(p.stdout), p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("runs", "batches", "costs", "all"), default="all")
    ap.add_argument("--batches", type=int, default=33_303, help="batch sizes in the runs CSV")
    ap.add_argument("--plan-batches", type=int, default=512, help="--batch 1..M")
    ap.add_argument("--rows", type=int, default=200_000, help="distinct cost rows")
    a = ap.parse_args()
    head = "batch,steps,topk,draft_tokens,accept_length,tokens_per_s\n"
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs.csv"
        runs.write_text(head + "".join(f"{b},0,,,,{100 * b ** 0.9:.3f}\n{b},3,1,4,2.5,{150 * b ** 0.9:.3f}\n"
                                       for b in range(1, a.batches + 1)))
        if a.part in ("runs", "all"):
            wall, cpu, size, rc = _run(["--measured", str(runs), "--json"])
            print(f"runs: {2 * a.batches:,} rows ({a.batches:,} batch sizes): {wall:.1f} s wall, {cpu:.1f} s CPU, "
                  f"{size / 1e6:.2f} MB JSON, exit {rc}")
        if a.part in ("batches", "all"):
            small = Path(tmp) / "small.csv"
            small.write_text(head + "1,0,,,,100\n2,0,,,,190\n1,3,1,4,2.5,200\n")
            wall, cpu, size, rc = _run(["--measured", str(small), "--batch",
                                        ",".join(map(str, range(1, a.plan_batches + 1)))])
            print(f"batches: --batch 1..{a.plan_batches}: {wall:.1f} s wall, {cpu:.1f} s CPU, exit {rc}")
        if a.part in ("costs", "all"):
            costs = Path(tmp) / "costs.csv"
            costs.write_text("batch,tokens,ms\n" + "".join(
                f"{1 + i % 1000},{1 + i // 1000},{5 + (1 + i % 1000) * (1 + i // 1000) // 100}\n" for i in range(a.rows)))
            wall, cpu, size, rc = _run(["--costs", str(costs), "--per-step", "0.8,0.7", "--json"])
            print(f"costs: {a.rows:,} distinct rows: {wall:.1f} s wall, {cpu:.1f} s CPU, {size / 1e6:.3f} MB JSON, "
                  f"exit {rc}")


if __name__ == "__main__":
    main()
