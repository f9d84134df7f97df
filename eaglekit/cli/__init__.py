"""The ``eaglekit`` command line: one subcommand per module in this package, listed in :data:`COMMANDS`.

Each subcommand module defines ``add_parser(subparsers)`` (registering its arguments from the shared
options of :mod:`.common` and setting ``func``) and imports the analysis it runs inside its handler: the
analyses pull numpy, torch, plotly or the Hub client, and ``eaglekit --help`` must not. Any
:class:`~eaglekit.core.errors.EaglekitError` becomes one line on stderr and exit code 2, never a traceback; so
does an ``OverflowError`` no input check caught (a figure past a float's range), as a last net.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from eaglekit.core.errors import EaglekitError

#: The subcommand modules, in ``--help`` order: a new subcommand is one new module and one entry here.
COMMANDS = ("search", "inspect", "diff", "compat", "check", "similarity", "acceptance", "acceptance_curve", "dump_hidden", "drift",
            "export", "tokenizer_diff", "vocab_coverage", "speedup", "plan", "live", "demo", "serve_hub", "serve_metrics",
            "report", "lab")


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message to one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eaglekit", description="Inspect, compare and size EAGLE-3 drafters.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f".{name}", __name__).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _visible_stdout():
            return int(args.func(args) or 0)
    except EaglekitError as e:
        print(f"eaglekit {args.command}: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except OverflowError as e:  # the last net: an input's figure past a float's range that no check caught
        print(f"eaglekit {args.command}: error: a figure from the input is too large to compute ({_one_line(str(e))}); "
              "check the inputs for values far outside what a measurement gives", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"eaglekit {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


class _VisibleWriter:
    """A text stream that shows control characters as escapes (TAB and LF pass): whatever a report
    quotes from a file or a server (a tensor name, a config value, a manifest's target) cannot clear
    the screen, retitle the terminal or write the clipboard (OSC 52) of whoever reads the output."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        from eaglekit.core.redact import visible_output

        self._stream.write(visible_output(text))  # eaglekit's own table colours pass
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def _visible_stdout() -> Iterator[None]:
    """Everything a command prints to stdout goes through :class:`_VisibleWriter` (JSON escapes control
    characters already, so ``--json`` output is unchanged)."""
    saved = sys.stdout
    sys.stdout = _VisibleWriter(saved)
    try:
        yield
    finally:
        sys.stdout = saved


def _one_line(text: str) -> str:
    """One line a terminal shows as it is: credentials redacted, control characters made visible."""
    from eaglekit.core.redact import shown

    import re

    return shown(re.sub(r"[ \t\r\n]+", " ", text)).strip()


if __name__ == "__main__":
    sys.exit(main())
