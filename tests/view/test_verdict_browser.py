"""The answer on the first screen: each page that judges the K2.5 candidates (00, 06, 08, 10) and the report's index,
rendered and opened in headless Chromium at 1280 x 900, shows its verdict block starting within the first 900 px."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.notebook]

PAGES = ("00_investigation", "06_acceptance", "08_serving_plan", "10_after_deploy")
SCREEN = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def rendered(notebook_demo, tmp_path_factory):
    """The four pages and the index, rendered from the pages this run executed."""
    from runfixtures import executed_page

    from eaglekit.view.report import build_report

    out = tmp_path_factory.mktemp("verdict-report")
    build_report(out, demo=notebook_demo.root, only=list(PAGES),
                 execute=lambda path: executed_page(path.stem, notebook_demo.root))
    return out


@pytest.mark.parametrize("name", [*PAGES, "index"])
def test_the_verdict_block_is_on_the_first_screen(chromium, rendered, name):
    page = chromium.new_page(viewport=SCREEN)
    page.goto((rendered / f"{name}.html").as_uri())
    page.wait_for_load_state("load")
    block = page.locator(".eaglekit-verdict").first
    box = block.bounding_box()
    assert box is not None, f"{name}: no verdict block"
    assert box["y"] < SCREEN["height"], f"{name}: the verdict block starts at {box['y']:.0f} px"
    assert "GO" in block.inner_text()
    page.close()
