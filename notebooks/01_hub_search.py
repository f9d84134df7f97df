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
# # 01 · Hub search: find EAGLE-3 drafters by what their configs say
#
# Drafters are named every which way (`EAGLE3-*`, `sglang-EAGLE3-*`, `*-Eagle3`, `*_eagle3`,
# `*-speculator.eagle3`, `*-eagle3-mla`, or nothing drafter-like at all), models that are not drafters
# have "eagle" in their names (RWKV's Eagle-7B, NVIDIA's Eagle2 VLMs), and a model card's `base_model`
# sometimes names another drafter. So `find_drafters` lists the Hub with each model's config summary,
# reads `config.json` of every candidate, and keeps a repo only when its config says EAGLE-3
# (architectures, or `speculators_model_type`). Given a target model, it marks the drafters whose
# hidden size and vocabulary fit it, says why the others do not, and ranks fitting ones first.
#
# Offline, this runs against the demo's Hub-compatible server on 127.0.0.1: **synthetic** repos (owners
# prefixed `demo-`): real-shape drafters at 1/16 scale (Kimi hidden 7168 -> 448), plus the `demo-mini/*`
# repos of the small trained demo world (hidden 64, 96 tokens) that notebook 00 walks through. Set
# `ENDPOINT = "https://huggingface.co"` to search the real Hub.

# %% tags=["parameters"]
import os

DEMO = os.environ.get("EAGLEKIT_DEMO", "../build/demo")
ENDPOINT = None  # a Hub endpoint, e.g. "https://huggingface.co"; None serves the demo Hub on 127.0.0.1
QUERY = None  # text the repo id must contain; None: every model (demo), "eagle" (real Hub)
TARGET = None  # the target model (repo id, hf:// location or config path); None: Kimi-K2
LIMIT = 1000  # how many listed models to examine

# %%
import eaglekit
from eaglekit import serve_demo_hub
from eaglekit import find_drafters

if ENDPOINT:
    hub, endpoint = None, ENDPOINT
    query = QUERY if QUERY is not None else "eagle"
    targets = ["moonshotai/Kimi-K2-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"]
else:
    ws = eaglekit.build_demo(DEMO)
    hub = serve_demo_hub(ws, page_size=8)  # small pages, so the search has to follow them
    endpoint, query = hub.endpoint, QUERY
    targets = ["demo-moonshot/Kimi-K2-Instruct", "demo-moonshot/Kimi-K2.5", "demo-meta-llama/Llama-3.1-8B-Instruct",
               "demo-Qwen/Qwen3-8B"]
target = TARGET or targets[0]

# %% [markdown]
# ## Everything whose config says EAGLE-3
# One search lists the Hub and reads each candidate's config; the table comes once, below, judged
# against a target. Here, what the search found:

# %%
everything = find_drafters(query, limit=LIMIT, endpoint=endpoint)
print(repr(everything))

# %% [markdown]
# What crossed the wire: the listing, page by page (the search follows the `Link` headers), then one
# `config.json` per candidate. Nothing else is read: no weights, no model cards.

# %%
if hub is not None:
    from collections import Counter

    kinds = Counter("listing page" if r.path == "/api/models" else "config.json" if r.path.endswith("config.json")
                    else "other" for r in hub.log)
    print(dict(kinds))

# %% [markdown]
# ## Names lie, configs decide
# These repos have "eagle" in their names or tags, and their configs say they are something else.
# Meanwhile `draft-head-v2` is found although nothing in its name says drafter, and model cards that
# name another drafter as `base_model` are not taken for the target.

# %%
for repo, why in everything.excluded:
    print(f"excluded  {repo:44} {why}")
for hit in everything:
    if hit.base_model and hit.target_source in ("name", None):
        print(f"card says {hit.base_model!r} for {hit.repo}: ignored (it names a drafter); target: {hit.target_label or 'unknown'}")

# %% [markdown]
# ## Which drafters fit my target?
# A drafter fits when its fc layer takes the target's hidden size (`target_hidden_size`) and its
# vocabulary is the target's. Fitting drafters come first (green), then misfits with the reason in
# `why`. The `target` column is what a speculators config declares (its verifier); anything marked
# *inferred* is a guess from the model card or the repo name. Candidates whose config could not be read
# are listed last (yellow) with the reason. Click a column header to sort. (`fit.to_pandas()` gives the
# same rows as a DataFrame.)

# %%
fit = everything.with_target(target, endpoint=endpoint)  # the same search, judged against the target
fit

# %% [markdown]
# The best fit handed straight to `read_inventory` (headers only):

# %%
if fit.fitting:
    best = fit.fitting[0]
    print(eaglekit.read_inventory(best.location, endpoint=endpoint, progress=False).summary())

# %% [markdown]
# ## Search box and target picker
# With a running kernel (`make lab`): type in the box (Enter searches) or pick a target, and the table
# appears below them. They run a search in Python, so a rendered page without a kernel leaves them out.

# %%
import ipywidgets as widgets
from IPython.display import display

query_box = widgets.Text(value=query or "", placeholder="text in the repo id (empty: all)", description="search",
                         continuous_update=False)
target_pick = widgets.Dropdown(options=[("(no target)", None), *((t, t) for t in targets)], value=target,
                               description="target")
table = widgets.Output()
searched = {query: everything}  # query -> results: picking a target re-ranks, it does not search again


def show(_=None):
    with table:
        table.clear_output(wait=True)
        q = query_box.value or None
        if q not in searched:
            searched[q] = find_drafters(q, limit=LIMIT, endpoint=endpoint)
        results = searched[q]
        display(results.with_target(target_pick.value, endpoint=endpoint) if target_pick.value else results)


query_box.observe(show, "value")
target_pick.observe(show, "value")
widgets.VBox([widgets.HBox([query_box, target_pick]), table])  # the table above is not repeated until you search
