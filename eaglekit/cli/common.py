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
from eaglekit.core.safejson import finite
from eaglekit.core.configs.engine_readings import parse_engine

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


def add_cache_options(p: argparse.ArgumentParser) -> None:
    """``--no-cache`` and ``--cache-dir``: the result cache (:mod:`eaglekit.io.cache`)."""
    g = p.add_argument_group("result cache (a repeat with the same files and options is read back, and says so)")
    g.add_argument("--no-cache", dest="cache", action="store_false",
                   help="measure afresh; read and write no cached answer")
    g.add_argument("--cache-dir", metavar="DIR", default=None,
                   help="where answers are kept (default: $EAGLEKIT_CACHE_DIR, else $XDG_CACHE_HOME/eaglekit)")


def cache_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``cache=`` and ``cache_dir=`` for a measuring function, from :func:`add_cache_options`' flags."""
    return {"cache": args.cache, "cache_dir": args.cache_dir}


def add_engine_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--engine E[==V]``: an engine eaglekit knows (sglang, vllm), optionally with a release, checked as it
    is parsed (:func:`eaglekit.core.configs.engine_readings.parse_engine`)."""
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
    print(json.dumps(finite(value), indent=2, allow_nan=False))


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


#: Largest layer id or hidden-state index a list may name (the largest models have about 100 layers).
MAX_INDEX = 1 << 16
#: Longest numeric flag read (digits); anything longer is refused before int() or float() sees it.
_MAX_DIGITS = 40


def _cut(text: str) -> str:
    return repr(text if len(text) <= _MAX_DIGITS else text[:_MAX_DIGITS] + "...")


def whole(low: int, high: int, what: str = "a whole number"):
    """An argparse type: a whole number from ``low`` to ``high`` (``--seed``, ``--tp``, ``--max-new-tokens``...);
    anything else (a fraction, -1 where 0 is the least, 400 digits) is one usage line, exit 2."""
    def parse(text: str) -> int:
        t = text.strip()
        value = int(t) if len(t) <= _MAX_DIGITS and t.lstrip("+-").isdigit() else None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} from {low:,} to {high:,}, got {_cut(text)}")
        return value
    parse.__name__ = "whole number"  # argparse names the type in some messages
    return parse


def number(low: float, high: float, what: str = "a number"):
    """An argparse type: a finite number from ``low`` to ``high`` (times, rates, accept lengths): NaN, inf,
    1e308 and 5e-324 where they make no sense are one usage line, exit 2."""
    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 4 * _MAX_DIGITS else math.nan
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"expected {what} from {low:g} to {high:g}, got {_cut(text)}")
        return value
    parse.__name__ = "number"
    return parse


def magnitude(most: float = 1e12, least: float = 1e-12):
    """An argparse type for figures the library checks itself (signs, ranges, NaN: its own messages): a float
    whose size is refused past ``most`` or, when not 0, under ``least`` (1e308 and 5e-324 would overflow a
    cycle or a speedup to inf instead)."""
    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 4 * _MAX_DIGITS else math.inf
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {_cut(text)}") from None
        if math.isfinite(value) and (abs(value) > most or 0 < abs(value) < least) or len(text) > 4 * _MAX_DIGITS:
            raise argparse.ArgumentTypeError(f"expected a number of size {least:g} to {most:g} (or 0), got {_cut(text)}")
        return value
    parse.__name__ = "number"
    return parse


def capped(most: int = 1 << 20):
    """An argparse type for whole numbers the library checks itself, refused past ``most`` in size."""
    def parse(text: str) -> int:
        t = text.strip()
        if len(t) > _MAX_DIGITS or not t.lstrip("+-").isdigit() or abs(int(t)) > most:
            raise argparse.ArgumentTypeError(f"expected a whole number no larger than {most:,}, got {_cut(text)}")
        return int(t)
    parse.__name__ = "whole number"
    return parse


def index_list(text: str) -> list[int]:
    """An argparse type: comma-separated non-negative integers (layer ids, hidden-state indices), each at most
    :data:`MAX_INDEX`."""
    parts = [v for v in text.replace(" ", "").split(",") if v]
    if not all(len(v) <= _MAX_DIGITS and v.lstrip("+-").isdigit() for v in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {_cut(text)}")
    values = [int(v) for v in parts]
    if not values or min(values) < 0 or max(values) > MAX_INDEX:
        raise argparse.ArgumentTypeError(f"expected layer ids from 0 to {MAX_INDEX:,}, got {_cut(text)}")
    return values


#: Shared bounds of the numeric flags.
SEED = whole(0, (1 << 32) - 1, "a seed")
NEW_TOKENS = whole(1, 1 << 16, "a token count")
STEPS = whole(1, 64, "a number of draft steps")
FILES = whole(1, 1 << 30, "a number of files")
PORT = whole(1, 65535, "a port")
FIGURE = magnitude()


def check_device(device: str) -> None:
    """``--device``: a torch device this torch can use, or one line (torch loads here, for the commands that compute;
    not for ``cpu``, which every torch has: a cached answer is then read without loading torch)."""
    if device == "cpu":
        return
    import torch

    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise InputError(f"--device {device!r} is not a torch device ({e}).") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device {device}: this torch sees no CUDA device; use --device cpu.")


def check_writable(path: str, option: str) -> None:
    """Refuse, before any work, a ``path`` that cannot be written (a missing or read-only folder, a folder
    or a symbolic link in its place). Nothing is opened or created here: the file is written later by
    :func:`eaglekit.io.write.write_atomic` (a fresh temporary file renamed into place)."""
    if os.path.islink(path):
        raise InputError(f"cannot write {path}: it is a symbolic link, and eaglekit does not write through links; "
                         f"choose a writable path for {option}.")
    if os.path.isdir(path):
        raise InputError(f"cannot write {path}: it is a folder; choose a writable path for {option}.")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {path}: its folder is missing or not writable; choose a writable path for "
                         f"{option}.")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def add_tls_options(p: argparse.ArgumentParser) -> None:
    """``--tls-ca-file``, ``--tls-cert``, ``--tls-key``: Dask TLS for a ``--scheduler tls://`` address."""
    g = p.add_argument_group("Dask TLS (for --scheduler tls://HOST:PORT; default: distributed.comm.tls in your Dask "
                             "config)")
    g.add_argument("--tls-ca-file", metavar="PEM", help="the cluster's CA certificate: the scheduler must present "
                                                        "a certificate it signed")
    g.add_argument("--tls-cert", metavar="PEM", help="this client's certificate, signed by that CA")
    g.add_argument("--tls-key", metavar="PEM", help="this client's private key (if not inside --tls-cert)")


def scheduler_security(args: argparse.Namespace):
    """A ``distributed.Security`` from the TLS options, or None when none was given (a tls:// address then
    takes Dask's config). Options without a tls:// scheduler are an error: they would silently do nothing."""
    from eaglekit.core.errors import InputError

    given = [args.tls_ca_file, args.tls_cert, args.tls_key]
    if not any(given):
        return None
    if not str(getattr(args, "scheduler", "") or "").startswith("tls://"):
        raise InputError("--tls-ca-file, --tls-cert and --tls-key apply to a --scheduler tls://HOST:PORT address only.")
    from eaglekit.io.scheduler import tls_security

    return tls_security(ca_file=args.tls_ca_file, cert=args.tls_cert, key=args.tls_key)


def add_trust_remote_code_option(p: argparse.ArgumentParser) -> None:
    """``--trust-remote-code``: the only way a target folder's own Python (``auto_map``) may run."""
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let transformers run the Python code a target or tokenizer folder ships (its auto_map); "
                        "off by default: such a folder is refused. Read that code first")
