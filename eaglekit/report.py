"""``make report``: execute every notebook on the demo workspace and write rendered, self-contained HTML.

Each notebook runs top to bottom in a fresh kernel (nbclient) with ``notebooks/`` as its working folder
and ``EAGLEKIT_DEMO`` pointing at the demo workspace (given relative to ``notebooks/`` so outputs hold
no absolute path of this machine); widget state is stored so sliders render without a kernel. The
HTML (nbconvert) opens from disk with no network: see :func:`export_html`.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

from .errors import EaglekitError

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


class NotebookError(EaglekitError):
    """A notebook raised while executing; the message names the notebook and the cell."""


@dataclass(frozen=True)
class RenderedNotebook:
    name: str
    title: str
    html_path: Path


def execute_notebook(path: str | os.PathLike[str], *, demo: str | os.PathLike[str] | None = None,
                     parameters: dict[str, object] | None = None, timeout: int = 900):
    """Run a notebook in a fresh kernel; returns the executed nbformat node. ``parameters`` replace the
    assignments of the cell tagged ``parameters`` (papermill's convention) by injecting a cell after it."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    if parameters:
        _inject_parameters(nb, parameters)
    env_before = os.environ.get("EAGLEKIT_DEMO")
    if demo is not None:
        os.environ["EAGLEKIT_DEMO"] = os.path.relpath(Path(demo).resolve(), path.parent.resolve())
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()
    except CellExecutionError as e:
        raise NotebookError(f"{path.name} failed: {str(e).strip().splitlines()[-1]}") from e
    finally:
        if env_before is None:
            os.environ.pop("EAGLEKIT_DEMO", None)
        else:
            os.environ["EAGLEKIT_DEMO"] = env_before
    return nb


def _inject_parameters(nb, parameters: dict[str, object]) -> None:
    import nbformat

    source = "# Parameters injected by eaglekit.report\n" + "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    idx = next((i + 1 for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])), 0)
    nb.cells.insert(idx, cell)


def export_html(nb) -> str:
    """Render an executed notebook to one HTML page."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    exporter.embed_images = True
    body, _ = exporter.from_notebook_node(nb)
    return body


def _title(nb, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def build_report(out: str | os.PathLike[str], *, demo: str | os.PathLike[str], notebooks: Path = NOTEBOOKS,
                 only: list[str] | None = None) -> list[RenderedNotebook]:
    """Execute the notebooks and write ``out/<name>.html`` for each plus ``out/index.html``."""
    from tqdm.auto import tqdm

    from .demo import build_demo

    build_demo(demo)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = sorted(p for p in Path(notebooks).glob("*.ipynb") if not only or p.stem in only)
    if not paths:
        raise EaglekitError(f"No notebooks found in {notebooks}.")
    rendered = []
    for path in tqdm(paths, desc="notebooks", unit="nb"):
        nb = execute_notebook(path, demo=demo)
        html_path = out / f"{path.stem}.html"
        html_path.write_text(export_html(nb), encoding="utf-8")
        rendered.append(RenderedNotebook(path.stem, _title(nb, path.stem), html_path))
    (out / "index.html").write_text(_index(rendered), encoding="utf-8")
    return rendered


def _index(pages: list[RenderedNotebook]) -> str:
    items = "\n".join(f'<li><a href="{escape(p.html_path.name)}">{escape(p.title)}</a> '
                      f"<small>({escape(p.name)}.ipynb)</small></li>" for p in pages)
    return ("<!doctype html><html><head><meta charset='utf-8'><title>eaglekit report</title>"
            "<style>body{font-family:system-ui,sans-serif;max-width:48em;margin:2em auto}</style></head>"
            "<body><h1>eaglekit report</h1><p>Rendered on the synthetic demo workspace "
            "(random weights in real EAGLE-3 layout). Each page opens offline.</p>"
            f"<ol>{items}</ol></body></html>\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eaglekit.report", description=__doc__.splitlines()[0])
    parser.add_argument("--demo", default="build/demo", help="demo workspace (built when missing)")
    parser.add_argument("--out", default="build/report", help="output folder")
    parser.add_argument("--only", nargs="*", help="notebook names (without .ipynb) to render")
    args = parser.parse_args(argv)
    try:
        pages = build_report(args.out, demo=args.demo, only=args.only)
    except EaglekitError as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(pages)} pages and index.html to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
