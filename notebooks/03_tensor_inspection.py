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
# # 03 · Tensor inspection: every tensor from its header alone
#
# A safetensors file starts with a JSON header that names every tensor, its dtype, shape and byte
# offsets. eaglekit reads only that header (a few KiB), wherever the file lives: a local folder, a
# sharded checkpoint, a Hub repo, any HTTP server, or a host over SSH. The original investigation
# downloaded a 2.22 GB file and loaded every tensor twice just to print shapes.
#
# This notebook reads the **synthetic demo workspace**: its real-shape random drafters (the Kimi-K2
# EAGLE-3 layout scaled 1/16, random weights) where shapes and files are the point, and its trained
# demo world for the checks of a drafter against its target. Point the parameters at real locations to
# inspect real drafters.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
ENDPOINT = None  # a Hub endpoint; None serves the demo's Hub-compatible server on 127.0.0.1

# %%
import eaglekit
from eaglekit import HubServer

ws = eaglekit.build_demo(DEMO)
hub = None if ENDPOINT else HubServer(ws.hub_root).start()
endpoint = ENDPOINT or hub.endpoint
ws

# %% [markdown]
# ## A local drafter
# The K2 drafter's stand-in: note there is no `embed_tokens.weight` (frozen, taken from the target at
# load time) and the vocabulary map `d2t` (int64, draft vocab) / `t2d` (bool, full vocab).

# %%
k2 = eaglekit.read_inventory(ws.drafter("k2"))
k2

# %% [markdown]
# ## The same drafter through the Hub, and a sharded repo
# The Hub path runs huggingface_hub's own client against the demo server. The request log shows
# what crossed the wire: the config, then one ranged read of each safetensors file's first 64 KiB (the
# header, a few KiB, and a read-ahead, so a header that fits needs no second request: the summary's
# "headers read" counts the header bytes, the log the bytes sent), and for the sharded repo, after the
# 404 of a single `model.safetensors`, its index. No listing, and no weight bytes past those 64 KiB.

# %%
hub_k2 = eaglekit.read_inventory("hf://demo-aqmed/Kimi-K2-Instruct-eagle3", endpoint=endpoint)
sharded = eaglekit.read_inventory("hf://demo-aqmed/Kimi-K2-Instruct-eagle3-sharded", endpoint=endpoint)
print("same tensor list as the local read:", hub_k2.to_json()["tensors"] == k2.to_json()["tensors"])
sharded

# %%
if hub is not None:
    import dataclasses

    import pandas as pd

    log = pd.DataFrame(map(dataclasses.asdict, hub.log))[["method", "path", "range", "status", "bytes_sent"]]
    display(log)
    print(f"{len(log)} requests, {log.bytes_sent.sum():,} bytes for two drafters of "
          f"{hub_k2.total_bytes + sharded.total_bytes:,} bytes")

# %% [markdown]
# ## Any HTTP server that honours byte ranges
# The demo server also serves its folder as plain files, like a generic web server.

# %%
if hub is not None:
    path = "files/demo-team/Kimi-K2.5-eagle3-finetuned/model.safetensors"
    plain = eaglekit.read_inventory(f"{hub.endpoint}/{path}")
    # the server's address dies with this kernel: show the path it served, not its URL
    print(f"/{path} over plain HTTP: {plain.summary().removeprefix(plain.source + ': ')}")

# %% [markdown]
# ## Five drafters side by side
# Names are normalised across layouts (`midlayer.*` in SpecForge, `layers.0.*` in speculators).
# The last column says whether every drafter holds the tensor with the same dtype and shape: the small
# Llama drafter differs everywhere, and only the K2.5-from-scratch drafter saved `embed_tokens.weight`.

# %%
inventories = {name: eaglekit.read_inventory(ws.drafter(name))
               for name in ["k2", "k2-speculators", "k25-finetuned", "k25-scratch", "llama-small"]}
eaglekit.compare_inventories(inventories)

# %% [markdown]
# ## Compatibility verdicts
# Shapes are not enough: the verdict also reads `d2t`/`t2d` by value (a few hundred KiB, by byte range,
# also remotely), interprets the aux hidden-state layer ids for the target's 61 layers, and checks the
# target's hidden size and vocabulary.
#
# **K2 → K2.5 fine-tuned**: every trainable tensor matches, but the fine-tune regenerated its draft
# vocabulary, so lm_head row *i* means a different token in each file: `compatible-after-remap`.

# %%
eaglekit.compat(ws.drafter("k2"), ws.drafter("k25-finetuned"), target=str(ws.target("kimi-k25")))

# %% [markdown]
# **K2 vs its speculators twin**: different tensor names (`layers.0.*`) and config format, same drafter:
# `compatible`.

# %%
eaglekit.compat(ws.drafter("k2"), ws.drafter("k2-speculators"), target=str(ws.target("kimi-k2")))

# %% [markdown]
# **K2 vs a drafter for another target** (hidden 256): `incompatible`, the target misfit listed first.
# The same check runs remotely: both drafters through the Hub.

# %%
eaglekit.compat("hf://demo-aqmed/Kimi-K2-Instruct-eagle3", "hf://demo-lab/Llama-small-EAGLE3",
                target="hf://demo-moonshot/Kimi-K2-Instruct", endpoint=endpoint)

# %% [markdown]
# ## Before serving: one drafter against its target
# `eaglekit.check` finds the faults that no engine reports before serving badly. Here on the **demo
# world** (notebooks 00, 06, 07): its trained K2 drafter against its K2 target, which it fits. The world
# holds one broken copy of that drafter per fault; each is caught (NOT READY). The healthy drafters
# pass every check but one question their configs cannot settle: which layers their aux ids meant in
# training, so the verdict per engine release is UNSURE until a measurement settles it (notebook 06,
# section 7 of notebook 00, docs/aux-layers.md).

# %%
import pandas as pd

world = ws.trained
rows = []
for name, what in world.manifest["broken"].items():
    r = eaglekit.check(world.broken(name), target=world.target("k2"))
    rows.append({"drafter": name, "planted fault": what, "verdict": r.verdict_line,
                 "found": " ".join(f"{f.check}: {f.message}" for f in r.errors)})
for name, target in [("k2", "k2"), ("k25-scratch", "k25"), ("k25-warm", "k25")]:
    r = eaglekit.check(world.drafter(name), target=world.target(target))
    rows.append({"drafter": name, "planted fault": "-", "verdict": r.verdict_line, "found": ""})
pd.DataFrame(rows).style.hide(axis="index").set_properties(**{"white-space": "normal", "text-align": "left"})

# %% [markdown]
# One report in full: an `embed_tokens.weight` that is not the target's, compared by value on sampled
# rows read by byte range (`full=True` compares every row). The aux table says what each engine feeds.

# %%
eaglekit.check(world.broken("foreign-embed"), target=world.target("k2"))

# %% [markdown]
# Through the Hub it reads the same few bytes: headers, config, the maps.

# %%
eaglekit.check("hf://demo-mini/Kimi-K2-mini-eagle3", target="hf://demo-mini/Kimi-K2-mini", endpoint=endpoint,
               engine="vllm")

# %%
if hub is not None:
    hub.stop()
