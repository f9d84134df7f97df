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
# # 00 · Investigation: can drafter A be fine-tuned for target B, and would it pay off?
# The answer first: each K2.5 candidate of the demo world, its verdict and the next measurement. The evidence follows.

# %%
import os

import eaglekit

verdicts = eaglekit.demo_verdicts(os.path.join(os.environ.get("EAGLEKIT_DEMO", "../build/demo"), "trained"))
verdicts  # each K2.5 candidate on the seed's deployment (page 08's plan at batch 1), as pages 06, 08 and 10 open

# %% [markdown]
# ## The walk
#
# The account behind eaglekit, as one walk. A team runs EAGLE-3 speculative decoding on Kimi-K2.5:
# baseline 82 tok/s, with their own drafter (37K training samples, 2 draft steps per cycle, accept
# length 2.0) only 60 tok/s.
# A public Kimi-K2 drafter, trained on 1.4M samples, reaches accept length 3.2-3.5 on K2 (the seed's account, as
# AQ-MedAI's model card states them; not measured here). Can it
# initialise a K2.5 drafter? This notebook searches, diffs configs, reads headers, checks the
# vocabulary maps by value, compares weights and does the payoff maths; its conclusion is generated
# from those results.
#
# The defaults run on the **demo world**, served by a Hub-compatible server on 127.0.0.1: small K2 and
# K2.5 targets trained on a synthetic token language, in the real targets' architecture and shipping
# layouts (MLA attention, routed and shared experts; K2 in FP8 blocks, K2.5 in INT4 under
# `language_model.`), a drafter trained for K2 (the public one), and the team's K2.5 drafter trained
# from scratch on a few samples. Every drafter and target on this page belongs to that one world, so
# every figure is measured on models that fit each other. Set the parameters to real `hf://`,
# `https://` or `ssh://` locations (and `ENDPOINT` to a Hub) to run the same walk on real drafters.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
ENDPOINT = None  # None: serve the demo's Hub on 127.0.0.1
DRAFTER_A = "hf://demo-mini/Kimi-K2-mini-eagle3"  # the public drafter, trained for TARGET_A
DRAFTER_B = "hf://demo-team/Kimi-K2.5-mini-eagle3-scratch"  # the team's own drafter for the new target
TARGET_A = "hf://demo-mini/Kimi-K2-mini"  # the target drafter A was trained on (FP8)
TARGET = "hf://demo-mini/Kimi-K2.5-mini"  # the new target (INT4)
BASELINE_TPS = 82.0  # measured without speculation
SPEC_TPS = 60.0  # measured with the team's drafter
OBSERVED_ACCEPT_LENGTH = 2.0
STEPS = 2  # draft steps per cycle in the measured deployment
VERIFY_MS = 30.0
EXPECTED_ACCEPT_LENGTH = 3.2  # what the public drafter reaches on its own target
TARGET_TPS = (150.0, 200.0)
TARGET_MODELS = ("kimi-k25-int4",)  # whose verify cost grows with k (a published config; page 08 adds K2's FP8)
TP = 8  # GPUs the measured deployment ran on (tensor parallel)

# %%
import eaglekit
from eaglekit import overview
from eaglekit import serve_demo_hub

ws = eaglekit.build_demo(DEMO)
world = ws.trained  # the demo world's local folders: its targets run in transformers, its hidden-state dumps
hub = None if ENDPOINT else serve_demo_hub(ws)
endpoint = ENDPOINT or hub.endpoint

# %% [markdown]
# ## 1. Which drafters could serve the target?
# Found by what their configs say (architectures, speculators type), not their names; ranked by fit.

# %%
found = eaglekit.find_drafters(target=TARGET, endpoint=endpoint)
found

# %% [markdown]
# ## 2. The two configs side by side
# Each drafter is opened once (headers and config.json); every step below reuses it.

# %%
ckpt_a = eaglekit.open_checkpoint(DRAFTER_A, endpoint=endpoint)
ckpt_b = eaglekit.open_checkpoint(DRAFTER_B, endpoint=endpoint)
eaglekit.diff_configs(ckpt_a.inventory.config, ckpt_b.inventory.config, a_name="A", b_name="B")

# %% [markdown]
# ## 3. Every tensor, from headers alone

# %%
eaglekit.compare_inventories({"A": ckpt_a.inventory, "B": ckpt_b.inventory})

# %% [markdown]
# ## 4. The verdict: shapes, the vocabulary map by value, aux layers, the target

# %%
report = eaglekit.compat(ckpt_a, ckpt_b, target=dict(found.target_config.raw), a_name="A", b_name="B")
report

# %% [markdown]
# ## 5. How alike are the weights?
# Streamed comparison of every shared tensor (skipped when the verdict is `incompatible`: shapes differ).

# %%
sim = None
if report.verdict != "incompatible":
    sim = eaglekit.similarity(ckpt_a, ckpt_b)
    display(sim)
    display(overview(sim))

# %% [markdown]
# ## 5b. Are the two targets' hidden states similar enough?
# The account's open risk: shapes cannot say. `eaglekit.drift` compares the two targets where drafter A
# looks (its frozen embedding, its draft rows of lm_head, the layers whose outputs feed it, per engine)
# and, given two hidden-state dumps of the same prompts (`eaglekit dump-hidden`), the states themselves
# per aux layer: cosine, and linear CKA, which forgives a rotated basis. Here on the demo's two
# targets, read from the Hub by byte range (FP8 against INT4: part of every weight figure is the
# quantisation), with each target's dump of the same prompts (notebook 07 walks through them).

# %%
target_drift = eaglekit.drift(TARGET_A, TARGET, drafter=ckpt_a, endpoint=endpoint, full=False, budget="4MB",
                              hidden=(world.hidden_dump("k2"), world.hidden_dump("k25")), progress=False)
print(target_drift.summary)
target_drift.hidden

# %% [markdown]
# ## 6. Would it pay off?
# One throughput account, the same one notebook 05 and `eaglekit speedup --spec-tps` print. The measured
# deployment implies the cycle (accept length / throughput); what it spends beyond the verify time is
# drafting, per draft step. The seed's own arithmetic used the 30 ms verify alone (drafting free, no
# limit on steps): the account shows both, and says which targets the deployment's steps can reach. Last, it
# prices them again with a verify that grows with k (a mixture-of-experts verify reads every expert its
# tokens route to; notebook 08 plans the steps per batch size).
# Accept length includes the bonus token, as vLLM, SGLang and EAGLE report it.

# %%
account = eaglekit.Account.from_measurements(BASELINE_TPS, SPEC_TPS, OBSERVED_ACCEPT_LENGTH, verify_ms=VERIFY_MS,
                                             steps=STEPS, targets=TARGET_TPS, expected=(EXPECTED_ACCEPT_LENGTH,),
                                             verify_grows_for=TARGET_MODELS, tp=TP)
account

# %% [markdown]
# ## 6a. Where the verify's time goes decides the fork
# The 30 ms verify of 3 tokens is 2.46x the 12.2 ms decode; bytes and FLOPs explain about 1.66x. The seed
# names the rest: "the real hardware cost of running a 1T MoE model on 8 PCIe GPUs without CUDA graphs", 30 ms
# "regardless of attention mode". Read as a cost per verified token, the verify keeps growing with k and the
# public drafter's 3.2 loses; read as a cost per verify forward (launches without graphs, all-reduces over
# PCIe), it barely grows and 3.2 wins. One decode and one verify go through both readings, so the page shows
# both, the verdict under each, and the one measurement that settles it; then the fork (warm start, 500K
# samples, or fix the verify first) under each reading.

# %%
account.fork

# %% [markdown]
# ## 6b. The accept length, measured
# The account above takes accept lengths as given. `eaglekit.measure_acceptance` (`eaglekit acceptance`)
# measures one offline: the target's greedy continuations, the drafter's chain drafts from every
# position, the serving cycles simulated. Here drafter A on the new target, run in transformers from
# the world's own folders (the same trained weights as the FP8 and INT4 files above), drafting up to
# the 3 steps it was trained for: the table gives the accept length at every K up to that, and its
# interval (a bootstrap over the prompts: a verdict that turns on hundredths is not one). The demo measures
# 48 prompts, each continued for 37 tokens (as long as the demo targets were trained to write).

# %%
import torch

torch.set_num_threads(1)  # the demo world's models are tiny
K_MAX = world.chain_steps  # the depth the demo drafters were trained to, and every verdict here judges
# measured as every page measures the demo (48 prompts, 37 tokens each, K up to 4), once: pages 06, 08 and 10
# read the same answers back from the result cache
measured = eaglekit.measure_demo(world, "k2", "k25").at_steps(K_MAX)
measured

# %% [markdown]
# ## Conclusion

# %%
from eaglekit import conclude

conclusion = conclude(report, similarity=sim, account=account, hidden=target_drift.hidden, payoff=False,
                      measured={"drafter A on the new target (demo world)": measured})  # the account: section 6
conclusion

# %% [markdown]
# ## 7. The warm-start checkpoint, and is it ready?
# When the verdict asks for a remap, `eaglekit.export` writes it: A's weights with lm_head rows
# re-aligned to B's vocabulary map by target token (rows for tokens A never had start from the
# target's lm_head rows, read by byte range), streamed into a new folder. `eaglekit.check` then runs
# the pre-serving checks on it against the target. Its first line gives a verdict per engine release:
# drafter A's SpecForge ids `[0, 1, 2]` mean the outputs of those layers to SGLang up to 0.5.10 but the
# token embeddings and the outputs of layers 0 and 1 to SGLang since PR #25454 and to vLLM, and the
# config does not say which capture trained it, so each engine reads UNSURE until a measurement
# (`eaglekit acceptance --aux-convention outputs` and `inputs`; notebook 06 does it) or the publisher
# settles it (docs/aux-layers.md).

# %%
warm = None
if report.verdict == "compatible-after-remap":
    os.makedirs(os.path.join(DEMO, "exports"), exist_ok=True)
    warm = eaglekit.export(ckpt_a, os.path.join(DEMO, "exports", "warm-start"), vocab_map=DRAFTER_B, target=TARGET,
                           endpoint=endpoint, force=True)
    display(warm)
else:
    print(f"No warm-start checkpoint: the verdict is {report.verdict}, not a remap.")

# %%
if warm is not None:
    display(eaglekit.check(warm.out, target=TARGET, endpoint=endpoint))

# %% [markdown]
# ## 8. The bottom line on the demo
# Will the K2 drafter pay off on K2.5, or should the warm start be trained? Two K2.5 drafters were trained
# on the same few samples when the demo world was built: the team's, from scratch (drafter B), and a warm
# start: the checkpoint `eaglekit.export` writes in section 7, fine-tuned. Every figure in the paragraph
# below is measured on this page, and judged against the break-even of the serving cycle of section 6:
# the measured 30 ms verify at K = 2 plus 1.67 ms per draft step, the verify growing with K as section 6's
# cost model prices the target (K2.5, INT4 experts: its mean growth per drafted token, as the calculator of
# notebook 05 takes it), at K = 3 and at each drafter's best K (break-even rises with K). The conclusion
# above judges drafter A on the same cycle. Each accept length carries its 95% interval (a bootstrap over
# the 48 prompts); a verdict whose interval straddles break-even says TOO CLOSE TO CALL.
# The seed's own figures (accept length 3.2 to 3.5 for the public K2 drafter on K2) are projections from
# another model, and stay in section 6.
# These paragraphs ask a narrower question than the verdict block at the top of the page: is the accept length above
# the break-even of the account's cycle, taken as exact, on one reading of the verify? The block asks the plan (page
# 08) with the cycle's own uncertainty and both readings; where the two differ (a GO here, TOO CLOSE TO CALL there),
# the difference is the cycle's uncertainty, and the block's next measurement is what settles it.
#
# A K2.5 team has four candidates today. Beside its two, a published MLA EAGLE-3 drafter (DeepSeek MLA
# attention, a full-vocabulary head, as lightseekorg's Kimi drafters are): the demo's `k25-mla` stands in for it,
# measured the same way and judged beside the team's two. And a DFlash block drafter (z-lab's kind): the demo's
# `k25-dflash`, trained with the authors' objective on the SAME few samples and target features as the team's two,
# drafts K tokens in ONE forward over the block `[anchor, MASK x K]` (block 5: K = 1 to 4). Its cycle is not the
# chain's, so neither is its break-even: it is judged on the **block cycle**, the same verify of K + 1 tokens
# (growing with K as above) plus one draft forward of one chain step's time (1.67 ms) whatever K, where a chain of K
# steps pays K of them (`eaglekit.block_scenario`; notebook 08 prices the forward from the drafter's config). The
# paragraph gives its accept length and interval at every K against that K's block break-even, and its best K.
#
# **What the demo can and cannot tell about real block drafters.** The published one for this target,
# z-lab/Kimi-K2.5-DFlash, has blocks of 8 and 6 layers, and its authors report accept length 5.3 on GSM8K and 3.7 on
# MT-Bench, against 2.7 to 3.3 for the MLA EAGLE-3 drafters. The demo's drafter is one layer on a 4-layer target, its
# blocks are 5, and its token language (a second-order rule with 10% noise, learnt from 6 samples) is nothing like
# text: its figures show the mechanics (the block, the mask slots, the context features, the authors' loop) and the
# pricing (one forward per cycle), not how a real DFlash drafter compares with a real EAGLE-3 one. To compare the
# real drafters, measure them on your traffic: `eaglekit acceptance z-lab/Kimi-K2.5-DFlash --target ...`.

# %%
own_target = eaglekit.measure_demo(world, "k2", "k2")
candidates = eaglekit.demo_candidates(world)  # the K2.5 candidates, as pages 06, 08 and 10 show them
scratch, warm_start, public_mla, dflash = (candidates[c] for c in ("scratch", "warm start", "public MLA drafter",
                                                                     "DFlash"))
bottom_line = eaglekit.conclude_acceptance(own=own_target, new_target=measured, scratch=scratch, warm=warm_start,
                                           scenario=account.growing_scenario, public=public_mla, steps=K_MAX,
                                           blocks={"DFlash": dflash},
                                           block_cycle=eaglekit.block_scenario(account.growing_scenario))
bottom_line

# %% [markdown]
# The same drafters on the other reading of the verify (section 6a): a cost per verify forward, so the verify
# grows only by its bytes and FLOPs with K and break-even is lower. Where the two bottom lines differ, the
# verdict is TOO CLOSE TO CALL until the verify at another K (or with CUDA graphs on) is measured. The DFlash
# drafter is judged on the same reading's block cycle (one 1.67 ms forward per cycle).

# %%
bottom_line_per_forward = eaglekit.conclude_acceptance(own=own_target, new_target=measured, scratch=scratch,
                                                       warm=warm_start, scenario=account.scenario_for("per-forward"),
                                                       public=public_mla, steps=K_MAX, blocks={"DFlash": dflash})
bottom_line_per_forward

# %%
ckpt_a.close()
ckpt_b.close()
if hub is not None:
    hub.stop()
