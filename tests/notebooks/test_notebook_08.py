"""notebooks/08_serving_plan.ipynb runs clean on the demo (its third section plans the trained world's three K2.5
candidates): the seed as measured rows (82 and 60 tok/s
given back, every k with an interval, the config's ratio beside the measured 2.46x), the plan across batch sizes
with the capacity check, the fitted grid as a heatmap, a published sweep, the engines' configs and the widget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_serving_plan.ipynb"


@pytest.mark.notebook
def test_serving_plan_notebook_shows_the_seed_the_plan_and_the_widget(executed_notebook):
    nb = executed_notebook(NOTEBOOK.stem)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = " ".join(json.dumps(outputs).split())
    assert "measured 2.46x" in text and "82.0" in text and "60.0 (" in text and "23.5" in text
    assert "kimi-k2-fp8: from the config alone a 3-token verify costs" in text
    assert "With a verify that grows with k (K2.5, INT4 experts" in text
    assert "num_speculative_tokens_per_batch_size" in text and "--speculative-num-steps" in text
    assert "do not fit" in text and "at most 109 concurrent requests" in text and "stops paying at batch 1" in text
    assert "the one run that most narrows" in text and "NO-GO" in text and "TOO CLOSE TO CALL" in text
    # the inline chart draws bars even where the best k is 0; 11 batch sizes take their labels on two lines
    assert "<svg" in text and "<tspan>k=0</tspan>" in text and ">1.00x</tspan>" in text
    assert "Speedup over no speculation at every (batch size, k)" in text  # the fitted grid
    assert sum("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs) == 3
    assert sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs) == 1


@pytest.mark.notebook
def test_the_four_candidates_are_planned_with_dflash_through_the_block_path(executed_notebook):
    """Page 08 plans the three EAGLE-3 candidates and the DFlash one (its block cycle sized from its config) per batch
    size, names the best of all four with its engine flags, and shows the DFlash accept length and interval that
    pages 00 and 06 show."""
    import re

    from test_investigation import dflash_figures

    nb = executed_notebook(NOTEBOOK.stem)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "block_drafter=[DFLASH_CONFIG]" in c.source)
    html = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
    text = json.dumps(cell.outputs)
    assert "DFlash block forward: prior from DFlash drafter (1 layers, hidden 64)" in text
    rows = [re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)]
    dflash = [r for r in rows if r.count("DFlash") == 2]  # the candidate and its family (the verdicts per batch size)
    assert len(dflash) == 3, rows  # one per planned batch size
    bottom = "".join(o.get("data", {}).get("text/plain", "") for c in executed_notebook("00_investigation").cells
                     if c.cell_type == "code" and "bottom_line = eaglekit.conclude_acceptance(" in c.source
                     for o in c.get("outputs", []))
    at3 = dflash_figures(bottom)[0]
    assert all(at3 in r for r in dflash), (at3, dflash)
    for name in ("warm start", "scratch", "public MLA drafter"):
        assert sum(name in r for r in rows) == 3, name
    assert "--speculative-algorithm" in html and "best" in html
    best = [r for r in rows if r and r[0] in ("1", "8", "32") and any(": EAGLE-3 chain" in c or ": DFlash K=" in c
                                                                      or "no speculation" in c for c in r)]
    assert len(best) == 3, rows
