"""What ``eaglekit inspect`` says about a block drafter (DFlash, DFlash2, DSpark) beside its tensor listing.

An EAGLE-3 checkpoint is listed as its :class:`~eaglekit.io.inventory.Inventory`. A checkpoint whose config.json
declares a block drafter (:func:`eaglekit.core.configs.block.block_family`: its architectures or its
``dflash_config``) also gets its verdicts: the family, the block size and the drafts one block proposes, the
target layers it reads (config ids are layer outputs, ``output_hidden_states[id + 1]``: the authors'
``extract_context_feature``, and what SGLang and vLLM read after adding one), that it owns no embedding and no
lm_head (the target's are used; a copy it carries is noted), and whether every tensor has the shape the config
implies (:mod:`eaglekit.core.configs.block_shapes`).

Pure: an inventory (with its config) in, a :class:`BlockInspection` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from eaglekit.core.configs.block import BlockDrafterConfig, block_family, read_block_config
from eaglekit.core.configs.block_shapes import BlockShapes, block_shapes
from eaglekit.core.redact import visible
from eaglekit.core.render import ansi, html_badge, html_table, text_table, use_colour
from eaglekit.io.inventory import Inventory

Severity = Literal["ok", "info", "warning", "error"]
_COLOUR = {"ok": "green", "info": "grey", "warning": "yellow", "error": "red"}


@dataclass(frozen=True)
class Verdict:
    """One line of what a block drafter is: ``topic`` (family, block, target layers...), the finding, severity."""

    topic: str
    severity: Severity
    text: str

    def to_json(self) -> dict:
        return {"topic": self.topic, "severity": self.severity, "text": self.text}


@dataclass(frozen=True)
class BlockInspection:
    """A block drafter's tensors (``inventory``), its normalised config and the verdicts read from both."""

    inventory: Inventory
    config: BlockDrafterConfig
    shapes: BlockShapes
    verdicts: tuple[Verdict, ...]

    @property
    def consistent(self) -> bool:
        return self.shapes.consistent

    def verdict(self, topic: str) -> Verdict:
        for v in self.verdicts:
            if v.topic == topic:
                return v
        raise KeyError(f"no verdict on {topic!r}: topics are {', '.join(v.topic for v in self.verdicts)}")

    @property
    def headline(self) -> str:
        c = self.config
        return (f"{self.inventory.source}: {c.family_name} block drafter, block {c.block_size} "
                f"({c.drafts_per_block} drafts per block), reads target layers {list(c.target_layer_ids)}")

    def to_json(self) -> dict[str, Any]:
        return {**self.inventory.to_json(),
                "block_drafter": {"family": self.config.family_name, "config": self.config.to_json(),
                                  "shapes": self.shapes.to_json(), "verdicts": [v.to_json() for v in self.verdicts]}}

    def __str__(self) -> str:
        colour = use_colour()
        rows = [(v.topic, ansi(v.severity, _COLOUR[v.severity], enabled=colour), visible(v.text, newlines=False))
                for v in self.verdicts]
        return "\n".join([visible(self.headline, newlines=False), text_table(["", "verdict", "finding"], rows), "",
                          str(self.inventory)])

    def _repr_html_(self) -> str:
        rows = [(v.topic, html_badge(v.severity, _COLOUR[v.severity]), v.text) for v in self.verdicts]
        return (f"<div class='eaglekit-inspect'><p><b>{escape(self.headline)}</b></p>"
                + html_table(["", "verdict", "finding"], rows, caption="Block drafter")
                + self.inventory._repr_html_() + "</div>")


def inspect_block(inventory: Inventory) -> BlockInspection | None:
    """The verdicts on ``inventory`` when its config declares a block drafter, else None (an EAGLE-3 drafter or
    a plain model: its inventory says all). A config whose values are out of range is a ConfigError naming
    the key."""
    raw = inventory.config
    if raw is None or block_family(raw) is None:
        return None
    cfg = read_block_config(raw, source=f"{inventory.source} config.json")
    shapes = block_shapes(cfg, {t.name: t.shape for t in inventory})
    return BlockInspection(inventory, cfg, shapes, tuple(block_verdicts(cfg, shapes)))


def block_verdicts(cfg: BlockDrafterConfig, shapes: BlockShapes) -> list[Verdict]:
    """The verdicts, in reading order."""
    out = [Verdict("family", "info", f"{cfg.family_name} block drafter"
                   + (f" ({cfg.architecture})" if cfg.architecture else " (declared by its dflash_config)"))]
    anchor = ("the anchor slot drafts too (DSpark's label shift)" if cfg.anchor_drafts
              else "the anchor (last committed token) plus mask slots, each mask slot one draft")
    out.append(Verdict("block", "info", f"{cfg.key('block_size')} {cfg.block_size}: {anchor}; "
                       f"{cfg.drafts_per_block} drafts per block, the target verifies {cfg.drafts_per_block + 1} "
                       "tokens per cycle"))
    ids, idx = list(cfg.target_layer_ids), list(cfg.hidden_state_indices())
    given = (f"{cfg.key('target_layer_ids')} {ids}" if cfg.target_layer_ids_given else
             f"{ids} (no target_layer_ids: the authors' spread over num_target_layers {cfg.num_target_layers})")
    trained = f"; trained for a target of {cfg.num_target_layers} layers" if cfg.num_target_layers else ""
    out.append(Verdict("target layers", "info", f"{given}: outputs of those target layers, output_hidden_states "
                       f"{idx} (id + 1; SGLang and vLLM add the same 1), concatenated into fc ({cfg.n_aux} x "
                       f"{cfg.target_hidden_size} wide){trained}"))
    if cfg.num_target_layers and cfg.num_target_layers - 1 in cfg.target_layer_ids:
        out.append(Verdict("target layers", "warning", f"id {cfg.num_target_layers - 1} is the target's last layer: "
                           "HF's last hidden state is after the final norm, an engine captures it before"))
    out.append(Verdict("mask token", "info" if cfg.mask_token_id is not None else "warning",
                       f"{cfg.key('mask_token_id')} {cfg.mask_token_id}: fills the block's draft slots"
                       if cfg.mask_token_id is not None else
                       "dflash_config.mask_token_id is missing: the block's slots cannot be filled"))
    copies = dict(shapes.copies)
    own = [n for n in ("embed_tokens.weight", "lm_head.weight") if n in copies]
    if not own:
        out.append(Verdict("embedding", "ok", "no embed_tokens and no lm_head of its own: the block is embedded with "
                           "the target's embedding and drafted through the target's lm_head"))
    else:
        said = ", ".join(f"{n} {list(copies[n])}" for n in own)
        why = {"dflash2": "DFlash2 checkpoints may carry the embedding; vLLM skips it and uses the target's",
               "dspark": "DeepSpec saves frozen copies of the target's; serving uses the target's"}.get(
            cfg.family, "DFlash has none of its own; engines use the target's")
        out.append(Verdict("embedding", "info" if cfg.family != "dflash" else "warning",
                           f"carries {said}: {why}"))
    out.append(Verdict("attention", "info", _attention(cfg)))
    if cfg.family == "dflash2":
        out.append(Verdict("dflash2", "info", f"candidate selector: rank {cfg.selector_rank}, top-{cfg.selector_top_k}; "
                           f"dynamic convolutions: kernel {cfg.conv_kernel_size}, group {cfg.conv_group_size}"))
    if cfg.family == "dspark":
        markov = (f"Markov head rank {cfg.markov_rank} ({cfg.markov_head_type or 'vanilla'})" if cfg.markov_rank
                  else "no Markov head (markov_rank 0)")
        conf = (("confidence head" + (" reading the Markov state" if cfg.confidence_head_with_markov else ""))
                if cfg.enable_confidence_head else "no confidence head")
        out.append(Verdict("dspark", "info", f"{markov}; {conf}"))
    out.append(Verdict("shapes", "ok" if shapes.consistent else "error", shapes.summary()))
    if shapes.unknown:
        out.append(Verdict("shapes", "info", f"{len(shapes.unknown)} tensor(s) no block drafter has: "
                           + ", ".join(shapes.unknown[:3]) + (" ..." if len(shapes.unknown) > 3 else "")))
    return out


def _attention(cfg: BlockDrafterConfig) -> str:
    kind = {"mla": "MLA", "mha": "multi-head"}.get(cfg.attention_mode,
                                                   f"{cfg.num_attention_heads} query / {cfg.num_key_value_heads} KV "
                                                   f"heads of {cfg.head_dim}")
    inside = "causal inside the block" if cfg.is_causal else "bidirectional inside the block"
    window = f", sliding window {cfg.sliding_window}" if cfg.sliding_window and "sliding_attention" in cfg.layer_types \
        else ""
    return (f"{cfg.num_hidden_layers} decoder layers, {kind}, {inside}{window}; every layer also attends to the "
            "projected target features")


__all__ = ["BlockInspection", "Verdict", "block_verdicts", "inspect_block"]
