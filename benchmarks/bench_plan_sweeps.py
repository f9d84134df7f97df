"""The serving plan held against published sweeps: given the no-speculation rows and the two smallest-k
speculative rows, how well does ``eaglekit.plan`` predict the rest, and do its 95% intervals hold them?

Sources (numbers as printed there; see benchmarks/RESULTS.md for setups):

- vLLM issue #20780: Llama-3.1-8B-Instruct + EAGLE-3, batch 1, K = 2..7 (TPOT and accept length per K).
- SpecForge issue #339: Qwen3-30B-A3B + EAGLE-3 on 2 x H100 (TP 2), SGLang via bench_eagle3.py, batch 1 and 4.
- AngelSlim issue #163: Qwen3-30B-A3B + EAGLE-3 on 4 x H100 (TP 4), batch 1..64.
- EAGLE-3 paper (arXiv 2503.01840), Table 3: SGLang on one H100, Llama-3.1-8B, chain of 3, speedup per batch
  size 2..64 (ratios only: no absolute tok/s or accept length per batch), held against the plan with no run
  given (the prior alone): the shape of the fall with batch size, which does not depend on the accept length.

Run: ``python benchmarks/bench_plan_sweeps.py`` (no GPU, no network: the published figures are below).
"""

from __future__ import annotations

import eaglekit
from eaglekit.core.serving.plan import Acceptance, constant_acceptance

# (batch, steps, topk, draft_tokens, accept_length, tokens_per_s)
VLLM_20780 = dict(
    target="llama-3.1-8b", gpu="H100-SXM", tp=1, context=1024,
    rows=[(1, 0, None, None, None, 1000 / 7.07)] + [
        (1, k, 1, k + 1, al, 1000 / tpot) for k, al, tpot in
        ((2, 2.36, 4.32), (3, 2.79, 4.09), (4, 3.08, 4.05), (5, 3.32, 4.13), (6, 3.46, 4.20), (7, 3.54, 4.29))],
    given=[(1, 2), (1, 3)], band=0.10)
SPECFORGE_339 = dict(
    target="qwen3-30b-a3b", gpu="H100-SXM", tp=2, context=1024,
    rows=[(b, 0, None, None, None, t) for b, t in ((1, 222.47), (4, 566.21), (8, 733.61), (16, 1012.96),
                                                   (32, 1077.55), (64, 1073.69))] + [
        (1, 3, 1, 4, 1.86, 159.78), (1, 3, 3, 8, 2.20, 172.99), (1, 3, 3, 4, 1.99, 207.62),
        (1, 7, 4, 16, 2.52, 191.90), (1, 6, 4, 12, 2.42, 171.54), (1, 8, 8, 60, 3.2, 177.5),
        (4, 3, 1, 4, 1.86, 447.90), (4, 3, 3, 8, 2.27, 426.46)],
    given=[(1, 3, 1, 4), (1, 3, 3, 4)], band=0.25)
ANGELSLIM_163_CONFIGS = dict(
    target="qwen3-30b-a3b", gpu="H100-SXM", tp=4, context=1024,
    rows=[(b, 0, None, None, None, t) for b, t in ((1, 218.89), (4, 507.49), (8, 677.14), (32, 1128.30),
                                                   (64, 1237.84))] + [
        (1, 3, 3, 4, 2.017, 170.35), (1, 3, 2, 8, 2.216, 185.28), (1, 4, 4, 16, 2.542, 185.64),
        (1, 7, 10, 64, 3.034, 193.31), (4, 4, 4, 16, 2.556, 476.37), (8, 4, 4, 16, 2.578, 673.14),
        (32, 4, 4, 16, 2.560, 927.11), (64, 4, 4, 16, 2.553, 1307.95)],
    given=[(1, 3, 3, 4), (1, 3, 2, 8)], band=0.25)
ANGELSLIM_163_ROWS = ANGELSLIM_163_CONFIGS["rows"]
ANGELSLIM_163_CONFIGS["rows"] = [r for r in ANGELSLIM_163_CONFIGS["rows"] if r[1] == 0 or r[0] == 1]
# the same source as a batch sweep of one tree (4, 4, 16): its rows at the two smallest batch sizes are given
ANGELSLIM_163_BATCHES = {**ANGELSLIM_163_CONFIGS,
                         "rows": [r for r in ANGELSLIM_163_ROWS if r[1] == 0 or r[1:4] == (4, 4, 16)],
                         "given": [(1, 4, 4, 16), (4, 4, 4, 16)]}
SWEEPS = {"vLLM #20780 (Llama-3.1-8B, batch-1 K sweep)": VLLM_20780,
          "SpecForge #339 (Qwen3-30B-A3B, TP 2, configurations at batch 1 and 4)": SPECFORGE_339,
          "AngelSlim #163 (Qwen3-30B-A3B, TP 4, configurations at batch 1)": ANGELSLIM_163_CONFIGS,
          "AngelSlim #163 (Qwen3-30B-A3B, TP 4, one tree across batch sizes)": ANGELSLIM_163_BATCHES}


def held_out(sweep: dict) -> list[dict]:
    """Fit on the baseline rows and the given speculative rows; predict every other speculative row."""
    rows = sweep["rows"]
    given = {tuple(g) for g in sweep["given"]}

    def is_given(r):
        return r[1] == 0 or (r[0], r[1]) in given or (r[0], r[1], r[2], r[3]) in given

    fit_rows = [r for r in rows if is_given(r)]
    trees = [{"steps": r[1], "topk": r[2], "draft_tokens": r[3], "accept_length": r[4]}
             for r in rows if r[1] and r[2] not in (None, 1)]
    chain = {r[1]: r[4] for r in rows if r[1] and r[2] in (None, 1)}
    acceptance = None
    if chain:
        top = max(chain)
        acc = constant_acceptance(chain[top], top)
        acceptance = Acceptance(acc.per_step, "published accept lengths", tuple(sorted(chain.items())))
    batches = tuple(sorted({r[0] for r in rows}))
    plan = eaglekit.plan(acceptance, measured=fit_rows, target=sweep["target"], gpu=sweep["gpu"], tp=sweep["tp"],
                         context=sweep["context"], batches=batches, max_steps=max(r[1] for r in rows),
                         trees=trees or None)
    out = []
    for r in rows:
        if is_given(r):
            continue
        b, k, topk, n, L, tps = r
        p = next(p for p in plan.plans if p.batch == b)
        if topk in (None, 1):
            cell = p.options[k]
        else:
            cell = next(t for t in p.trees if (t.steps, t.topk, t.verified_tokens) == (k, topk, n))
        lo, hi = cell.tps.low, cell.tps.high
        out.append({"batch": b, "config": (k, topk or 1, n or k + 1), "published": tps,
                    "predicted": cell.tokens_per_s, "low": lo, "high": hi,
                    "error": cell.tokens_per_s / tps - 1, "held": lo <= tps <= hi})
    return out


#: EAGLE-3 paper Table 3 (SGLang v0.4.4, one H100, Llama-3.1-8B-Instruct, chain of 3, MT-Bench): speedup by batch
PAPER_TABLE_3 = {2: 1.81, 4: 1.82, 8: 1.62, 16: 1.48, 24: 1.39, 32: 1.32, 48: 1.38, 56: 1.34, 64: 1.38}


def batch_trend() -> list[dict]:
    """The plan's speedup at 3 steps per batch size, with no run given, against Table 3's, both relative to
    batch 2 (a constant accept length cancels out of that ratio)."""
    acc = constant_acceptance(3.0, 3)
    plan = eaglekit.plan(acc, target="llama-3.1-8b", gpu="H100-SXM", context=1024, batches=tuple(PAPER_TABLE_3),
                         max_steps=3)
    first = plan.plans[0].options[3].speedup
    return [{"batch": p.batch, "published": PAPER_TABLE_3[p.batch] / PAPER_TABLE_3[2],
             "predicted": p.options[3].speedup / first} for p in plan.plans]


def main() -> None:
    for name, sweep in SWEEPS.items():
        res = held_out(sweep)
        worst = max(abs(r["error"]) for r in res)
        print(f"\n{name}: given {sweep['given']} and the baseline rows; band {sweep['band']:.0%}")
        print("| batch | steps/topk/draft | published tok/s | predicted (95%) | error | in interval |")
        print("|---:|---|---:|---:|---:|---|")
        for r in res:
            k, t, n = r["config"]
            print(f"| {r['batch']} | {k}/{t}/{n} | {r['published']:.1f} | {r['predicted']:.1f} "
                  f"({r['low']:.1f}-{r['high']:.1f}) | {r['error']:+.1%} | {'yes' if r['held'] else 'NO'} |")
        held = sum(r["held"] for r in res)
        print(f"worst error {worst:.1%} (band {sweep['band']:.0%}); {held} of {len(res)} inside the interval")
    trend = batch_trend()
    print("\nEAGLE-3 paper Table 3 (SGLang, H100, Llama-3.1-8B, chain of 3): speedup relative to batch 2, no run given")
    print("| batch | published | predicted | error |")
    print("|---:|---:|---:|---:|")
    for t in trend:
        print(f"| {t['batch']} | {t['published']:.2f} | {t['predicted']:.2f} | {t['predicted'] / t['published'] - 1:+.1%} |")
    worst = max(abs(t["predicted"] / t["published"] - 1) for t in trend)
    print(f"worst error {worst:.1%}")


if __name__ == "__main__":
    main()
