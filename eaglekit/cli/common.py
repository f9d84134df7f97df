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
