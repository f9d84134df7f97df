"""``eaglekit serve-hub ROOT``: serve a folder of repos as a read-only, Hub-compatible HTTP server."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-hub", help="serve ROOT/OWNER/REPO folders as a read-only Hub on this machine",
                       description="Serve ROOT/OWNER/REPO/<files> with the endpoints huggingface_hub uses, so "
                                   "hf:// locations work offline: export HF_ENDPOINT=<the printed endpoint>. "
                                   "Runs until Ctrl-C.")
    p.add_argument("root", metavar="ROOT", help="folder laid out as ROOT/OWNER/REPO/<files>; the demo workspace's is build/demo/hub")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="port to listen on; 0 picks a free one (default: 8765)")
    p.add_argument("--token", action="append", default=[], metavar="TOKEN",
                   help="a bearer token that may read private and gated repos (repeatable)")
    p.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.demo.hubserver import serve

    serve(args.root, host=args.host, port=args.port, tokens=args.token, quiet=args.quiet)
    return 0


def _port(text: str) -> int:
    value = int(text) if text.isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be a number from 0 to 65535, got {text!r}")
    return value
