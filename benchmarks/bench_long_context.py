"""Benchmark: accept length at a long context by sampled positions against generating all the way there.

To read a drafter's accept length at positions 2,048-2,084, eaglekit measures prompts of 2,048 tokens continued
for 37 (one prefill, 37 decode steps: the cycles start there). The naive way generates from a short prompt until
the continuation reaches those positions (2,075 decode steps) and reads the last bucket. Both are whole
``eaglekit acceptance --by-position`` processes on the demo's K2.5 target and warm-start drafter, no cache;
wall seconds and peak RSS of each, medians over the rounds, and the ratio sampled / naive. The two buckets need
not agree (different text reaches those positions); both are printed.

    python benchmarks/bench_long_context.py                      # the demo's trained world (built when missing)
    python benchmarks/bench_long_context.py --length 2048 --prompts 4 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from wholeprocess import run_json


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", default="build/demo", help="demo workspace (its trained world is measured)")
    ap.add_argument("--length", type=int, default=2048, help="the context length to read the accept length at")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()

    import numpy as np

    from eaglekit.demo.prompts import MAX_NEW_TOKENS, PROMPT_LENGTH, _GRAMMAR_SEED
    from eaglekit.demo.trained import _grammar, build_trained_demo, sample_language

    world = build_trained_demo(Path(args.demo) / "trained", progress=False)
    gram = _grammar(np.random.default_rng(_GRAMMAR_SEED))
    rng = np.random.default_rng(7)
    folder = Path(tempfile.mkdtemp(prefix="eaglekit-bench-long-"))
    long_p, short_p = folder / "long.jsonl", folder / "short.jsonl"
    long_p.write_text("".join(json.dumps({"input_ids": x.tolist()}) + "\n" for x in
                              sample_language(rng, gram["k25"], gram["common25"], args.prompts, args.length)))
    short_p.write_text("".join(json.dumps({"input_ids": x.tolist()}) + "\n" for x in
                               sample_language(rng, gram["k25"], gram["common25"], args.prompts, PROMPT_LENGTH)))
    edges = f"0,{args.length},{args.length + MAX_NEW_TOKENS + 1}"
    base = [sys.executable, "-m", "eaglekit", "acceptance", str(world.drafter("k25-warm")), "--target",
            str(world.target("k25")), "--steps", str(args.steps), "--by-position", edges, "--no-cache", "--json"]
    sampled = base + ["--prompts", str(long_p), "--max-new-tokens", str(MAX_NEW_TOKENS)]
    naive = base + ["--prompts", str(short_p), "--max-new-tokens",
                    str(args.length + MAX_NEW_TOKENS - PROMPT_LENGTH)]
    rows = []
    for _ in range(args.rounds):
        a, ta, ma = run_json(sampled)
        b, tb, mb = run_json(naive)
        rows.append((ta, ma, tb, mb))
    med = [statistics.median(r[i] for r in rows) for i in range(4)]

    def last(data: dict) -> str:
        bucket = data["by_position"]["buckets"][-1]
        return (f"{bucket['accept_length']:.2f} ({bucket['accept_length_low']:.2f}-{bucket['accept_length_high']:.2f}) "
                f"over {bucket['cycles']} cycles at positions {bucket['start']}-{bucket['end'] - 1}")

    print(f"accept length at context {args.length}, {args.prompts} prompts, K = {args.steps}, "
          f"medians of {args.rounds} rounds")
    print(f"  sampled (prompts of {args.length} + {MAX_NEW_TOKENS} new): {med[0]:.1f} s, peak RSS {med[1]:.0f} MiB; "
          f"{last(a)}")
    print(f"  naive (generate {args.length + MAX_NEW_TOKENS - PROMPT_LENGTH} tokens): {med[2]:.1f} s, "
          f"peak RSS {med[3]:.0f} MiB; {last(b)}")
    print(f"  ratio sampled / naive: time {med[0] / med[2]:.3f}, peak memory {med[1] / med[3]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
