"""``eaglekit acceptance``: measure a drafter's accept length offline.

    eaglekit acceptance DRAFTER --target TARGET --prompts prompts.jsonl [--steps 5] [--json]
    eaglekit acceptance DRAFTER --hidden-states DUMP [--embeddings TARGET_CHECKPOINT] [--json]

The convention is vLLM's mean acceptance length (bonus token counted, the prefill token not); see
:mod:`eaglekit.analysis.acceptance.measure` and docs/acceptance.md.
"""

from __future__ import annotations

import argparse

from eaglekit.cli._dumps import add_dump_options, is_training_dump, run_dump
from eaglekit.cli.common import add_hub_options


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "acceptance", help="measure a drafter's accept length against a target or hidden-state dumps",
        description="Greedy chain drafting with K steps against the target's greedy continuations; prints the "
                    "accept length (vLLM's convention: bonus token in, prefill token out), per-step acceptance and "
                    "the accept length for every K up to --steps.")
    p.add_argument("drafter", metavar="DRAFTER", help="drafter location (local, hf://, https://, ssh://)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--target", metavar="T", help="a causal LM transformers loads (folder or Hub repo id)")
    src.add_argument("--hidden-states", metavar="DIR",
                     help="a dump folder: `eaglekit dump-hidden`'s, or SpecForge's, speculators' or Model-Optimizer's")
    p.add_argument("--prompts", metavar="FILE", help="JSONL prompts (needed with --target)")
    p.add_argument("--embeddings", metavar="LOCATION",
                   help="with --hidden-states: the target checkpoint whose embed_tokens the drafter uses "
                        "(default: the dump's target when it is a local folder)")
    p.add_argument("--max-new-tokens", type=int, default=64, metavar="N", help="greedy continuation length (64)")
    p.add_argument("--steps", type=int, default=5, metavar="K", help="draft steps per cycle (5)")
    p.add_argument("--temperature", type=float, default=0.0, metavar="T",
                   help="> 0 adds the expected acceptance per step under sampling (needs --target)")
    p.add_argument("--aux-convention", choices=("outputs", "inputs"), default=None,
                   help="how the drafter's aux layer ids select target layers (default: what it was trained with)")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_dump_options(p)
    add_hub_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from eaglekit.analysis.acceptance.measure import measure_acceptance
    from eaglekit.core.errors import InputError

    if args.target is not None and args.prompts is None:
        raise InputError("--target needs --prompts FILE (JSONL: input_ids, text or messages per line).")
    if args.hidden_states is not None and args.prompts is not None:
        raise InputError("--prompts goes with --target; a dump already holds its prompts.")
    _check_device(args.device)
    if is_training_dump(args):
        return run_dump(args)
    result = measure_acceptance(
        args.drafter, target=args.target, hidden_states=args.hidden_states, prompts=args.prompts,
        max_new_tokens=args.max_new_tokens, steps=args.steps, temperature=args.temperature,
        aux_convention=args.aux_convention, device=args.device, dtype=args.dtype, embeddings=args.embeddings,
        endpoint=args.endpoint)
    if args.json:
        print(json.dumps(result.to_json(), allow_nan=False))
    else:
        print(result)
    return 0


def _check_device(device: str) -> None:
    import torch

    from eaglekit.core.errors import InputError

    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise InputError(f"--device {device!r} is not a torch device ({e}).") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device {device}: this torch sees no CUDA device; use --device cpu.")
