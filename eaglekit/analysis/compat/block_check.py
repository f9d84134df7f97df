"""Can this block drafter (DFlash, DFlash2, DSpark) serve that target? Pre-serving checks from headers and configs.

What a block drafter must agree with its target on (docs/block-drafters.md):

* ``mask_token_id`` inside the target's vocabulary: the block's draft slots are that token, embedded with the
  target's ``embed_tokens``;
* ``target_layer_ids`` inside the target's layers. Ids are layer *outputs*: the drafter reads
  ``output_hidden_states[id + 1]`` (the authors' ``extract_context_feature``; SGLang and vLLM add the same one
  when they read the config; the accept-length measurement reads them so too). An id equal to the target's last
  layer is flagged: HF's last hidden state is taken after the final norm;
* fc's input width ``n_aux x`` the target's hidden size, and the drafter's own hidden size equal to the target's:
  the block is embedded with the target's embedding and drafted through the target's lm_head;
* the vocabulary-sized tensors (DFlash2's codebooks, DSpark's Markov head) one row per target token;
* an engine release that loads the family under its architecture name, and the flags that launch it
  (:mod:`eaglekit.core.configs.block_engines`; unverified releases are said to be so).

A checkpoint that contradicts itself (a mask id outside its own vocabulary, layer ids past its own
``num_target_layers``, a tensor whose shape is not the one its config implies) is not checked further: it is a
:class:`~eaglekit.core.errors.ConfigError` naming the key or tensor (the CLI's one line and exit 2).

Pure: :func:`check_block_drafter` takes the inventory, the config dict, an optional target config (and the
target's inventory, when its weights were found) and returns the same
:class:`~eaglekit.analysis.compat.check_report.CheckReport` as the EAGLE-3 checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eaglekit.analysis.compat.check_report import CheckReport, Finding, Severity
from eaglekit.core.configs.block import BlockDrafterConfig, read_block_config
from eaglekit.core.configs.block_engines import block_engine, release_verdict
from eaglekit.core.configs.block_shapes import block_shapes
from eaglekit.core.configs.config import TargetConfig, normalize_target
from eaglekit.core.configs.engine_readings import parse_engine
from eaglekit.core.configs.layers import ENGINES, READER_NAMES, check_engine
from eaglekit.core.errors import ConfigError
from eaglekit.io.inventory import Inventory


def read_checked_block(inventory: Inventory, config: Mapping[str, Any], *, name: str) -> BlockDrafterConfig:
    """The block config of ``inventory``, refused (ConfigError naming the key or tensor) when the config is out of
    range or the tensors contradict it."""
    cfg = read_block_config(config, source=f"{name} config.json")
    problem = block_shapes(cfg, {t.name: t.shape for t in inventory}).first_problem(name, cfg)
    if problem is not None:
        raise ConfigError(problem)
    return cfg


def check_block_drafter(inventory: Inventory, config: Mapping[str, Any], *, target: Mapping[str, Any] | None = None,
                        target_inventory: Inventory | None = None, engine: str | None = None, name: str = "drafter",
                        target_name: str | None = None) -> CheckReport:
    """The pure check of a block drafter. ``engine``: ``"sglang"``, ``"sglang==0.5.19"``, ``"vllm"``,
    ``"vllm==0.28.0"``; None checks both engines (a fault of one engine is then a warning)."""
    check_engine(engine)
    engines = (engine,) if engine else ENGINES
    per_engine: Severity = "error" if engine else "warning"
    cfg = read_checked_block(inventory, config, name=name)
    shapes = block_shapes(cfg, {t.name: t.shape for t in inventory})
    out: list[Finding] = []
    add = lambda *a: out.append(Finding(*a))  # noqa: E731

    anchor = "the anchor drafts too" if cfg.anchor_drafts else "anchor + mask slots"
    add("family", "info", f"{cfg.family_name} block drafter ({cfg.architecture or 'dflash_config'}): block "
        f"{cfg.block_size} ({anchor}), {cfg.drafts_per_block} drafts per cycle; reads target layer outputs "
        f"{list(cfg.target_layer_ids)} = output_hidden_states {list(cfg.hidden_state_indices())}.")
    add("shapes", "ok", f"{shapes.summary()}.")
    copies = [n for n, _ in shapes.copies]
    if not copies:
        add("embedding", "ok", "no embed_tokens and no lm_head of its own: the target's are used.")
    else:
        add("embedding", "info", f"carries {' and '.join(copies)}: engines use the target's "
            f"({'vLLM skips the copy' if cfg.family == 'dflash2' else 'the copy is not read when serving'}).")
    if cfg.mask_token_id is None:
        add("mask token", "error", "dflash_config.mask_token_id is missing: the block's draft slots cannot be filled.",
            "Set dflash_config.mask_token_id to the id the drafter was trained with.")
    tgt = normalize_target(target, source=target_name or "target config.json") if target is not None else None
    if tgt is None:
        add("target", "info", "no target given: the mask id, layer ids and widths were not checked against one.",
            "Run eaglekit check DRAFTER --target TARGET.")
    else:
        _against_target(cfg, tgt, target_inventory, add)
    for spec in engines:
        _engine(cfg, spec, per_engine, add)
    return CheckReport(name, target_name, engines, tuple(out), cfg)


def _against_target(cfg: BlockDrafterConfig, tgt: TargetConfig, tinv: Inventory | None, add) -> None:
    layers, vocab, hidden = tgt.num_hidden_layers, tgt.vocab_size, tgt.hidden_size
    if cfg.mask_token_id is not None:
        if cfg.mask_token_id >= vocab:
            add("mask token", "error", f"{cfg.key('mask_token_id')} {cfg.mask_token_id} is outside the target's "
                f"vocabulary (vocab_size {vocab}: ids 0..{vocab - 1}): the target's embedding has no such row.",
                "Use a drafter trained for this target's tokenizer.")
        else:
            add("mask token", "ok", f"{cfg.key('mask_token_id')} {cfg.mask_token_id} is inside the target's "
                f"vocabulary ({vocab} tokens).")
    ids, key = list(cfg.target_layer_ids), cfg.key("target_layer_ids")
    past = [i for i in ids if i >= layers]
    if past:
        add("target layers", "error", f"{key} {ids} names layer {max(past)}, past the target's {layers} layers "
            f"(num_hidden_layers: ids 0..{layers - 1}).", "Use a drafter trained for this target.")
    else:
        add("target layers", "ok", f"{key} {ids}: outputs of target layers inside its {layers} "
            f"(output_hidden_states {list(cfg.hidden_state_indices())}).")
        if layers - 1 in ids:
            add("target layers", "warning", f"id {layers - 1} is the target's last layer: HF's last hidden state "
                "(output_hidden_states[-1]) is taken after the final norm, while an engine captures the layer's "
                "output before it; training and serving may feed different features.",
                "Check which state the drafter was trained on before serving it.")
    if cfg.num_target_layers is not None and cfg.num_target_layers != layers:
        add("target layers", "warning", f"num_target_layers {cfg.num_target_layers}: the drafter was trained for a "
            f"target of {cfg.num_target_layers} layers, this one has {layers}.", "Check the drafter's target.")
    fc_in = cfg.n_aux * cfg.target_hidden_size
    if cfg.target_hidden_size != hidden:
        add("fc width", "error", f"fc.weight reads {fc_in} = {cfg.n_aux} x {cfg.target_hidden_size} features, but "
            f"{cfg.n_aux} target layers of this target give {cfg.n_aux} x {hidden} = {cfg.n_aux * hidden}.",
            "Use a drafter trained for a target of this hidden size.")
    else:
        add("fc width", "ok", f"fc.weight reads {cfg.n_aux} x {hidden} = {fc_in} features.")
    if cfg.hidden_size != hidden:
        add("hidden size", "error", f"hidden_size {cfg.hidden_size} != the target's {hidden}: the block is embedded "
            "with the target's embed_tokens and drafted through its lm_head, both [vocab, "
            f"{hidden}].", "A block drafter's hidden size must equal its target's.")
    else:
        add("hidden size", "ok", f"hidden_size {hidden} equals the target's: its embedding and lm_head fit "
            f"({cfg.num_attention_heads} x {cfg.head_dim} query heads on a {hidden}-wide state).")
    if cfg.vocab_size is not None and cfg.vocab_size != vocab:
        rows = {"dflash2": "the candidate selector's codebooks", "dspark": "the Markov head"}.get(cfg.family)
        if rows and (cfg.selector_rank or cfg.markov_rank):
            add("vocabulary", "error", f"vocab_size {cfg.vocab_size} != the target's {vocab}: {rows} hold one row "
                "per token of the vocabulary it was trained on.", "Use a drafter trained for this target's tokenizer.")
        else:
            add("vocabulary", "warning", f"vocab_size {cfg.vocab_size} != the target's {vocab} (no tensor of the "
                "drafter depends on it, but it suggests another tokenizer).", "Check the drafter's target.")
    if tinv is not None:
        for what in ("embed_tokens.weight", "lm_head.weight"):
            hits = [t for t in tinv if t.name.endswith(what)]
            if hits:
                t = min(hits, key=lambda t: len(t.name))
                if len(t.shape) != 2 or t.shape[1] != cfg.hidden_size:
                    add("target weights", "error", f"the target's {t.name} is {list(t.shape)}; the drafter needs "
                        f"[vocab, {cfg.hidden_size}].", "Check the target checkpoint.")
                else:
                    add("target weights", "ok", f"the target's {t.name} {list(t.shape)} fits the drafter's width.")


def _engine(cfg: BlockDrafterConfig, spec: str, per_engine: Severity, add) -> None:
    choice = parse_engine(spec)
    support = block_engine(choice.engine, cfg.family)
    who = READER_NAMES[choice.engine]
    if support.architectures and cfg.architecture not in support.architectures:
        add("architecture", per_engine, f"{who} loads {cfg.family_name} drafters as "
            f"{' or '.join(support.architectures)}, not {cfg.architecture or '(no architectures)'}.",
            f"Set architectures to [\"{support.architectures[0]}\"]"
            + (" (SpecForge's DSpark export rewrites the config so)" if cfg.family == "dspark" else "") + ".", spec)
    verdict = release_verdict(support, choice.version)
    if verdict is not None and verdict[0] == "absent":
        add("engine", per_engine, verdict[1] + ".", f"Use {who} {support.since} or newer." if support.since else "",
            spec)
    elif verdict is not None and verdict[0] == "older":
        add("engine", "warning", verdict[1] + f" ({support.evidence}).", f"Use {who} {support.since} or newer.", spec)
    else:
        add("engine", "info", f"{who} loads {cfg.family_name} drafters: {support.releases}; {support.evidence}.",
            "", spec)
    flags = support.launch(cfg)
    if flags is None:
        add("launch", "info", f"{who}'s flags for {cfg.family_name} were not established from the sources read.",
            "", spec)
    else:
        k = (f"--speculative-num-draft-tokens {cfg.block_size} is the whole block, anchor included"
             if choice.engine == "sglang" else
             f"num_speculative_tokens {cfg.drafts_per_block} counts drafts; fewer runs a smaller block, which is not "
             "the trained block cut short (attention inside the block is bidirectional)")
        add("launch", "info", f"{who}: {flags} ({k}).", "", spec)


__all__ = ["check_block_drafter", "read_checked_block"]
