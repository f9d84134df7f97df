"""Benchmark: a repeated ``eaglekit acceptance ... --json`` against the first run (the result cache).

Each round clears a cache folder of its own, runs the command once (measured: the target runs, the drafter
drafts), then again (read back), then once with ``--no-cache`` (measured again); whole processes, wall seconds
and peak RSS of each, the medians over the rounds and the ratio repeat / first (the issue's bar: at most 0.25).
The figures must agree but for the cache's own keys, or the script stops.

    python benchmarks/bench_cache.py                        # the demo's trained world (built when missing)
    python benchmarks/bench_cache.py --rounds 5 --demo build/demo
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from wholeprocess import run_json


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", default="build/demo", help="demo workspace (its trained world is measured)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()

    from eaglekit.demo.prompts import MAX_NEW_TOKENS, measurement_prompts
    from eaglekit.demo.trained import build_trained_demo

    world = build_trained_demo(Path(args.demo) / "trained", progress=False)
    prompts = measurement_prompts(world, "k25")
    base = [sys.executable, "-m", "eaglekit", "acceptance", str(world.drafter("k25-warm")), "--target",
            str(world.target("k25")), "--prompts", str(prompts), "--steps", str(args.steps), "--max-new-tokens",
            str(MAX_NEW_TOKENS), "--json"]
    rows = []
    for _ in range(args.rounds):
        folder = tempfile.mkdtemp(prefix="eaglekit-bench-cache-")
        env = {**os.environ, "EAGLEKIT_CACHE_DIR": folder}
        try:
            first, t1, m1 = run_json(base, env)
            again, t2, m2 = run_json(base, env)
            fresh, t3, m3 = run_json(base + ["--no-cache"], env)
        finally:
            shutil.rmtree(folder)
        if not (first["cached"] is False and again["cached"] is True and fresh["cached"] is False):
            raise SystemExit("the repeat was not read from the cache")
        for j in (first, again, fresh):
            for k in ("cached", "computed_at", "cache_dir"):
                j.pop(k, None)
        if not first == again == fresh:
            raise SystemExit("the cached figures differ from the measured ones")
        rows.append((t1, t2, t3, m1, m2, m3))
    med = [statistics.median(r[i] for r in rows) for i in range(6)]
    ratios = [r[1] / r[0] for r in rows]
    print(f"eaglekit acceptance on the demo (k25-warm on k25, {prompts.name}, K = {args.steps}), "
          f"{args.rounds} rounds, medians:")
    print(f"  first run (measured)     {med[0]:6.2f} s   peak RSS {med[3]:6.0f} MiB")
    print(f"  repeat (read back)       {med[1]:6.2f} s   peak RSS {med[4]:6.0f} MiB")
    print(f"  --no-cache (measured)    {med[2]:6.2f} s   peak RSS {med[5]:6.0f} MiB")
    print(f"  repeat / first           {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}; "
          "bar 0.25)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
