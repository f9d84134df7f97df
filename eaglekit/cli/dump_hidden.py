"""``eaglekit dump-hidden``: run a target once and save its hidden states for later measurements.

    eaglekit dump-hidden --target TARGET --prompts prompts.jsonl --out DIR [--layers 2,31,59 | --for-drafter D]

The dump format is :mod:`eaglekit.io.dumps.native` (docs/acceptance.md); `eaglekit acceptance
--hidden-states DIR` reads it anywhere, without the target.
"""

from __future__ import annotations

import argparse

from eaglekit.cli.common import NEW_TOKENS, add_remote_options, check_device, add_trust_remote_code_option, index_list


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dump-hidden", help="save a target's hidden states on prompts, for `eaglekit acceptance --hidden-states`",
        description="Greedy continuation of every prompt, then one forward pass; writes input ids, the chosen "
                    "hidden states (Hugging Face output_hidden_states indices) and the target's next-token ids.")
    p.add_argument("--target", required=True, metavar="T", help="a causal LM transformers loads")
    p.add_argument("--prompts", required=True, metavar="FILE", help="JSONL prompts")
    p.add_argument("--out", required=True, metavar="DIR", help="a new (or empty) folder")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--layers", metavar="I,J,K", type=index_list,
                       help="output_hidden_states indices to save (index i+1 = output of layer i; default: all)")
    which.add_argument("--for-drafter", metavar="DRAFTER",
                       help="save what this drafter reads under both aux conventions")
    p.add_argument("--max-new-tokens", type=NEW_TOKENS, default=64, metavar="N")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16", help="stored dtype (bfloat16)")
    p.add_argument("--device", default="cpu")
    add_remote_options(p)
    add_trust_remote_code_option(p)
    p.set_defaults(func=run)



def run(args: argparse.Namespace) -> int:
    from eaglekit.analysis.acceptance.target import dump_hidden_states, load_target_model, read_prompts

    from eaglekit.io.dumps.native import check_new_folder

    check_device(args.device)
    check_new_folder(args.out)
    read_prompts(args.prompts)  # a bad prompts file fails before the target is loaded
    target = load_target_model(args.target, device=args.device, trust_remote_code=args.trust_remote_code)
    layers = args.layers
    if args.for_drafter is not None:
        layers = drafter_layers(args.for_drafter, target.num_hidden_layers, endpoint=args.endpoint, timeout=args.timeout)
    dump = dump_hidden_states(target, args.prompts, args.out, layers=layers, max_new_tokens=args.max_new_tokens,
                              dtype=args.dtype)
    print(f"wrote {len(dump)} samples to {dump.path} (hidden states {list(dump.layers)}, {dump.manifest.dtype})")
    return 0


def drafter_layers(drafter: str, num_layers: int, *, endpoint: str | None = None, timeout: float | None = None) -> list[int]:
    """output_hidden_states indices a drafter reads under either aux convention."""
    from eaglekit.analysis.draft import hidden_state_indices
    from eaglekit.core.configs.layers import default_aux_layers
    from eaglekit.core.configs.config import normalize_config
    from eaglekit.io.reader import load_config

    from eaglekit.analysis.draft.block import check_target_fit
    from eaglekit.core.configs.block import block_family, read_block_config

    raw = load_config(drafter, kind="any", endpoint=endpoint, timeout=timeout)
    if block_family(raw) is not None:  # DFlash and its kin read layer outputs: hidden_states[id + 1]
        block = read_block_config(raw, source=f"{drafter}/config.json")
        if max(block.target_layer_ids) >= num_layers:
            check_target_fit(block, num_layers=num_layers, hidden=block.target_hidden_size,
                             vocab=block.vocab_size or 0, target="the target")
        return sorted(set(block.hidden_state_indices()))
    cfg = normalize_config(load_config(drafter, kind="drafter", endpoint=endpoint, timeout=timeout), source=drafter)
    out: set[int] = set()
    for conv in ("outputs", "inputs"):
        ids = cfg.aux_layer_ids or default_aux_layers(num_layers, convention=conv)
        out.update(k for k in hidden_state_indices(ids, conv) if 0 <= k <= num_layers)
    return sorted(out)
