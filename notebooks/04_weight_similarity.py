# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Weight similarity: how far did a fine-tune move, and what did a scratch drafter learn?
#
# Shapes say the Kimi-K2 drafter fits Kimi-K2.5. They cannot say how far a fine-tune has moved, which
# parts of the network changed, or whether a team's own drafter learned anything like the public one.
# `eaglekit.similarity` answers that in one streamed pass over the two checkpoints: for every tensor
# it reports the cosine, the relative difference ‖a−b‖/‖a‖ and the norm ratio ‖b‖/‖a‖, for the whole
# tensor and for each block of a grid (at most 64 × 64 blocks). Only the compared tensors' bytes are
# read, by range, wherever the drafters live; memory stays at tens of MiB whatever the size.
#
# Three alignments make the numbers mean something:
# * `lm_head` rows are paired **by target token** (`i + d2t[i]`), over the tokens both draft
#   vocabularies share: a fine-tune regenerates `d2t`, so row *i* may predict another token;
# * `fc.weight` is split into its three column blocks, one per auxiliary hidden state (low, mid, high
#   target layer), and q/k/v into the halves that read the token embedding and the hidden state;
# * `d2t` and `t2d` are integer/bool buffers: they are compared by equality, not by cosine.
#
# This notebook runs on the **synthetic demo workspace** (random weights in the real Kimi-K2 EAGLE-3
# layout, scaled 1/16). The demo's fine-tune has a known drift built in, so we can check that the
# figures show it.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")

# %%
import eaglekit
from eaglekit import heatmap, overview

ws = eaglekit.build_demo(DEMO)
ws

# %% [markdown]
# ## K2 against the K2.5 fine-tune
# The summary table is what a terminal prints too (`eaglekit similarity A B`). Green rows are nearly
# the same weights (cosine ≥ 0.9), yellow related, red unrelated.

# %%
ft = eaglekit.similarity(ws.drafter("k2"), ws.drafter("k25-finetuned"))
ft

# %% [markdown]
# **Reading it.** Every tensor stays close to K2 (cosine above 0.85): this is K2, moved. The moves are
# not uniform. Of `fc.weight`'s three blocks, the one reading the *high* auxiliary layer (58) moved most
# (‖a−b‖/‖a‖ ≈ 0.6), the *low* layer's block least (≈ 0.1): the fine-tune re-learned how to read the
# deep hidden states of the new target. In q/k/v the embedding half barely moved (≈ 0.05) while the
# hidden-state half moved about eight times more (≈ 0.4). `lm_head` compares only the 1,800 tokens both
# vocabularies share; `d2t` differs almost everywhere, because the 200 new tokens shift every offset.
#
# The overview puts every tensor on one row. Left: the whole-tensor measure. Right: the same measure
# along the tensor's output rows, first row on the left. Here we plot the relative difference, where
# 0 means unchanged.

# %%
overview(ft, measure="rel_diff")

# %% [markdown]
# **Reading it.** The q/k/v *hidden* rows and the fc *high* row are the darkest bands. The three MLP
# rows darken from left to right: the fine-tune moved later output rows more (from about 0.05 to
# 0.5), in the gate, up and down projections alike. The norms hardly moved.
#
# One tensor's block grid: the up projection. Hover a block for its row and column ranges and all
# three measures.

# %%
heatmap(ft, "midlayer.mlp.up_proj.weight", measure="rel_diff")

# %% [markdown]
# **Reading it.** Each block row is a band of 18 intermediate units; the drift grows steadily from
# about 0.05 at the top to about 0.5 at the bottom, the same in every column block.
#
# The same tensor in cosine, on the diverging scale (blue agrees, white unrelated, red opposed): the
# top stays deep blue, the bottom fades. Cosine and relative difference tell one story:
# for two equal-norm tensors, cos ≈ 1 − rel²/2.

# %%
heatmap(ft, "midlayer.mlp.up_proj.weight")

# %% [markdown]
# And `fc.weight`'s high block next to its low block (columns 896–1343 and 0–447 of the same matrix),
# on one colour range, 0 to 0.8.

# %%
heatmap(ft, "fc.weight[high: aux layer 58]", measure="rel_diff", zmax=0.8)

# %%
heatmap(ft, "fc.weight[low: aux layer 2]", measure="rel_diff", zmax=0.8)

# %% [markdown]
# **Reading it.** The high block sits around 0.6 everywhere, the low block around 0.1. The change is
# spread over the whole block, not a few rows or columns: the fine-tune re-learned how the drafter
# reads the target's deepest auxiliary layer.

# %% [markdown]
# ## K2 against the K2.5 drafter trained from scratch
# The team's own drafter: same layout, its own training run.

# %%
scratch = eaglekit.similarity(ws.drafter("k2"), ws.drafter("k25-scratch"))
scratch

# %% [markdown]
# **Reading it.** Every weight matrix has cosine ≈ 0 and ‖a−b‖/‖a‖ ≈ √2, exactly what two
# independent random initialisations of the same scale give: nothing the two runs learned lines up.
# Only the norm weights agree (≈ 1.0), because RMSNorm weights start at 1 in every run. The scratch
# drafter also saved `embed_tokens.weight` (listed "only in B"), and its draft vocabulary shares
# 1,500 tokens with K2's.
#
# The block grid shows why there is no hidden agreement either: blocks scatter around zero, both
# signs, with no region that matches. (Independent training can also permute hidden units, which a
# cosine cannot see through; a unit-matching analysis would be needed to tell "unrelated" from
# "the same features in another order".)

# %%
heatmap(scratch, "fc.weight[high: aux layer 58]")

# %%
overview(scratch)

# %% [markdown]
# ## What this says for initialising a K2.5 drafter
# Starting from K2 keeps most of what it learned: after fine-tuning, the embedding-facing weights and
# the low-layer block of `fc` barely moved, and the change concentrates where the target's deep hidden
# states enter. A drafter trained from scratch shares nothing with K2 at the weight level. When
# reusing `lm_head`, pair rows by token: the `d2t` maps differ, so row *i* of one drafter is not row
# *i* of the other.
