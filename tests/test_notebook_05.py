"""notebooks/05_accept_length.ipynb runs clean, shows its figures, and its rendered HTML keeps a working
what-if slider with no kernel and no network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_accept_length.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def executed(executed_notebook):
    return executed_notebook("05_accept_length")


def _outputs(nb) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


@pytest.mark.notebook
def test_runs_and_shows_the_seed_numbers_the_calculator_and_the_whatif(executed):
    outputs = _outputs(executed)
    assert not [o for o in outputs if o.output_type == "error"]
    text = json.dumps(outputs)
    assert "accept length 2.46" in text  # break-even
    assert "150 tok/s needs accept length 4.50 (alpha 0.78)" in text
    assert "200 tok/s needs accept length 6.00 (alpha 0.83)" in text
    assert "33.33 ms" in text  # the cycle 60 tok/s at 2.0 implies
    assert any(WIDGET in o.get("data", {}) for o in outputs), "the Calculator widget is not displayed"
    (whatif,) = [o["data"][PLOTLY] for o in outputs if PLOTLY in o.get("data", {})]
    (slider,) = whatif["layout"]["sliders"]
    assert slider["steps"][slider["active"]]["label"] == "2.0" and len(slider["steps"]) == 71
    html = [o["data"]["text/html"] for o in outputs if PLOTLY in o.get("data", {})][0]
    assert "Plotly.newPlot" in html  # rendered HTML gets a figure, not just the mimetype JSON


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.notebook
@pytest.mark.browser
def test_rendered_html_slider_moves_the_point_without_a_kernel(executed, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    from eaglekit.view.report import export_html

    page_path = tmp_path / "05.html"
    page_path.write_text(export_html(executed), encoding="utf-8")
    with sync_api.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=_chromium())
        except Exception as e:  # no browser on this machine
            pytest.skip(f"no Chromium to drive: {e}")
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
        page.goto(page_path.as_uri())
        readout = page.locator(".js-plotly-plot .annotation-text").first
        readout.wait_for(state="attached", timeout=15_000)
        assert readout.text_content() == "accept length 2.00 (alpha 0.50): 66.7 tok/s, 0.81x baseline; break-even 2.46"
        page.wait_for_load_state("load")
        rail = page.locator(".js-plotly-plot .slider-rail-touch-rect").first
        for _ in range(5):  # the page may still shift while it settles: measure, click, check
            rail.scroll_into_view_if_needed()
            box = rail.bounding_box()
            page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2)  # 4.5 of 1.0-8.0
            page.wait_for_timeout(300)
            if readout.text_content().startswith("accept length 4.50"):
                break
        assert readout.text_content() == "accept length 4.50 (alpha 0.78): 150.0 tok/s, 1.83x baseline; break-even 2.46"
        browser.close()
    assert not errors
