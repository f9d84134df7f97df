"""What the subcommands share: option definitions, printing a record, exit codes, writing a page.

Every subcommand builds its parser from these (as huggingface_hub's CLI builds from its shared option
types), so a location, ``--json``, ``--engine``, ``--endpoint`` and ``--timeout`` read and mean the same
everywhere; remote settings travel to the library as arguments (``endpoint=``, ``timeout=``), never as
process-wide state.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.engine_readings import parse_engine

#: Exit codes beside 0 (success) and 2 (bad input, one line on stderr).
EXIT_AFTER_REMAP = 3  # compat: compatible once lm_head rows are re-aligned
EXIT_NOT_FIT = 4  # compat: incompatible; check: not ready; similarity: nothing comparable

#: How a location may be written (one grammar: eaglekit.io.location).
LOCATION_FORMS = "local path, hf://OWNER/REPO[@REV][/PATH], http(s)://URL, ssh://host/path or user@host:/path"


def add_location(p: argparse.ArgumentParser, name: str, what: str, *, metavar: str | None = None,
                 nargs: str | None = None) -> None:
    """A positional location argument: ``what`` it is, then the forms a location takes."""
    kwargs: dict[str, Any] = {"metavar": metavar or name.upper(), "help": f"{what}: {LOCATION_FORMS}"}
    if nargs is not None:
        kwargs["nargs"] = nargs
    p.add_argument(name, **kwargs)


def add_json_option(p: argparse.ArgumentParser, what: str = "print one JSON object instead of the text") -> None:
    p.add_argument("--json", action="store_true", help=what)


def add_engine_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--engine E[==V]``: an engine eaglekit knows (sglang, vllm), optionally with a release, checked as it
    is parsed (:func:`eaglekit.core.engine_readings.parse_engine`)."""
    p.add_argument("--engine", type=engine_spec, default=None, metavar="E[==V]", help=what)


def engine_spec(text: str) -> str:
    """An argparse type: ``text`` if it names a known engine (and release), else a usage error."""
    try:
        parse_engine(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_remote_options(p: argparse.ArgumentParser) -> None:
    """``--endpoint`` for hf:// locations and ``--timeout`` for every remote request."""
    p.add_argument("--endpoint", default=None, metavar="URL",
                   help="Hub endpoint for hf:// locations (default: $HF_ENDPOINT or https://huggingface.co); "
                        "the token comes from $HF_TOKEN or your huggingface login, never from the command line")
    add_timeout_option(p)


def add_timeout_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="total time each HTTP or Hub request may take, waiting and transferring included "
                        "(default: $EAGLEKIT_TIMEOUT or 60)")


def emit(record: Any, args: argparse.Namespace) -> None:
    """Print ``record`` as text, or as one JSON object (``record.to_json()``) with ``--json``."""
    if args.json:
        print_json(record.to_json())
    else:
        print(record)


def print_json(value: Any) -> None:
    """One JSON object on stdout; a figure that is not a finite number is written as null, never as bare
    NaN (which is not JSON)."""
    print(json.dumps(_finite(value), indent=2, allow_nan=False))


def write_html(write: Any, path: str) -> None:
    """Call ``write(path)`` (a page writer of eaglekit.view); an OSError becomes one line."""
    try:
        write(path)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}; choose a writable path for --html.") from e


def temperature(text: str) -> float:
    """``--temperature``: a finite number >= 0 (0 is greedy), refused at parse time otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite temperature >= 0 (0 is greedy), got {text!r}")
    return value


def check_writable(path: str, option: str) -> None:
    """Refuse, before any work, a ``path`` that cannot be written (a missing or read-only folder, a
    folder in its place): opened for appending, so nothing there is lost, and removed if it was new."""
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}; choose a writable path for {option}.") from e
    if not existed:
        os.remove(path)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value
