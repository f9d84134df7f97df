"""notebooks/08_serving_plan.ipynb runs clean (it needs no demo): the seed calibrated (82 and 60 tok/s, the
verify by k with its experts, the config's ratio beside the measured 2.46x), the plan across batch sizes
with its figures, the engines' configs and the widget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_serving_plan.ipynb"


@pytest.mark.notebook
def test_serving_plan_notebook_shows_the_seed_the_plan_and_the_widget():
    from eaglekit.view.report import execute_notebook

    nb = execute_notebook(NOTEBOOK)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = " ".join(json.dumps(outputs).split())
    assert "measured 2.46x" in text and "82.0" in text and "60.0" in text and "23.5" in text
    assert "kimi-k2-fp8: from the config alone a 3-token verify costs" in text
    assert "With a verify that grows with k (K2.5, INT4 experts" in text
    assert "num_speculative_tokens_per_batch_size" in text and "--speculative-num-steps" in text
    assert "stops paying at batch 1024" in text
    assert sum("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs) == 2
    assert sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs) == 1
