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
# # 05 · Accept length: when does speculation pay?
#
# The seed account: Kimi-K2.5 on 8 GPUs decodes at **82 tok/s** without speculation. With the team's
# EAGLE-3 drafter (37K training samples, **2 draft steps** per cycle) the accept length was **2.0** and
# decoding fell to **59-61 tok/s**, 27% slower. The verify step costs about **30 ms** per cycle. The
# team's arithmetic: break-even needs 2.46; 150 tok/s needs 4.5 (78% per-token acceptance) and 200
# tok/s needs 6.0 (83%).
#
# That arithmetic is one of two models of the cycle, and this page (like notebook 00, the README and
# `eaglekit speedup --spec-tps`) shows both in one account:
# * **verify only**: the cycle is the 30 ms verify, drafting counted free, no limit on draft steps;
# * **measured**: 60 tok/s at accept length 2.0 means 33.3 ms per cycle; the 3.3 ms beyond verify is
#   the 2 draft steps (1.67 ms each, other per-cycle costs included), and 2 steps emit at most 3 tokens.
#
# Convention: the accept length counts the bonus token the target adds every cycle (as vLLM, SGLang
# and EAGLE report it), so it is at least 1 and at most k + 1 with k draft steps. The maths is
# Leviathan et al. 2023 (arXiv 2211.17192); every number below comes from `eaglekit`.

# %%
from IPython.display import display

from eaglekit import Account, Calculator
from eaglekit import AcceptanceMetrics, Scenario, estimate

# %% [markdown]
# ## The account
# The measured cycle, the verify-only figures and why they differ, each target at the deployment's
# 2 steps (and what steps and draft cost would reach it), and what the public K2 drafter's 3.2-3.5 gives.

# %%
account = Account.seed()
account

# %% [markdown]
# ## The seed's verify-only arithmetic, reproduced
# 30 ms per cycle, an unbounded chain, drafting counted free (alpha = 1 - 1/L):

# %%
verify_only = Scenario.seed()
for target_tps in (82, 150, 200):
    need = estimate(verify_only, accept_length=2.0, target_tps=target_tps).target
    print(f"{target_tps:>4} tok/s needs accept length {need.accept_length:.2f} (alpha {need.alpha:.2f}) "
          "in the verify-only model")

# %% [markdown]
# The same targets at the deployment's 2 steps and 1.67 ms per draft step:

# %%
estimate(account.scenario, accept_length=2.0, target_tps=150)

# %% [markdown]
# ## Acceptance in each engine's terms
# vLLM's "acceptance rate" is accepted / drafted tokens, not the per-token alpha, and a finite chain
# changes the alpha an accept length implies. The team's 2-step drafter at accept length 2.0, and a
# public K2.5 EAGLE-3 drafter measured at 51.78% acceptance with k = 4 in vLLM:

# %%
display(AcceptanceMetrics.from_accept_length(2.0, k=2), AcceptanceMetrics.from_rate(0.5178, k=4))

# %% [markdown]
# ## The calculator
# Loaded with the measured deployment. It computes in the browser, so it works here and in the
# rendered report alike, with or without a kernel. An accept length above what the steps allow is
# computed at the ceiling and says so; "unbounded chain" gives the verify-only model; "alpha" switches
# the input to per-token acceptance. "verify growth" is how much the verify grows per drafted token away
# from the 30 ms measured at the deployment's k = 2: the account's growing verify (its last lines; notebook 08)
# is the same line, so moving the steps to 3 here gives what the account says for k = 3 (accept length 3.2:
# 73 tok/s in both). That growth (8.86 ms per drafted token) reads the verify's excess over bytes and FLOPs as a
# cost per verified token; read as a cost per verify forward (launches without CUDA graphs, all-reduces over
# PCIe: notebook 00, section 6a) the verify grows 1.41 ms per drafted token, and 3.2 at k = 3 gives 88 tok/s. Set
# the growth to 0 for a verify held at 30 ms whatever it verifies.

# %%
Calculator.preset("seed")
