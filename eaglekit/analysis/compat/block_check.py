"""Pre-serving checks for a block drafter (DFlash, and the DFlash backbone of DFlash2 and DSpark), from its config and
safetensors headers: what ``eaglekit check`` runs when the drafter's config is a block drafter's.

A block drafter owns no embedding and no ``lm_head`` (it drafts through the target's), reads the OUTPUTS of
``dflash_config.target_layer_ids`` (``hidden_states[id + 1]``, z-lab/dflash ``extract_context_feature``), and embeds
its mask slots as ``dflash_config.mask_token_id``: the checks are that its tensors are the ones its config implies,
and that its config can read the target (layer ids within the target's layers, the target's hidden size, a mask id
in the target's vocabulary: :func:`~eaglekit.analysis.draft.block.check_target_fit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eaglekit.core.configs.block import read_block_config
from eaglekit.core.configs.config import normalize_target
from eaglekit.core.errors import EaglekitError
from eaglekit.io.inventory import Inventory

#: one finding: (check, severity, message, fix), as :class:`~eaglekit.analysis.compat.check.Finding` takes them
Found = tuple[str, str, str, str]

#: what each engine is launched with for a DFlash drafter
LAUNCH = {"sglang": "--speculative-algorithm DFLASH --speculative-num-draft-tokens K+1",
          "vllm": '--speculative-config \'{"method": "dflash", "num_speculative_tokens": K}\''}


def block_findings(inventory: Inventory, config: Mapping[str, Any], *, engines: tuple[str, ...],
                   target: Mapping[str, Any] | None = None, name: str = "drafter",
                   target_name: str | None = None) -> list[Found]:
    """The pure check of a block drafter: its config, every tensor's shape against it (headers only), and the target
    it would read (its config); ``check_block_drafter`` in :mod:`eaglekit.analysis.compat.check` makes the report."""
    from eaglekit.analysis.draft.block import backbone_shapes, check_target_fit

    out: list[Found] = []

    def add(check: str, severity: str, message: str, fix: str = "") -> None:
        out.append((check, severity, message, fix))

    try:
        cfg = read_block_config(config, source=f"{name} config.json")
    except EaglekitError as e:
        add("config", "error", str(e), "Fix the key named (the authors' config.json has it).")
        return out
    if cfg.family == "dflash":
        bases = dict.fromkeys(e.split("<")[0].split(">")[0].split("=")[0] for e in engines)
        layers = f"{cfg.num_hidden_layers} decoder layer" + ("s" if cfg.num_hidden_layers != 1 else "")
        add("architecture", "ok", f"a DFlash block drafter ({cfg.architecture or 'dflash_config'}): block "
            f"{cfg.block_size}, up to {cfg.block_size - 1} drafts in one forward, {layers}; launch with "
            + "; ".join(f"{b}: {LAUNCH[b]}" for b in bases if b in LAUNCH) + ".")
    else:
        add("architecture", "warning", f"a {cfg.family_name} drafter: eaglekit checks its DFlash backbone (config, "
            "shapes, target fit) only, not what its family adds.", "Check it with its authors' loader too.")
    names = set(inventory.names)
    shapes = backbone_shapes(cfg)
    problems = []
    for tensor, (shape, keys) in shapes.items():
        stored = tensor if tensor in names else f"model.{tensor}" if f"model.{tensor}" in names else None
        if stored is None:
            problems.append(f"{tensor} is missing ({keys})")
        elif tuple(int(d) for d in inventory[stored].shape) != shape:
            problems.append(f"{stored} is {list(inventory[stored].shape)}, config.json implies {list(shape)} ({keys})")
    if problems:
        more = f"; and {len(problems) - 4} more" if len(problems) > 4 else ""
        add("shapes", "error", "; ".join(problems[:4]) + more,
            "Use the config.json the weights were trained with.")
    else:
        add("shapes", "ok", f"all {len(shapes)} tensors the config implies are present with its shapes.")
    own = [n for n in names if n.split(".")[-2:-1] in (["embed_tokens"], ["lm_head"])]
    if own:
        add("embedding", "info", f"the checkpoint carries {', '.join(sorted(own))}; a DFlash drafter drafts through "
            "its target's embedding and lm_head, and the engines skip its own.")
    else:
        add("embedding", "ok", "no embedding and no lm_head: it drafts through the target's (as the engines load it).")
    if cfg.mask_token_id is None:
        add("mask", "error", "dflash_config.mask_token_id is missing: the block's mask slots cannot be embedded.",
            "Add the mask token id the drafter was trained with.")
    if target is None:
        return out
    try:
        tgt = normalize_target(target, source=target_name or "target config.json")
        check_target_fit(cfg, num_layers=tgt.num_hidden_layers, hidden=tgt.hidden_size, vocab=tgt.vocab_size,
                         target=target_name or "the target")
    except EaglekitError as e:
        add("target", "error", str(e), "Use a drafter made for this target.")
        return out
    ids = list(cfg.target_layer_ids)
    add("target", "ok", f"reads the outputs of target layers {ids} (hidden_states {[i + 1 for i in ids]}) of its "
        f"{tgt.num_hidden_layers}, hidden size {tgt.hidden_size}; mask id {cfg.mask_token_id} is in its vocabulary "
        f"of {tgt.vocab_size}.")
    if max(ids) == tgt.num_hidden_layers - 1:
        add("target", "warning", f"layer id {max(ids)} is the target's last layer: transformers returns it after the "
            "final norm, the engines before it.", "Measure with eaglekit acceptance to see which reading it was "
                                                  "trained on.")
    return out
