"""Notebook 09 on the trained demo: the tokenizer diff names the new specials, the template gap is shown
and sits in the thinking block, the old-traffic map covers the new traffic worse than the recommended one."""

from __future__ import annotations

import json
import re

import pytest


@pytest.mark.notebook
def test_tokens_notebook(executed_notebook):
    nb = executed_notebook("09_tokens")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = json.dumps(outputs)
    assert "Loading weights" not in text          # transformers' loading bar stays out of the page
    assert "&lt;think&gt;" in text or "<think>" in text
    assert "tokenizers differ in" in text and "eos_token" in text
    gap = re.search(r"accept length ([0-9.]+) under \S+, ([0-9.]+) under \S+ \(gap ([-+][0-9.]+)\)", text)
    assert gap and float(gap[3]) < 0 and float(gap[2]) < float(gap[1])
    cov = re.search(r"old-traffic map: ([0-9.]+)% of the new traffic; recommended map: ([0-9.]+)%", text)
    assert cov and float(cov[1]) < float(cov[2])
    # the gain is read against its own noise: a paired bootstrap over the same prompts, and a three-way verdict
    assert re.search(r"the gain [+-]\d\.\d\d \([+-]\d\.\d\d to [+-]\d\.\d\d, paired bootstrap over \d+ prompts, "
                     r"95%\): re-mapping alone (helps|hurts|is too close to call)\.", text), text
