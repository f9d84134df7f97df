"""eaglekit.report: the rendered report opens offline, links every notebook, ships its widget front end and
holds no absolute path or token. The page checks read the report rendered once per session
(reportfixtures.py); the pure helpers are checked on hand-made notebooks."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from reportfixtures import NAMES, ROOT, report  # noqa: F401  (report: the session fixture)

from eaglekit.view.report import (
    ASSETS,
    PLOTLY_MIME,
    WIDGET_STATE_MIME,
    NotebookError,
    ReportError,
    build_report,
    check_page,
    machine_addresses,
    static_figures,
    static_widgets,
)

pytestmark = pytest.mark.xdist_group("report")

PLOTLY_JS_BANNER = "* plotly.js v"


def _page(report, name: str) -> str:  # noqa: F811
    return report.pages[name].html_path.read_text(encoding="utf-8")


# --- the rendered report ---------------------------------------------------------------------------------

@pytest.mark.notebook
def test_index_links_every_notebook_page_in_both_forms_and_says_which_is_which(report):  # noqa: F811
    index = (report.out / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'<a href="([^"]+)">', index)
    singles = re.findall(r'<a class="single" href="([^"]+)">single file</a>', index)
    assert links == [f"{name}.html" for name in NAMES]
    assert singles == [f"single/{name}.html" for name in NAMES]
    assert all((report.out / link).is_file() for link in links + singles)
    assert sorted(p.name for p in report.out.glob("*.html")) == sorted([*links, "index.html"])
    assert "<b>folder form</b>" in index and "self-contained pages" in index and "keep this folder together" in index


@pytest.mark.notebook
def test_folder_form_shares_one_plotly_js_and_single_pages_carry_their_own(report):  # noqa: F811
    """Item 9: the report was 20 MB with plotly.js inlined in every page."""
    folder = [report.pages[n].html_path.read_text(encoding="utf-8") for n in NAMES]
    single = [report.pages[n].single_path.read_text(encoding="utf-8") for n in NAMES]
    shared = report.out / "assets" / "plotly.min.js"
    assert shared.read_text(encoding="utf-8").count(PLOTLY_JS_BANNER) == 1
    assert sum(html.count(PLOTLY_JS_BANNER) for html in folder) == 0
    with_figures = [n for n in NAMES if report.pages[n].figures]
    assert len(with_figures) >= 2  # sharing matters only when several pages draw figures
    for name, html in zip(NAMES, single):
        assert html.count(PLOTLY_JS_BANNER) == (1 if report.pages[name].figures else 0)
        assert not re.findall(r"<script[^>]*\bsrc=(?![\"']data:)", html), f"single/{name}.html loads a file"
    folder_bytes = sum(len(h.encode()) for h in folder) + sum(p.stat().st_size for p in (report.out / "assets").iterdir())
    single_bytes = sum(len(h.encode()) for h in single)
    assert folder_bytes < single_bytes


@pytest.mark.notebook
def test_widget_front_end_is_shipped_beside_the_pages(report):  # noqa: F811
    shipped = {p.name: p.read_bytes() for p in (report.out / "assets").iterdir()}
    assert shipped.pop("plotly.min.js").startswith(b"/**\n* plotly.js v")  # the folder form's one shared copy
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
    # the folder form loads the shared plotly.js on a page with figures, and nothing on one without
    assert html.count(PLOTLY_JS_BANNER) == 0
    assert ('<script src="assets/plotly.min.js"></script>' in html) == bool(report.pages[name].figures)


@pytest.mark.notebook
@pytest.mark.parametrize("name", NAMES)
def test_page_holds_no_absolute_path_or_token(report, name):  # noqa: F811
    html = _page(report, name)
    private = [ROOT, report.demo.resolve(), report.out.resolve(), Path.home()]
    assert check_page(html, paths=private) == []
    assert "hf_test_token" not in html


@pytest.mark.notebook
def test_no_page_holds_a_machine_address_and_the_index_tells_the_truth(report):  # noqa: F811
    """Issue 24: 07 linked the Dask dashboard at this machine's address, 03 a loopback server that stopped
    with the kernel; the index said "random weights" while 00, 06, 07 and 09 run on the demo world."""
    pages = sorted(report.out.glob("*.html")) + sorted((report.out / "single").glob("*.html"))
    found = {p.name: machine_addresses(p.read_text(encoding="utf-8")) for p in pages}
    assert {name: a for name, a in found.items() if a} == {}
    index = (report.out / "index.html").read_text(encoding="utf-8")
    assert "wherever a drafter is measured or checked against a target (00, 03, 06, 07, 08, 09, 10, 11)" in index and "(01 to 04)" in index


@pytest.mark.notebook
def test_report_renders_the_calculator_by_its_own_code_and_leaves_out_kernel_controls(report):  # noqa: F811
    html = _page(report, "05_accept_length")
    assert html.count('class="eaglekit-anywidget"') == 1 and "export function compute" in html
    assert "A live" not in html  # the calculator is not replaced by a note: it works without a kernel
    search = _page(report, "01_hub_search")
    assert "they need a running kernel, so this page leaves them out" in search  # the search box and picker
    assert "TextModel" not in re.sub(r'<script type="application/vnd.jupyter.widget-state\+json">.*?</script>', "",
                                     search, flags=re.DOTALL)


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


def test_static_widgets_render_eaglekit_anywidgets_and_leave_out_controls_that_need_a_kernel():
    """Item 5: in a page with no kernel every control either works or is not there."""
    def controls(name, view, **state):
        return {"model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0", "model_name": name,
                "state": {"_view_name": view, **state}}

    calc = {"model_module": "anywidget", "model_module_version": "~0.11.*", "model_name": "AnyModel",
            "state": {"_anywidget_id": "eaglekit.view.calculator.CalculatorWidget", "_esm": "export default {}",
                      "_css": ".x{}", "verify_ms": 30.0}}
    state = {"c1": calc, "t1": controls("TextModel", "TextView"), "d1": controls("DropdownModel", "DropdownView"),
             "o1": controls("OutputModel", "OutputView"),
             "b1": controls("VBoxModel", "VBoxView", children=["IPY_MODEL_t1", "IPY_MODEL_d1", "IPY_MODEL_o1"]),
             "p1": controls("FloatProgressModel", "ProgressView"),
             "h1": controls("HBoxModel", "HBoxView", children=["IPY_MODEL_p1"])}

    def view(model_id):
        return {"output_type": "display_data", "metadata": {}, "data": {
            "application/vnd.jupyter.widget-view+json": {"model_id": model_id, "version_major": 2, "version_minor": 0},
            "text/plain": "w"}}

    nb = _nb([view("c1"), view("b1"), view("h1"), view("closed")], state)
    done = static_widgets(nb)
    calc_out, box_out, bar_out = nb.cells[0].outputs  # a bar closed before the end: dropped, as if it never showed
    html = calc_out["data"]["text/html"]
    assert '<div class="eaglekit-anywidget" id="anywidget-c1">' in html and '"verify_ms": 30.0' in html
    assert '"export default {}"' in html and "await widget.render({model, el})" in html
    assert "Text, Dropdown" in box_out["data"]["text/html"] and "application/vnd.jupyter.widget-view+json" not in box_out["data"]
    assert "application/vnd.jupyter.widget-view+json" in bar_out["data"]  # a progress bar only shows: kept
    assert done == ["rendered CalculatorWidget", "left out Text, Dropdown", "dropped a closed widget"]
    assert "c1" not in nb.metadata["widgets"][WIDGET_STATE_MIME]["state"]  # drawn by its own code: not stored


def test_hidden_and_finished_progress_bars_leave_no_gap():
    """Issue 39: tqdm hides a leave=False bar by its layout (the hidden box still took a line of the page), and a
    finished bar that stays is one line of text, not a widget."""
    def model(name, view, **state):
        return {"model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0", "model_name": name,
                "state": {"_view_name": view, **state}}

    def bar(prefix, value, top, left, right, **look):
        return {f"{prefix}l": {"model_module": "@jupyter-widgets/base", "model_module_version": "2.0.0",
                               "model_name": "LayoutModel", "state": look},
                f"{prefix}a": model("HTMLModel", "HTMLView", value=left),
                f"{prefix}p": model("FloatProgressModel", "ProgressView", value=value, max=top),
                f"{prefix}b": model("HTMLModel", "HTMLView", value=right),
                prefix: model("HBoxModel", "HBoxView", layout=f"IPY_MODEL_{prefix}l",
                              children=[f"IPY_MODEL_{prefix}{k}" for k in "apb"])}

    state = {**bar("hid", 12, 12, "hidden drift:\u2007\u2007\u20070%", "\u20070/12", visibility="hidden"),
             **bar("done", 9, 9, "training the demo world: 100%", "9/9 [01:42&lt;00:00,  5.65s/it]"),
             **bar("run", 3, 9, "measuring:  33%", "3/9")}

    def view(model_id):
        return {"output_type": "display_data", "metadata": {}, "data": {
            "application/vnd.jupyter.widget-view+json": {"model_id": model_id, "version_major": 2, "version_minor": 0},
            "text/plain": "w"}}

    nb = _nb([view("hid"), view("done"), view("run")], state)
    done = static_widgets(nb)
    finished, running = nb.cells[0].outputs
    assert finished["data"] == {"text/plain": "training the demo world: 100% 9/9 [01:42<00:00,  5.65s/it]"}
    assert "application/vnd.jupyter.widget-view+json" in running["data"]  # unfinished: the widget stays
    assert done == ["dropped a hidden widget", "a finished progress bar as text"]


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
    assert problem in check_page(html)


@pytest.mark.parametrize("text, address", [
    ("<pre>http://127.0.0.1:35383/files/demo-team/x/model.safetensors: 15 tensors</pre>", "127.0.0.1:35383"),
    ('<a href="http://localhost:8787/status">dashboard</a>', "localhost:8787"),
    ("<pre>read 2 GB on Dask inproc://10.0.0.5/1234/1 in 3 s</pre>", "inproc://10.0.0.5/1234/1"),
    ("<p>Dask dashboard: http://192.168.1.20:8787/status</p>", "192.168.1.20:8787"),
    ("<pre>tcp://10.1.2.3:8786</pre>", "10.1.2.3:8786"),
    ("<pre>http://0.0.0.0:8888/</pre>", "0.0.0.0:8888"),
])
def test_check_page_refuses_a_machine_address(text, address):
    """Issue 24: page 07 linked the rendering machine's dashboard, page 03 a loopback server that had stopped."""
    assert machine_addresses(text) == [address]
    assert check_page(text) == [f"holds the machine address {address!r} (dead once the kernel stops)"]


def test_check_page_allows_words_about_addresses():
    text = ("<pre>ENDPOINT = None  # None serves the demo's Hub server on 127.0.0.1\n"
            "eaglekit drift A B --full --scheduler tcp://HOST:8786\nversion 10.0.0.1, torch 2.13.0</pre>")
    assert machine_addresses(text) == [] and check_page(text) == []


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

    with pytest.raises(Empty):  # nothing comes: Empty at the caller's deadline, as before
        asyncio.run(_in_slices(never)(timeout=1.2))


@pytest.mark.notebook
def test_executing_a_notebook_prints_no_kernel_transport_noise(tmp_path, capfd):
    """Item 15: ``make report`` printed the kernel's "Kernel is running over TCP without encryption" warning."""
    import nbformat

    from eaglekit.view.report import execute_notebook

    path = tmp_path / "tiny.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), str(path))
    nb = execute_notebook(path)
    assert nb.cells[0].outputs[0]["data"]["text/plain"] == "2"
    out, err = capfd.readouterr()
    assert "running over TCP" not in out + err


def test_printed_lines_wrap_at_spaces_not_mid_word():
    """Issue 39: JupyterLab's output CSS (word-break: break-all) split printed words ("scrat" / "ch"); the report's
    template overrides it with a more specific rule, since the lab template's own comes later in the page."""
    from eaglekit.view import report as report_module

    template = (Path(report_module.__file__).parent / "report_template" / "index.html.j2").read_text()
    rule = re.search(r"([^{}\n]+)\{\s*word-break:\s*normal;\s*overflow-wrap:\s*break-word;\s*\}", template)
    assert rule, "the wrap rule"
    assert rule.group(1).strip().count(".jp-OutputArea") >= 2 and rule.group(1).strip().endswith("pre")


def test_progress_names_the_notebook_running(tmp_path, capsys):
    """Issue 49: "notebooks: 8/11" sat there for minutes without saying which notebook ran."""
    import nbformat

    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    for name in ("01_first", "02_second"):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")]),
                       notebooks / f"{name}.ipynb")
    seen = {}

    def execute(path: Path):
        seen[path.stem] = capsys.readouterr().err.split("\r")[-1]  # the bar as it stands while this one runs
        return nbformat.read(path, as_version=4)

    build_report(tmp_path / "out", demo=tmp_path, notebooks=notebooks, execute=execute)
    assert re.search(r"^notebooks: +0%.* 0/2 .*running 01_first\]$", seen["01_first"]), seen
    assert re.search(r"^notebooks: +50%.* 1/2 .*running 02_second\]$", seen["02_second"]), seen
    assert re.search(r"notebooks: 100%.* 2/2 .*all rendered\] *\n$", capsys.readouterr().err)
