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
# # 10 · After the deploy: the engine's own acceptance, beside the offline figure
# The answer first: the demo's K2.5 candidates judged offline, and the next measurement; then what the engine says
# once one is served.

# %%
import os

import eaglekit

verdicts = eaglekit.demo_verdicts(os.path.join(os.environ.get("EAGLEKIT_DEMO", "../build/demo"), "trained"))
verdicts  # each K2.5 candidate on the seed's deployment (page 08's plan at batch 1), as pages 00, 06, 08 and 10 open

# %% [markdown]
# ## Once served
#
# Every page so far answers before serving. Once a drafter is served, the engine counts its own acceptance:
# vLLM's `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
# `..._num_accepted_tokens_per_pos_total{position="i"}` on its `/metrics`; SGLang's verify calls and generated
# tokens (and the "accept len" of its log). The counters are cumulative: `eaglekit live URL` reads them twice, a
# window apart, and reports the difference: the accept length 1 + accepted / drafts (vLLM's convention, as every
# accept length in this kit) with its 95% interval, per-position and per-step acceptance, and tokens per second.
#
# Then the question this kit is made for: offline said one figure, the engine says another. Is the gap real
# (both figures carry intervals), and which of the known causes can be checked from here?
#
# **On the demo** the engine is a loopback server replaying a vLLM `/metrics` page whose counters move on at every
# scrape: the drafter of notebook 06 (the warm start on K2.5) served with its **first** draft step accepted 30%
# less often than offline measures it, as happens when the engine feeds the drafter something it was not trained
# on (another chat template, aux layers read under another convention). Point `URL` at a real engine instead.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
TRAINED = None  # None: the trained world inside DEMO (trained on first use, then cached)
URL = None  # the engine, http://HOST:PORT; None: the demo's replaying server
STEPS = 3  # the served draft steps (the demo drafters were trained for 3)
DRAFTER = "k25-warm"
SERVED_FIRST_STEP = 0.7  # the demo engine's first-step acceptance, relative to offline
WINDOW = 0.5  # seconds per live window (a real engine: 10 to 60)
READINGS = 5
TORCH_THREADS = 1

# %%
from pathlib import Path

import torch

import eaglekit

if TORCH_THREADS:
    torch.set_num_threads(TORCH_THREADS)
world = eaglekit.build_trained_demo(TRAINED or Path(DEMO) / "trained")

# %% [markdown]
# ## The offline figure
# `eaglekit acceptance DRAFTER --target T --prompts FILE --steps 3 --json > acceptance.json` in the terminal.
# The demo's figure is the one pages 00, 06 and 08 show for this drafter (48 prompts, the same measurement,
# read back from the result cache), read at the served steps.

# %%
offline = eaglekit.measure_demo(world, DRAFTER, "k25").at_steps(STEPS)
offline

# %% [markdown]
# ## The engine, read live
# `eaglekit live URL --window 30` in the terminal (`--json` for a file the plan reads). Each window's reading is
# the difference of two scrapes; a counter that went down means the server restarted, and the window is read again.
# On the demo the engine's accept length sits below the offline one by construction (its first step is served
# `SERVED_FIRST_STEP` = 0.7 times as often accepted): it answers "what does the engine accept?", at the served
# k = 3, not "what does the drafter accept offline?", which the verdict block above and pages 00, 06 and 08 read.

# %%
server, NAME = None, None  # NAME: what the readings call the server (None: its address)
if URL is None:  # the demo: a vLLM /metrics replayed on loopback, its first step served worse than offline
    served = [(a or 0.0) * (SERVED_FIRST_STEP if j == 0 else 1.0) for j, a in enumerate(offline.per_step_acceptance)]
    server = eaglekit.serve_metrics_replay(served, seed=0)
    URL, NAME = server.url, "the demo's replaying server"   # its loopback port dies with the kernel
series = eaglekit.read_live_series(URL, readings=READINGS, window=WINDOW, name=NAME)
series

# %%
eaglekit.live_readings_figure(series, offline=offline)

# %% [markdown]
# ## The gap, and its causes
# The gap is offline minus live, its interval the two intervals combined. REAL GAP means the engine accepts
# less than offline, REVERSE GAP more, TOO CLOSE TO CALL that the two figures are not told apart (GO and NO-GO
# stay with "speculation pays"). Each window's interval here treats drafts as independent, and drafts of one
# request are correlated: the windows above show how far readings wander (`eaglekit live` widens its interval by
# the spread between sub-windows). The causes `/metrics` can show are checked; the others are listed with what
# would check them.

# %%
comparison = eaglekit.compare_live(series.latest, offline)
comparison

# %% [markdown]
# On the demo the gap opens at step 1: the first draft is accepted less often served than offline, and the later
# steps follow. That points at what the drafter reads (the chat template, the aux layers' convention, the target
# revision), not at its depth. `eaglekit live URL --offline acceptance.json --drafter D --engine vllm==0.10.2`
# checks the aux ids as that release reads them.
#
# ## Read again
# The button reads one more window and shows it beside the offline figure. It runs in Python, so it is here only
# with a running kernel (the rendered report shows the readings above instead).

# %%
eaglekit.LiveWidget(URL, offline=offline, window=WINDOW, name=NAME)

# %% [markdown]
# ## Into the plan
# `eaglekit live URL --json > live.json`, then `eaglekit plan --measured live.json ...`: the reading is one
# measured run (the engine's running requests as the batch, its served steps, accept length and tokens per second).
# (The demo's replaying server stays up while the kernel runs, so the button above keeps working.)
