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
# # 00 · Investigation: can drafter A be fine-tuned for target B, and would it pay off?
#
# The account behind eaglekit, as one walk. A team runs EAGLE-3 speculative decoding on Kimi-K2.5:
# baseline 82 tok/s, with their own drafter (37K training samples, accept length 2.0) only 60 tok/s.
# A public Kimi-K2 drafter, trained on 1.4M samples, reaches accept length 3.2-3.5 on K2. Can it
# initialise a K2.5 drafter? This notebook searches, diffs configs, reads headers, checks the
# vocabulary maps by value, compares weights and does the payoff maths; its conclusion is generated
# from those results.
#
# The defaults run on the **synthetic demo workspace** served by a Hub-compatible server on 127.0.0.1.
# Set the parameters to real `hf://`, `https://` or `ssh://` locations (and `ENDPOINT` to a Hub) to run
# the same walk on real drafters.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
ENDPOINT = None  # None: serve the demo's Hub on 127.0.0.1
DRAFTER_A = "hf://demo-aqmed/Kimi-K2-Instruct-eagle3"  # the public drafter
DRAFTER_B = "hf://demo-team/Kimi-K2.5-eagle3-scratch"  # the team's own drafter for the new target
TARGET = "hf://demo-moonshot/Kimi-K2.5"
BASELINE_TPS = 82.0  # measured without speculation
SPEC_TPS = 60.0  # measured with the team's drafter
OBSERVED_ACCEPT_LENGTH = 2.0
VERIFY_MS = 30.0
EXPECTED_ACCEPT_LENGTH = 3.2  # what the public drafter reaches on its own target
TARGET_TPS = 150.0

# %%
import eaglekit
from eaglekit.view.figures import overview
from eaglekit.demo.shelf import serve_demo_hub

ws = eaglekit.build_demo(DEMO)
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
# ## 6. Would it pay off?
# The measured deployment implies the cycle time; from it, the break-even accept length and what
# the target throughput needs (accept length includes the bonus token, as vLLM, SGLang and EAGLE report).

# %%
from eaglekit.core.specmath import fit_from_measurements

fit = fit_from_measurements(BASELINE_TPS, SPEC_TPS, OBSERVED_ACCEPT_LENGTH, verify_ms=VERIFY_MS)
fit

# %% [markdown]
# ## Conclusion

# %%
from eaglekit.analysis.conclusion import conclude

conclusion = conclude(report, similarity=sim, fit=fit, expected_accept_length=EXPECTED_ACCEPT_LENGTH,
                      target_tps=TARGET_TPS)
conclusion

# %%
ckpt_a.close()
ckpt_b.close()
if hub is not None:
    hub.stop()
