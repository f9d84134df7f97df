"""Benchmark: tree drafts from every position, against the chain, on the trained demo world and a
Kimi-K2-sized drafter on CPU.

For each drafter: positions per second of

* the chain with K = 6 (``DraftModel.draft``: one pass per step over every position);
* the tree (steps 6, topk 10, 60 draft tokens) alone: the first pass, then 5 batched passes over every
  position's 10 frontier nodes (51 drafter rows per position), the selection of 59 nodes and the
  accepted depth;
* a grid of five configurations in one run (6:10:60, 6:10:32, 5:10:40, 4:8:32, 3:1:4): the first pass
  shared, one growth per top-k up to its deepest configuration (1 + 50 + 24 + 2 = 77 rows per position).

    python benchmarks/bench_tree.py                        # both parts (the second needs ~8 GB RAM)
    python benchmarks/bench_tree.py --part demo --world build/demo/trained
    python benchmarks/bench_tree.py --part kimi --positions 24
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from bench_acceptance import random_drafter  # noqa: E402

import eaglekit  # noqa: E402
from eaglekit.analysis.draft import DraftModel, trained_convention  # noqa: E402
from eaglekit.analysis.acceptance.target import read_prompts  # noqa: E402
from eaglekit.analysis.acceptance.tree import parse_tree_grid, tree_sample_stats  # noqa: E402

LARGEST = "6:10:60"
GRID = "6:10:60,6:10:32,5:10:40,4:8:32,3:1:4"


def _time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(model: DraftModel, samples, repeat: int, label: str) -> None:
    """samples: (aux, input_ids, target_ids, prompt_len) per sequence."""
    positions = sum(int(ids.shape[0]) - p - 1 for _, ids, _, p in samples)
    largest, grid = parse_tree_grid(LARGEST), parse_tree_grid(GRID)

    def chain():
        for aux, ids, _, p in samples:
            T = ids.shape[0]
            model.draft(model.project(aux)[:T - 1], ids[1:], 6, start=p - 1)

    def trees(configs):
        def run():
            for aux, ids, tgt, p in samples:
                tree_sample_stats(model, aux, ids, tgt, p, configs)
        return run

    t_chain = _time(chain, repeat)
    t_tree = _time(trees(largest), repeat)
    t_grid = _time(trees(grid), repeat)
    print(f"{label}: {positions} positions, torch threads {torch.get_num_threads()}, best of {repeat}")
    print(f"  chain K = 6:              {t_chain:8.2f} s  {positions / t_chain:10.3f} positions/s")
    print(f"  tree {LARGEST} alone:     {t_tree:8.2f} s  {positions / t_tree:10.3f} positions/s  "
          f"({t_tree / t_chain:.1f}x the chain)")
    print(f"  grid of five ({GRID}): {t_grid:8.2f} s  {positions / t_grid:10.3f} positions/s  "
          f"({t_grid / t_tree:.2f}x the largest alone)")
    print(f"  peak RSS so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


def demo(world: str, repeat: int, max_new_tokens: int) -> None:
    w = eaglekit.build_trained_demo(world)
    target = eaglekit.load_target_model(w.target("k2"))
    model = DraftModel.load(w.drafter("k2"), embed=target.embedding())
    layers = model.aux_indices(trained_convention(model.config), target.num_hidden_layers)
    prompts, _ = read_prompts(w.prompts("k2"))
    samples = []
    for ids in target.tokenize_all(prompts, source="prompts", max_new_tokens=max_new_tokens):
        s = target.run(ids, max_new_tokens=max_new_tokens, layers=layers)
        samples.append((s.hidden_states, s.input_ids, s.target_ids, s.prompt_len))
    measure(model, samples, repeat, f"trained demo world (K2 drafter, hidden 64), {len(samples)} prompts")


def kimi(positions: int, repeat: int) -> None:
    t0 = time.perf_counter()
    model = random_drafter(hidden=7168, heads=64, head_dim=128, inter=18432, vocab=32000, draft_vocab=32000,
                           scale=0.01)
    print(f"kimi-sized drafter made in {time.perf_counter() - t0:.0f} s")
    g = torch.Generator().manual_seed(2)
    T = positions + 9
    aux = torch.randn(3, T, 7168, generator=g)
    ids = torch.randint(0, 32000, (T,), generator=g)
    model.draft(model.project(aux[:, :16]), ids[1:17], 1)        # warm-up
    measure(model, [(aux, ids, ids.roll(-1), 8)], repeat,
            "Kimi-K2-sized drafter (hidden 7168, 64 heads x 128, intermediate 18432, draft vocab 32000, float32)")


def _load(when: str) -> None:
    print(f"load average {when}: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("demo", "kimi", "all"), default="all")
    ap.add_argument("--world", default="build/demo/trained", help="the trained demo world (built if absent)")
    ap.add_argument("--positions", type=int, default=24, help="Kimi part: positions drafted from (24)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, best of each (3; Kimi part: 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads or torch.get_num_threads())
    parts = {"demo": lambda: demo(args.world, args.repeat, args.max_new_tokens),
             "kimi": lambda: kimi(args.positions, 1 if args.part == "all" else args.repeat)}
    _load("before")
    for name, run in parts.items():
        if args.part in (name, "all"):
            run()
    _load("after")


if __name__ == "__main__":
    main()
