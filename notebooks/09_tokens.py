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
# # 09 · Tokens: tokenizer, chat template and draft vocabulary between target versions
#
# Weights and hidden states are two ways a drafter stops fitting a new target version. The third is
# invisible in shapes: the **token level**. A new version may rename special tokens, or ship a chat
# template with a new assistant prefix and a thinking block; the drafter then meets a token stream it
# was never trained on (a public report: accept length 3.93 on raw completion, 1.94 with the chat
# template, same drafter). And the draft vocabulary (d2t: the N target tokens the drafter can propose)
# was chosen from the old version's traffic: on the new traffic it may miss the tokens that matter.
#
# The story on the **demo world** (notebooks 00, 06, 07): "K2.5-think" is the K2.5 target continued
# on chats whose new template ends the user's turn with `<|im_end|>` and opens `<|assistant|> <think>`;
# the thinking block is written in tokens of its own. The drafters were trained on the old stream.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
TRAINED = None  # None: the trained world inside DEMO (trained on first use, then cached)
STEPS = 4  # draft steps K per cycle
MAX_NEW_TOKENS = 24
DRAFTER = "k25-warm"  # the warm start of notebook 06: K2's drafter fine-tuned on a few raw K2.5 samples
TORCH_THREADS = 1  # the demo's models are tiny: one thread is fastest (None: torch's default)

# %%
import tempfile
from pathlib import Path

import plotly.graph_objects as go
import torch

import eaglekit

if TORCH_THREADS:
    torch.set_num_threads(TORCH_THREADS)
world = eaglekit.build_trained_demo(TRAINED or Path(DEMO) / "trained")
tokens = eaglekit.build_token_demo(world)
k25, think = eaglekit.load_target_model(world.target("k25")), eaglekit.load_target_model(tokens.target("k25-think"))
tokens

# %% [markdown]
# ## 1. The tokenizers, compared from their files
# `eaglekit tokenizer-diff A B` in the terminal (exit 4: they differ). Only the tokenizer files are read
# (small GETs for remote targets); code a tokenizer names in `auto_map` is never run.

# %%
diff = eaglekit.tokenizer_diff(world.target("k25"), tokens.target("k25-think"))
diff

# %% [markdown]
# Four ids now hold special tokens, eos and pad are set, and the template adds the end-of-turn token
# and the generation prompt. The vocabulary size is unchanged: shapes, d2t and t2d all still "fit".

# %% [markdown]
# ## 2. Accept length under the old and the new template
# `eaglekit acceptance DRAFTER --target T --prompts chats.jsonl --compare-templates OLD NEW`: the same
# chats rendered both ways (in transformers' sandboxed environment, in a child process with time and
# memory limits), the accept length of each, and where the gap comes from.

# %%
cmp = eaglekit.compare_templates(world.drafter(DRAFTER), target=think, prompts=tokens.prompts(),
                                 a=tokens.template("k25"), b=tokens.template("k25-think"),
                                 steps=STEPS, max_new_tokens=MAX_NEW_TOKENS, progress=False)
cmp

# %%
positions = list(range(len(cmp.by_position)))
fig = go.Figure([go.Scatter(x=positions, y=[a for a, _ in cmp.by_position], name="old template"),
                 go.Scatter(x=positions, y=[b for _, b in cmp.by_position], name="new template (thinking)")])
fig.update_layout(title="drafts matched from each output position", xaxis_title="output position",
                  yaxis_title=f"drafts matched (of {STEPS})", height=320)
fig

# %% [markdown]
# ## 3. The draft vocabulary on the new traffic
# `eaglekit vocab-coverage DRAFTER --target T --prompts chats.jsonl --chat-template NEW --out map.safetensors`:
# the share of the target's output tokens the draft vocabulary contains caps per-step acceptance.

# %%
cov = eaglekit.vocab_coverage(world.drafter(DRAFTER), target=think, prompts=tokens.prompts(),
                              chat_template=tokens.template("k25-think"), max_new_tokens=MAX_NEW_TOKENS,
                              steps=STEPS, progress=False)
cov

# %% [markdown]
# A map built the trainer's way (the N most frequent tokens) from the **old** traffic, against the one
# built from the **new** traffic, both measured on the new traffic:

# %%
old_traffic = eaglekit.traffic_tokens(target=k25, prompts=world.prompts("k25"), max_new_tokens=MAX_NEW_TOKENS,
                                      progress=False)
new_traffic = eaglekit.traffic_tokens(target=think, prompts=tokens.prompts(), chat_template=tokens.template("k25-think"),
                                      max_new_tokens=MAX_NEW_TOKENS, progress=False)
old_map, _ = eaglekit.recommend_map(old_traffic, cov.draft_vocab_size, cov.vocab_size)
on_new = eaglekit.coverage(old_map, new_traffic, vocab_size=cov.vocab_size, drafter="map from the old traffic",
                           traffic="the new traffic", steps=STEPS)
print(f"old-traffic map: {on_new.coverage:.1%} of the new traffic; recommended map: {on_new.recommended_coverage:.1%}")

# %% [markdown]
# ## 4. Re-mapping without training
# `eaglekit export DRAFTER --vocab-map recommended.safetensors --target T` re-aligns lm_head by target
# token: rows of tokens the drafter had are carried over, rows of new tokens come from the target's
# lm_head. Does re-mapping alone help?

# %%
work = Path(tempfile.mkdtemp(prefix="eaglekit-09-"))
recommended = eaglekit.write_vocab_map(work / "recommended.safetensors", cov.recommended_d2t, cov.recommended_t2d)
eaglekit.export(world.drafter(DRAFTER), work / "remapped", vocab_map=recommended, target=tokens.target("k25-think"),
                progress=False)
measured = {name: eaglekit.measure_with_template(path, target=think, prompts=tokens.prompts(),
                                                 template=tokens.template("k25-think"), steps=STEPS,
                                                 max_new_tokens=MAX_NEW_TOKENS, progress=False)
            for name, path in (("original", world.drafter(DRAFTER)), ("re-mapped", work / "remapped"))}
gain = eaglekit.accept_length_gain(measured["original"], measured["re-mapped"])  # same prompts: a paired bootstrap
says = {"GO": "helps", "NO-GO": "hurts", "TOO CLOSE TO CALL": "is too close to call"}[eaglekit.verdict(gain, 0.0)]
print(f"accept length under the new template: original {measured['original'].interval.text(2)}, re-mapped "
      f"{measured['re-mapped'].interval.text(2)}; the gain {gain.value:+.2f} ({gain.low:+.2f} to {gain.high:+.2f}, "
      f"{gain.method}): re-mapping alone {says}.")

# %% [markdown]
# ## What this says
# - The tokenizer diff names what changed (four special tokens, eos/pad, the template's new lines) before
#   anything is served; the vocabulary size did not change, so no shape check would notice.
# - Under the new template the same drafter on the same target loses most of its accept length, and the
#   loss sits mostly in the thinking block, a register the drafter never saw; the answer after it is
#   drafted worse too (its tokens follow thinking tokens the drafter's features never carried).
# - The old draft vocabulary covers a small share of the new traffic; a map from the new traffic covers
#   it. Coverage caps acceptance, but a new map without training only gives the drafter rows it has no
#   features for: re-mapping is the start of a fine-tune (keep lm_head aligned by token, SpecForge
#   `--vocab-mapping-path`), not a substitute for one.
