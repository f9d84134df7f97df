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
# # 11 · Long context: does the drafter still pay on long traces?
# The answer first: each EAGLE-3 K2.5 candidate judged at batch 1 on the seed's deployment (8 H20s, assumed) at
# each context length, with the accept length measured **at that context** on the demo's long traces.

# %%
import os

import eaglekit

by_context = eaglekit.demo_context_verdicts(os.path.join(os.environ.get("EAGLEKIT_DEMO", "../build/demo"), "trained"))
by_context  # context 47 holds pages 06 and 08's chat-length requests; the others the long traces' cycles

# %% [markdown]
# ## The question
#
# Pages 00 to 10 judge the candidates on chat-length requests. Two things teams find out only in production:
#
# - **Acceptance falls with context.** Published for the Kimi family: a K3 DFlash drafter at 6.49 on GSM8K but
#   3.56 at 16k tokens of context, slower than no speculation there (SGLang issue 35784); a K3 DSpark drafter at
#   131k input tokens falls to accept length 1.0, decode 28-41% slower (tokenspeed issue 1132). Drafters are trained
#   on short samples (TorchSpec's Kimi drafters at a training-time-test length of 4 on chat turns) and then read at
#   positions they never saw; a YaRN-scaled drafter claims a range its training never covered.
# - **The verify's cost grows with context** (attention over the KV cache, MLA's latent reads), so the best k at
#   batch 8 and 2k tokens is not the best at 64k, and a schedule by batch size alone (vLLM's RFC 48627 asks for
#   one by context too) cannot say so.
#
# **On the demo** the targets and drafters claim 8,192 positions (`max_position_embeddings`) and were trained on
# 48-token samples, as real drafters claim their target's range after short training samples.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
PLANNED = "public MLA drafter"  # the candidate planned by (batch, context) below
BATCHES = (1, 4, 16, 64)

# %%
import json

import eaglekit

world = eaglekit.build_trained_demo(os.path.join(DEMO, "trained"))

# %% [markdown]
# ## Long traces, bounded compute
# A long context does not need a long generation: cycles start only inside a continuation, so a prompt of 4,096
# tokens continued for 37 costs one prefill and 37 decode steps, and its cycles all start between positions 4,097
# and 4,133. The demo's long traces are the measured pages' chat-length prompts, then held-out prompts of the K2.5
# language at each of these lengths, each continued for the same 37 tokens; every cycle is kept with the position
# it starts at and pooled in one bucket per prompt length (`AcceptanceResult.by_position`: accept length with a
# bootstrap interval over the bucket's requests, per-step acceptance over its cycle starts). Your own traces: any
# prompts file, `eaglekit acceptance DRAFTER --target T --prompts long.jsonl --by-position 0,2048,16384,65536`,
# or a training pipeline's dump of long samples (`--hidden-states`).

# %%
profiles = eaglekit.demo_long_profiles(world)  # 48 chat-length prompts, then 8 at each of 256 ... 4,096 tokens
profiles["warm start"]

# %% [markdown]
# Every candidate falls past the 48 positions it was trained on; the public MLA drafter, trained on many more
# samples, falls least and latest. The dotted lines are the drafters' own range: the trained length (48, the
# demo's training samples) and the 8,192 positions their configs claim.

# %%
eaglekit.accept_length_by_position(profiles)

# %% [markdown]
# ## The plan by batch size and context length
# One candidate planned at each (batch, context) cell on the seed's deployment: the verify and draft costs from the
# cost model at that context (the verify's KV read grows with it, and the KV cache decides which batch sizes fit),
# the accept length at each k from the bucket holding the context, each cell with its interval and its verdict
# (TOO CLOSE TO CALL where a reading of the verify or an end of the accept length's interval gives another one).
# From the command line, `eaglekit acceptance ... --by-position 0,256,512,1024,2048,4096,4160 --json > r.json`, then
# `eaglekit plan --acceptance r.json --costs COSTS.csv --measured RUNS.csv --target kimi-k25-int4 --gpu H20 --tp 8
# --batch 1,4,16,64 --max-steps 4 --contexts 47,256,512,1024,2048,4096` with the seed's verify and decode, gives
# this grid cell for cell (tested).

# %%
grid = eaglekit.demo_context_plan(world, PLANNED, batches=BATCHES)
grid

# %% [markdown]
# ## Schedules engines read
# Each is written from the grid above (the best k per cell; 0 where speculation does not pay or the batch does not
# fit) and checked in the tests against the engine's own parser (`docs/serving-plan.md` names the code):
# vLLM's `num_speculative_tokens_per_batch_size` (rows of batch range, context range, k).

# %%
print(json.dumps(grid.schedule("vllm")))

# %% [markdown]
# TensorRT-LLM's `draft_len_schedule` (last batch size of a range -> draft length) and SGLang's flags per batch
# range take no context axis: each is written for one context, the one you serve. At 47 tokens of context:

# %%
print(json.dumps(grid.schedule("trtllm", context=47)))

# %% [markdown]
# At 4,096 the grid drafts nothing at batch 1 (TensorRT-LLM's schedule must start with a draft length above 0, so
# it is refused there); SGLang's flags then serve that range without speculation:

# %%
print(json.dumps(grid.schedule("sglang", context=4096)))

# %% [markdown]
# The per-position acceptance profile at a context in both conventions (conditional: P(step j accepted | steps
# 1..j-1 accepted), as EAGLE and the trainers report it; marginal: P(steps 1..j all accepted), vLLM's per-position
# rate), and `vllm bench`'s synthetic acceptance rates (marginal), to benchmark the engine at the acceptance
# measured there. At 1,024 tokens:

# %%
print(json.dumps(grid.schedule("profile", context=1024)))
print(json.dumps(grid.schedule("vllm-bench", context=1024)))
