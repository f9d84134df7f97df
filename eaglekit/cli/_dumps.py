"""``eaglekit acceptance DRAFTER --hidden-states DIR`` on a training pipeline's dump (SpecForge,
speculators, Model-Optimizer): the options, and the run (:func:`~eaglekit.analysis.acceptance.dumps.measure_dump`).

    eaglekit acceptance DRAFTER --hidden-states /data/hs --target-head hf://moonshotai/Kimi-K2.5 \\
        [--dump-format specforge] [--aux-layers 2,30,58] [--final-norm after-norm] [--all-positions] \\
        [--limit N | --sample N --seed S] [--scheduler tcp://10.0.0.5:8786] [--device cuda] [--json]
"""

from __future__ import annotations

import argparse
import os

from eaglekit.cli._positions import emit_with_positions
from eaglekit.cli.common import FILES, SEED, index_list

FORMATS = ("auto", "eaglekit", "specforge", "speculators", "modelopt")


def add_dump_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training dumps (--hidden-states DIR written by SpecForge, speculators or Model-Optimizer)")
    g.add_argument("--target-head", metavar="LOCATION",
                   help="the target checkpoint whose final norm and lm_head give its next tokens (read by range: "
                        "local, hf://, https://, ssh://)")
    g.add_argument("--dump-format", choices=FORMATS, default="auto", help="the dump's layout (default: recognised)")
    g.add_argument("--aux-layers", metavar="I,J,K", type=index_list,
                   help="layer ids the dump's aux hidden states hold, in the drafter's convention (default: the "
                        "drafter config's; the files do not record them)")
    g.add_argument("--final-norm", choices=("before-norm", "after-norm"), default=None,
                   help="where the dump's final hidden state sits (default: what the format's writer stores)")
    g.add_argument("--all-positions", action="store_true",
                   help="count every token, not only the loss mask's assistant tokens")
    g.add_argument("--loss-masks", metavar="FILE",
                   help="JSON lines {\"file\": NAME, \"loss_mask\": [0, 1, ...]} for formats that keep masks elsewhere")
    g.add_argument("--limit", type=FILES, metavar="N", help="the first N files only")
    g.add_argument("--sample", type=FILES, metavar="N", help="N files drawn at random (with a 95%% interval)")
    g.add_argument("--seed", type=SEED, default=0, metavar="S", help="seed of --sample (0)")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="a Dask scheduler address ('local' for a LocalCluster here): workers read their files")



#: Options that only a training pipeline's dump reads, with the value that means "not given".
DUMP_ONLY = {"target_head": None, "aux_layers": None, "final_norm": None, "all_positions": False, "loss_masks": None,
             "limit": None, "sample": None, "seed": 0, "scheduler": None}
#: Options a training pipeline's dump cannot honour (the dump holds rendered text and its own capture).
NOT_FOR_DUMPS = {"chat_template": None, "compare_templates": None, "aux_convention": None}


def refuse_unused(args: argparse.Namespace, training_dump: bool) -> None:
    """One line for an option that would silently do nothing on this kind of run."""
    from eaglekit.core.errors import InputError

    unused = NOT_FOR_DUMPS if training_dump else DUMP_ONLY
    given = [name for name, unset in unused.items() if getattr(args, name, unset) != unset]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise InputError(f"{flag} does nothing here: " + (
            "a training pipeline's dump holds its text and its layers as captured; drop it (give --aux-layers for "
            "the layers the dump holds)." if training_dump else
            "it applies to a training pipeline's dump (--hidden-states DIR written by SpecForge, speculators or "
            "Model-Optimizer); drop it."))


def check_sources(args: argparse.Namespace) -> bool:
    """The measurement's sources, checked as ``eaglekit acceptance`` checks them (--target with --prompts, no
    --prompts with a dump, the device, options the source ignores); True for a training pipeline's dump."""
    from eaglekit.cli.common import check_device
    from eaglekit.core.errors import InputError

    if args.target is not None and args.prompts is None:
        raise InputError("--target needs --prompts FILE (JSONL: input_ids, text or messages per line).")
    if args.hidden_states is not None and args.prompts is not None:
        raise InputError("--prompts goes with --target; a dump already holds its prompts.")
    check_device(args.device)
    training_dump = is_training_dump(args)
    if training_dump or args.hidden_states is None:  # (eaglekit's own dumps say what they lack themselves)
        refuse_unused(args, training_dump)
    return training_dump


def is_training_dump(args: argparse.Namespace) -> bool:
    """True when ``--hidden-states`` names a training pipeline's dump rather than eaglekit's own."""
    if args.hidden_states is None:
        return False
    if args.dump_format not in ("auto", "eaglekit"):
        return True
    if args.dump_format == "eaglekit":
        return False
    return not os.path.lexists(os.path.join(os.path.expanduser(args.hidden_states), "manifest.json"))


def run_dump(args: argparse.Namespace, trees=None) -> int:
    from eaglekit.analysis.acceptance.dumps import measure_dump
    from eaglekit.core.errors import InputError
    from eaglekit.io.dumps.detect import open_training_dump

    fmt = None if args.dump_format == "auto" else args.dump_format
    open_training_dump(args.hidden_states, format=fmt)   # the folder first: a missing one says so
    if args.target_head is None:
        raise InputError("--hidden-states with a training pipeline's dump needs --target-head LOCATION: the target "
                         "checkpoint whose final norm and lm_head give the target's next tokens.")
    result = measure_dump(
        args.drafter, args.hidden_states, target_head=args.target_head,
        dump_format=fmt, steps=args.steps,
        temperature=args.temperature, aux_layers=args.aux_layers, final_norm=args.final_norm,
        all_positions=args.all_positions, loss_masks=args.loss_masks, limit=args.limit, sample=args.sample,
        seed=args.seed, scheduler=args.scheduler, device=args.device, dtype=args.dtype, embeddings=args.embeddings,
        endpoint=args.endpoint, timeout=args.timeout, cache=args.cache, cache_dir=args.cache_dir,
        **({"trees": trees, "tree_attention": args.tree_attention or "ancestors"} if trees else {}))
    emit_with_positions(result, args)
    return 0
