"""notebooks/04_weight_similarity.ipynb runs top to bottom on the demo (nbclient, cwd notebooks/,
EAGLEKIT_DEMO set) and leaves its tables and heatmaps behind, holding no absolute path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "04_weight_similarity.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def executed(executed_notebook):
    return executed_notebook("04_weight_similarity")


def _outputs(nb) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


@pytest.mark.notebook
def test_runs_clean_with_tables_and_heatmaps(executed, demo):
    outputs = _outputs(executed)
    assert not [o for o in outputs if o.output_type == "error"]
    text = json.dumps(outputs)
    absolute = re.compile(r"(?<!\.\.)" + re.escape(str(demo.root)))  # ../../tmp/... is the relative spelling
    assert not absolute.search(text) and str(Path.home()) not in text
    assert "widget-view" not in text  # the demo reads less than PROGRESS_BYTES: no bar, however loaded the machine
    tables = [o["data"]["text/html"] for o in outputs if "Weight similarity of" in o.get("data", {}).get("text/html", "")]
    assert len(tables) == 2 and "fc.weight[high: aux layer 58]" in tables[0] and "embed_tokens.weight" in tables[1]
    figures = [o["data"][PLOTLY] for o in outputs if PLOTLY in o.get("data", {})]
    titles = [f["layout"]["title"]["text"] for f in figures]
    assert len(figures) == 7

    def value(title: str, prefix: str) -> float:
        assert title.startswith(prefix), title
        return float(title[len(prefix):])

    assert value(titles[1], "midlayer.mlp.up_proj.weight: ‖a−b‖/‖a‖ ") == pytest.approx(0.30, abs=0.02)
    assert value(titles[3], "fc.weight[high: aux layer 58]: ‖a−b‖/‖a‖ ") == pytest.approx(0.6, abs=0.02)
    assert value(titles[4], "fc.weight[low: aux layer 2]: ‖a−b‖/‖a‖ ") == pytest.approx(0.1, abs=0.02)
    assert abs(value(titles[5], "fc.weight[high: aux layer 58]: cosine ")) < 0.02  # scratch: unrelated
    assert figures[3]["data"][0]["zmax"] == figures[4]["data"][0]["zmax"] == 0.8  # one colour range
