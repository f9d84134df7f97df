"""A cell past its limit stops the run with one line naming the notebook, the cell and how long it ran."""

from __future__ import annotations

import nbformat
import pytest

from eaglekit.view.report import NotebookError, execute_notebook


@pytest.mark.notebook
def test_a_stuck_cell_is_named(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_code_cell("import time\ntime.sleep(30)  # stuck")]
    path = tmp_path / "stuck.ipynb"
    nbformat.write(nb, str(path))
    with pytest.raises(NotebookError) as e:
        execute_notebook(path, timeout=3)
    message = str(e.value)
    assert message.startswith("stuck.ipynb: cell 2 ('import time')"), message
    assert "past its 3 s limit" in message and "--timeout" in message and "\n" not in message
