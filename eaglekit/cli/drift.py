"""``eaglekit drift A B``: how far target B moved from target A, where an EAGLE-3 drafter looks first.

    eaglekit drift hf://moonshotai/Kimi-K2-Instruct hf://moonshotai/Kimi-K2.5 --budget 4GB \\
        --drafter hf://AQ-MedAI/Kimi-K2-Instruct-eagle3
    eaglekit drift /data/k2 /data/k25 --full --scheduler tcp://10.0.0.5:8786 --html drift.html
    eaglekit drift /data/k2 /data/k25 --hidden dumps/k2 dumps/k25

Reads FP8 block-quantised, compressed-tensors pack-quantised and bf16/fp16/fp32 weights by row block
through :func:`eaglekit.drift`: sampled under ``--budget`` with confidence intervals (the default for
remote locations), or every byte with ``--full`` (the default for local ones), on a Dask cluster.
"""

from __future__ import annotations

import argparse
import sys

from eaglekit.cli.common import (add_json_option, capped, add_location, add_remote_options, add_tls_options,
                                 add_trust_remote_code_option, check_writable, emit, scheduler_security, write_html)

_EPILOG = ("Weights pair by name across wrappers (K2.5's language_model. prefix) and quantisation suffixes. "
           "Sampled figures carry 95% intervals; --full reads every byte (inline below 1 GiB, else on a Dask "
           "LocalCluster, or on --scheduler ADDRESS whose workers read the locations themselves).")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drift", help="how far a target moved between versions: drafter's view, per-layer map",
                       description="Compare two versions of a target model (quantised or not), the drafter's view "
                                   "first (embedding rows, draft lm_head rows, layers feeding it), then every layer.",
                       epilog=_EPILOG)
    add_location(p, "a", "the reference target")
    add_location(p, "b", "the target compared against A")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--budget", metavar="SIZE", help="sampled mode: bytes to read, e.g. 4GB (default 4GB)")
    mode.add_argument("--full", action="store_true", default=None, help="read every byte (default for local targets)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="full mode: a Dask scheduler address (tcp://HOST:PORT, or tls://HOST:PORT with the TLS "
                        "options below), 'local' for a LocalCluster here, 'inline' for this process (implies --full). "
                        "A scheduler can run code in this process: connect only to your own (docs/drift.md)")
    p.add_argument("--drafter", metavar="LOCATION",
                   help="an EAGLE-3 drafter: its d2t and aux layer ids pick what to show first")
    p.add_argument("--tokenizer", metavar="PATH", help="a local tokenizer folder to decode moved embedding rows")
    p.add_argument("--hidden", nargs=2, metavar=("DUMP_A", "DUMP_B"),
                   help="two hidden-state dumps of the same prompts (eaglekit dump-hidden): cosine and CKA per layer")
    p.add_argument("--seed", type=capped((1 << 63) - 1), default=0, help="sampled mode: the random seed (default 0)")
    add_json_option(p)
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page with the drift map")
    add_remote_options(p)
    add_tls_options(p)
    add_trust_remote_code_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.drift.measure import drift

    if args.html:
        check_writable(args.html, "--html")
    security = scheduler_security(args)
    tokenizer = _tokenizer(args.tokenizer, trust_remote_code=args.trust_remote_code) if args.tokenizer else None
    full = True if args.full else (False if args.budget else None)
    report = drift(args.a, args.b, drafter=args.drafter, tokenizer=tokenizer, full=full, budget=args.budget,
                   scheduler=args.scheduler, seed=args.seed, hidden=tuple(args.hidden) if args.hidden else None,
                   endpoint=args.endpoint, timeout=args.timeout, security=security, progress=sys.stderr.isatty())
    if args.html:
        from eaglekit.view.drift_figures import save_drift_page

        write_html(lambda path: save_drift_page(report, path), args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    emit(report, args)
    return 0


def _tokenizer(path: str, *, trust_remote_code: bool = False):
    from eaglekit.core.errors import InputError

    import os

    from eaglekit.core.errors import ConfigError
    from eaglekit.core.configs.loadable import remote_code
    from eaglekit.core.safejson import loads
    from eaglekit.io.sources.local import LocalSource

    if os.path.isdir(path):  # a folder declaring its own tokenizer class is refused before transformers sees it
        files = {}
        for name in ("tokenizer_config.json", "config.json"):
            data = LocalSource(path).read_small(name)
            if data is not None:
                files[name] = loads(data, what=f"{path}/{name}", error=ConfigError)
        remote_code(files, name=path, trust_remote_code=trust_remote_code)
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    except Exception as e:  # transformers raises many types for a folder that is not a tokenizer
        raise InputError(f"cannot load a tokenizer from {path!r} ({type(e).__name__}); give a local folder with "
                         "tokenizer files, or omit --tokenizer.") from e
