"""``eaglekit live``: the engine's own acceptance, read live, and beside eaglekit's offline figure.

    eaglekit live http://localhost:8000 [--window 30] [--model NAME] [--json]
    eaglekit live --log sglang_server.log [--steps 3] [--json]
    eaglekit live http://localhost:8000 --offline acceptance.json [--drafter D --engine vllm==0.10.2] [--temperature 0]
    eaglekit live http://localhost:8000 --drafter D --target T --prompts P   (measures the offline figure first)

Reads the engine's Prometheus ``/metrics`` twice, ``--window`` seconds apart (vLLM's spec_decode counters, or
SGLang's), and prints the accept length (1 + accepted / drafts, bonus token in) with its interval, drafts, draft
and accepted tokens, per-position and per-step acceptance, generation tokens per second and the speculative
config the server reports. A bearer token for the metrics endpoint comes from ``$EAGLEKIT_METRICS_TOKEN`` (never
the command line) and goes to that host only; redirects to another host are refused. ``--json`` of a plain reading
is what ``eaglekit plan --measured`` reads as a measured run.
"""

from __future__ import annotations

import argparse
import json
import os
import re

from eaglekit.cli.common import add_json_option, add_timeout_option, emit, engine_spec, number, temperature, whole

TOKEN_ENV = "EAGLEKIT_METRICS_TOKEN"
_MAX_OFFLINE = 64 * 1024 * 1024


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("live", help="the engine's acceptance read live from /metrics (or SGLang's log), beside "
                                    "the offline figure",
                       description="Read a vLLM or SGLang server's speculative-decoding counters twice over a window "
                                   "and report its accept length with an interval; with --offline (or --drafter, "
                                   "--target, --prompts), put eaglekit's offline figure beside it and check the "
                                   "known causes of a gap.")
    p.add_argument("url", nargs="?", default=None, metavar="URL",
                   help="the engine's address, http(s)://HOST:PORT (its /metrics is read) or the metrics URL itself; "
                        "or a server log file (as --log)")
    p.add_argument("--log", metavar="FILE", help="an SGLang server log: pool its 'Decode batch ... accept len' lines")
    p.add_argument("--window", type=number(0.05, 86_400, "seconds"), default=10.0, metavar="SECONDS",
                   help="seconds between the two scrapes (default 10)")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="only this model_name's counters (default: every served model's, summed)")
    p.add_argument("--steps", type=whole(1, 64, "a number of draft steps"), default=None, metavar="K",
                   help="the served draft steps, where the engine does not report them (SGLang's log)")
    p.add_argument("--batch", type=whole(1, 1 << 20, "a batch size"), default=None, metavar="N",
                   help="the concurrency per engine for --json when the engine's running-requests gauge is missing")
    p.add_argument("--offline", metavar="RESULT.json", help="an `eaglekit acceptance --json` result to compare with")
    p.add_argument("--drafter", default=None, metavar="D",
                   help="the served drafter: its config's aux layer ids are checked against --engine's reading; with "
                        "--target and --prompts, measured offline at the served steps")
    p.add_argument("--target", default=None, metavar="T", help="the target, to measure the offline figure (with --prompts)")
    p.add_argument("--prompts", default=None, metavar="P", help="prompts JSONL, to measure the offline figure")
    p.add_argument("--max-new-tokens", type=whole(1, 65_536, "a number of tokens"), default=64, metavar="N",
                   help="with --target and --prompts: tokens generated per prompt offline (default 64)")
    p.add_argument("--engine", type=engine_spec, default=None, metavar="E[==V]",
                   help="the served engine release (vllm==0.10.2, sglang==0.5.9): checks how it reads the aux ids")
    p.add_argument("--temperature", type=temperature, default=None, metavar="T",
                   help="the served requests' temperature, if you know it (checked against the offline one)")
    add_timeout_option(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from eaglekit.analysis.live.read import read_live, read_live_log
    from eaglekit.core.errors import InputError

    log = args.log
    if log is None and args.url is not None and not args.url.lower().startswith(("http://", "https://")):
        if not os.path.exists(args.url) and re.match(r"^[\w.-]+:\d+(/|$)", args.url):
            raise InputError(f"{args.url}: give the engine's address with its scheme, http://{args.url}")
        log = args.url
    elif log is not None and args.url is not None:
        raise InputError("give a URL or --log FILE, not both.")
    if log is None and args.url is None:
        raise InputError("give the engine's URL (http://HOST:PORT) or --log FILE.")
    loaded = _load_offline(args)  # a bad file is refused before a window is spent
    if log is not None:
        reading = read_live_log(log, steps=args.steps)
    else:
        reading = read_live(args.url, window=args.window, model=args.model, timeout=args.timeout,
                            token=os.environ.get(TOKEN_ENV) or None)
        if args.steps is not None and reading.steps is None:
            reading = replace(reading, steps=args.steps)
    if args.batch is not None:
        reading = replace(reading, running_requests=float(args.batch) * (reading.engines or 1))  # per engine
    offline = loaded if loaded is not None else _measure_offline(args, reading.steps)
    if offline is None:
        emit(reading, args)
        return 0
    from eaglekit.analysis.live.compare import compare_live

    emit(compare_live(reading, offline, aux_view=_aux_view(args), engine=args.engine,
                      temperature=args.temperature), args)
    return 0


def _load_offline(args: argparse.Namespace):
    """``--offline RESULT.json``, read and checked (its accept length, interval and steps)."""
    from eaglekit.analysis.live.compare import offline_at
    from eaglekit.core import safejson
    from eaglekit.core.errors import InputError
    from eaglekit.io.metrics import read_regular

    if args.offline is None:
        return None
    if args.target is not None or args.prompts is not None:
        raise InputError("give --offline RESULT.json or --target with --prompts (to measure it), not both.")
    data, cut = read_regular(args.offline, max_bytes=_MAX_OFFLINE, what="an `eaglekit acceptance --json` result")
    if cut:
        raise InputError(f"{args.offline} is larger than 64 MiB; expected an `eaglekit acceptance --json` result.")
    offline = safejson.loads(data, what=args.offline, error=InputError)
    offline_at(offline, None, what=args.offline)
    return offline


def _measure_offline(args: argparse.Namespace, steps: int | None):
    """The offline figure measured now (``--drafter --target --prompts``) at the served steps; None without them."""
    from eaglekit.core.errors import InputError

    if args.target is None and args.prompts is None:
        return None
    if args.drafter is None or args.target is None or args.prompts is None:
        raise InputError("measuring the offline figure needs --drafter, --target and --prompts together.")
    from eaglekit.analysis.acceptance.measure import measure_acceptance  # torch: only when measuring

    result = measure_acceptance(args.drafter, target=args.target, prompts=args.prompts, steps=steps or 5,
                                max_new_tokens=args.max_new_tokens, temperature=args.temperature or 0.0,
                                timeout=args.timeout)
    return json.loads(json.dumps(result.to_json()))


def _aux_view(args: argparse.Namespace):
    """The drafter's aux ids as the served release reads them (its config.json only), when both are given."""
    if args.drafter is None or args.engine is None:
        return None
    from eaglekit.core.configs.config import normalize_config
    from eaglekit.io.reader import opened

    with opened(args.drafter, timeout=args.timeout) as ckpt:
        raw = ckpt.inventory.config
    if raw is None:
        return None
    return normalize_config(raw, source=f"{args.drafter} config.json").aux_view(engines=(args.engine,))
