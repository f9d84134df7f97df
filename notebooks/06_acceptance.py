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
# # 06 · Accept length, measured: will this drafter pay off on that target?
# The answer first: the demo's K2.5 candidates, each judged on the seed's deployment, and the next measurement;
# then the measurements behind it.

# %%
import os

import eaglekit

verdicts = eaglekit.demo_verdicts(os.path.join(os.environ.get("EAGLEKIT_DEMO", "../build/demo"), "trained"))
verdicts  # each K2.5 candidate on the seed's deployment (page 08's plan at batch 1), as pages 00, 06, 08 and 10 open

# %% [markdown]
# ## The question
#
# Every other view guesses: shapes, vocabulary overlap, weight cosine. The number that decides whether
# speculative decoding pays is the **accept length**: tokens emitted per draft-verify cycle. This
# notebook measures it offline, without a serving stack: the target generates its greedy continuation
# of each prompt, the drafter drafts K tokens from every position (chain, top-1), and a simulation of the
# serving cycles counts what the target would accept (vLLM's convention: the bonus token counts, the
# prefill token does not).
#
# The seed's question, replayed on the **demo world** (the one of notebooks 00 and 07; random weights
# accept nothing): a small target in Kimi-K2's architecture (MLA attention, routed and shared experts)
# trained on a token language ("K2"), a new version of it continued on a shifted language whose common
# tokens partly changed ("K2.5"), an EAGLE-3 drafter trained for K2, a drafter trained from scratch on
# K2.5 with few samples (the team's), and a warm start: the K2 drafter exported onto K2.5's draft
# vocabulary (notebook 00, section 7), fine-tuned on the same few samples. Then the K2.5 team's other two
# candidates: a public MLA EAGLE-3 drafter, and a DFlash block drafter trained on the same few samples.
#
# The drafters were trained with training-time test for a fixed number of chain steps (the world's
# `chain_steps`, shown under the table below). Beyond that step a drafter drafts what it never learned,
# and its per-step acceptance collapses: the measurements say so in a note, and the chart marks it.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
TRAINED = None  # None: the trained world inside DEMO (trained on first use, a few minutes, then cached)
STEPS = 4  # draft steps K per cycle
PROMPTS = 48  # prompts per target: the world's 12 and more of the same language (intervals narrow as 1/sqrt(n))
MAX_NEW_TOKENS = 37  # 36 tokens after the prefill one: 9 whole cycles at K = 3, within the demo's trained length
BASELINE_TPS = 82.0  # the seed's deployment (notebook 00, section 6): decode tok/s without speculation
SPEC_TPS = 60.0  # ... with speculation, at accept length 2.0 and K = 2 draft steps
VERIFY_MS = 30.0  # ... its verify per cycle at K = 2
TARGET_MODEL = "kimi-k25-int4"  # whose verify grows with K (a published config's cost model, notebook 08)
TP = 8  # ... on 8 GPUs (tensor parallel)
TORCH_THREADS = 1  # the demo's models are tiny: one thread is fastest (None: torch's default)

# %%
from pathlib import Path

import torch

import eaglekit
from eaglekit import conclude_acceptance
from eaglekit import accept_length_vs_steps, per_prompt_spread, per_step_acceptance, steps_table

if TORCH_THREADS:
    torch.set_num_threads(TORCH_THREADS)
world = eaglekit.build_trained_demo(TRAINED or Path(DEMO) / "trained")
k2, k25 = eaglekit.load_target_model(world.target("k2")), eaglekit.load_target_model(world.target("k25"))
world

# %% [markdown]
# ## The K2 drafter on its own target
# `measure_acceptance` is `eaglekit acceptance DRAFTER --target T --prompts FILE` in the terminal.

# %%
def measure(drafter, target, prompts, **kw):
    return eaglekit.measure_acceptance(world.drafter(drafter), target=target,
                                       prompts=eaglekit.measurement_prompts(world, prompts, PROMPTS), steps=STEPS,
                                       max_new_tokens=MAX_NEW_TOKENS, **kw)


own = measure("k2", k2, "k2")
own

# %% [markdown]
# ## The same drafter on the new target version
# Same shapes, same vocabulary, same layer ids: a compatibility check passes. The measurement does not.

# %%
on_new = measure("k2", k25, "k25")
on_new

# %% [markdown]
# ## Scratch or warm start, with the same few samples
# Both K2.5 drafters here saw the same 6 samples many times over: 200 training steps of 4 samples at a
# learning rate of 3e-3, some 130 passes over them. In the demo's token language a few samples repeated go
# a long way, so these drafters score higher than the checkpoints of "How many samples" below with ten
# times the samples: those runs are another regime (one pass over fresh samples, one a step, at a third of
# the learning rate), built to show a curve in samples. Sample counts compare only within one regime.

# %%
scratch = measure("k25-scratch", k25, "k25")
warm = measure("k25-warm", k25, "k25")
results = {"K2 drafter on K2": own, "K2 drafter on K2.5": on_new, "scratch on K2.5": scratch,
           "warm start on K2.5": warm}

# %% [markdown]
# ## The third candidate: a public MLA drafter
# The drafters Kimi users serve today are not Llama heads: they are MLA EAGLE-3 drafters (one decoder
# layer with DeepSeek's Multi-head Latent Attention, a full-vocabulary head with no d2t/t2d). The demo's
# `k25-mla` stands in for one: trained on K2.5 with 256 samples and saved as TorchSpec's vLLM export
# writes it (`layers.0.*`, its aux ids counted as layer inputs). It is measured exactly as the Llama
# drafters are, on the same prompts.

# %%
public = measure("k25-mla", k25, "k25")
results["public MLA drafter on K2.5"] = public
public

# %% [markdown]
# ## The fourth candidate: a DFlash block drafter
# A block drafter (z-lab's DFlash) drafts K tokens in ONE forward: the block `[anchor, MASK x K]`, embedded with
# the target's embedding, reads the target's features of the context before the anchor (`target_layer_ids`) and
# itself (bidirectionally), and the target's `lm_head` turns the mask slots into drafts. The demo's `k25-dflash`
# (block 5, so K = 1 to 4; one Qwen3-style layer; no embedding or head of its own) was trained with the authors'
# objective on the SAME 6 samples and target features as the two drafters above. `measure_acceptance` sees its
# config and simulates the authors' decoding loop cycle by cycle on the same prompts (docs/acceptance.md, "Block
# drafters"); every K below runs its own block of K + 1, as the engines do.
#
# **What the demo can and cannot tell about real block drafters.** The published one for K2.5,
# z-lab/Kimi-K2.5-DFlash, has blocks of 8 and 6 layers; its authors report accept length 5.3 on GSM8K and 3.7 on
# MT-Bench, against 2.7 to 3.3 for the MLA EAGLE-3 drafters. The demo's token language and tiny models show the
# mechanics (the block, the mask slots, the features before the anchor, the authors' loop) and the pricing below,
# not the real figures: a one-layer block drafter learning a second-order rule from 6 samples says nothing about
# how a 6-layer one does on text. Measure the real ones on your traffic with `eaglekit acceptance`.

# %%
dflash = measure("k25-dflash", k25, "k25")
dflash
deployment = eaglekit.Account.from_measurements(BASELINE_TPS, SPEC_TPS, 2.0, verify_ms=VERIFY_MS, steps=2,
                                                verify_grows_for=(TARGET_MODEL,), tp=TP)
serving = deployment.growing_scenario  # the seed's cycle, its verify growing with K as on notebook 00
print(f"serving cycle: verify {VERIFY_MS:g} ms at K = 2, growing {serving.verify_growth_ms:.2f} ms per drafted token "
      f"({TARGET_MODEL}), plus {serving.draft_ms:.2f} ms per draft step")
accept_length_vs_steps(results, scenario=serving, trained_steps=world.chain_steps)

# %% [markdown]
# Break-even rises with K: every draft step lengthens the cycle by the draft time, and on a
# mixture-of-experts target the verify grows too (more drafted tokens route to more experts, whose
# weights the verify reads). A drafter pays at a K where its accept length is above that K's break-even,
# in the chart and in this table; each accept length carries its 95% interval (a bootstrap over the prompts),
# and one whose interval straddles break-even is TOO CLOSE TO CALL, not a payer.

# %%
steps_table(results, serving)

# %% [markdown]
# The DFlash drafter is not judged on that cycle. A chain of K steps pays K draft steps; a block cycle pays ONE
# draft forward whatever K, so its break-even is its own: the **block cycle**, the same verify of K + 1 tokens
# (growing with K as above) plus one draft forward priced as one of the deployment's draft steps
# (`eaglekit.block_scenario(serving)`: the forward reads the drafter's weights once, as a chain step does; notebook
# 08 prices it from the drafter's config instead). Its accept length at each K, with its interval, against that K's
# block break-even:

# %%
block_serving = eaglekit.block_scenario(serving)
print(f"block cycle: verify {VERIFY_MS:g} ms at K = 2, growing {block_serving.verify_growth_ms:.2f} ms per drafted "
      f"token, plus ONE draft forward of {block_serving.overhead_ms:.2f} ms whatever K")
steps_table({"DFlash on K2.5": dflash}, block_serving)

# %%
per_step_acceptance(results)

# %%
per_prompt_spread(results)

# %% [markdown]
# ## The aux-layer convention
# The K2 drafter's config (SpecForge format) names layers `[0, 1, 2]`. SpecForge trained it on the
# OUTPUTS of those layers; vLLM reads the same ids as layer INPUTS. Every result measures both readings;
# the table compares them at K = 3, the depth the drafters were trained to and every verdict uses (the
# same K as notebook 00).

# %%
import pandas as pd

print(f"accept length by aux reading at K = {world.chain_steps}")
pd.DataFrame({name: r.by_convention_at(world.chain_steps) for name, r in results.items()}).T.round(3)

# %% [markdown]
# On the K2 drafter's own target the other reading can come out higher, although an off-by-one feeds the
# drafter layers it was not trained on. The measurement below, with that reading as the primary one, says
# where the difference comes from: step by step, at the depth the drafter was trained to, and prompt by
# prompt. The drafter trained from scratch, measured the same way, shows what an off-by-one can cost.

# %%
own_other = measure("k2", k2, "k2", aux_convention="inputs")
scratch_other = measure("k25-scratch", k25, "k25", aux_convention="inputs")
per_step_acceptance({"K2 drafter on K2, outputs (as trained)": own, "K2 drafter on K2, inputs": own_other})

# %%
print(eaglekit.compare_readings(own, own_other, chain_steps=world.chain_steps), "\n")
print(eaglekit.compare_readings(scratch, scratch_other, chain_steps=world.chain_steps))

# %% [markdown]
# ## From the dumps your training already wrote
# A team that trained a drafter already has its target's hidden states on disk, written by SpecForge,
# speculators or Model-Optimizer. The trained world writes its own in those three layouts (the
# target's greedy continuations of the same prompts), and `measure_dump` reads them with only the
# target's `lm_head` and final norm: `eaglekit acceptance DRAFTER --hidden-states DIR --target-head T`.
# The figures are the ones `--target` measured above.

# %%
dumps = eaglekit.trained_dumps(world)
from_dumps = {fmt: eaglekit.measure_dump(world.drafter("k2"), folder, target_head=str(world.target("k2")),
                                         steps=STEPS, loss_masks=eaglekit.loss_masks_of(folder))
              for fmt, folder in dumps.items()}
pd.DataFrame({"--target": {"accept length": own.accept_length, "coverage": 1.0},
              **{f"{fmt} dump": {"accept length": r.accept_length, "coverage": r.coverage}
                 for fmt, r in from_dumps.items()}}).T.round(3)

# %%
accept_length_vs_steps({"K2 drafter, --target": own,
                        **{f"K2 drafter, {fmt} dump": r.result for fmt, r in from_dumps.items()}})

# %% [markdown]
# Every convention a user compares against, each labelled with who prints it:

# %%
from_dumps["specforge"]

# %% [markdown]
# Training text is often dataset text the target did not generate. Drafts are then compared only
# inside the spans where the text follows the target's greedy token (the coverage says how much of the
# assistant text that is); each assistant turn is still one request, and the drafts the text cannot show
# are completed with the conditional acceptances at cycle starts (the result's `estimator` says so). On
# the demo the figure holds the greedy continuations' inside its interval at every K.

# %%
dataset = eaglekit.trained_dumps(world, greedy=False)["specforge"]
eaglekit.measure_dump(world.drafter("k2"), dataset, target_head=str(world.target("k2")), steps=STEPS)

# %% [markdown]
# ## Conclusion (generated from the measurements above)
# Go or no-go on the serving cycle above, at the depth the drafters were trained to (K = 3, as notebook
# 00 judges them) and at each drafter's best K; the DFlash drafter on its block cycle, at every K it drafts.
# A narrower question than the verdict block at the top: the accept length against the break-even of this cycle,
# taken as exact, on one reading of the verify. The block asks the plan (page 08), with the cycle's own uncertainty
# and both readings; where the two differ, that uncertainty is the difference, and the block names the run that
# settles it.

# %%
conclude_acceptance(own=own, new_target=on_new, scratch=scratch, warm=warm, scenario=serving,
                    steps=world.chain_steps, public=public, blocks={"DFlash": dflash}, block_cycle=block_serving)

# %% [markdown]
# ## Accept length by tree configuration
# Most deployments draft a tree: `--speculative-num-steps s --speculative-eagle-topk k
# --speculative-num-draft-tokens n` in SGLang (EAGLE's `depth = s - 1`, `top_k`, `total_token`). Each of
# the s drafter passes keeps the k best nodes by cumulative log-probability; the n - 1 best nodes of the
# whole pool are verified with the root in one target forward, and the longest path the target agrees
# with is accepted. `measure_trees` drafts the trees of every configuration from every position of the
# same greedy continuations (`eaglekit acceptance ... --tree-grid S:K:N,...` in the terminal); `topk 1`
# is the chain, figure for figure. Beyond the 3 steps the drafter was trained for, its first choice often
# misses; a tree's other children catch it (the share of cycles whose accepted path left the first child
# says how often). The tree pays in accept length; whether it pays in throughput depends on what a verify
# of n tokens costs on the target (notebook 08).
#
# The trees run on the page's 48 prompts and reach 6 and 8 steps deep: at 4 steps the wider trees accept
# every draft of every cycle, the most 36 tokens a prompt allow (4.5 tokens a cycle), and such a table
# cannot tell them apart (the ^ mark says where a row sits at that ceiling).

# %%
TREE_GRID = "4:1:5,4:2:8,6:2:12,6:4:24,8:10:60"
TREE_PROMPTS = eaglekit.measurement_prompts(world, "k2", PROMPTS)
trees = eaglekit.measure_trees(world.drafter("k2"), trees=TREE_GRID, target=k2, prompts=TREE_PROMPTS,
                               max_new_tokens=MAX_NEW_TOKENS)  # the chain beside it: K = 1..8
trees

# %% [markdown]
# The two readings of a frontier node's attention: EAGLE's (its true ancestors) and SGLang's (its branch
# slot's earlier entries, another lineage's after a re-selection). They agree on the first two levels.

# %%
slots = eaglekit.measure_trees(world.drafter("k2"), trees=TREE_GRID, target=k2, prompts=TREE_PROMPTS,
                               max_new_tokens=MAX_NEW_TOKENS, tree_attention="sglang-slots")
pd.DataFrame([{"steps": a.steps, "topk": a.topk, "draft tokens": a.draft_tokens,
               "chain (K = steps)": trees.result.accept_length_by_steps[a.steps - 1],
               "tree, EAGLE": a.accept_length, "tree, SGLang slots": b.accept_length,
               "left first child": a.left_first_child} for a, b in zip(trees.trees, slots.trees)]).round(3)

# %% [markdown]
# ## How many samples?
# The seed's fork: the team's K2.5 drafter, trained from scratch on 37K samples, reached accept length
# 2.0; the public K2 drafter had 1.4M samples behind it. Generate 200K-500K samples (days at 82 tok/s),
# or warm-start from the K2 drafter? A training run leaves checkpoints, and the answer is the curve
# through them. The trained world keeps two runs on fresh K2.5 samples, one from scratch and one from the
# warm start, each with a checkpoint at 16, 32, 64, 128 and 256 samples, saved as SpecForge saves them
# (`epoch_0_step_N` with its `training_state.pt`: the samples are read from there).
#
# **What the demo's sample counts stand for.** This is a toy world: its token language is learnt from tens
# of samples where a real drafter needs tens of thousands, so its counts map to the seed's by ratio only.
# The 64-sample checkpoints play the team's 37K samples; the seed's 200K and 500K are then 5.4 and 13.5
# times that, 346 and 865 samples here, past the largest checkpoint (256): predictions, not measurements.
# What carries over is the method (checkpoints, the curve through them with its interval, the break-even),
# not the figures.
#
# `acceptance_curve` is `eaglekit acceptance-curve --label scratch CKPT... --label warm CKPT... --batch-size B`
# in the terminal. Each checkpoint is measured as `eaglekit acceptance` measures one drafter (here on the
# K2.5 hidden-state dump, at the depth the drafters were trained to). Several curve forms are fitted
# (saturating ones, a straight line in log samples, a rise that has not yet bent), each with a bootstrap
# over the checkpoints and the prompts; a prediction is their average weighted by fit and its interval the
# union of the plausible forms' intervals, so a curve of another shape than the demo's is covered too, and
# the output says when the points do not pin the curve down. The break-even is the serving cycle's above.

# %%
TEAM_SAMPLES = 64  # the curve runs' stand-in for the seed's 37K samples (not the 6-sample drafters above)
SEED_SAMPLES = {"37K": 37_000, "200K": 200_000, "500K": 500_000}  # the seed's fork, in its own samples
as_demo = {name: round(TEAM_SAMPLES * n / SEED_SAMPLES["37K"]) for name, n in SEED_SAMPLES.items()}
print("the seed's samples on the demo's scale:", ", ".join(f"{k} -> {v}" for k, v in as_demo.items()))
break_even = serving.at_steps(world.chain_steps).break_even_accept_length
curves = eaglekit.acceptance_curve(
    {"scratch": world.checkpoints("scratch"), "warm start": world.checkpoints("warm")},
    batch_size=world.manifest["curve_batch"], hidden_states=world.hidden_dump("k25"), steps=world.chain_steps,
    predict=[as_demo["200K"], as_demo["500K"]], reach=[3.0], break_even=break_even, progress=False)
curves

# %% [markdown]
# The two regimes side by side, from this page's measurements: the 6-sample drafters (many passes) against
# the curve runs' 64-sample checkpoints (one pass).

# %%
for label, few in (("scratch", scratch), ("warm start", warm)):
    at64 = curves[label].at(TEAM_SAMPLES)
    print(f"{label}: 6 samples, ~130 passes: {few.accept_length_by_steps[world.chain_steps - 1]:.2f} at K = "
          f"{world.chain_steps}; {TEAM_SAMPLES} fresh samples, one pass: {at64.text(2)}")

# %%
eaglekit.accept_length_curve(curves)

# %% [markdown]
# The seed's question, answered on the demo: does the warm start reach break-even with the scratch
# drafter's data, and how much data would scratch need?

# %%
print(curves.compare("warm start", "scratch", samples=TEAM_SAMPLES, break_even=break_even))
