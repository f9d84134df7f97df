"""``eaglekit similarity A B``: how far drafter B's weights are from drafter A's, tensor by tensor.

    eaglekit similarity hf://AQ-MedAI/Kimi-K2-Instruct-eagle3 ./my-k25-drafter --html similarity.html

Streams only the compared tensors' bytes (by range, wherever each drafter lives) through
:func:`eaglekit.similarity`; prints the summary table, or one JSON object with ``--json``; ``--html``
writes a self-contained page (plotly.js inlined) with the heatmaps, which opens offline, coloured by
``--measure``. When the two drafters have no tensor in common that can be compared (different shapes),
it says why on stderr and exits 4, as ``eaglekit compat`` does for an incompatible pair.
"""

from __future__ import annotations

import argparse
import sys

from eaglekit.cli.common import (EXIT_NOT_FIT, whole, add_json_option, add_location, add_remote_options, check_writable,
                                 emit, write_html)

_EPILOG = ("Names are normalised (layers.0.* = midlayer.*). lm_head rows are paired by target token "
           "(i + d2t[i]); fc.weight is split into its low/mid/high column blocks and q/k/v into their embedding "
           "and hidden halves; d2t/t2d are compared by equality. JSON 'grid' holds the cosine of each block.")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("similarity", help="compare two drafters' weights: cosine, relative difference, heatmaps",
                       description="Compare the weights of drafter B against drafter A in one streamed pass: "
                                   "cosine, ||a-b||/||a|| and ||b||/||a|| per tensor and per block of a grid.",
                       epilog=_EPILOG)
    add_location(p, "a", "the reference drafter")
    add_location(p, "b", "the drafter compared against A")
    p.add_argument("--tensors", action="append", metavar="PATTERN",
                   help="compare only tensors matching this glob (repeatable), e.g. 'midlayer.mlp.*'")
    p.add_argument("--grid", nargs=2, type=whole(1, 4096, "a grid size"), default=[64, 64], metavar=("R", "C"),
                   help="block grid rows and columns, at most (default 64 64)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="where to compute (default cpu)")
    add_json_option(p)
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page with the heatmaps")
    p.add_argument("--measure", choices=("rel_diff", "cosine", "norm_ratio"), default="rel_diff",
                   help="what the --html page colours (default rel_diff, ||a-b||/||a||: 0 is unchanged; the colour "
                        "range spans the blocks on the page, so a fine-tune's drift shows)")
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.similarity.measure import similarity
    from eaglekit.view.figures import save_page

    if args.html:
        check_writable(args.html, "--html")
    report = similarity(args.a, args.b, tensors=args.tensors, grid=tuple(args.grid), device=args.device,
                        endpoint=args.endpoint, timeout=args.timeout, progress=sys.stderr.isatty())
    # An incompatible pair: no weight tensor compared, only d2t/t2d at most. Say why, exit 4 as compat does.
    if not report.tensors and (not report.buffers or report.mismatched):
        emit(report, args)
        print(f"eaglekit similarity: {_why_nothing(report)}", file=sys.stderr)
        return EXIT_NOT_FIT
    if args.html:
        write_html(lambda path: save_page(report, path, measure=args.measure), args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    emit(report, args)
    return 0


def _why_nothing(report) -> str:
    """Why two drafters had no weight tensor to compare: every shared tensor mismatched, or no tensor shared."""
    parts = [f"{m.name} ({m.reason})" for m in report.mismatched[:3]]
    more = f" and {len(report.mismatched) - 3} more" if len(report.mismatched) > 3 else ""
    if parts:
        why = f"every tensor both have differs: {'; '.join(parts)}{more}"
    else:
        why = "they share no tensor name"
    what = "nothing compared"
    if report.buffers:
        what = f"no weight tensor compared (only {' and '.join(b.name for b in report.buffers)})"
    return (f"{what} between {report.a} and {report.b}: {why}. Weights of drafters with different "
            "shapes cannot be compared; check them with `eaglekit compat A B`.")
