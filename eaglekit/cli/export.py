"""``eaglekit export DRAFTER --out DIR [--target T] [--vocab-map FILE] [--format specforge|speculators]``.

Writes a warm-start drafter: layout converted, lm_head rows re-aligned to a new vocabulary map by
target token (new tokens' rows from the target's lm_head), embed_tokens from the target when asked, aux
ids rewritten for an engine. Streamed; writes only into DIR (refused when not empty; --force replaces an
earlier eaglekit export, nothing else);
nothing is written on error.
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import add_engine_option, add_json_option, add_location, add_remote_options, emit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a warm-start drafter (layout, vocabulary map, aux ids for an engine)",
                       description="Write a new drafter folder from DRAFTER: SpecForge or speculators layout and "
                                   "config, lm_head rows re-aligned by target token to --vocab-map (rows of tokens "
                                   "the drafter never had come from the target's lm_head), embed_tokens from the "
                                   "target with --embed-from-target, aux ids rewritten for --engine. Streamed; "
                                   "writes only into --out, never over a non-empty folder: --force replaces an earlier export only.")
    add_location(p, "drafter", "the drafter to start from")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to create (empty or new)")
    p.add_argument("--target", metavar="T", help="target location with weights (lm_head rows for new tokens, "
                                                  "--embed-from-target)")
    p.add_argument("--vocab-map", metavar="FILE", help="d2t/t2d safetensors, SpecForge's .pt map (loaded weights_only), or "
                                                          "another drafter")
    p.add_argument("--format", choices=("specforge", "speculators"), default="specforge",
                   help="the layout and config to write (default specforge)")
    add_engine_option(p, "rewrite aux ids so this engine feeds the tensors training used: vllm, sglang (its newest "
                         "known release; the note says what older ones need) or sglang==0.5.9 (default: keep them)")
    p.add_argument("--embed-from-target", action="store_true", help="save the target's embedding as embed_tokens")
    p.add_argument("--force", action="store_true", help="replace an earlier eaglekit export in --out (never any other "
                                                        "non-empty folder)")
    add_json_option(p)
    add_remote_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.compat.export import export

    result = export(args.drafter, args.out, target=args.target, vocab_map=args.vocab_map, format=args.format,
                    engine=args.engine, embed_from_target=args.embed_from_target, force=args.force,
                    endpoint=args.endpoint, timeout=args.timeout)
    emit(result, args)
    return 0
