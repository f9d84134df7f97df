"""Options several subcommands share."""

from __future__ import annotations

import argparse


def add_hub_options(p: argparse.ArgumentParser) -> None:
    """``--endpoint`` for hf:// locations and ``--timeout`` for every remote request."""
    p.add_argument("--endpoint", default=None, metavar="URL",
                   help="Hub endpoint for hf:// locations (default: $HF_ENDPOINT or https://huggingface.co); "
                        "the token comes from $HF_TOKEN or your huggingface login, never from the command line")
    add_timeout_option(p)


def add_timeout_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="total time each HTTP or Hub request may take, waiting and transferring included "
                        "(default: $EAGLEKIT_TIMEOUT or 60)")


def _seconds(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def temperature(text: str) -> float:
    """``--temperature``: a finite number >= 0 (0 is greedy), refused at parse time otherwise."""
    import math

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
    import os

    from eaglekit.core.errors import InputError

    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}; choose a writable path for {option}.") from e
    if not existed:
        os.remove(path)
