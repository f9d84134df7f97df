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
# # 05 · Accept length: when does speculation pay?
#
# The seed account: Kimi-K2.5 on 8 GPUs decodes at **82 tok/s** without speculation. With the team's
# EAGLE-3 drafter (37K training samples) the accept length was **2.0** and decoding fell to
# **59-61 tok/s**, 27% slower. The verify step costs about **30 ms** per cycle. The team's arithmetic:
# break-even needs 2.46; 150 tok/s needs 4.5 (78% per-token acceptance) and 200 tok/s needs 6.0 (83%).
#
# Convention: the accept length counts the bonus token the target adds every cycle (as vLLM, SGLang
# and EAGLE report it), so it is at least 1 and at most k + 1 with k draft steps. The maths is
# Leviathan et al. 2023 (arXiv 2211.17192); every number below comes from `eaglekit.specmath`.

# %%
import plotly.io as pio
from IPython.display import display

from eaglekit import Calculator
from eaglekit.view.calculator import whatif_figure
from eaglekit.core.specmath import AcceptanceMetrics, Scenario, estimate, fit_from_measurements

# Plotly figures carry their own JavaScript, so the rendered HTML keeps working without a kernel.
pio.renderers.default = "plotly_mimetype+notebook"

# %% [markdown]
# ## The seed's scenario
# 82 tok/s baseline, 30 ms per draft-verify cycle, the seed's unbounded-chain arithmetic.

# %%
seed = Scenario.seed()
estimate(seed, accept_length=2.0, target_tps=150)

# %% [markdown]
# What each target needs (accept length = target x cycle time; alpha = 1 - 1/L for an unbounded chain):

# %%
for target_tps in (82, 150, 200):
    need = estimate(seed, accept_length=2.0, target_tps=target_tps).target
    print(f"{target_tps:>4} tok/s needs accept length {need.accept_length:.2f} (alpha {need.alpha:.2f})")

# %% [markdown]
# ## What the measurement says about the cycle
# 30 ms alone would give 66.7 tok/s at accept length 2.0, but the team measured about 60. Working
# back from the measurement: the real cycle is about 33 ms, so drafting and overhead add about 3 ms
# and the real break-even is higher than 2.46.

# %%
fit_from_measurements(82, 60, 2.0, verify_ms=30)

# %% [markdown]
# ## Acceptance in each engine's terms
# vLLM's "acceptance rate" is accepted / drafted tokens, not the per-token alpha, and a finite chain
# changes the alpha an accept length implies. The team's 2-step drafter at accept length 2.0, and a
# public K2.5 EAGLE-3 drafter measured at 51.78% acceptance with k = 4 in vLLM:

# %%
display(AcceptanceMetrics.from_accept_length(2.0, k=2), AcceptanceMetrics.from_rate(0.5178, k=4))

# %% [markdown]
# ## The calculator
# Move the sliders (this needs a running kernel): the readouts and the chart update as you drag.
# Untick "unbounded chain" to price draft steps; "alpha" switches the input to per-token acceptance.

# %%
Calculator.preset("seed")

# %% [markdown]
# ## What-if without a kernel
# The same chart with plotly's own slider: it works in the rendered HTML, where no Python runs.
# Drag along accept length; the readout shows throughput and speedup over the 82 tok/s baseline.

# %%
whatif_figure(seed, accept_length=2.0, target_tps=150)
