"""``eaglekit tokenizer-diff A B [--drafter D] [--json]``: two targets' tokenizers and chat templates.

A and B are target locations (folders, hf://, https://, ssh://); only their tokenizer files are read (small
GETs). Exit 0 when tokenizers and templates are the same, 4 when they differ (each difference named, a grown
vocabulary's appended ids and what they mean for a drafter's d2t/t2d included), 2 on bad input. Code a
tokenizer names in ``auto_map`` is never run.
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import add_json_option, add_location, add_remote_options, print_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokenizer-diff", help="compare two targets' tokenizers and chat templates (exit 0 same / 4 differ)",
                       description="Read two targets' tokenizer files (tokenizer.json, tokenizer_config.json, "
                                   "special_tokens_map.json, tiktoken.model, chat_template.jinja) and name every "
                                   "difference: token ids that hold other tokens, ids a new version appends, special and "
                                   "added tokens, BOS/EOS/pad, the chat template lines, and what a changed vocabulary "
                                   "means for a drafter's d2t/t2d. Exit 0 same, 4 different, 2 error.")
    add_location(p, "a", "target A (its tokenizer files are read)")
    add_location(p, "b", "target B")
    p.add_argument("--drafter", metavar="D", help="also say what this drafter's checkpoint says it was trained with")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="accepted for symmetry with loading commands; tokenizer-diff only reads files and never runs "
                        "a tokenizer's code either way")
    add_json_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.io.tokens.tokenizer import drafter_claims, tokenizer_diff

    diff = tokenizer_diff(args.a, args.b, endpoint=args.endpoint, timeout=args.timeout)
    claims = drafter_claims(args.drafter, endpoint=args.endpoint, timeout=args.timeout) if args.drafter else None
    if args.json:
        out = diff.to_json()
        if claims is not None:
            out["drafter"] = claims.to_json()
        print_json(out)
    else:
        print(diff)
        if claims is not None:
            print("\n" + str(claims))
    return diff.exit_code
