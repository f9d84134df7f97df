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
# # 08 · Serving plan: what a verify really costs, and the best draft steps per batch size
#
# The seed's arithmetic charged 30 ms for a verify whatever it verified, so "150 tok/s takes k = 5".
# On a mixture-of-experts target the verify grows with k: a decode step of Kimi-K2.5 reads 8 of 384
# routed experts per layer, a verify of k + 1 tokens reads every expert any of them routes to, about
# 384 (1 - (1 - 8/384)^(k+1)) under uniform routing. Batches change it again: at high concurrency a
# decode step already reads most experts, extra tokens cost compute, and speculation stops paying at
# some batch size. Engines take a schedule for that (vLLM's `num_speculative_tokens_per_batch_size`).
#
# `eaglekit.plan` joins a drafter's per-step acceptance to a cost model of the target's forward: fitted to
# measured forwards, or estimated from the target's config (and checkpoint header) and a GPU table,
# calibrated by one or two measured points. The model and its assumptions: `docs/serving-plan.md`.

# %% tags=["parameters"]
TARGET = "kimi-k25-int4"  # a config.json, a checkpoint location, or a published config's short name
SEED_COSTS = [(1, 1, 12.2), (1, 3, 30.0)]  # (batch, tokens per request, ms): the seed's decode and k = 2 verify
SEED_DRAFT = {1: 5 / 3}  # ms per draft step at batch 1: 60 tok/s at accept length 2.0 is a 33.3 ms cycle
SEED_PER_STEP = (0.618034, 0.618034)  # accept length 2.0 at k = 2 (1 + c + c^2)
PER_STEP = (0.8, 0.72, 0.66, 0.6, 0.55)  # an illustrative EAGLE-3 profile: accept length 3.1 at k = 5
GPU, TP, CONTEXT = "H20", 8, 2048
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
DRAFT_COSTS = {1: 0.4, 256: 1.2}  # ms per draft step at two batch sizes (a straight line between)

# %%
import json

import eaglekit

# %% [markdown]
# ## The seed, calibrated
# The seed's two measurements at batch 1 (12.2 ms decode, 30 ms verify of 2 drafts) calibrate K2.5's cost
# model; with the draft step the 60 tok/s implies, it gives back 82 tok/s without speculation and 60 tok/s
# at k = 2. The verify it predicts for every other k comes with the distinct experts behind it, and the
# ratio the config alone predicts stands beside the measured 2.46x.

# %%
seed = eaglekit.plan(SEED_PER_STEP, costs=SEED_COSTS, draft_costs=SEED_DRAFT, target=TARGET, tp=TP, context=CONTEXT,
                     batches=(1,))
seed

# %% [markdown]
# The same two measurements against Kimi-K2's FP8 layout (every linear layer in FP8, so routed experts
# weigh twice what K2.5's INT4 ones do and a verify's extra experts cost more bytes):

# %%
for name in ("kimi-k25-int4", "kimi-k2-fp8"):
    b, n, estimated, measured = eaglekit.plan(SEED_PER_STEP, costs=SEED_COSTS, target=name, tp=TP, context=CONTEXT,
                                              batches=(1,)).uncalibrated_ratio()
    print(f"{name}: from the config alone a {n}-token verify costs {estimated:.2f}x a decode step; "
          f"measured {measured:.2f}x")

# %% [markdown]
# ## The account, with a verify that grows with k
# The throughput account of notebooks 00 and 05 prices the seed's targets again on these cost models:

# %%
for g in eaglekit.Account.seed().growing:
    print(g.sentence(), end="\n\n")

# %% [markdown]
# ## The plan across batch sizes
# An estimate on 8 H20s at 2048 tokens of context, calibrated by the 12.2 ms decode step alone (what the
# roofline leaves out becomes a fixed cost per forward), with a drafter whose per-step acceptance decays
# as EAGLE-3 drafters' usually do. `*` marks figures from the model, `^` acceptance past the measured steps.
# This is a what-if for a deployment whose verify costs what the hardware says: the seed's measured 30 ms
# verify (2.46x its decode step, where the config alone predicts about 1.06x) is left out here. Calibrated
# by both of the seed's points (`calibrate_points=SEED_COSTS`), the plan prices every verify as the seed
# measured it; the line printed under the plan below says what that leaves at batch 1.

# %%
plan = eaglekit.plan(PER_STEP, target=TARGET, gpu=GPU, tp=TP, context=CONTEXT, calibrate_points=SEED_COSTS[:1],
                     batches=BATCHES, draft_costs=DRAFT_COSTS)
measured_verify = eaglekit.plan(PER_STEP, target=TARGET, gpu=GPU, tp=TP, context=CONTEXT, calibrate_points=SEED_COSTS,
                                batches=(1,), draft_costs=DRAFT_COSTS)
print("with the seed's measured verify as well:", measured_verify.headline())
plan

# %%
eaglekit.plan_throughput_figure(plan)

# %%
eaglekit.plan_steps_figure(plan)

# %% [markdown]
# ## The engines' configs
# vLLM's `speculative_config` (the per-batch-size list is the current form; the dict form is what the
# first release of the feature took) and SGLang's flags per batch range:

# %%
for engine, config in plan.engine_config.items():  # one line per setting, as it goes into a launch script
    print(f"{engine}:")
    for key, value in config.items():
        print(f"  {key}: {json.dumps(value)}")

# %% [markdown]
# ## The widget
# The plan's cost model with batch-size and context sliders and its inputs (GPU figures, the calibrated
# fixed cost and factors, the draft line). It recomputes in the browser, so it works here and in the
# rendered report alike, with or without a kernel.

# %%
eaglekit.PlanWidget(plan, batch=1)
