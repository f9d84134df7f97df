"""Notebook 11 on the trained demo: the answer by context first, accept length against context with the drafters'
range drawn, the (batch, context) plan, and schedules engines read, each printed as JSON that parses."""

from __future__ import annotations

import html
import json
import re

import pytest


@pytest.mark.notebook
def test_long_context_notebook(executed_notebook):
    nb = executed_notebook("11_long_context")
    code = [c for c in nb.cells if c.cell_type == "code"]
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    first = html.unescape(json.dumps(code[0].outputs))       # the answer first: the verdict by context
    assert "eaglekit-context-verdict" in first
    cells = dict(re.findall(r"([a-zA-Z ]+@\d+)=(GO|NO-GO|TOO CLOSE TO CALL)", first))
    assert cells["warm start@4096"] == "NO-GO" and cells["scratch@4096"] == "NO-GO"
    assert cells["warm start@47"] != "NO-GO"
    assert "NO-GO from context" in first
    text = html.unescape(json.dumps(outputs))
    assert "trained length 48" in text and "max_position_embeddings 8192" in text    # the drafters' range, drawn
    assert "application/vnd.plotly.v1+json" in text
    printed = [json.loads(line) for o in outputs if o.output_type == "stream"
               for line in o.text.splitlines() if line.startswith(("{", "["))]
    vllm = next(p for p in printed if isinstance(p, dict) and "num_speculative_tokens_per_batch_size" in p)
    assert all(len(row) == 5 for row in vllm["num_speculative_tokens_per_batch_size"])
    assert any(isinstance(p, dict) and "draft_len_schedule" in p for p in printed)
    assert any(isinstance(p, dict) and p.get("rejection_sample_method") == "synthetic" for p in printed)
    profile = next(p for p in printed if isinstance(p, dict) and "conventions" in p)
    assert set(profile["conventions"]) == {"conditional", "marginal"}
