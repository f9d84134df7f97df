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
# # 07 · Target drift: how far did the target move, where the drafter looks?
#
# A drafter is trained on one target's hidden states and embeddings. When the target changes (K2 to
# K2.5, BF16 to FP8 or INT4, a fine-tune), acceptance drops and nobody sees it until serving. The
# targets are 1T-parameter MoE models of about 1 TB each, FP8 block-quantised (K2) or 4-bit
# pack-quantised (K2.5): nobody downloads both to look. `eaglekit.drift` reads both by byte range,
# dequantises row blocks on the fly, pairs tensors across wrappers (K2.5 nests the language model under
# `language_model.`) and reports, first, what the drafter sees:
#
# * the **embedding** (the drafter's frozen copy): how many token rows moved, and which;
# * the **lm_head rows of its draft vocabulary** (`i + d2t[i]`);
# * the **layers whose outputs feed it**, as SGLang and vLLM read its aux layer ids;
#
# then a per-layer map of the whole target (attention, shared experts, routed experts together).
# Two modes: **sampled** (random row blocks under a byte budget, a 95% interval on every figure) and
# **full** (every byte, on a Dask cluster whose workers read their byte ranges themselves).
#
# This notebook runs on the **demo world** (the one notebooks 00 and 06 measure): a small K2 target
# trained on a synthetic token language and K2.5, the same model trained further on a shifted language,
# both in the real targets' architecture (MLA attention; layer 0 dense, layers 1-3 with 4 routed
# experts and a shared one; hidden 64) and shipping layouts: K2 in FP8 with 128×128 block scales, K2.5 in
# compressed-tensors INT4 (group 32) under `language_model.`. The drafter is the world's K2 drafter,
# trained on K2's hidden states: its aux ids `[0, 1, 2]` point at the outputs of layers 0, 1 and 2, and
# its draft vocabulary is K2's 48 most common tokens. The hidden-state dumps are both targets' own, on
# the same K2.5 prompts (`eaglekit dump-hidden`).

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
TARGET_A = None  # None: the demo's K2 (FP8); else any location (hf://, https://, ssh://, a folder)
TARGET_B = None  # None: the demo's K2.5 (INT4)
DRAFTER = None  # None: the demo's K2 drafter; its d2t and aux layer ids pick what is shown first
DUMPS = None  # None: the demo's two hidden-state dumps; else (dump of A, dump of B) of the same prompts
BUDGET = "128KB"  # sampled mode: bytes to read (the demo pair is about 0.5 MB; a real 1 TB pair: a few GB)
WORKERS = 2  # Dask workers for the full pass (threads in this kernel)

# %%
import eaglekit
from eaglekit import drafter_view, drift_map

world = eaglekit.build_demo(DEMO).trained
a = TARGET_A or world.target_weights("k2")
b = TARGET_B or world.target_weights("k25")
drafter = DRAFTER or world.drafter("k2")
dumps = DUMPS or (world.hidden_dump("k2"), world.hidden_dump("k25"))

# %% [markdown]
# ## 1. Sampled: a few blocks of every layer, an interval on every figure
# Every stratum of the map (a layer's attention, its routed experts, ...) gets at least 10 random row
# blocks (on targets as small as the demo's, those minimums alone read more than this page's budget);
# the rest of the budget goes where the bytes are. Figures are ratio estimates with delta-method
# (jackknife) intervals, so a laptop can map two 1 TB targets by reading a few GB.

# %%
sampled = eaglekit.drift(a, b, drafter=drafter, full=False, budget=BUDGET, hidden=dumps)
drafter_view(sampled)

# %% [markdown]
# ## 2. Full: every byte, on a Dask cluster
# Each task names the two locations and its row blocks; the worker opens them and reads its ranges
# itself, so no weight bytes pass through the scheduler. Here the cluster lives in this kernel (threads);
# `eaglekit drift A B --full --scheduler tcp://HOST:8786` uses a real one, and a task lost with its worker
# is re-run elsewhere.
#
# **Watching it run.** A Dask cluster serves a live dashboard (task stream, progress, workers' memory)
# while it runs. In a running kernel, `client.dashboard_link` is its address: open it in a browser on
# the same machine (the dashboard's pages need the `bokeh` package). This page shows no link: the
# cluster stopped when the cell finished.

# %%
from distributed import Client, LocalCluster

cluster = LocalCluster(n_workers=1, threads_per_worker=WORKERS, processes=False, dashboard_address=":0")
client = Client(cluster)
full = eaglekit.drift(a, b, drafter=drafter, full=True, scheduler=client, hidden=dumps)
client.close()
cluster.close()
full

# %% [markdown]
# ## 3. Did the sample tell the truth?
# Each sampled interval against the full pass's value, for the drafter's figures and its deepest aux layer. A 95%
# interval misses about one time in twenty; the test suite checks the rate over 200 seeded samples.
# Strata with few blocks (the norms, the router) are read whole: their figures are exact.

# %%
import pandas as pd

deepest = max(f.layer for f in full.feeds)  # the deepest layer whose output feeds the drafter
names = ["embedding", "lm_head (draft rows)", "lm_head"] + [f.name for f in full.strata if f.layer == deepest]
rows = []
for name in ["whole target", *names]:
    s, f = sampled.figure(name), full.figure(name)
    rows.append({"figure": name, "full pass": round(f.cosine.value, 5),
                 "sampled": f"{s.cosine.value:.5f} [{s.cosine.low:.5f}, {s.cosine.high:.5f}]",
                 "covered": s.cosine.low <= f.cosine.value <= s.cosine.high, "units read": f"{s.units}/{s.units_total}"})
print(f"sampled read {sum(sampled.bytes_read) / sum(full.bytes_read):.0%} of the full pass's bytes")
pd.DataFrame(rows)

# %% [markdown]
# ## 4. The map: where the target moved
# Relative change ‖b−a‖/‖a‖ per layer and component; dotted lines mark the layers whose outputs feed the
# drafter. Part of every figure here is quantisation itself: INT4 with group 32 against FP8 blocks
# moves each weight by several percent even where the BF16 weights did not change (the norms and the
# router, kept in BF16, show the underlying drift alone). Here K2.5 was trained on from K2 with a
# learning rate that moves every weight, so nearly every row moved (the router's gate rows partly
# kept); the routed experts moved most. "Not compared": the vision tower only K2.5 has.

# %%
drift_map(full)

# %% [markdown]
# ## 5. Hidden states: similar enough?
# Weights are one side; the drafter reads hidden states. Two dumps of the same prompts (`eaglekit
# dump-hidden` on each target) give, per aux layer, the mean cosine of the two targets' states on the
# positions where both saw the same tokens, and linear CKA, which forgives a rotation of the basis:
# a cosine far below the CKA says the information is still there in a turned basis, which fine-tuning
# the drafter's `fc` may follow; a low CKA says it is gone. In the demo both fall with depth: the
# deeper the layer, the more of what the drafter learned to read has gone (notebook 06 measures what
# that costs in accept length: K2's drafter on K2.5).

# %%
full.hidden

# %%
print(full.summary)
