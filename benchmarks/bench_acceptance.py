"""Benchmark: the all-positions-at-once draft pass, and a Kimi-K2-sized drafter on CPU.

1. ``fast-vs-naive``: a random drafter (hidden 256, 4 heads x 64, intermediate 688, draft vocabulary
   2,000 of 8,000, 3 aux layers) on 2,000 positions with K = 5. eaglekit's pass (one forward per chain
   step over every position, training-time-test mask) against the naive loop a serving engine runs
   (position by position, step by step, each step one token attending to the cached prefix and its own
   chain), on the same inputs, in the same run. Checks the drafts are identical.
2. ``kimi``: a drafter in the Kimi-K2 EAGLE-3 shapes (hidden 7168, 64 heads x 128, intermediate 18432,
   draft vocabulary 32,000, fc [7168, 21504]; random weights, float32; the embedding is cut to 32,000
   rows, which costs no FLOPs) drafting K steps over a synthetic hidden-state sequence: positions per
   second, peak RSS, and its FLOP rate (the linear layers' FLOPs / wall time) against a plain torch
   matmul of the same shapes measured in the same run.

    python benchmarks/bench_acceptance.py                  # both parts (the second needs ~7 GB RAM)
    python benchmarks/bench_acceptance.py --part fast-vs-naive --threads 1 --repeat 3
    python benchmarks/bench_acceptance.py --part kimi --positions 256 --steps 3
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import torch

from eaglekit.analysis.acceptance.measure import match_lengths
from eaglekit.analysis.draft import DraftModel


def random_drafter(*, hidden, heads, head_dim, inter, vocab, draft_vocab, n_aux=3, seed=0, scale=None):
    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return torch.randn(*shape, generator=g) * (scale or shape[-1] ** -0.5)

    p = "midlayer."
    t = {"fc.weight": w(hidden, n_aux * hidden),
         p + "self_attn.q_proj.weight": w(heads * head_dim, 2 * hidden),
         p + "self_attn.k_proj.weight": w(heads * head_dim, 2 * hidden),
         p + "self_attn.v_proj.weight": w(heads * head_dim, 2 * hidden),
         p + "self_attn.o_proj.weight": w(hidden, heads * head_dim),
         p + "mlp.gate_proj.weight": w(inter, hidden), p + "mlp.up_proj.weight": w(inter, hidden),
         p + "mlp.down_proj.weight": w(hidden, inter),
         p + "hidden_norm.weight": torch.ones(hidden), p + "input_layernorm.weight": torch.ones(hidden),
         p + "post_attention_layernorm.weight": torch.ones(hidden), "norm.weight": torch.ones(hidden),
         "lm_head.weight": w(draft_vocab, hidden), "embed_tokens.weight": w(vocab, hidden)}
    keep = np.sort(np.random.default_rng(seed).permutation(vocab)[:draft_vocab])
    t["d2t"] = torch.from_numpy(keep - np.arange(draft_vocab))
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": hidden, "intermediate_size": inter,
           "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": head_dim, "vocab_size": vocab,
           "draft_vocab_size": draft_vocab, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "num_hidden_layers": 1,
           "max_position_embeddings": 131072, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}
    return DraftModel.from_tensors(cfg, t)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fast_vs_naive(positions: int, steps: int, repeat: int = 1) -> None:
    model = random_drafter(hidden=256, heads=4, head_dim=64, inter=688, vocab=8000, draft_vocab=2000)
    g = torch.Generator().manual_seed(1)
    aux = torch.randn(3, positions, 256, generator=g)
    ids = torch.randint(0, 8000, (positions,), generator=g)
    h = model.project(aux)
    model.draft(h[:64], ids[:64], steps)                       # warm-up
    t_fast = t_naive = float("inf")
    for _ in range(repeat):                                    # interleaved, best of each: load hits both alike
        t0 = time.perf_counter()
        fast = model.draft(h, ids, steps).tokens
        t_fast = min(t_fast, time.perf_counter() - t0)
        t0 = time.perf_counter()
        naive = model.draft_loop(h, ids, steps)
        t_naive = min(t_naive, time.perf_counter() - t0)
    # expected tokens: the fast drafts with every third step-2 token changed, so matches vary
    expected = fast.clone()
    expected[1, ::3] += 1
    same_tokens = torch.equal(fast, naive)
    same_matches = torch.equal(match_lengths(fast, expected), match_lengths(naive, expected))
    print(f"fast-vs-naive: {positions} positions, K = {steps}, torch threads {torch.get_num_threads()}, "
          f"best of {repeat}")
    print(f"  all positions at once: {t_fast:.3f} s ({positions * steps / t_fast:,.0f} drafted tokens/s)")
    print(f"  naive loop:            {t_naive:.3f} s ({positions * steps / t_naive:,.0f} drafted tokens/s)")
    print(f"  ratio naive / fast:    {t_naive / t_fast:.1f}x   identical drafts: {same_tokens}, "
          f"identical match lengths: {same_matches}")
    print(f"  peak RSS so far: {peak_rss_mib():,.0f} MiB")


def linear_flops(model: DraftModel, positions: int, steps: int) -> float:
    """FLOPs of the linear layers: fc once, then per step q/k/v/o, the MLP and lm_head (2 x m x n x k)."""
    H = model.hidden_size
    qkv = model.q.shape[0] + model.k.shape[0] + model.v.shape[0]
    per_step = 2 * H * qkv + model.o.numel() + 3 * model.gate.numel() + model.lm_head.numel()
    return 2.0 * positions * (model.fc.numel() + steps * per_step)


def matmul_rate(model: DraftModel, positions: int, repeat: int = 2) -> float:
    """FLOP/s of plain torch matmuls of the drafter's shapes (one step's linear layers, no attention)."""
    H = model.hidden_size
    x2 = torch.randn(positions, 2 * H)
    x1 = torch.randn(positions, H)
    xo = torch.randn(positions, model.o.shape[1])
    xi = torch.randn(positions, model.gate.shape[0])
    ws = [(x2, model.q), (x2, model.k), (x2, model.v), (xo, model.o), (x1, model.gate), (x1, model.up),
          (xi, model.down), (x1, model.lm_head)]
    for x, w in ws:
        x @ w.T                                                 # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for x, w in ws:
            x @ w.T
        best = min(best, time.perf_counter() - t0)
    flops = sum(2.0 * x.shape[0] * w.shape[0] * w.shape[1] for x, w in ws)
    return flops / best


def kimi(positions: int, steps: int) -> None:
    t0 = time.perf_counter()
    model = random_drafter(hidden=7168, heads=64, head_dim=128, inter=18432, vocab=32000, draft_vocab=32000,
                           scale=0.01)
    t_init = time.perf_counter() - t0
    g = torch.Generator().manual_seed(2)
    aux = torch.randn(3, positions + 1, 7168, generator=g)
    ids = torch.randint(0, 32000, (positions + 1,), generator=g)
    model.draft(model.project(aux[:, :16]), ids[:16], 1)          # warm-up
    t0 = time.perf_counter()
    h = model.project(aux)
    model.draft(h[:positions], ids[1:], steps)
    t = time.perf_counter() - t0
    rate = linear_flops(model, positions, steps) / t
    mm = matmul_rate(model, positions)
    print(f"kimi: hidden 7168, 64 heads x 128, intermediate 18432, draft vocab 32000; {positions} positions, "
          f"K = {steps}, float32, torch threads {torch.get_num_threads()} (weights made in {t_init:.0f} s)")
    print(f"  draft pass: {t:.2f} s = {positions / t:.1f} positions/s ({positions * steps / t:.1f} drafted tokens/s)")
    print(f"  FLOP rate {rate / 1e9:.1f} GFLOP/s; plain torch matmul of the same shapes {mm / 1e9:.1f} GFLOP/s; "
          f"ratio {rate / mm:.2f}")
    print(f"  peak RSS: {peak_rss_mib():,.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("fast-vs-naive", "kimi", "all"), default="all")
    ap.add_argument("--positions", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--repeat", type=int, default=3, help="fast-vs-naive rounds, best of each (3)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.part in ("fast-vs-naive", "all"):
        fast_vs_naive(args.positions or 2000, args.steps or 5, args.repeat)
    if args.part in ("kimi", "all"):
        kimi(args.positions or 256, args.steps or 3)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
