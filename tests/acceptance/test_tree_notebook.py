"""Notebook 06's tree section on the trained world: the trees beside the chain, both attention readings."""

from __future__ import annotations

import json
import re

import pytest


@pytest.mark.notebook
def test_tree_section_of_notebook_06(executed_notebook):
    cells = executed_notebook("06_acceptance").cells
    text = json.dumps([o for c in cells if c.cell_type == "code" for o in c.outputs])
    assert '"output_type": "error"' not in text
    assert "Tree drafts (ancestors attention" in text            # the record, chain beside it
    assert "tree, SGLang slots" in text and "left first child" in text
    # issue 39: deeper trees on the page's 48 prompts, so the table is not all at the run's ceiling
    assert re.search(r"\b8\s+10\s+60\s+\d\.\d{3}", text), "the 8:10:60 tree's row"
    assert "^ at the ceiling the run's lengths allow" not in text
