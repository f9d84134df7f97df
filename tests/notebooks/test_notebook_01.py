"""notebooks/01_hub_search.ipynb runs top to bottom on the demo (nbclient, cwd notebooks/, EAGLEKIT_DEMO set)
and leaves static tables behind for readers without a kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_hub_search.ipynb"


@pytest.fixture(scope="module")
def executed(executed_notebook):
    return executed_notebook("01_hub_search")


def _outputs(cell) -> str:
    return json.dumps(cell.get("outputs", []))


@pytest.mark.notebook
def test_runs_without_errors_or_leaks(executed, demo):
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    text = json.dumps([c.get("outputs", []) for c in code])
    assert str(demo.root) not in text and str(Path.home()) not in text and "hf_test_token" not in text


@pytest.mark.notebook
def test_shows_the_story(executed):
    code = [c for c in executed.cells if c.cell_type == "code"]
    by_source = {c.source.strip().splitlines()[-1]: c for c in code}
    everything = _outputs(by_source["print(repr(everything))"])
    assert "16 EAGLE-3 drafters among 28 Hub models" in everything
    log = _outputs(next(c for c in code if "listing page" in c.source))
    assert "'listing page': 4" in log  # 28 models in pages of 8
    excluded = _outputs(next(c for c in code if "everything.excluded" in c.source))
    assert "excluded  demo-mirror/Llama-3.1-8B-Instruct-EAGLE3" in excluded
    assert "card says 'demo-RedHatAI/Qwen3-8B-speculator.eagle3' for demo-AngelSlim/Qwen3-8B_eagle3" in excluded
    assert "for demo-someone/draft-head-v2: ignored (it names a drafter); target: unknown" in excluded
    assert "7 fit target demo-moonshot/Kimi-K2-Instruct" in _outputs(by_source["fit"])


@pytest.mark.notebook
def test_each_table_is_shown_once(executed):
    """Item 7: the same 15-row table was shown four times (search, fit, DataFrame, widget, its static copy)."""
    code = [c for c in executed.cells if c.cell_type == "code"]
    tables = [o for c in code for o in c.outputs if "<table" in o.get("data", {}).get("text/html", "")]
    assert len(tables) == 1 and "fit target demo-moonshot/Kimi-K2-Instruct" in tables[0]["data"]["text/html"]
    assert "demo-someone/draft-head-v2" in tables[0]["data"]["text/html"]
    app = next(c for c in code if "widgets.VBox" in c.source)
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in app.outputs)
    assert "show()" not in app.source.replace("def show(", "")  # the widget's table fills only when you search
