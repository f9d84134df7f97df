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
# # 02 · Config diff: every difference classified by what it changes
#
# Two config.json files side by side. Each difference is `shape` (changes a tensor's shape),
# `behaviour` (same shapes, different runtime behaviour) or `metadata` (labels, versions), with a
# one-line reason. Equal values spelled differently across formats (SpecForge vs speculators) are not
# differences. Runs on the **synthetic demo workspace**.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")

# %%
import eaglekit
from eaglekit import load_config

ws = eaglekit.build_demo(DEMO)
k2, k25_ft, k2_spec = (load_config(ws.drafter(n)) for n in ("k2", "k25-finetuned", "k2-speculators"))

# %% [markdown]
# ## The K2 drafter vs the K2.5 fine-tune
# The team's comparison found only `max_position_embeddings` (131072 vs 262144): a behaviour
# difference, no shape changes.

# %%
eaglekit.diff_configs(k2, k25_ft, a_name="k2", b_name="k25-finetuned")

# %% [markdown]
# ## Same drafter, two formats
# The speculators config nests the decoder layer in `transformer_layer_config` and keeps the aux
# layer ids at the top level. Normalised, nothing that matters differs.

# %%
eaglekit.diff_configs(k2, k2_spec, a_name="k2 (SpecForge)", b_name="k2 (speculators)")

# %% [markdown]
# Both normalise into the same record:

# %%
eaglekit.normalize_config(k2_spec, source="k2-speculators/config.json")

# %% [markdown]
# ## The targets: Kimi-K2 vs Kimi-K2.5
# K2.5 wraps a `kimi_k2` text config and ships 4-bit pack-quantised weights; the text model's layer
# count, hidden size and vocabulary are unchanged, so a K2 drafter fits K2.5 in shape. The target's
# `quantization_config` changes how the target stores its own weights, not any drafter tensor: it is
# a behaviour difference (the hidden states the drafter reads shift slightly), not a shape one.

# %%
eaglekit.diff_configs(load_config(ws.target("kimi-k2")), load_config(ws.target("kimi-k25")),
                      a_name="kimi-k2", b_name="kimi-k25")

# %% [markdown]
# ## Aux hidden-state layer ids, engine by engine and release by release
# What an id selects depends on the engine that reads it, on its release and on the target's model
# code, not on the config format. The K2 drafter serves Kimi-K2, which runs on SGLang's DeepSeek model
# code, where PR #25454 (May 2026) adds the one only when the first id is 1: releases since then read
# `[2, 30, 58]` as the outputs of `[1, 29, 57]`. SpecForge's own SGLang capture backend follows whichever
# SGLang it runs, so the config alone does not say what the drafter was trained on: the view shows both
# meanings as AMBIGUOUS, with the ids to write for each, as pages 00 and 03 do (docs/aux-layers.md has the
# table of releases).

# %%
K2_ARCHITECTURE = load_config(ws.target("kimi-k2"))["architectures"][0]  # the target's model code
eaglekit.normalize_config(k2).aux_view(61, architecture=K2_ARCHITECTURE)

# %% [markdown]
# Were the same ids in a drafter for a Llama-style target, every SGLang release would read id *i* as the
# output of layer *i* (as SpecForge's Hugging Face backend trains it) and vLLM as the input of layer *i*, one
# layer earlier: SGLang would be fed what training used, vLLM the outputs of `[1, 29, 57]` (write
# `[3, 31, 59]` for vLLM; `eaglekit export --engine vllm` does). That reading holds only for such a target;
# without the target's architecture the view says which code it assumed.

# %%
eaglekit.normalize_config(k2).aux_view(61, architecture="LlamaForCausalLM")

# %% [markdown]
# The speculators twin copied the SpecForge ids unchanged; its trainer is guessed from its format
# (speculators trains on layer inputs), so the view says what vLLM and SGLang feed under that guess.
# When you know who trained it, say so:

# %%
eaglekit.normalize_config(k2_spec).aux_view(61, trained_by="specforge")

# %% [markdown]
# ## Ready to serve? One drafter against its target
# `eaglekit check` runs the pre-serving checks from headers: lm_head, embed_tokens, the vocabulary map,
# fc width, aux ids per engine release, target fit, architecture, dtype, rope. Every finding has a fix.
# Its first line gives one verdict per engine release, each named with the releases it means: here
# UNSURE for both SGLang readings, because the aux ids are ambiguous (settle it with `eaglekit
# acceptance --aux-convention outputs` and `inputs`, or ask the publisher).

# %%
eaglekit.check(ws.drafter("k2"), target=ws.target("kimi-k2").parent, engine="sglang")
