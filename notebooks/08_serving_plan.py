# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Serving plan: the best draft steps per batch size, from what the engine measured
# The answer first: the demo's K2.5 candidates planned at batch 1 on 8 H20s (assumed: the seed names 8 PCIe GPUs)
# at 2048 tokens of context (assumed; `eaglekit plan` assumes H100-SXM and 4096 without `--gpu` and `--context`).

# %%
import os

import eaglekit

verdicts = eaglekit.demo_verdicts(os.path.join(os.environ.get("EAGLEKIT_DEMO", "../build/demo"), "trained"))
verdicts  # each K2.5 candidate on the seed's deployment (page 08's plan at batch 1), as pages 00, 06, 08 and 10 open

# %% [markdown]
# ## The question
#
# The seed's arithmetic charged 30 ms for a verify whatever it verified and counted drafting free, so "150 tok/s
# takes k = 5". A cycle costs more: the verify grows with k (a decode step of Kimi-K2.5 reads 8 of 384 routed
# experts per layer, a verify of k + 1 tokens every expert any of them routes to), each draft step has a latency
# floor of about a millisecond, and each cycle has work beyond both (the draft-extend pass, sampling). Batches
# change it again, and only so many requests fit in memory.
#
# `eaglekit.plan` fits a cost model of the cycle to the runs a team already has (no-speculation rows fit the
# target's forward, speculative rows fit drafting and the overhead), uses measured cells as measured, and prices
# every other (batch size, k) with a 95% interval. The model, its prior and how to measure the rows:
# `docs/serving-plan.md`.

# %% tags=["parameters"]
TARGET = "kimi-k25-int4"  # a config.json, a checkpoint location, or a published config's short name
# the seed's two measured runs (batch, steps, topk, draft tokens, accept length, tok/s) and its verify
SEED_RUNS = [(1, 0, None, None, None, 82.0), (1, 2, 1, 3, 2.0, 60.0)]
SEED_VERIFY = [(1, 3, 30.0)]  # (batch, tokens per request, ms): the verify of 2 drafts
PER_STEP = (0.8, 0.72, 0.66, 0.6, 0.55)  # an illustrative EAGLE-3 profile: accept length 3.1 at k = 5
GPU, TP, CONTEXT = "H20", 8, 2048
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# a published sweep (vLLM issue #20780: Llama-3.1-8B + EAGLE-3, batch 1, tok/s = 1000 / TPOT): the baseline
# and the two smallest K as measured runs; the published accept lengths for K = 2..7 (K = 1's 1.8 assumed)
SWEEP = [(1, 0, None, None, None, 1000 / 7.07), (1, 2, 1, 3, 2.36, 1000 / 4.32), (1, 3, 1, 4, 2.79, 1000 / 4.09)]
SWEEP_ACCEPT = {"accept_length_by_steps": [1.8, 2.36, 2.79, 3.08, 3.32, 3.46, 3.54]}

# %%
import json

import eaglekit

# %% [markdown]
# ## The seed, as measured rows
# 82 tok/s without speculation, 60 tok/s at accept length 2.0 with 2 steps, and the 30 ms verify: the plan gives
# those back as measured and prices every other k with its interval. What the speculative run leaves beyond the
# verify (3.3 ms) is split between drafting and the per-cycle overhead under a prior sized from an EAGLE-3
# drafter of K2.5's hidden size (`extrapolate=True`: k past 2 repeats the measured per-step acceptance).
# The 30 ms verify holds more than bytes and FLOPs explain (the seed: "a 1T MoE model on 8 PCIe GPUs without
# CUDA graphs"); one decode and one verify cannot say whether that excess is paid per verified token or per
# verify forward, so the plan prices both readings (`verify_split`, `--verify-split`) and names the run that
# settles it.

# %%
seed = eaglekit.plan(None, costs=SEED_VERIFY, measured=SEED_RUNS, target=TARGET, tp=TP, batches=(1,),
                     extrapolate=True)
seed

# %% [markdown]
# The same two forwards against Kimi-K2's FP8 layout (every linear layer in FP8, so routed experts weigh twice
# what K2.5's INT4 ones do and a verify's extra experts cost more bytes):

# %%
for name in ("kimi-k25-int4", "kimi-k2-fp8"):
    b, n, estimated, measured = eaglekit.plan(None, costs=SEED_VERIFY, measured=SEED_RUNS, target=name, tp=TP,
                                              batches=(1,)).uncalibrated_ratio()
    print(f"{name}: from the config alone a {n}-token verify costs {estimated:.2f}x a decode step; "
          f"measured {measured:.2f}x")

# %% [markdown]
# ## The account, with the one verify model
# The throughput account of notebooks 00 and 05 prices the seed's targets on the same verify: the cost model on
# the seed's 8 GPUs calibrated through the same two forwards, so its verify at k = 3, 5 and 8 is the plan's
# "target ms" above (page 05's calculator moves along the line through k = 2 and k = 3, within 0.5 ms of it out
# to k = 8).
# Its drafting differs, by design: the account puts all 3.3 ms the measured cycle holds beyond the verify into
# its 2 draft steps (1.67 ms each), where the plan's fit splits them under its prior into a cost per step and
# a cost per cycle, so at k = 3 the plan's cycle is about 1 ms shorter. A second speculative run at another k
# settles the split.
# Figures for how the verify grows, each its own quantity: 7.45 ms per verified token past the first is the
# per-token reading's excess beyond bytes and FLOPs (the fitted term); 8.86 ms is what the per-token curve grows
# from k = 2 to k = 3 (the calculator's line); the per-forward reading's curve grows 1.41 ms there.

# %%
for g in eaglekit.Account.seed().growing:
    print(g.sentence(), end="\n\n")
eaglekit.Account.seed().fork

# %% [markdown]
# ## The plan across batch sizes
# K2.5 on 8 H20s at 2048 tokens of context, fitted to the seed's runs and verify, with a drafter whose per-step
# acceptance decays as EAGLE-3 drafters' usually do (`PER_STEP`: accept length 2.38 at k = 2, 3.1 at k = 5; an
# illustration of a better drafter than the seed's). The seed's speculative run (accept length 2.0, 60 tok/s at
# batch 1, k = 2) fits drafting and the overhead, but its cell belongs to the seed's drafter: here k = 2 is priced
# from the profile like every other cell, and the plan warns that the run disagrees with the profile given. Batch sizes whose weights and KV cache
# do not fit in the GPUs' memory are marked and get no k. The intervals are wide at large batch sizes: one speculative run at
# batch 1 says little about what a draft step costs at batch 64, and the plan names the run that would say most.
# With the seed's verify read per verified token (7.45 ms per token past the first beyond what bytes and FLOPs
# explain) even this drafter's best is k = 0 at every batch size that fits; where another k's interval overlaps
# k = 0's, the verdict is TOO CLOSE TO CALL. The plan's "verify read per-forward" line gives the other reading.
# The best-k table is a schedule, and a schedule never climbs with batch size: where a larger batch's best k is within
# the interval of the smaller batch's k, the table keeps the smaller k, so it can read k = 0 where the heatmap below
# shows another k above 1x by less than the intervals tell apart (the widget says the same at the bottom).

# %%
plan = eaglekit.plan(PER_STEP, costs=SEED_VERIFY, measured=SEED_RUNS, target=TARGET, gpu=GPU, tp=TP,
                     context=CONTEXT, batches=BATCHES)
plan

# %%
eaglekit.plan_grid_figure(plan)

# %%
eaglekit.plan_throughput_figure(plan)

# %% [markdown]
# ## A published sweep
# vLLM's batch-1 sweep of Llama-3.1-8B with its EAGLE-3 drafter: given the baseline and K = 2, 3, the plan prices
# K = 1..7 (vLLM measured 246.9, 242.1, 238.1 and 233.1 tok/s at K = 4..7: K = 4 best, within 2% of K = 5
# and 6; the plan's "also within" column lists every K whose interval overlaps the best one's, so from two
# measured K it cannot single out K = 4). At larger batch sizes it has only the prior for what a draft step
# adds per request, and says which run would settle it.

# %%
sweep = eaglekit.plan(SWEEP_ACCEPT, measured=SWEEP, target="llama-3.1-8b", gpu="H100-SXM", batches=(1, 4, 16, 64),
                      context=1024)
sweep

# %%
eaglekit.plan_grid_figure(sweep)

# %% [markdown]
# ## The engines' configs
# vLLM's `speculative_config` (the per-batch-size list is the current form; the dict form is what the first
# release of the feature took) and SGLang's flags per batch range, for the batch sizes that fit. For K2.5 on the
# H20s speculation pays at no planned batch size, so its configs say to serve without it; the Llama-3.1-8B sweep's
# pay, with fewer steps as the batch grows:

# %%
for name, p in (("K2.5 on 8 H20s", plan), ("Llama-3.1-8B on an H100 (the published sweep)", sweep)):
    print(f"== {name}")
    for engine, config in p.engine_config.items():  # one line per setting, as it goes into a launch script
        print(f"{engine}:")
        for key, value in config.items():
            print(f"  {key}: {json.dumps(value)}")

# %% [markdown]
# ## Four candidates for K2.5, planned
# A K2.5 team chooses between a warm start from the K2 drafter, its own drafter from scratch, a public MLA drafter
# and a DFlash block drafter (notebooks 00 and 06). Each one's acceptance, measured on the demo world's K2.5 as
# notebook 06 measures it (48 prompts, K = 1 to 4: the same figures), goes into the same plan of the seed's
# deployment (its baseline and verify as measured). The three EAGLE-3 drafters are priced with the same draft-step
# prior (an EAGLE-3 layer of K2.5's size; `drafter=` sizes it from a real drafter's own layer). The DFlash drafter
# goes through the plan's block path with its config (`block_drafter=`): a cycle of K drafts is the verify of K + 1
# tokens plus ONE block forward, sized from the config (its layers, and the target's lm_head it reads once), not K
# draft steps. Per batch size the first table gives each candidate's best k with drafts, its throughput interval and
# its verdict against serving without speculation, judged as the block at the top judges batch 1
# (`eaglekit.demo_verdicts`): under both readings of the verify, TOO CLOSE TO CALL where they disagree. The second
# table gives the best of all four (each EAGLE-3 candidate planned beside the DFlash one) and the engines' flags.
#
# **What the demo can and cannot tell about real block drafters.** The demo's DFlash forward is sized from its own
# tiny config (one layer, hidden 64: the launch floor, the bookkeeping and the target's lm_head read once), and its
# accept lengths come from a token language learnt from 6 samples. The published z-lab/Kimi-K2.5-DFlash has blocks
# of 8 and 6 layers, and its authors report accept length 5.3 on GSM8K and 3.7 on MT-Bench against 2.7 to 3.3 for
# the MLA EAGLE-3 drafters. What carries over is the pricing (one forward per cycle, the verify of K + 1 tokens),
# not who wins: plan the real drafters with their measured accept lengths and their own configs.

# %%
import os
from pathlib import Path

import pandas as pd


DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
world = eaglekit.build_trained_demo(Path(DEMO) / "trained")
PLAN_BATCHES = (1, 8, 32)
candidates = eaglekit.demo_candidates(world, progress=False)  # the same cached measurements as pages 00 and 06
dflash = candidates["DFlash"]
DFLASH_CONFIG = world.drafter("k25-dflash") / "config.json"
plans = {label: eaglekit.plan([measured, dflash], block_drafter=[DFLASH_CONFIG], costs=SEED_VERIFY,
                              measured=SEED_RUNS[:1], target=TARGET, gpu=GPU, tp=TP, context=CONTEXT,
                              batches=PLAN_BATCHES, max_steps=4)
         for label, measured in candidates.items() if label != "DFlash"}
print("DFlash block forward:", next(iter(plans.values())).block_fits[0].prior.source)
# each candidate's verdict per batch size, judged as the block at the top of the page judges batch 1 (both readings)
rows = [{"batch": batch, "candidate": v.candidate, "family": "DFlash" if v.block else "EAGLE-3",
         "accept length (K = 3)": candidates[v.candidate].interval_at(3).text(), "best k with drafts": v.steps,
         "accept length there": v.accept_length.text(2), "tok/s (95%)": v.tokens_per_s.text(1),
         "speedup (95%)": v.speedup.text(2), "verdict (both readings)": v.verdict}
        for batch in PLAN_BATCHES for v in eaglekit.demo_verdicts(world, batch=batch).candidates]
best_rows = []
for batch in PLAN_BATCHES:
    at = {label: next(b for b in p.fitting if b.batch == batch) for label, p in plans.items()}
    options = {label: b.best_eagle for label, b in at.items()}
    options["DFlash"] = next(iter(at.values())).best_block  # the same block cells in every plan
    winner = max(options, key=lambda label: options[label].tokens_per_s)
    plan_of = plans[winner] if winner in plans else next(iter(plans.values()))
    entry = next(e for e in plan_of.choices if int(e["batch"].split("-")[0]) <= batch <= int(e["batch"].split("-")[1]))
    drafter = f"drafters/{Path(candidates[winner].drafter).name}"  # its folder in the world
    best_rows.append({"batch": batch, "best": f"{winner}: {entry['label']}", "tok/s (95%)": options[winner].tps.text(1),
                      "verdict": at[winner].verdict if winner in at else eaglekit.verdict(options[winner].gain, 1.0),
                      "SGLang": (entry.get("sglang") or "serve without speculation").replace("<drafter>", drafter),
                      "vLLM": json.dumps(entry.get("vllm")).replace("<drafter>", drafter)})
display(pd.DataFrame(rows).set_index(["batch", "candidate"]))
pd.DataFrame(best_rows).set_index("batch")

# %% [markdown]
# ## The widget
# The plan's fitted cost model with batch-size and context sliders and its inputs (GPU figures, the fitted
# fixed cost, factors and per-token cost, the draft line and the per-cycle overhead). It recomputes in the
# browser, so it works here and in the rendered report alike, with or without a kernel; it shows the point
# values (the intervals are in the plan above), measured runs as measured, and says when a batch size does not
# fit in memory. While its inputs are the plan's, it also gives the plan's choice at each batch size and the
# plan's schedule, which weigh the intervals: where k = 1 edges ahead of k = 0 by less than the figures can
# tell, the plan keeps k = 0, and the widget says so.

# %%
eaglekit.PlanWidget(plan, batch=1)
