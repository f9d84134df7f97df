"""eaglekit.report: the rendered report opens offline, links every notebook, ships its widget front end and
holds no absolute path or token. The page checks read the report rendered once per session
(reportfixtures.py); the pure helpers are checked on hand-made notebooks."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from reportfixtures import NAMES, ROOT, report  # noqa: F401  (report: the session fixture)

from eaglekit.view.report import (ASSETS, PLOTLY_MIME, WIDGET_STATE_MIME, NotebookError, ReportError, build_report,
                             check_page, static_figures, static_widgets)

pytestmark = pytest.mark.xdist_group("report")

PLOTLY_JS_BANNER = "* plotly.js v"


def _page(report, name: str) -> str:  # noqa: F811
    return report.pages[name].html_path.read_text(encoding="utf-8")


# --- the rendered report ---------------------------------------------------------------------------------

@pytest.mark.notebook
def test_index_links_every_notebook_page(report):  # noqa: F811
    index = (report.out / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'<a href="([^"]+)">', index)
    assert links == [f"{name}.html" for name in NAMES]
    assert all((report.out / link).is_file() for link in links)
    assert sorted(p.name for p in report.out.glob("*.html")) == sorted([*links, "index.html"])


@pytest.mark.notebook
def test_widget_front_end_is_shipped_beside_the_pages(report):  # noqa: F811
    shipped = {p.name: p.read_bytes() for p in (report.out / "assets").iterdir()}
    assert shipped == {p.name: p.read_bytes() for p in ASSETS.iterdir()}
    assert shipped["embed.js"].startswith(b"/*! For license information please see embed.js.LICENSE.txt */")
    assert b"BSD 3-Clause License" in shipped["LICENSE"]
    with_widgets = [n for n in NAMES if WIDGET_STATE_MIME in _page(report, n)]
    for name in with_widgets:
        assert '<script src="assets/embed.js"></script>' in _page(report, name)
    if "05_accept_length" in NAMES:
        assert "05_accept_length" in with_widgets  # the calculator's sliders are stored


@pytest.mark.notebook
@pytest.mark.parametrize("name", NAMES)
def test_page_loads_nothing_from_the_web(report, name):  # noqa: F811
    from plotly.offline import get_plotlyjs

    html = _page(report, name)
    assert check_page(html, plotly_js=get_plotlyjs()) == []
    sources = re.findall(r"<script[^>]*\bsrc=[\"']?([^\"' >]+)", html)
    assert all(not re.match(r"(?i)(https?:)?//", src) for src in sources), sources
    for cdn in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net", "require.min.js"):
        assert cdn not in html.replace(get_plotlyjs(), ""), f"{name}.html names {cdn}"
    # plotly.js is inlined exactly once on a page with figures, and not at all on one without
    assert html.count(PLOTLY_JS_BANNER) == (1 if report.pages[name].figures else 0)


@pytest.mark.notebook
@pytest.mark.parametrize("name", NAMES)
def test_page_holds_no_absolute_path_or_token(report, name):  # noqa: F811
    html = _page(report, name)
    private = [ROOT, report.demo.resolve(), report.out.resolve(), Path.home()]
    assert check_page(html, paths=private) == []
    assert "hf_test_token" not in html


@pytest.mark.notebook
def test_report_draws_the_calculator_whatif(report):  # noqa: F811
    if "05_accept_length" not in NAMES:
        pytest.skip("notebooks/05_accept_length.ipynb is not there yet")
    page = report.pages["05_accept_length"]
    assert len(page.figures) >= 1 and all(n > 0 for n in page.figures)
    html = _page(report, "05_accept_length")
    assert "A live FigureWidget sits here" in html  # the anywidget chart needs a kernel: a note stands in
    assert '"_esm"' not in html  # ... and its 5 MB of JavaScript is not in the page


# --- the helpers, on hand-made notebooks --------------------------------------------------------------

def _nb(outputs, widget_state=None):
    import nbformat

    cell = nbformat.v4.new_code_cell("fig")
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nb = nbformat.v4.new_notebook(cells=[cell])
    if widget_state is not None:
        nb.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": widget_state, "version_major": 2, "version_minor": 0}}
    return nb


def test_static_figures_drop_plotlyjs_copies_and_render_without_mathjax():
    figure = {"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4]}, {"type": "bar", "x": [1], "y": [2]}],
              "layout": {"title": {"text": "t"}}}
    loader = "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script><script>/**\n* plotly.js v4</script>"
    nb = _nb([
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": loader}},
        {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {
            PLOTLY_MIME: figure, "text/html": '<script src="https://cdnjs.cloudflare.com/mathjax.js"></script>',
            "text/plain": "Figure"}},
    ])
    assert static_figures(nb) == (2,)
    (output,) = nb.cells[0].outputs
    html = output["data"]["text/html"]
    assert "Plotly.newPlot" in html and "mathjax" not in html.lower() and "<script src" not in html
    assert output["data"][PLOTLY_MIME] == figure  # JupyterLab keeps drawing from the JSON


def test_static_widgets_replace_models_that_need_a_cdn_by_a_note():
    controls = {"model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
                "model_name": "FloatSliderModel", "state": {"value": 2.0}}
    anywidget = {"model_module": "anywidget", "model_module_version": "~0.11.*", "model_name": "AnyModel",
                 "state": {"_anywidget_id": "plotly.graph_objs._figurewidget.FigureWidget", "_esm": "x" * 1000,
                           "layout": "IPY_MODEL_l1"}}
    nb = _nb([], {"s1": controls, "f1": anywidget})
    assert static_widgets(nb) == ["FigureWidget"]
    state = nb.metadata["widgets"][WIDGET_STATE_MIME]["state"]
    assert state["s1"] == controls
    assert state["f1"]["model_name"] == "HTMLModel" and state["f1"]["model_module"] == "@jupyter-widgets/controls"
    assert state["f1"]["state"]["layout"] == "IPY_MODEL_l1" and "_esm" not in state["f1"]["state"]
    assert "A live FigureWidget sits here: it needs a running kernel" in state["f1"]["state"]["value"]


@pytest.mark.parametrize("html, problem", [
    ('<script src="https://cdn.example/x.js"></script>', "loads '<script src=\"https://'..."),
    ("<script src='//cdn.example/x.js'></script>", "loads \"<script src='//\"..."),
    ('<link rel="stylesheet" href="http://fonts.example/a.css">', "loads '<link rel=\"stylesheet\" href=\"http://'..."),
    ("<style>@import 'https://fonts.example/a.css';</style>", "loads \"@import 'https://\"..."),
    ("<style>a{background:url(https://x.example/i.png)}</style>", "loads 'url(https://'..."),
    ('<script type="module">import "https://esm.example/m.js"</script>', "loads 'import \"https://'..."),
    ("key hf_" + "a" * 34, "holds a token"),
    ("http://127.0.0.1:8888/lab?token=" + "0123456789abcdef" * 3, "holds a token"),
])
def test_check_page_names_what_would_break_offline_or_leak(html, problem):
    assert check_page(html) == [problem]


def test_check_page_allows_links_relative_paths_and_the_inlined_plotlyjs():
    html = ('<a href="https://arxiv.org/abs/2211.17192">paper</a><script src="assets/embed.js"></script>'
            "<pre>DEMO = '../../../srv/ci/demo/ws'</pre><script>PLOTLY url(https://tiles.example)</script>")
    assert check_page(html, paths=["/srv/ci/demo/ws"], plotly_js="PLOTLY url(https://tiles.example)") == []
    assert check_page("<pre>/srv/ci/demo/ws/drafters</pre>", paths=["/srv/ci/demo/ws/"]) == [
        "holds the absolute path /srv/ci/demo/ws"]
    assert check_page("<pre>/srv/ci/demo/wsx</pre>", paths=["/srv/ci/demo/ws"]) == []


def test_check_page_finds_a_token_from_the_environment(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "my-secret-value")
    assert check_page("<pre>Bearer my-secret-value</pre>") == ["holds a token"]


@pytest.mark.notebook
def test_build_report_refuses_a_page_that_leaks_or_fetches(demo, tmp_path):
    import nbformat

    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    cell = nbformat.v4.new_code_cell("import os\nfrom IPython.display import HTML\nprint(os.getcwd())\n"
                                     "HTML('<script src=\"https://cdn.example/x.js\"></script>')")
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), notebooks / "leaky.ipynb")
    with pytest.raises(ReportError) as info:
        build_report(tmp_path / "out", demo=demo.root, notebooks=notebooks)
    message = str(info.value)
    assert message.startswith("leaky.ipynb renders a page that loads '<script src=\"https://'...; "
                              f"holds the absolute path {notebooks.resolve().parent}")
    assert message.endswith("and load nothing from the web.")
    assert not (tmp_path / "out" / "leaky.html").exists()


@pytest.mark.notebook
def test_build_report_names_the_notebook_that_fails(demo, tmp_path):
    import nbformat

    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")]), notebooks / "broken.ipynb")
    with pytest.raises(NotebookError, match=r"^broken.ipynb failed: ZeroDivisionError: division by zero$"):
        build_report(tmp_path / "out", demo=demo.root, notebooks=notebooks)


def test_main_reports_an_error_in_one_line(tmp_path, capsys):
    from eaglekit.cli import main

    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "stray.txt").write_text("not a demo")
    assert main(["report", "--demo", str(tmp_path / "demo"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eaglekit report: error: ") and err.count("\n") == 1 and "not an eaglekit demo workspace" in err
    assert os.listdir(tmp_path) == ["demo"]


def test_channel_waits_poll_in_short_slices_up_to_the_same_deadline():
    import asyncio
    from queue import Empty

    from eaglekit.view.report import POLL_SLICE, _in_slices

    asked: list[float | None] = []

    async def get_msg(timeout=None):  # a message that a long poll would have missed until its timeout
        asked.append(timeout)
        if len(asked) < 3:
            raise Empty
        return {"msg_type": "execute_reply"}

    assert asyncio.run(_in_slices(get_msg)(timeout=900)) == {"msg_type": "execute_reply"}
    assert asked == [POLL_SLICE] * 3
    asked.clear()
    assert asyncio.run(_in_slices(get_msg)(timeout=None))["msg_type"] == "execute_reply"

    async def never(timeout=None):
        await asyncio.sleep(timeout)
        raise Empty

    start = time.monotonic()
    with pytest.raises(Empty):  # nothing comes: Empty at the caller's deadline, as before
        asyncio.run(_in_slices(never)(timeout=1.2))
    assert 1.2 <= time.monotonic() - start < 2.5
