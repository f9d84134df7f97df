"""Rendered report pages: execute every notebook on the demo workspace and write rendered, self-contained HTML.

Each notebook runs top to bottom in a fresh kernel (nbclient) with ``notebooks/`` as its working folder
and ``EAGLEKIT_DEMO`` pointing at the demo workspace (given relative to ``notebooks/`` so outputs hold
no absolute path of this machine); widget state is stored so sliders render without a kernel.

A page opens from disk with no network (:func:`export_html`; the template ``report_template/`` is
nbconvert's JupyterLab template without its CDN scripts). Each notebook is written in two forms: the
**folder form** ``<name>.html`` loads plotly.js and the static widget manager (the vendored
``@jupyter-widgets/html-manager`` bundle, see ``report_template/assets/README.md``) from the one shared
copy in ``assets/``; the **single-file form** ``single/<name>.html`` inlines both, to be shared alone.
Widgets are made honest for a page with no kernel (:func:`static_widgets`). Before a page is written,
:func:`check_page` refuses remote scripts, absolute paths of this machine and tokens.
"""

from __future__ import annotations

import base64
import copy
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html import escape, unescape
from pathlib import Path
from typing import Any

from eaglekit.core.errors import EaglekitError
from eaglekit.core.render import strip_ansi
from eaglekit.io.write import write_atomic

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
TEMPLATE = Path(__file__).resolve().parent / "report_template"
ASSETS = TEMPLATE / "assets"

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
#: Widget modules the static manager (html-manager's embed.js) renders without fetching code.
STATIC_WIDGET_MODULES = frozenset({"@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output"})


class NotebookError(EaglekitError):
    """A notebook raised while executing; the message names the notebook and the cell."""


class ReportError(EaglekitError):
    """A rendered page would not open offline, or would leak an absolute path or a token."""


@dataclass(frozen=True)
class RenderedNotebook:
    name: str
    title: str
    html_path: Path
    #: trace count of each plotly figure, in page order (what the page must draw)
    figures: tuple[int, ...] = ()
    #: the same page as one self-contained file (plotly.js and the widget manager inlined), for sharing alone
    single_path: Path | None = None


def execute_notebook(path: str | os.PathLike[str], *, demo: str | os.PathLike[str] | None = None,
                     parameters: dict[str, object] | None = None, timeout: int = 900):
    """Run a notebook in a fresh kernel; returns the executed nbformat node. ``parameters`` replace the
    assignments of the cell tagged ``parameters`` (papermill's convention) by injecting a cell after it."""
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    if parameters:
        _inject_parameters(nb, parameters)
    env_before = os.environ.get("EAGLEKIT_DEMO")
    if demo is not None:
        os.environ["EAGLEKIT_DEMO"] = os.path.relpath(Path(demo).resolve(), path.parent.resolve())
    try:
        client = _notebook_client(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                                  resources={"metadata": {"path": str(path.parent)}})
        running: dict[str, object] = {}
        client.on_cell_execute = lambda cell, cell_index: running.update(cell=cell, index=cell_index,
                                                                         start=time.monotonic())
        client.execute()
    except CellTimeoutError as e:
        cell = running.get("cell")
        first = next((ln.strip() for ln in cell.source.splitlines() if ln.strip()), "") if cell is not None else ""
        took = time.monotonic() - running.get("start", time.monotonic())
        raise NotebookError(f"{path.name}: cell {int(running.get('index', -1)) + 1} ({first[:60]!r}) was stopped "
                            f"after {took:.0f} s, past its {timeout} s limit; a machine under load runs slower: "
                            "raise the limit (eaglekit report --timeout).") from e
    except CellExecutionError as e:

        raise NotebookError(f"{path.name} failed: {strip_ansi(str(e)).strip().splitlines()[-1]}") from e
    finally:
        if env_before is None:
            os.environ.pop("EAGLEKIT_DEMO", None)
        else:
            os.environ["EAGLEKIT_DEMO"] = env_before
    return nb


#: Longest single wait on a kernel channel, in seconds (see :func:`_notebook_client`).
POLL_SLICE = 0.5


def _notebook_client(nb, **options):
    """An nbclient ``NotebookClient`` whose waits on the kernel's shell and iopub channels poll in
    :data:`POLL_SLICE` steps up to the same deadline. With one long poll, zmq.asyncio now and then misses
    that a reply has arrived and wakes only when the wait times out: each cell's whole timeout (seen
    under load: a 40 s cell timeout gave a 40 s pause after a 0.3 s cell, and no error)."""
    from nbclient import NotebookClient

    # The kernel app logs errors only: its one warning, "Kernel is running over TCP without encryption", is
    # about a loopback socket on this machine and would only be noise in ``make report``'s output.
    options.setdefault("extra_arguments", ["--IPKernelApp.log_level=ERROR"])

    class Client(NotebookClient):
        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            kc.shell_channel.get_msg = _in_slices(kc.shell_channel.get_msg)
            kc.iopub_channel.get_msg = _in_slices(kc.iopub_channel.get_msg)
            return kc

    return Client(nb, **options)


def _in_slices(get_msg):
    from queue import Empty

    async def get_msg_in_slices(timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=min(POLL_SLICE, left))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return get_msg_in_slices


def _inject_parameters(nb, parameters: dict[str, object]) -> None:
    import nbformat

    source = "# Parameters injected by eaglekit.report\n" + "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    idx = next((i + 1 for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])), 0)
    nb.cells.insert(idx, cell)


# --- making an executed notebook static ---------------------------------------------------------------

def _is_plotlyjs_loader(html: object) -> bool:
    """The ~5 MB output plotly's "notebook" renderer emits once per kernel to define ``window.Plotly``."""
    return isinstance(html, str) and "window.PlotlyConfig" in html and "* plotly.js v" in html


def static_figures(nb) -> tuple[int, ...]:
    """Give every plotly output (``application/vnd.plotly.v1+json``, what JupyterLab draws) an HTML
    rendering that draws with the page's one copy of plotly.js, and drop the copies of plotly.js the
    kernel's "notebook" renderer emitted. Rewrites ``nb`` in place; returns each figure's trace count.

    The renderer's own HTML is replaced because it also loads MathJax from a CDN
    (plotly.io's ``NotebookRenderer`` hard-codes ``include_mathjax="cdn"``).
    """
    import plotly.io as pio

    traces = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if _is_plotlyjs_loader(data.get("text/html")):
                continue
            if PLOTLY_MIME in data:
                figure = data[PLOTLY_MIME]
                data["text/html"] = pio.to_html(figure, config=figure.get("config"), include_plotlyjs=False,
                                                include_mathjax=False, full_html=False, validate=False,
                                                default_width="100%", default_height=525)
                traces.append(len(figure.get("data", [])))
            kept.append(output)
        cell.outputs = kept
    return tuple(traces)


#: anywidgets (by ``_anywidget_id`` prefix) whose front end is self-contained and computes without a kernel:
#: rendered in the page by their own code. Others (plotly's FigureWidget) become a note.
STATIC_ANYWIDGETS = ("eaglekit.",)
#: Views of @jupyter-widgets/controls that only show something. Every other control (a slider, a text box, a
#: dropdown, a button) is an input whose effect runs in the kernel: in a page without one it would move and
#: change nothing, so :func:`static_widgets` takes it out and says so.
DISPLAY_VIEWS = frozenset({"HTMLView", "HTMLMathView", "LabelView", "ProgressView", "BoxView", "HBoxView",
                           "VBoxView", "GridBoxView", "ImageView", "OutputView", "ValidView", "TabView",
                           "AccordionView", "StackView"})


def _html_note(state: dict, controls: str, text: str, old: dict) -> None:
    state.update(model_module="@jupyter-widgets/controls", model_module_version=controls, model_name="HTMLModel",
                 state={"_model_module": "@jupyter-widgets/controls", "_model_module_version": controls,
                        "_model_name": "HTMLModel", "_view_module": "@jupyter-widgets/controls",
                        "_view_module_version": controls, "_view_name": "HTMLView",
                        "description": "", "placeholder": "", "value": text,
                        **({"layout": old["layout"]} if "layout" in old else {})})


def _needs_kernel(model_id: str, state: dict, seen: set[str] | None = None) -> list[str]:
    """The input controls in the widget tree under ``model_id`` (by model name)."""
    seen = set() if seen is None else seen
    if model_id in seen or model_id not in state:
        return []
    seen.add(model_id)
    model = state[model_id]
    found = []
    if model["model_module"] == "@jupyter-widgets/controls" and model["state"].get("_view_name") not in DISPLAY_VIEWS \
            and model["state"].get("_view_name"):
        found.append(model["model_name"].removesuffix("Model"))
    for child in model["state"].get("children", []):
        found += _needs_kernel(str(child).removeprefix("IPY_MODEL_"), state, seen)
    return found


def _anywidget_html(model_id: str, model_state: dict) -> str:
    """A page fragment that renders an anywidget from its stored state with no kernel: its own ES module (the
    ``_esm`` the kernel stored, no CDN) imported from a blob, handed a small model over the stored values."""
    import json

    values = {k: v for k, v in model_state.items() if not k.startswith("_")}

    def js(value) -> str:
        return json.dumps(value).replace("</", "<\\/")

    return (f'<div class="eaglekit-anywidget" id="anywidget-{escape(model_id)}"></div>\n<script type="module">\n'
            f"const values = {js(values)}, esm = {js(model_state.get('_esm', ''))}, css = {js(model_state.get('_css', ''))};\n"
            + _ANYWIDGET_SHIM.replace("MODEL_ID", model_id) + "</script>\n")


# The few model methods an anywidget's render() uses (get, set, save_changes, on, off, send), over plain values:
# "change:<name>" listeners fire on set, "change" listeners on save_changes, as in the live widget manager.
_ANYWIDGET_SHIM = """const el = document.getElementById("anywidget-MODEL_ID");
if (css) { const style = document.createElement("style"); style.textContent = css; document.head.append(style); }
const listeners = {};
const fire = (event) => (listeners[event] || []).forEach((f) => f());
const model = {
  get: (name) => values[name],
  set: (name, value) => { values[name] = value; fire(`change:${name}`); },
  save_changes: () => fire("change"),
  on: (event, f) => { for (const e of event.split(" ")) (listeners[e] = listeners[e] || []).push(f); },
  off: () => {}, send: () => {},
};
const url = URL.createObjectURL(new Blob([esm], {type: "text/javascript"}));
const mod = await import(url);
const widget = typeof mod.default === "function" ? mod.default() : (mod.default || mod);
await widget.render({model, el});
el.dataset.rendered = "true";
"""


def _model(ref: Any, state: dict) -> dict | None:
    """The model an ``IPY_MODEL_<id>`` reference names (None when it is not stored)."""
    return state.get(ref[len("IPY_MODEL_"):]) if isinstance(ref, str) and ref.startswith("IPY_MODEL_") else None


def _hidden(model: dict, state: dict) -> bool:
    """Whether a widget shows nothing: its layout hides it (``visibility: hidden`` or ``display: none``)."""
    layout = _model(model.get("state", {}).get("layout"), state)
    look = layout.get("state", {}) if layout else {}
    return look.get("visibility") == "hidden" or look.get("display") == "none"


def _finished_bar(model: dict, state: dict) -> str | None:
    """A finished progress bar (tqdm's box: text, a progress at its maximum, text) as one line; else None."""
    kids = [_model(k, state) for k in model.get("state", {}).get("children", [])]
    bars = [k for k in kids if k and k.get("state", {}).get("_view_name") == "ProgressView"]
    if len(bars) != 1 or any(k is None for k in kids):
        return None
    value, top = bars[0]["state"].get("value"), bars[0]["state"].get("max")
    if not isinstance(value, (int, float)) or not isinstance(top, (int, float)) or top <= 0 or value < top:
        return None
    texts = [unescape(str(k["state"].get("value", ""))).replace("\u2007", " ").strip() for k in kids
             if k.get("state", {}).get("_view_name") == "HTMLView"]
    label = re.sub(r"\s*\d+%\s*$", "", texts[0]).rstrip(": ") if texts else ""
    count = f"{value:g}/{top:g}"
    rest = texts[-1] if len(texts) > 1 and texts[-1].startswith(count) else count
    return f"{label}: 100% {rest}" if label else f"100% {rest}"


def static_widgets(nb) -> list[str]:
    """Make every widget output honest in a page with no kernel. Rewrites ``nb`` in place; returns what it did.

    - An eaglekit anywidget (:data:`STATIC_ANYWIDGETS`; its front end stored with it as ``_esm``) is rendered
      by its own code over its stored values (:func:`_anywidget_html`): controls that compute in the
      browser keep working.
    - A view holding input controls (sliders, text boxes, dropdowns, buttons: anything not in
      :data:`DISPLAY_VIEWS`) would move and change nothing; it is replaced by a note that it needs a kernel.
    - Any other model the static manager cannot load (:data:`STATIC_WIDGET_MODULES`) becomes such a note too.
    - A view of a widget closed before the notebook ended (a finished progress bar), or hidden at the end (tqdm
      hides a ``leave=False`` bar by its layout's visibility, and the hidden box still takes a line), has nothing
      to show: its output is dropped, so the page is the same whether or not a bar appeared.
    - A finished progress bar that stays (tqdm's ``leave=True``) becomes one line of text.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {})
    controls = next((m["model_module_version"] for m in state.values()
                     if m["model_module"] == "@jupyter-widgets/controls"), "2.0.0")
    done, rendered = [], set()
    for cell in nb.cells:
        dropped = []
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            view = data.get(WIDGET_VIEW_MIME)
            if not view:
                continue
            if view.get("model_id") not in state:  # closed before the notebook ended (a finished progress bar)
                dropped.append(output)
                done.append("dropped a closed widget")
                continue
            model_id = view["model_id"]
            model = state[model_id]
            if _hidden(model, state):
                dropped.append(output)
                done.append("dropped a hidden widget")
                continue
            line = _finished_bar(model, state)
            if line is not None:
                output["data"] = {"text/plain": line}
                done.append("a finished progress bar as text")
                continue
            if str(model["state"].get("_anywidget_id", "")).startswith(STATIC_ANYWIDGETS) and "_esm" in model["state"]:
                output["data"] = {"text/html": _anywidget_html(model_id, model["state"]),
                                  "text/plain": data.get("text/plain", "")}
                rendered.add(model_id)
                done.append(f"rendered {str(model['state'].get('_anywidget_id', 'anywidget')).rsplit('.', 1)[-1]}")
                continue
            inputs = _needs_kernel(model_id, state)
            if inputs:
                what = ", ".join(dict.fromkeys(inputs))
                output["data"] = {"text/html": (
                    "<p class='eaglekit-needs-kernel' style='padding:0.5em 1em;color:#666;border-left:3px solid #ccc'>"
                    f"<em>Controls stood here ({escape(what)}) whose effect runs in Python: they need a running "
                    "kernel, so this page leaves them out. Open the notebook with <code>make lab</code> to use them."
                    "</em></p>"), "text/plain": data.get("text/plain", "")}
                done.append(f"left out {what}")
        if dropped:
            cell["outputs"] = [o for o in cell["outputs"] if all(o is not d for d in dropped)]
    for model_id in rendered:  # drawn by their own code now: the static manager need not know them
        del state[model_id]
    for model in state.values():
        if model["model_module"] in STATIC_WIDGET_MODULES:
            continue
        old = model["state"]
        what = str(old.get("_anywidget_id") or model["model_name"]).rsplit(".", 1)[-1]
        note = (f"<p style='padding:0.5em 1em;color:var(--jp-ui-font-color2, #666)'><em>A live {escape(what)} "
                "sits here: it needs a running kernel (open the notebook with <code>make lab</code>).</em></p>")
        _html_note(model, controls, note, old)
        done.append(what)
    return done


# --- HTML ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Page:
    html: str
    figures: tuple[int, ...]
    inlined: tuple[str, ...]  # the JavaScript inlined in the page (skipped by :func:`check_page`)


#: The shared copy of plotly.js in the folder form's ``assets/``.
PLOTLY_ASSET = "plotly.min.js"


def _export(nb, *, assets_url: str | None, title: str | None = None) -> _Page:
    """One page. ``assets_url``: the folder form, loading plotly.js and the widget manager from that
    ``assets/`` folder; None: the single-file form, with both inlined."""
    from nbconvert import HTMLExporter
    from plotly.offline import get_plotlyjs

    nb = copy.deepcopy(nb)
    figures = static_figures(nb)
    static_widgets(nb)
    single = assets_url is None
    plotly_js = get_plotlyjs() if figures and single else None
    embed_js = None
    if single and "widgets" in nb.metadata:  # as a data: URL (see the template)
        embed_js = "data:text/javascript;base64," + base64.b64encode((ASSETS / "embed.js").read_bytes()).decode()
    exporter = HTMLExporter(extra_template_basedirs=[str(TEMPLATE.parent)], template_name=TEMPLATE.name)
    exporter.embed_images = True
    resources = {"metadata": {"name": title or _title(nb, "eaglekit")}, "plotly_js": plotly_js,
                 "plotly_src": f"{assets_url}/{PLOTLY_ASSET}" if figures and not single else None,
                 "embed_js": embed_js, "assets_url": assets_url}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return _Page(body, figures, tuple(js for js in (plotly_js, embed_js) if js))


def export_html(nb, *, assets_url: str | None = None, title: str | None = None) -> str:
    """Render an executed notebook to one HTML page that opens from disk with no network. By default the page
    stands alone (plotly.js and the widget manager inlined: one file to share); with ``assets_url`` it loads
    them from the report's ``assets/`` folder at that URL, relative to the page (see :func:`copy_assets`).
    ``title`` (the browser tab's) defaults to the notebook's first heading."""
    return _export(nb, assets_url=assets_url, title=title).html


def copy_assets(out: str | os.PathLike[str]) -> Path:
    """Copy the widget front end (``report_template/assets``) and plotly.js to ``out/assets``; returns that folder."""
    from plotly.offline import get_plotlyjs

    target = Path(out) / "assets"
    for src in sorted(Path(ASSETS).rglob("*")):  # file by file through the one writer: a link there is refused
        if src.is_file():
            dst = target / src.relative_to(ASSETS)
            dst.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(dst, src.read_bytes(), what="a report asset")
    write_atomic(target / PLOTLY_ASSET, get_plotlyjs(), what="a report asset")
    return target


# Requests a page would make to another host: script/img/iframe/link sources, CSS url() and @import, ES imports.
_REMOTE = re.compile(
    r"""<(?:script|img|iframe|link|source|audio|video|embed)\b[^>]*?\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//"""
    r"""|url\(\s*["']?\s*(?:https?:)?//|@import\s+["']\s*(?:https?:)?//|\bimport\s*\(?\s*["'](?:https?:)?//""",
    re.IGNORECASE)
_TOKENS = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b|[?&]token=[0-9a-f]{16,}")
_TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "JUPYTER_TOKEN")
#: A machine's own address with a port or a scheme: a server that stopped with the kernel, or one only the
#: rendering machine reaches (loopback, any-address, in-process, private networks).
_ADDRESS = re.compile(
    r"\binproc://[^\s\"'<]*"
    r"|\b(?:localhost|127(?:\.\d{1,3}){3}|0\.0\.0\.0|\[::1?\]|10(?:\.\d{1,3}){3}|192\.168(?:\.\d{1,3}){2}"
    r"|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}):\d{2,5}\b",
    re.IGNORECASE)


def machine_addresses(text: str) -> list[str]:
    """The machine-specific addresses in ``text`` (``127.0.0.1:8888``, ``localhost:...``, ``inproc://...``,
    private-network ``host:port``), each once: links that die with the kernel or work on one machine only."""
    return list(dict.fromkeys(m.group(0) for m in _ADDRESS.finditer(text)))


def check_page(html: str, *, paths: Iterable[str | os.PathLike[str]] = (), plotly_js: str | None = None,
               inlined: Iterable[str] = ()) -> list[str]:
    """What would break the report's promise in one page: a request to another host, an absolute path
    from ``paths`` (allowed only after ``..``, as the relative demo path spells it), a machine address
    (:func:`machine_addresses`), or a token. Inlined
    library code (``plotly_js``, whose code names map-tile servers, and ``inlined``) is skipped. Returns
    the problems found."""
    for js in (plotly_js, *inlined):
        if js:
            html = html.replace(js, "")
    problems = [f"loads {m.group(0)!r}..." for m in _REMOTE.finditer(html)]
    problems += [f"holds the machine address {a!r} (dead once the kernel stops)" for a in machine_addresses(html)[:3]]
    for path in dict.fromkeys(str(p).rstrip("/") for p in paths):
        if len(path) > 1 and re.search(r"(?<!\.\.)" + re.escape(path) + r"(?![\w.-])", html):
            problems.append(f"holds the absolute path {path}")
    secrets = {os.environ[v] for v in _TOKEN_VARS if len(os.environ.get(v, "")) >= 8}
    if _TOKENS.search(html) or any(s in html for s in secrets):
        problems.append("holds a token")
    return problems


def _title(nb, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def build_report(out: str | os.PathLike[str], *, demo: str | os.PathLike[str], notebooks: Path = NOTEBOOKS,
                 only: list[str] | None = None, timeout: int = 900, execute=None) -> list[RenderedNotebook]:
    """Execute the notebooks and write ``out/<name>.html`` for each, ``out/assets/`` and ``out/index.html``.
    ``timeout`` bounds each cell, in seconds. ``execute(path)``: the executed notebook of ``path``, where the
    caller has it already (the test suite executes each page once); default: executed here on ``demo``.

    Raises :class:`NotebookError` when a notebook fails and :class:`ReportError` when a page would reach
    the network or hold an absolute path of this machine (the repository, the demo, ``out``, the home
    folder) or a token.
    """
    if not Path(demo).is_dir():
        raise EaglekitError(f"No demo workspace at {demo}: build it first (eaglekit demo {demo}).")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = sorted(p for p in Path(notebooks).glob("*.ipynb") if not only or p.stem in only)
    if not paths:
        raise EaglekitError(f"No notebooks found in {notebooks}.")
    private = [Path(notebooks).resolve().parent, Path(demo).resolve(), out.resolve(), Path.home()]
    copy_assets(out)
    (out / SINGLE).mkdir(exist_ok=True)
    rendered, answer = [], ""
    for path in _progress(paths):
        nb = execute(path) if execute is not None else execute_notebook(path, demo=demo, timeout=timeout)
        title = _title(nb, path.stem)
        pages = {out / f"{path.stem}.html": _export(nb, assets_url="assets", title=title),
                 out / SINGLE / f"{path.stem}.html": _export(nb, assets_url=None, title=title)}
        for html_path, page in pages.items():
            problems = check_page(page.html, paths=private, inlined=page.inlined)
            if problems:
                raise ReportError(f"{path.name} renders a page that {'; '.join(problems)}. Change the notebook so "
                                  "its outputs show relative paths and no tokens, and load nothing from the web.")
            write_atomic(html_path, page.html, what="a report page")
        folder, single = pages
        rendered.append(RenderedNotebook(path.stem, title, folder, pages[folder].figures, single))
        answer = answer or verdict_block(nb)
    write_atomic(out / "index.html", _index(rendered, answer), what="a report page")
    return rendered


def _progress(paths: list[Path]) -> Iterator[Path]:
    """Each notebook in turn, under a progress bar on stderr that names the one running: one page can take
    minutes, and "notebooks: 8/11" alone does not say which."""
    from tqdm.auto import tqdm

    with tqdm(total=len(paths), desc="notebooks", unit="nb") as bar:
        for path in paths:
            bar.set_postfix_str(f"running {path.stem}")
            yield path
            bar.update()
        bar.set_postfix_str("all rendered", refresh=False)


#: The class of the verdict block (:class:`eaglekit.Verdicts`) a page opens with; the index carries page 00's.
VERDICT_CLASS = "eaglekit-verdict"


def verdict_block(nb) -> str:
    """The HTML of the first verdict block among ``nb``'s outputs ("" where it has none)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            if f'class="{VERDICT_CLASS}"' in html:
                return html
    return ""


#: The folder, inside the report, of the single-file pages.
SINGLE = "single"


#: What the index says the pages run on (a test holds it to the notebooks).
INDEX_STORY = (
    "Rendered on the synthetic demo workspace. One world, trained on a token language, carries the story "
    "wherever a drafter is measured or checked against a target (00, 03, 06, 07, 08, 09, 10, 11): small K2 and K2.5 "
    "targets in Kimi's architecture and shipping layouts (FP8, INT4), the K2 drafter and copies of it with "
    "planted faults, the K2.5 scratch and warm-start drafters, a public-style MLA drafter, the targets' hidden-state dumps, "
    "and long traces of up to 4,096 tokens (page 11). Drafters with random weights in the real EAGLE-3 layout (1/16 scale) "
    "stand in wherever only real shapes, configs and files matter (01 to 04); random weights accept "
    "nothing. Page 10's engine is a loopback server replaying a vLLM /metrics page. Every page opens offline.")


def _index(pages: list[RenderedNotebook], answer: str = "") -> str:
    def figures(p: RenderedNotebook) -> str:
        return f" · {len(p.figures)} figure{'s' * (len(p.figures) != 1)}" if p.figures else ""

    def single(p: RenderedNotebook) -> str:
        if p.single_path is None:
            return ""
        return f' · <a class="single" href="{SINGLE}/{escape(p.single_path.name)}">single file</a>'

    items = "\n".join(f'<li><a href="{escape(p.html_path.name)}">{escape(p.title)}</a> '
                      f"<small>({escape(p.name)}.ipynb{figures(p)}{single(p)})</small></li>" for p in pages)
    return ("<!doctype html><html><head><meta charset='utf-8'><title>eaglekit report</title>"
            "<style>body{font-family:system-ui,sans-serif;max-width:48em;margin:2em auto}"
            "ul.pages{list-style:none;padding-left:0}ul.pages li{margin:.4em 0}</style></head>"
            "<body><h1>eaglekit report</h1>"
            + (f"<h2>The investigation's answer</h2>{answer}" if answer else "")
            + "<p>" + INDEX_STORY + "</p>"
            "<p><b>Two forms.</b> The pages linked by title are the <b>folder form</b>: they share one copy of "
            "plotly.js and of the widget front end in <code>assets/</code>, so keep this folder together when you "
            f"move it. The <b>single file</b> links (in <code>{SINGLE}/</code>) are self-contained pages, each with "
            "everything inlined: send one of those when you share a single page.</p>"
            f'<ul class="pages">{items}</ul></body></html>\n')  # the titles carry their numbers
