"""The report's index carries the investigation's answer: the first verdict block among the pages' outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat

from eaglekit.view.report import RenderedNotebook, _index, verdict_block

BLOCK = '<div class="eaglekit-verdict" data-verdicts="warm start=GO@2"><table></table></div>'


def _nb(*htmls: str):
    nb = nbformat.v4.new_notebook()
    for h in htmls:
        cell = nbformat.v4.new_code_cell("x")
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": h, "text/plain": "x"})]
        nb.cells.append(cell)
    return nb


def test_the_index_opens_with_the_verdict_block():
    assert verdict_block(_nb("<p>a table</p>", BLOCK)) == BLOCK
    assert verdict_block(_nb("<p>no verdict here</p>")) == ""
    page = RenderedNotebook("00_investigation", "00 · Investigation", Path("00_investigation.html"), (), None)
    index = _index([page], BLOCK)
    assert index.index(BLOCK) < index.index('<ul class="pages">')
    assert "The investigation's answer" in index and "The investigation's answer" not in _index([page])
