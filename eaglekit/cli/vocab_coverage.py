"""``eaglekit vocab-coverage DRAFTER (--target T --prompts P | --hidden-states DUMP) [--out MAP] [--json]``.

The share of the target's output tokens the drafter's draft vocabulary contains (overall and by output
position), which caps per-step acceptance, and the map SpecForge's rule (the N most frequent target tokens)
would build from the same traffic (its coverage is in-sample: measured on the traffic it was chosen from),
with the rows that would take a new token and the rows only shifted. ``--steps K``: the draft steps the cap
on the accept length assumes. ``--out map.safetensors`` writes it for ``eaglekit export --vocab-map``
(``.pt``: SpecForge's format).
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import (NEW_TOKENS, STEPS, add_json_option, add_location, add_remote_options, add_trust_remote_code_option,
                                 check_device, print_json)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vocab-coverage", help="draft vocabulary coverage of the target's tokens on your traffic, "
                                              "and a recommended map",
                       description="Coverage of the target's output tokens by the drafter's draft vocabulary (d2t), "
                                   "overall and by output position; it caps per-step acceptance. Also the map of the "
                                   "N most frequent target tokens on this traffic (SpecForge's rule), its coverage "
                                   "and the lm_head rows that would change; --out writes it.")
    add_location(p, "drafter", "the drafter")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--target", metavar="T", help="a causal LM transformers loads: its greedy continuations are the traffic")
    src.add_argument("--hidden-states", metavar="DIR",
                     help="a dump folder: eaglekit dump-hidden's (its continuations are the traffic) or a training "
                          "pipeline's (SpecForge: the assistant tokens; speculators, Model-Optimizer: every token)")
    p.add_argument("--prompts", metavar="FILE", help="JSONL prompts (needed with --target)")
    p.add_argument("--chat-template", metavar="FILE", help="render the prompts with this template (or 'raw') in the "
                                                           "bounded sandbox instead of the target's own")
    p.add_argument("--max-new-tokens", type=NEW_TOKENS, default=64, metavar="N", help="continuation length (64)")
    p.add_argument("--steps", type=STEPS, default=5, metavar="K",
                   help="draft steps per cycle, for the accept length the coverage caps (5)")
    p.add_argument("--out", metavar="MAP", help="write the recommended map: .safetensors (for eaglekit export "
                                                "--vocab-map) or .pt (SpecForge)")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    add_json_option(p)
    add_trust_remote_code_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.acceptance.coverage import check_map_path, vocab_coverage, write_vocab_map
    from eaglekit.core.errors import InputError

    if args.target is not None and args.prompts is None:
        raise InputError("--target needs --prompts FILE (JSONL: text or messages per line, or input_ids).")
    if args.hidden_states is not None and (args.prompts is not None or args.chat_template is not None):
        raise InputError("--prompts and --chat-template go with --target; a dump already holds its prompts.")
    if args.out is not None:
        check_map_path(args.out)
    check_device(args.device)
    cov = vocab_coverage(args.drafter, target=args.target, prompts=args.prompts, hidden_states=args.hidden_states,
                         chat_template=args.chat_template, max_new_tokens=args.max_new_tokens, steps=args.steps,
                         device=args.device,
                         trust_remote_code=args.trust_remote_code, endpoint=args.endpoint, timeout=args.timeout)
    written = write_vocab_map(args.out, cov.recommended_d2t, cov.recommended_t2d) if args.out else None
    if args.json:
        out = cov.to_json()
        out["written"] = None if written is None else str(written)
        print_json(out)
    else:
        print(cov)
        if written is not None:
            print(f"\nrecommended map written to {written} (eaglekit export DRAFTER --vocab-map {written} --target T)")
    return 0
