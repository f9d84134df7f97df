"""Can block drafter A replace or warm-start drafter B? Two block drafters, or a block drafter and an EAGLE-3 one.

* Two block drafters of one family (DFlash, DFlash2 or DSpark): tensor by tensor (``model.`` prefixes dropped).
  ``compatible`` when every tensor matches and both read the same target layers with the same mask token: A can
  serve where B serves. Otherwise ``incompatible``, and the warm start says part by part (fc, attention, MLP,
  norms, DFlash2's selector and convolutions, DSpark's Markov and confidence heads) what carries over. Another
  block size is a warning: the same weights, trained to draft another number of tokens per cycle.
* Two block families: the DFlash backbone carries over where its shapes match; each family's own parts start
  from scratch.
* A block drafter and an EAGLE-3 drafter: different families, and a warm start takes little. At most the decoder
  layer's attention and MLP tensors whose shapes happen to match (EAGLE-3's q/k/v read the embedding and the
  hidden state side by side, 2H wide, so usually only o_proj and the MLP do); fc has the same name and another
  meaning (EAGLE-3: three target states into the state joined with the token embedding; block drafters: target
  layer outputs into every layer's context keys and values); the block drafter has no embedding and no lm_head
  of its own, and drafts over the whole target vocabulary (no d2t/t2d).

Layer ids are read as the measurement reads them: layer outputs, ``output_hidden_states[id + 1]``.

Pure: inventories and configs in, the :class:`~eaglekit.analysis.compat.compat_report.CompatReport` that EAGLE-3
pairs get out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from eaglekit.analysis.compat.block_check import read_checked_block
from eaglekit.analysis.compat.compat_report import (CompatReport, TargetCheck, TensorMatch, WarmStartPart,
                                                    match_tensors)
from eaglekit.core.checkpoint.names import normalize_name
from eaglekit.core.configs.block import BlockDrafterConfig, block_family
from eaglekit.core.configs.block_engines import block_engine
from eaglekit.core.configs.block_shapes import TARGET_COPIES, block_tensor_name
from eaglekit.core.configs.config import is_eagle3_config, normalize_target
from eaglekit.core.configs.diff import diff_configs
from eaglekit.core.configs.layers import ENGINES, READER_NAMES
from eaglekit.io.inventory import Inventory

#: the parts of a block drafter, by tensor name (first match wins)
_PARTS = (
    ("fc", re.compile(r"^fc\.")),
    ("convolutions", re.compile(r"^layers\.\d+\.(attention|mlp)_conv\.")),
    ("attention", re.compile(r"^layers\.\d+\.self_attn\.")),
    ("mlp", re.compile(r"^layers\.\d+\.mlp\.")),
    ("norms", re.compile(r"^(hidden_norm|norm|layers\.\d+\.(input_layernorm|post_attention_layernorm))\.")),
    ("selector", re.compile(r"^candidate_selector\.")),
    ("markov head", re.compile(r"^markov_head\.")),
    ("confidence head", re.compile(r"^confidence_head\.")),
)
#: EAGLE-3 layer tensors and the block drafter's first-layer tensors a warm start could pair
_LAYER_PAIRS = tuple((f"midlayer.{s}.weight", f"layers.0.{s}.weight") for s in (
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"))


def part_of(name: str) -> str:
    for part, pattern in _PARTS:
        if pattern.match(name):
            return part
    return "embedding" if name in TARGET_COPIES else "other"


def compare_block(inv_a: Inventory, inv_b: Inventory, *, config_a: Mapping[str, Any] | None,
                  config_b: Mapping[str, Any] | None, target: Mapping[str, Any] | None = None, a_name: str = "A",
                  b_name: str = "B") -> CompatReport:
    """The verdict for a pair where at least one side's config declares a block drafter."""
    block_a = config_a is not None and block_family(config_a) is not None
    cfg_a = read_checked_block(inv_a, config_a, name=a_name) if block_a else None
    block_b = config_b is not None and block_family(config_b) is not None
    cfg_b = read_checked_block(inv_b, config_b, name=b_name) if block_b else None
    diff = diff_configs(config_a, config_b, a_name=a_name, b_name=b_name) \
        if config_a is not None and config_b is not None else None
    tgt = normalize_target(target, source="target config.json") if target is not None else None
    checks = tuple(c for cfg, name in ((cfg_a, a_name), (cfg_b, b_name)) if cfg is not None and tgt is not None
                   for c in _target_checks(cfg, name, tgt))
    engines = {name: _engine_words(cfg) for cfg, name in ((cfg_a, a_name), (cfg_b, b_name)) if cfg is not None}
    aux = {key: {"explanation": _layers_words(cfg)} for key, cfg in (("a", cfg_a), ("b", cfg_b)) if cfg is not None}
    if cfg_a is not None and cfg_b is not None:
        report = _two_blocks(inv_a, inv_b, cfg_a, cfg_b, a_name, b_name)
    else:
        report = _block_and_other(inv_a, inv_b, cfg_a, cfg_b, config_a, config_b, a_name, b_name)
    verdict, reasons, warnings, tensors, parts, vocab = report
    misfit = [f"{c.drafter}'s {c.field} ({c.value}) does not fit the target ({c.target})." for c in checks if not c.ok]
    if misfit:
        verdict, reasons = "incompatible", (*misfit, *reasons)
    return CompatReport(a_name, b_name, verdict, tuple(reasons), tensors, vocab, aux, diff, checks, tuple(warnings),
                        parts, engines)


def _two_blocks(inv_a, inv_b, cfg_a: BlockDrafterConfig, cfg_b: BlockDrafterConfig, a_name: str, b_name: str):
    tensors = _match(inv_a, inv_b)
    reasons: list[str] = []
    warnings: list[str] = []
    if cfg_a.family != cfg_b.family:
        reasons.append(f"{a_name} is a {cfg_a.family_name} and {b_name} a {cfg_b.family_name} block drafter: "
                       f"different families. The DFlash backbone carries over where its shapes match; "
                       f"{_own_parts(cfg_b)} of {b_name} start from scratch.")
    bad = [t for t in tensors if t.status in ("shape-mismatch", "only-a", "only-b") and part_of(t.name) != "embedding"]
    if cfg_a.family == cfg_b.family:
        for t in bad[:5]:
            reasons.append(f"{t.name}: shape {list(t.a[1])} in {a_name} vs {list(t.b[1])} in {b_name}."
                           if t.status == "shape-mismatch" else
                           f"{t.name} exists only in {a_name if t.status == 'only-a' else b_name}.")
        if len(bad) > 5:
            reasons.append(f"... and {len(bad) - 5} more tensors differ.")
    if cfg_a.target_layer_ids != cfg_b.target_layer_ids:
        reasons.append(f"they read other target layers: {a_name} {list(cfg_a.target_layer_ids)} vs {b_name} "
                       f"{list(cfg_b.target_layer_ids)} (layer outputs, output_hidden_states[id + 1]): fc and every "
                       "layer learned other features; replacing one by the other needs retraining.")
    if cfg_a.mask_token_id != cfg_b.mask_token_id:
        reasons.append(f"mask_token_id {cfg_a.mask_token_id} in {a_name} vs {cfg_b.mask_token_id} in {b_name}: each "
                       "learned its own mask token's embedding in the draft slots.")
    if cfg_a.block_size != cfg_b.block_size:
        warnings.append(f"block_size {cfg_a.block_size} in {a_name} vs {cfg_b.block_size} in {b_name}: the same "
                        "tensors, trained to draft another number of tokens per cycle (set the block at launch).")
    for t in tensors:
        if t.status == "dtype-mismatch":
            warnings.append(f"{t.name}: dtype {t.a[0]} vs {t.b[0]} (same shape; cast when loading).")
    verdict = "incompatible" if reasons else "compatible"
    if not reasons:
        reasons.append(f"same {cfg_a.family_name} architecture, every tensor's shape, the same target layers "
                       f"{list(cfg_a.target_layer_ids)} and mask token: {a_name} can serve where {b_name} serves.")
    parts = _parts(tensors, cfg_a, cfg_b, a_name, b_name)
    vocab = {"note": "block drafters have no vocabulary map: they draft over the target's whole vocabulary through "
                     "its lm_head"}
    return verdict, reasons, warnings, tensors, parts, vocab


def _match(inv_a: Inventory, inv_b: Inventory) -> tuple[TensorMatch, ...]:
    return match_tensors(inv_a, inv_b, block_tensor_name,
                         lambda name: "a copy of the target's: not the drafter's own" if name in TARGET_COPIES else None)


def _parts(tensors, cfg_a: BlockDrafterConfig, cfg_b: BlockDrafterConfig, a_name: str, b_name: str):
    groups: dict[str, list[TensorMatch]] = {}
    for t in tensors:
        if part_of(t.name) not in ("embedding", "other"):
            groups.setdefault(part_of(t.name), []).append(t)
    out = []
    for part, members in groups.items():
        names = tuple(t.name for t in members)
        if all(t.status == "only-a" for t in members):
            out.append(WarmStartPart(part, "not needed", f"only {a_name} has it", names))
        elif any(t.status == "only-b" for t in members) and not any(t.status == "match" for t in members):
            out.append(WarmStartPart(part, "cannot", f"{a_name} has none: trained from scratch", names))
        elif all(t.status in ("match", "dtype-mismatch") for t in members):
            why = "same shapes"
            if part == "fc" and cfg_a.target_layer_ids != cfg_b.target_layer_ids:
                why += (f", but it read target layers {list(cfg_a.target_layer_ids)}, not "
                        f"{list(cfg_b.target_layer_ids)}: fine-tune on the new features")
            out.append(WarmStartPart(part, "take", why, names))
        else:
            first = next(t for t in members if t.status not in ("match", "dtype-mismatch"))
            out.append(WarmStartPart(part, "cannot", f"other shapes ({first.name})", names))
    out.append(WarmStartPart("embedding / lm_head", "not needed", "block drafters use the target's", ()))
    return tuple(out)


def _block_and_other(inv_a, inv_b, cfg_a, cfg_b, config_a, config_b, a_name: str, b_name: str):
    """One block drafter and one EAGLE-3 drafter (or a checkpoint that is neither)."""
    block_is_a = cfg_a is not None
    cfg = cfg_a if block_is_a else cfg_b
    other_config, other_name = (config_b, b_name) if block_is_a else (config_a, a_name)
    other = "an EAGLE-3 drafter" if other_config is not None and is_eagle3_config(other_config) else \
        "not a drafter eaglekit recognises"
    eagle = {normalize_name(t.name): t for t in (inv_b if block_is_a else inv_a)}
    block = {block_tensor_name(t.name): t for t in (inv_a if block_is_a else inv_b)}
    tensors, same = [], []
    for e_name, b_layer in _LAYER_PAIRS:
        te, tb = eagle.get(e_name), block.get(b_layer)
        if te is None or tb is None:
            continue
        sa, sb = ((tb, te) if block_is_a else (te, tb))
        row_name = f"{e_name} ~ {b_layer}"
        if te.shape == tb.shape:
            same.append(b_layer.split(".", 2)[2].removesuffix(".weight"))
            tensors.append(TensorMatch(row_name, "match", (sa.dtype, sa.shape), (sb.dtype, sb.shape),
                                       "same shape: a warm start could copy it"))
        else:
            tensors.append(TensorMatch(row_name, "shape-mismatch", (sa.dtype, sa.shape), (sb.dtype, sb.shape)))
    fc_e, fc_b = eagle.get("fc.weight"), block.get("fc.weight")
    if fc_e is not None and fc_b is not None:
        sa, sb = ((fc_b, fc_e) if block_is_a else (fc_e, fc_b))
        tensors.append(TensorMatch("fc.weight", "match" if fc_e.shape == fc_b.shape else "shape-mismatch",
                                   (sa.dtype, sa.shape), (sb.dtype, sb.shape), "same name, another meaning"))
    took = ", ".join(same) if same else "nothing"
    reasons = [f"{a_name if block_is_a else b_name} is a {cfg.family_name} block drafter and "
               f"{other_name} is {other}: different families. A warm start of {b_name} from {a_name} takes little: "
               f"{took} (decoder-layer tensors whose shapes happen to match); fc has another meaning, and the "
               "block drafter has no embedding and no lm_head of its own."]
    attention = [s for s in same if s.startswith("self_attn")]
    mlp = [s for s in same if s.startswith("mlp")]
    parts = (
        WarmStartPart("attention", "take" if attention else "cannot",
                      (f"same shapes: {', '.join(attention)}; " if attention else "") +
                      "EAGLE-3's q/k/v read [embedding, hidden] side by side (2H wide)",
                      tuple(f"layers.0.{s}.weight" for s in attention)),
        WarmStartPart("mlp", "take" if len(mlp) == 3 else "cannot",
                      "same shapes (the MLP's job differs little)" if len(mlp) == 3 else "other shapes",
                      tuple(f"layers.0.{s}.weight" for s in mlp)),
        WarmStartPart("fc", "cannot", "EAGLE-3's fc maps three target states into the state joined with the token "
                      "embedding; a block drafter's maps target layer outputs into every layer's context keys and "
                      "values: same name, another meaning"),
        WarmStartPart("lm_head / embedding", "not needed" if not block_is_a else "cannot",
                      "the block drafter uses the target's embedding and lm_head" if not block_is_a else
                      f"{a_name} has none of its own: {b_name}'s lm_head starts from the target's rows or from "
                      "scratch"),
        WarmStartPart("vocab map", "not needed" if not block_is_a else "cannot",
                      "a block drafter drafts over the whole target vocabulary (no d2t/t2d)"),
    )
    vocab = {"note": "not comparable: a block drafter has no vocabulary map (it drafts over the whole target "
                     "vocabulary)"}
    return "incompatible", reasons, [], tuple(tensors), parts, vocab


def _own_parts(cfg: BlockDrafterConfig) -> str:
    return {"dflash": "no parts of its own", "dflash2": "the candidate selector and the convolutions",
            "dspark": "the Markov and confidence heads"}[cfg.family]


def _target_checks(cfg: BlockDrafterConfig, name: str, tgt) -> tuple[TargetCheck, ...]:
    out = [TargetCheck("hidden size", name, cfg.hidden_size, tgt.hidden_size, cfg.hidden_size == tgt.hidden_size),
           TargetCheck("fc input per layer", name, cfg.target_hidden_size, tgt.hidden_size,
                       cfg.target_hidden_size == tgt.hidden_size),
           TargetCheck("highest target layer id", name, max(cfg.target_layer_ids), tgt.num_hidden_layers - 1,
                       max(cfg.target_layer_ids) < tgt.num_hidden_layers)]
    if cfg.mask_token_id is not None:
        out.append(TargetCheck("mask_token_id", name, cfg.mask_token_id, tgt.vocab_size - 1,
                               cfg.mask_token_id < tgt.vocab_size))
    return tuple(out)


def _engine_words(cfg: BlockDrafterConfig) -> dict[str, str]:
    return {e: f"{READER_NAMES[e]}: {cfg.family_name}, {block_engine(e, cfg.family).releases}" for e in ENGINES}


def _layers_words(cfg: BlockDrafterConfig) -> str:
    return (f"{cfg.family_name}: target layer outputs {list(cfg.target_layer_ids)} = output_hidden_states "
            f"{list(cfg.hidden_state_indices())}; block {cfg.block_size}, {cfg.drafts_per_block} drafts per cycle")


__all__ = ["compare_block", "part_of"]
