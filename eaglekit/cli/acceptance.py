"""``eaglekit acceptance``: measure a drafter's accept length offline.

    eaglekit acceptance DRAFTER --target TARGET --prompts prompts.jsonl [--steps 5] [--json]
    eaglekit acceptance DRAFTER --hidden-states DUMP [--embeddings TARGET_CHECKPOINT] [--json]
    eaglekit acceptance DRAFTER --target TARGET --prompts chats.jsonl --chat-template FILE
    eaglekit acceptance DRAFTER --target TARGET --prompts chats.jsonl --compare-templates A.jinja B.jinja
    eaglekit acceptance DRAFTER --target TARGET --prompts prompts.jsonl --steps 6 --topk 10 --draft-tokens 60
    eaglekit acceptance DRAFTER --target TARGET --prompts prompts.jsonl --by-position 8 [--break-even 2.1]
    eaglekit acceptance DRAFTER --hidden-states DUMP --tree-grid 6:10:60,4:8:32,3:1:4 [--tree-attention sglang-slots]

The convention is vLLM's mean acceptance length (bonus token counted, the prefill token not); see
:mod:`eaglekit.analysis.acceptance.measure` and docs/acceptance.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from eaglekit.cli._dumps import add_dump_options, check_sources, run_dump
from eaglekit.cli._positions import add_position_options, emit_with_positions
from eaglekit.cli.common import (NEW_TOKENS, STEPS, capped, add_cache_options, add_json_option, cache_kwargs, add_location, add_remote_options,
                                 add_trust_remote_code_option, emit,
                                 temperature)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "acceptance", help="measure a drafter's accept length against a target or hidden-state dumps",
        description="Greedy chain drafting with K steps against the target's greedy continuations; prints the "
                    "accept length (vLLM's convention: bonus token in, prefill token out), per-step acceptance and "
                    "the accept length for every K up to --steps.")
    add_location(p, "drafter", "the drafter")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--target", metavar="T", help="a causal LM transformers loads (folder or Hub repo id)")
    src.add_argument("--hidden-states", metavar="DIR",
                     help="a dump folder: `eaglekit dump-hidden`'s, or SpecForge's, speculators' or Model-Optimizer's")
    p.add_argument("--prompts", metavar="FILE", help="JSONL prompts (needed with --target)")
    p.add_argument("--embeddings", metavar="LOCATION",
                   help="with --hidden-states: the target checkpoint whose embed_tokens the drafter uses "
                        "(default: the dump's target when it is a local folder)")
    p.add_argument("--max-new-tokens", type=NEW_TOKENS, default=64, metavar="N", help="greedy continuation length (64)")
    p.add_argument("--steps", type=STEPS, default=None, metavar="K",
                   help="draft steps per cycle (5); a block drafter (DFlash): drafts per block, run with a block of "
                        "K + 1 (default block_size - 1)")
    p.add_argument("--temperature", type=temperature, default=0.0, metavar="T",
                   help="> 0 adds the expected acceptance per step and the expected accept length under "
                        "sampling, on the same cycle basis as the greedy figure (needs --target)")
    p.add_argument("--confidence-threshold", type=float, default=0.0, metavar="P",
                   help="a DSpark drafter: cut each proposal before the first slot whose confidence is below P, as "
                        "DeepSpec's --confidence-threshold does (0: the whole block)")
    p.add_argument("--aux-convention", choices=("outputs", "inputs"), default=None,
                   help="how the drafter's aux layer ids select target layers (default: what it was trained with)")
    p.add_argument("--rotary-base", type=_rotary_base, default="config", metavar="config|torchspec|both|BASE",
                   help="the drafter's rotary base: config (rope_theta, as vLLM, SGLang and transformers build the "
                        "table; default), torchspec (as TorchSpec trains it: 10000 for an MLA drafter's YaRN whatever "
                        "rope_theta says), both (config's figure, with torchspec's in a note) or a number")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    tree = p.add_argument_group("tree drafts (SGLang's --speculative-eagle-topk / --speculative-num-draft-tokens)")
    tree.add_argument("--topk", type=capped(), default=None, metavar="K",
                      help="draft a tree: K children per node, K best kept per level (1 is the chain)")
    tree.add_argument("--draft-tokens", type=capped(), default=None, metavar="N",
                      help="tokens verified per cycle, the root included (N - 1 drafted; topk 1: steps + 1)")
    tree.add_argument("--tree-grid", metavar="S:K:N,...", default=None,
                      help="several trees in one run (steps:topk:draft tokens), sharing the target run and the "
                           "drafter's first pass; JSON trees[]")
    tree.add_argument("--tree-attention", choices=("ancestors", "sglang-slots"), default=None,
                      help="what a frontier node's drafter pass attends to: its true ancestors (EAGLE; default) or "
                           "its branch slot's earlier entries (SGLang's draft KV layout)")
    add_json_option(p)
    tpl = p.add_mutually_exclusive_group()
    tpl.add_argument("--chat-template", metavar="FILE",
                     help="render the prompts with this Jinja template (or 'raw': no template), in a bounded sandbox")
    tpl.add_argument("--compare-templates", nargs=2, metavar=("A", "B"),
                     help="measure under template A and template B (files, or 'raw'): the accept length of each, "
                          "the gap, and where it comes from")
    add_dump_options(p)
    add_remote_options(p)
    add_trust_remote_code_option(p)
    add_cache_options(p)
    add_position_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.acceptance.measure import measure_acceptance
    from eaglekit.core.errors import InputError

    block_default = args.steps is None  # a block drafter's default is its own (block_size - 1)
    args.steps = 5 if block_default else args.steps
    training_dump = check_sources(args)
    trees = _trees(args)
    if trees is not None and (args.chat_template is not None or args.compare_templates is not None):
        raise InputError("tree drafts (--topk, --draft-tokens, --tree-grid) are measured without a chat template "
                         "comparison; drop one of the two.")
    if args.rotary_base != "config" and (training_dump or trees is not None or args.chat_template is not None
                                         or args.compare_templates is not None):
        raise InputError("--rotary-base applies to a chain measurement (--target or --hidden-states): drop it, or "
                         "drop the tree, template or training-dump options.")
    if training_dump:
        return run_dump(args, None if trees is None else trees[0])
    if args.chat_template is not None or args.compare_templates is not None:
        return _run_templates(args)
    if trees is not None:
        return _run_trees(args, *trees)
    common = dict(target=args.target, hidden_states=args.hidden_states, prompts=args.prompts,
                  max_new_tokens=args.max_new_tokens, steps=None if block_default else args.steps,
                  temperature=args.temperature, aux_convention=args.aux_convention, device=args.device,
                  dtype=args.dtype, embeddings=args.embeddings, endpoint=args.endpoint, timeout=args.timeout,
                  trust_remote_code=args.trust_remote_code, confidence_threshold=args.confidence_threshold,
                  **cache_kwargs(args))
    both = args.rotary_base == "both"
    result = measure_acceptance(args.drafter, rotary_base="config" if both else args.rotary_base, **common)
    if both:  # the engines' figure, and TorchSpec's training base beside it
        other = measure_acceptance(args.drafter, rotary_base="torchspec", **common)
        result = replace(result, notes=(*result.notes, _other_base(other)))
    _warn(result.notes)
    emit_with_positions(result, args)
    return 0


def _other_base(other) -> str:
    """TorchSpec's figure in one sentence, beside the engines' (``--rotary-base both``)."""
    by_k = ", ".join(f"K={k} {v:.2f}" for k, v in enumerate(other.accept_length_by_steps, 1))
    return f"rotary base torchspec (as TorchSpec trains): accept length {other.accept_length:.2f} ({by_k})."


def _rotary_base(text: str):
    """``config``, ``torchspec``, ``both`` or a positive number (argparse type)."""
    if text in ("config", "torchspec", "both"):
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected config, torchspec or a positive number, got {text!r}")
    return value


def _run_templates(args: argparse.Namespace) -> int:
    """``--chat-template`` / ``--compare-templates``: prompts rendered in the bounded sandbox."""
    from eaglekit.analysis.acceptance.templates import compare_templates, measure_with_template
    from eaglekit.core.errors import InputError

    if args.target is None:
        raise InputError("--chat-template and --compare-templates render prompts for a target: give --target T and "
                         "--prompts FILE (a dump holds prompts already rendered).")
    if args.temperature > 0 or args.aux_convention is not None:
        raise InputError("--chat-template / --compare-templates measure at temperature 0 with the drafter's own aux "
                         "convention; drop --temperature / --aux-convention.")
    common = dict(target=args.target, prompts=args.prompts, max_new_tokens=args.max_new_tokens, steps=args.steps,
                  device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code, endpoint=args.endpoint, timeout=args.timeout)
    if args.compare_templates is not None:
        out = compare_templates(args.drafter, a=args.compare_templates[0], b=args.compare_templates[1], **common)
    else:
        out = measure_with_template(args.drafter, template=args.chat_template, **common)
    emit(out, args)
    return 0


def _trees(args: argparse.Namespace):
    """(configurations, chain steps) from --topk/--draft-tokens or --tree-grid; None without them."""
    from eaglekit.core.errors import InputError

    single = args.topk is not None or args.draft_tokens is not None
    if single or args.tree_grid is not None:  # torch loads with the tree module: not for a chain read from the cache
        from eaglekit.analysis.acceptance.tree import parse_tree_grid, tree_config
    if single and args.tree_grid is not None:
        raise InputError("give --topk K --draft-tokens N (one tree, with --steps) or --tree-grid S:K:N,... (several), "
                         "not both.")
    if args.tree_grid is not None:
        return parse_tree_grid(args.tree_grid), args.steps
    if single:
        if args.topk is None:
            raise InputError("--draft-tokens needs --topk K (children per node; 1 is the chain).")
        n = args.draft_tokens
        if n is None:
            if args.topk != 1:
                raise InputError(f"--topk {args.topk} needs --draft-tokens N: the tokens verified per cycle, root "
                                 "included (SGLang's --speculative-num-draft-tokens).")
            n = args.steps + 1
        return (tree_config(args.steps, args.topk, n),), args.steps
    if args.tree_attention is not None:
        raise InputError("--tree-attention does nothing without a tree: add --topk K --draft-tokens N or --tree-grid.")
    return None


def _run_trees(args: argparse.Namespace, configs, steps: int) -> int:
    from eaglekit.analysis.acceptance.trees import measure_trees

    result = measure_trees(
        args.drafter, trees=configs, tree_attention=args.tree_attention or "ancestors", steps=steps,
        target=args.target, hidden_states=args.hidden_states, prompts=args.prompts,
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, aux_convention=args.aux_convention,
        device=args.device, dtype=args.dtype, embeddings=args.embeddings, endpoint=args.endpoint,
        timeout=args.timeout, trust_remote_code=args.trust_remote_code, **cache_kwargs(args))
    _warn(result.result.notes)
    emit_with_positions(result, args)
    return 0


def _warn(notes) -> None:
    for note in notes:  # what may make the figure measure something else, also where --json hides it
        if note.startswith("warning: "):
            print(f"eaglekit acceptance: {note}", file=sys.stderr)
