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
