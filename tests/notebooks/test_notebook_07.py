"""Notebook 07 on the demo: how to open the Dask dashboard is said (no dead link is shown), sampled figures are checked against the full
pass, the hidden-state table is there, and the drafter fits the targets (one demo world)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.notebook
def test_target_drift_notebook(executed_notebook):
    nb = executed_notebook("07_target_drift")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = json.dumps(outputs)
    assert "dashboard" not in text and "inproc://" not in text and "127.0.0.1:" not in text  # issue 24: no dead link
    assert "client.dashboard_link" in json.dumps([c.source for c in nb.cells if c.cell_type == "markdown"])
    assert "sampled read" in text and "covered" in text
    assert "linear CKA" in text and "output of layer 2" in text
    # issue 24: one world: the drafter fits the targets, so the figures of what it reads are all there
    assert "does not fit" not in text and "drafter_misfit=()" in text
    assert "lm_head, draft rows" in text and "SGLang before #25454 aux id 2" in text and "SGLang since #25454 aux id 2" in text and "Embedding (the drafter's frozen copy)" in text


def test_the_index_says_which_pages_run_on_the_demo_world():
    """Issue 24: the report's index text is true: the pages that build the trained world are the ones it names,
    and the random real-shape pages never measure a drafter against a target."""
    import re
    from pathlib import Path

    from eaglekit.view.report import INDEX_STORY

    folder = Path(__file__).resolve().parents[2] / "notebooks"
    on_world = {p.name[:2] for p in folder.glob("[0-9][0-9]_*.py")
                if re.search(r"\.trained\b|build_trained_demo|build_token_demo", p.read_text())}
    named = re.search(r"wherever a drafter is measured or checked against a target \(([\d, ]+)\)", INDEX_STORY).group(1)
    assert set(named.split(", ")) == on_world == {"00", "03", "06", "07", "08", "09", "10", "11"}
