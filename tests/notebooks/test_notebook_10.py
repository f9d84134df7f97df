"""Notebook 10 on the trained demo: the engine's live readings from the replaying server, beside the offline
figure; the gap is real and opens at step 1 (the demo serves the first step worse); the widget is there."""

from __future__ import annotations

import html
import json
import re

import pytest


@pytest.mark.notebook
def test_after_deploy_notebook(executed_notebook):
    nb = executed_notebook("10_after_deploy")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = html.unescape(json.dumps(outputs))    # the headline is read where the page shows it: the HTML
    assert "5 successive live readings" in text
    head = re.search(r"offline ([0-9.]+) \(([0-9.]+)-([0-9.]+)\) vs engine ([0-9.]+) \(([0-9.]+)-([0-9.]+)\) at 3 steps: "
                     r"gap ([-+]?[0-9.]+) \(([-+]?[0-9.]+)-([-+]?[0-9.]+)\) -> (REAL GAP|REVERSE GAP|TOO CLOSE TO CALL)", text)
    assert head, text[:2000]
    offline, live, gap_low = float(head[1]), float(head[4]), float(head[8])
    assert live < offline and gap_low > 0 and head[10] == "REAL GAP"
    assert "at step 1: the drafter" in text
    assert "application/vnd.plotly.v1+json" in text
    assert "application/vnd.jupyter.widget-view+json" in text  # the read-again widget, in a kernel
