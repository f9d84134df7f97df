"""Notebook 06's "How many samples" section: both curves with their bands, the break-even line of the page's
serving cycle, and the seed's question answered from the page's own figures."""

from __future__ import annotations

import json
import re

import pytest


@pytest.mark.notebook
def test_how_many_samples_section(executed_notebook):
    nb = executed_notebook("06_acceptance")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o["data"]["application/vnd.plotly.v1+json"] for o in outputs
               if "application/vnd.plotly.v1+json" in o.get("data", {})]
    curve = next(f for f in figures if "Accept length vs training samples" in json.dumps(f["layout"]["title"]))
    names = {t.get("name") for t in curve["data"]}
    for label in ("scratch", "warm start"):
        assert {f"{label}: checkpoints", f"{label}: 95% band", f"{label}: fit", f"{label}: extrapolated"} <= names
    # the break-even of the page's serving cycle at the drafters' trained depth (K = 3)
    drawn = re.search(r"break-even (\d\.\d\d)", json.dumps(curve["layout"].get("annotations", [])))
    assert drawn, curve["layout"].get("annotations")
    # the answer is judged against the line the figure draws
    answer = next(o["text"] for o in outputs
                  if o.get("name") == "stdout" and f"against a break-even of {drawn.group(1)}" in o.get("text", ""))
    m = re.search(r"With (\d+) samples, warm start measures ([\d.]+) .* and scratch ([\d.]+) .*: warm start ([A-Z -]+), "
                  r"scratch ([A-Z -]+) \(", answer)
    assert m, answer
    warm, scratch = float(m.group(2)), float(m.group(3))
    assert warm > scratch and m.group(5) == "NO-GO"
    need = re.search(r"scratch reaches break-even at about ([\d,.]+) ", answer)
    assert need and float(need.group(1).replace(",", "")) > int(m.group(1)), answer
