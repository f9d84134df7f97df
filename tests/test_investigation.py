"""The investigation notebook's conclusion comes from the results: other parameters, other verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglekit.analysis.compat import compat
from eaglekit.analysis.conclusion import conclude
from eaglekit.core.specmath import fit_from_measurements

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "00_investigation.ipynb"


def _conclusion(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("from eaglekit.analysis.conclusion import conclude"):
            return cell.outputs[0]["data"]["text/plain"]
    raise AssertionError("no conclusion cell")


@pytest.mark.notebook
def test_parameters_change_the_conclusion(demo):
    from eaglekit.view.report import execute_notebook

    default = _conclusion(execute_notebook(NOTEBOOK, demo=demo.root))
    other = _conclusion(execute_notebook(NOTEBOOK, demo=demo.root, parameters={
        "DRAFTER_B": "hf://demo-lab/Llama-small-EAGLE3", "TARGET": "hf://demo-moonshot/Kimi-K2-Instruct"}))
    assert "compatible-after-remap" in default and "1,500 draft tokens are shared" in default
    assert "trained independently" in default
    assert "verdict='incompatible'" in other and "cannot initialise B" in other
    assert "Weights:" not in other  # similarity is skipped for an incompatible pair


def test_conclusion_sentences_follow_the_numbers(demo):
    fit = fit_from_measurements(82, 60, 2.0, verify_ms=30)
    ft = conclude(compat(demo.drafter("k2"), demo.drafter("k25-finetuned")), fit=fit, expected_accept_length=3.2,
                  target_tps=150)
    assert ft.verdict == "compatible-after-remap"
    assert "only 1,800 draft tokens are shared (90% of the smaller vocabulary)" in ft.sentences[0]
    assert "33.3 ms per draft-verify cycle" in str(ft) and "accept length 2.73" in str(ft)
    assert "150 tok/s needs accept length 5.00" in str(ft)
    twin = conclude(compat(demo.drafter("k2"), demo.drafter("k2-speculators")))
    assert "drop-in" in twin.sentences[0]
    assert "<li>" in twin._repr_html_()
