"""notebooks/05_accept_length.ipynb runs clean, shows its figures, and its rendered HTML keeps a working
what-if slider with no kernel and no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "05_accept_length.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def executed(executed_notebook):
    return executed_notebook("05_accept_length")


def _outputs(nb) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


@pytest.mark.notebook
def test_runs_and_shows_one_account_and_the_calculator(executed):
    outputs = _outputs(executed)
    assert not [o for o in outputs if o.output_type == "error"]
    text = " ".join(json.dumps(outputs).split())
    # the seed's verify-only figures, reproduced and labelled as such
    assert "150 tok/s needs accept length 4.50 (alpha 0.78) in the verify-only model" in text
    assert "200 tok/s needs accept length 6.00 (alpha 0.83) in the verify-only model" in text
    # the measured account beside them, with steps and draft cost, and the difference explained
    assert "33.33 ms = verify 30 + 2 x draft 1.67" in text and "accept length 2.73 on the measured cycle" in text
    assert "2.46 on verify alone" in text and "why two figures" in text
    assert "150 tok/s is out of reach at k = 2 draft steps of 1.67 ms" in text
    assert "verify grows with k (K2.5, INT4 experts)" in text  # the same targets on a verify that grows with k
    widgets = [o for o in outputs if WIDGET in o.get("data", {})]
    assert len(widgets) == 1, "the Calculator is displayed once"
    assert not [o for o in outputs if PLOTLY in o.get("data", {})]  # the calculator draws its own chart
