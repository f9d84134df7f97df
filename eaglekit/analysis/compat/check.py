"""Can this drafter serve that target? Pre-serving checks for one EAGLE-3 drafter, from headers.

The faults users meet most often, none of which an engine reports before it serves badly
(docs/aux-layers.md, docs/config-formats.md):

* no lm_head (an engine serves a random head: accept length 1.00), or one of the wrong shape;
* a missing or all-zero d2t with a reduced draft vocabulary (draft ids read as target ids);
* fc width not equal to n_aux x target hidden size (a config naming three layers on a four-layer fc);
* aux ids out of the target's range, or read by the engine as other layers than training used;
* an embed_tokens.weight saved from another model (engines may use the drafter's copy);
* the EAGLE(-1/2) architecture name on an EAGLE-3 checkpoint (the engine runs the wrong method);
* vocabulary or hidden size that do not fit the target, a dtype label that lies, rope settings
  unlike the target's or no table can be built from;
* an MLA drafter's YaRN table, which engines build on rope_theta and TorchSpec on 10000; MoE keys a config
  leaves out, which each reader fills its own way; a Llama architecture over a checkpoint without Llama
  projections. An MLA drafter's aux ids are read through the export-layout rule acceptance applies.

Pure core: :func:`check_drafter` takes an inventory, a config dict, the (d2t, t2d) arrays, an optional
target config and the result of an embedding comparison, and returns a :class:`CheckReport`.
:func:`check` is the I/O edge: it opens the locations and reads only headers, config.json, the maps
and (when the drafter saves embed_tokens) sampled embedding rows of both sides, by byte range.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from eaglekit.core.checkpoint.names import find, normalize_name
from eaglekit.core.configs.aux_view import (
    SETTLE,
    AuxEngineView,
    EngineReading,
    layer_names,
)
from eaglekit.core.configs.config import (
    DrafterConfig,
    TargetConfig,
    normalize_config,
    normalize_target,
    target_fit,
)
from eaglekit.core.configs.engine_readings import capture_range, parse_engine
from eaglekit.core.configs.mla_shapes import mla_layer_problems
from eaglekit.core.configs.moe_readers import missing_moe_keys, missing_words, readers_disagree
from eaglekit.core.configs.rotary import base_words, bases_differ, rope_scaling_problem, torchspec_base
from eaglekit.core.configs.layers import (
    ENGINES,
    READER_NAMES,
    check_engine,
    default_aux_layers,
    layout_of,
)
from eaglekit.core.errors import EaglekitError
from eaglekit.core.redact import location_label
from eaglekit.core.tokens.diff import diff_tokenizers
from eaglekit.core.tokens.vocab import check_vocab_map
from eaglekit.io.drafter import embedding_of, open_target, read_maps, read_rows
from eaglekit.io.inventory import Inventory
from eaglekit.io.reader import opened
from eaglekit.io.tokens.tokenizer import drafter_claims, read_tokenizer
from eaglekit.analysis.compat.block_check import check_block_drafter
from eaglekit.core.configs.block import block_family
from eaglekit.analysis.compat.check_report import (  # noqa: F401  (the record's names stay importable from here)
    _COLOUR,
    EXIT_NOT_READY,
    EXIT_READY,
    CheckReport,
    EmbedComparison,
    Finding,
    Severity,
    Status,
)

#: Architecture names of EAGLE(-1/2) drafters: an engine that sees one runs the EAGLE method.
EAGLE1_ARCHITECTURES = ("LlamaForCausalLMEagle", "EagleLlamaForCausalLM", "EagleDeepSeekMTPModel")
#: Architecture names each engine maps to its EAGLE-3 model code (from the engines' model registries:
#: SGLang llama_eagle3.py, vLLM's registry and its speculators-config translation). Derived: check
#: your engine version. MLA drafters: vLLM's ``vllm/model_executor/models/registry.py``
#: ``_SPECULATIVE_DECODING_MODELS`` maps both ``Eagle3DeepseekV2ForCausalLM`` and
#: ``Eagle3DeepseekV3ForCausalLM`` to ``deepseek_eagle3.Eagle3DeepseekV2ForCausalLM``; SGLang's
#: ``python/sglang/srt/models/deepseek_eagle3.py`` registers ``EntryClass = [Eagle3DeepseekV2ForCausalLM,
#: Eagle3DeepseekV3ForCausalLM]`` and ``kimi_k25_eagle3.py`` (PR #24826, kimi-k2.5-eagle3-mla)
#: ``Eagle3DeepseekV2ForCausalLM``. ``DeepseekV3ForCausalLMEagle3`` is SpecForge's training class (PR #640),
#: registered by neither engine. Releases (:data:`ENGINE_MLA_SINCE`): the lightseekorg/kimi-k2.5-eagle3-mla
#: model card asks for vLLM 0.18.0 or newer (and said SGLang did not support it yet); SGLang's first release
#: with PR #24826 could not be pinned from the sources read.
ENGINE_ARCHITECTURES: dict[str, tuple[str, ...]] = {
    "sglang": ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"),
    "vllm": ("Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3", "Eagle3Speculator", "Eagle3DraftModel",
             "Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM", "Eagle3Qwen2_5vlForCausalLM",
             "Eagle3Qwen3vlForCausalLM", "LlamaForCausalLM"),
}
#: Since which release each engine loads MLA drafters, as far as the sources read say.
ENGINE_MLA_SINCE = {"vllm": "vLLM 0.18.0 or newer (the kimi-k2.5-eagle3-mla model card's requirement)",
                    "sglang": "SGLang releases with PR #24826 (first release not pinned)"}
#: The architecture name each engine loads an MLA drafter under (the first of its MLA names).
MLA_ENGINE_ARCHITECTURE = "Eagle3DeepseekV2ForCausalLM"
#: What each engine's MLA drafter code builds: one dense MLP of ``intermediate_size`` (vLLM deepseek_eagle3.py
#: "Always uses MLP (not MoE)"; SGLang deepseek_eagle3.py "Always uses dense MLP (no MoE)" and
#: kimi_k25_eagle3.py ``DeepseekV2MLP``); SGLang's kimi_k25_eagle3.py also refuses a null q_lora_rank.
ENGINE_MLA_NOTES = {
    "vllm": "vLLM's deepseek_eagle3.py (Eagle3DeepseekV2ForCausalLM) builds a dense MLP only",
    "sglang": "SGLang's deepseek_eagle3.py / kimi_k25_eagle3.py build a dense MLP only",
}
#: How to ask each engine for the EAGLE-3 method (not EAGLE).
LAUNCH = {"sglang": "--speculative-algorithm EAGLE3", "vllm": '--speculative-config \'{"method": "eagle3", ...}\''}
#: Rows of embed_tokens compared by value unless ``full``.
SAMPLE_ROWS = 64


def check_drafter(inventory: Inventory, config: Mapping[str, Any] | None, maps: tuple[Any, Any], *,
                  target: Mapping[str, Any] | None = None, embed: EmbedComparison | None = None,
                  engine: str | None = None, name: str = "drafter", target_name: str | None = None) -> CheckReport:
    """The pure check. ``maps`` are the (d2t, t2d) numpy arrays (None where absent); ``engine``:
    ``"sglang"`` (every SGLang reading, newest first), ``"sglang==0.5.9"`` (that release), ``"vllm"``;
    None checks for both engines (a fault of one engine only is then a warning)."""
    if config is not None and block_family(config) is not None:  # DFlash, DFlash2, DSpark: their own checks
        return check_block_drafter(inventory, config, target=target, engine=engine, name=name,
                                   target_name=target_name)
    check_engine(engine)
    engines = (engine,) if engine else ENGINES
    per_engine: Severity = "error" if engine else "warning"
    out: list[Finding] = []
    add = lambda *a: out.append(Finding(*a))  # noqa: E731
    cfg = _config(config, inventory, name, engines, add)
    if cfg is None:
        return CheckReport(name, target_name, engines, tuple(out))
    cfg = cfg.for_layout(layout_of(inventory.names))  # the layout rule acceptance applies: one reading everywhere
    tgt = normalize_target(target, source=target_name or "target config.json") if target is not None else None
    tensors = {normalize_name(t.name): t for t in inventory}

    if not any(f.check == "architecture" for f in out):  # the EAGLE-1 architecture error already said it
        _architecture(cfg, engines, per_engine, add)
    _lm_head(cfg, tensors, add)
    _embedding(cfg, tensors, embed, tgt, add)
    _vocab_map(cfg, maps, name, add)
    _fc(cfg, tensors, add)
    _mla_layer(cfg, tensors, add)
    _llama_layer(cfg, tensors, add)
    fits = _target(cfg, tgt, add)
    aux = cfg.aux_view(tgt.num_hidden_layers if tgt is not None and fits else None, engines=engines,
                       architecture=tgt.architecture if tgt is not None else None)
    _aux(cfg, aux, tgt, fits, per_engine, add)
    _dtype(cfg, tensors, add)
    _rotary(cfg, add)
    _moe_keys(cfg, add)
    _rope(cfg, tgt, add)
    return CheckReport(name, target_name, engines, tuple(out), cfg, aux, embed)


def _config(config, inventory, name, engines, add) -> DrafterConfig | None:
    if config is None:
        add("config", "error", f"{name} has no config.json beside its weights: no engine can load it.",
            "Add the drafter's config.json (the one its trainer wrote) beside the safetensors files.")
        return None
    archs = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    eagle1 = [a for a in archs if a in EAGLE1_ARCHITECTURES]
    eagle3_tensors = find(inventory, "d2t") is not None or any(
        normalize_name(t.name).startswith("midlayer.") for t in inventory)
    if eagle1 and eagle3_tensors:
        add("architecture", "error",
            f"architectures {archs} names the EAGLE(-1/2) model on an EAGLE-3 checkpoint (it has "
            f"d2t/t2d and a midlayer): an engine would run the EAGLE method and misread fc.",
            f"Set architectures to [\"LlamaForCausalLMEagle3\"] and launch with "
            f"{' / '.join(LAUNCH[e] for e in engines)}.")
        # Read the rest as the EAGLE-3 drafter it is, so the other checks still run; the architecture
        # verdict is the error above (check_drafter skips the per-engine architecture findings).
        config = {**config, "architectures": ["LlamaForCausalLMEagle3"]}
    return normalize_config(config, source=f"{name} config.json")


def engine_loads(cfg: DrafterConfig, engine: str) -> tuple[bool, str]:
    """(whether ``engine`` ("sglang" or "vllm") loads this drafter, why in words): its architecture name
    must be one the engine registers, and an MLA drafter must have the dense MLP the engine builds."""
    arch = cfg.architecture or "(none)"
    if arch not in ENGINE_ARCHITECTURES[engine]:
        return False, (f"{READER_NAMES[engine]} does not load architecture {arch} as an EAGLE-3 drafter (it expects "
                       f"one of {', '.join(ENGINE_ARCHITECTURES[engine])})")
    if cfg.moe:
        return False, (f"{READER_NAMES[engine]} registers {arch}, but {ENGINE_MLA_NOTES[engine]}: this drafter's MoE "
                       f"MLP (use_moe, {cfg.moe['n_routed_experts']} experts) has no place there, its router and "
                       "expert tensors would not load")
    if engine == "sglang" and cfg.attention == "mla" and cfg.mla.get("q_lora_rank") is None:
        return True, (f"SGLang loads {arch} through deepseek_eagle3.py (kimi_k25_eagle3.py refuses a null "
                      f"q_lora_rank); {ENGINE_MLA_SINCE['sglang']}")
    since = f" ({ENGINE_MLA_SINCE[engine]})" if cfg.attention == "mla" else ""
    return True, f"{READER_NAMES[engine]} loads architecture {arch} as an EAGLE-3 drafter{since}"


def _architecture(cfg: DrafterConfig, engines, per_engine: Severity, add) -> None:
    arch = cfg.architecture or "(none)"
    for e in dict.fromkeys(parse_engine(spec).engine for spec in engines):
        loads, why = engine_loads(cfg, e)
        if loads:
            add("architecture", "ok", why + ".", "", e)
        elif cfg.moe and arch in ENGINE_ARCHITECTURES[e]:
            add("architecture", per_engine, why + ".", "Serve a dense-MLP MLA drafter, or measure this one with "
                "eaglekit acceptance only: no engine release eaglekit knows of serves a MoE EAGLE-3 drafter.", e)
        else:
            want = MLA_ENGINE_ARCHITECTURE if cfg.attention == "mla" else ENGINE_ARCHITECTURES[e][0]
            fix = (f"Export it for {READER_NAMES[e]}: eaglekit export DRAFTER --out DIR --format "
                   f"{'specforge' if e == 'sglang' else 'speculators'}" if cfg.format in ("speculators", "specforge")
                   else f"Set architectures to [\"{want}\"].")
            add("architecture", per_engine, f"{READER_NAMES[e]} does not load architecture {arch} as an EAGLE-3 "
                f"drafter (it expects one of {', '.join(ENGINE_ARCHITECTURES[e])}).", fix, e)


    add("method", "info", "serve it with the EAGLE-3 method; the EAGLE method would misread its fc and vocabulary "
        "map.", "; ".join(f"{READER_NAMES[e]}: {LAUNCH[e]}" for e in dict.fromkeys(parse_engine(s).engine
                                                                                   for s in engines)))


def _lm_head(cfg: DrafterConfig, tensors, add) -> None:
    t = tensors.get("lm_head.weight")
    want = [cfg.draft_vocab_size, cfg.hidden_size]
    if t is None:
        add("lm_head", "error", "lm_head.weight is missing: engines would serve a randomly initialised head "
            "(accept length about 1.00).",
            "Add lm_head.weight [draft_vocab_size, hidden] from the training checkpoint, or rebuild one with "
            "eaglekit export --target T (rows from the target's lm_head).")
    elif list(t.shape) != want:
        add("lm_head", "error", f"lm_head.weight is {list(t.shape)}, expected {want} (draft_vocab_size x hidden_size).",
            "Use the lm_head that belongs to this config, or fix draft_vocab_size / hidden_size in config.json.")
    else:
        add("lm_head", "ok", f"lm_head.weight {list(t.shape)} matches draft_vocab_size x hidden_size.")


def _embedding(cfg: DrafterConfig, tensors, embed: EmbedComparison | None, tgt, add) -> None:
    t = tensors.get("embed_tokens.weight")
    if t is None:
        add("embed_tokens", "ok", "embed_tokens.weight is absent: engines take the target's embedding (frozen).")
        return
    want = [cfg.vocab_size, cfg.hidden_size]
    if list(t.shape) != want:
        add("embed_tokens", "error", f"embed_tokens.weight is {list(t.shape)}, expected {want} (vocab x hidden).",
            "Drop embed_tokens.weight from the checkpoint: engines take the target's embedding.")
        return
    if embed is None:
        note = ("no target given" if tgt is None else "the target location holds no weights to compare")
        add("embed_tokens", "info", f"embed_tokens.weight is saved and was not compared ({note}); engines may use "
            "this copy instead of the target's.",
            "Give --target a location with the target's weights to compare it, or drop it from the checkpoint.")
    elif embed.note:
        add("embed_tokens", "warning", f"embed_tokens.weight could not be compared: {embed.note}.",
            "Compare it by hand, or drop it so engines take the target's embedding.")
    elif embed.differing:
        scope = "all" if embed.full else "sampled"
        add("embed_tokens", "error", f"embed_tokens.weight is not the target's: {embed.differing} of {embed.rows} "
            f"{scope} rows differ (first: row {embed.first_differing}). The drafter was trained against another "
            "embedding, or saved one that engines would use in place of the target's.",
            "Drop embed_tokens.weight, or re-export with eaglekit export --target T --embed-from-target.")
    else:
        scope = "every row" if embed.full else f"{embed.rows} sampled rows of {embed.total_rows:,} (--full for all)"
        add("embed_tokens", "ok", f"embed_tokens.weight equals the target's embedding ({scope}).")


def _vocab_map(cfg: DrafterConfig, maps, name: str, add) -> None:

    d2t, t2d = maps
    full = cfg.draft_vocab_size == cfg.vocab_size
    if d2t is None and t2d is None and full:
        add("vocab map", "ok", "full vocabulary: no d2t/t2d, every target token can be drafted (lm_head row i "
            "drafts token i).")
        return
    c = check_vocab_map(d2t, t2d, vocab_size=cfg.vocab_size, draft_vocab_size=cfg.draft_vocab_size, name=name)
    if c.valid:
        add("vocab map", "ok", f"d2t [{c.draft_vocab_size}] and t2d [{c.vocab_size}] are valid and agree "
            "(every draft row maps to a distinct target token).")
        return
    for rule, problem in zip(c.rules, c.problems):
        text = problem.removeprefix(f"{name}: ")
        if rule == "d2t-present":
            add("vocab map", "error", text + f"; without it vLLM reads draft ids as target ids (SGLang too): draft id i "
                f"becomes target id i, so the drafter proposes only target ids 0..{cfg.draft_vocab_size - 1} "
                "(eaglekit acceptance measures what it gets).",
                "Add the d2t the trainer wrote (SpecForge vocab_mapping), or export with --vocab-map FILE.")
        elif rule == "identity-needs-full-vocab":
            add("vocab map", "error", text + ": engines read draft id i as target id i, so the drafter proposes only "
                f"target ids 0..{cfg.draft_vocab_size - 1} (eaglekit acceptance measures what it gets).", "Restore the real d2t offsets (the trainer's vocab mapping file): eaglekit export "
                "--vocab-map FILE.")
        else:
            add("vocab map", "error", text + ".", "Rebuild d2t/t2d from the trainer's vocab mapping "
                "(eaglekit export --vocab-map FILE).")


def _fc(cfg: DrafterConfig, tensors, add) -> None:
    t = tensors.get("fc.weight")
    want = [cfg.hidden_size, cfg.n_aux * cfg.target_hidden_size]
    if t is None:
        add("fc", "error", "fc.weight is missing: the drafter cannot read the target's hidden states.",
            "Use the full training checkpoint; SpecForge's exporter keeps fc.weight.")
        return
    shape = list(t.shape)
    if shape == want:
        add("fc", "ok", f"fc.weight {shape} = hidden x ({cfg.n_aux} aux layers x target hidden {cfg.target_hidden_size}).")
    elif len(shape) == 2 and shape[0] == cfg.hidden_size and shape[1] % cfg.target_hidden_size == 0:
        n = shape[1] // cfg.target_hidden_size
        add("fc", "error", f"fc.weight {shape} reads {n} aux layers of width {cfg.target_hidden_size}, but the config "
            f"names {cfg.n_aux} ({'ids ' + str(list(cfg.aux_layer_ids)) if cfg.aux_layer_ids else 'the default'}).",
            f"Give eagle_aux_hidden_state_layer_ids the {n} layers training used, or use the fc that matches "
            f"the config.")
    else:
        add("fc", "error", f"fc.weight is {shape}, expected {want} (hidden x n_aux * target_hidden_size).",
            "Set target_hidden_size / hidden_size to the values training used.")
    norms = sorted(k for k in tensors if k.startswith("fc_norm."))
    if cfg.fc_norm and len(norms) != cfg.n_aux:
        add("fc", "error", f"the config sets fc_norm but the checkpoint has {len(norms)} fc_norm tensors for "
            f"{cfg.n_aux} aux layers.", "Use the checkpoint that matches the config, or set fc_norm false.")
    elif norms and not cfg.fc_norm:
        add("fc", "warning", f"the checkpoint has {len(norms)} fc_norm tensors but the config does not set fc_norm: "
            "engines would skip them.", "Set fc_norm true in config.json.")
    if cfg.norm_before_fc and "input_norm.weight" not in tensors:
        add("fc", "error", "the config sets norm_before_fc but input_norm.weight is missing.",
            "Use the checkpoint that matches the config, or set norm_before_fc false.")
    elif "input_norm.weight" in tensors and not cfg.norm_before_fc:
        add("fc", "warning", "input_norm.weight is saved but the config does not set norm_before_fc: engines "
            "would skip it.", "Set norm_before_fc true in config.json.")


def _mla_layer(cfg: DrafterConfig, tensors, add) -> None:
    """An MLA drafter's attention and MLP tensors against its config (core/configs/mla_shapes.py): each wrong
    shape, missing tensor or tensor the config rules out is one error naming the tensor and the config keys."""
    if cfg.attention != "mla":
        return
    problems = mla_layer_problems(cfg, {n: tuple(t.shape) for n, t in tensors.items()})
    for p in problems:
        add("mla layer", "error", p + ".", "Use the config the checkpoint was trained with (its MLA ranks, heads, "
            "use_moe and expert sizes), or the checkpoint that matches this config.")
    if not problems:
        mlp = f"MoE MLP of {cfg.moe['n_routed_experts']} experts" if cfg.moe else "dense MLP"
        add("mla layer", "ok", f"MLA attention (q_lora_rank {cfg.mla['q_lora_rank']}, kv_lora_rank "
            f"{cfg.mla['kv_lora_rank']}) and {mlp} match the config.")


#: what a Llama-style EAGLE-3 layer must hold (vLLM / SGLang llama_eagle3.py load these by name)
LLAMA_LAYER = tuple(f"midlayer.self_attn.{n}_proj.weight" for n in "qkvo") + tuple(
    f"midlayer.mlp.{n}_proj.weight" for n in ("gate", "up", "down"))


def _llama_layer(cfg: DrafterConfig, tensors, add) -> None:
    """The tensors a Llama-style layer needs against the checkpoint: a config naming a Llama architecture over a
    checkpoint of MLA attention would load with random q/k/v projections (engines) or be refused (acceptance)."""
    if cfg.attention != "llama" or not any(n.startswith("midlayer.") for n in tensors):
        return
    missing = [n for n in LLAMA_LAYER if n not in tensors]
    if not missing:
        return
    mla = any(n.startswith("midlayer.self_attn.kv_a_proj_with_mqa") for n in tensors)
    fix = (f"The checkpoint holds MLA attention (kv_a_proj_with_mqa): set architectures to [\"{MLA_ENGINE_ARCHITECTURE}\"] "
           "with the MLA ranks it was trained with (q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, "
           "v_head_dim)." if mla else "Use the checkpoint that belongs to this config.")
    add("layer", "error", f"architecture {cfg.architecture or '(none)'} builds a Llama-style layer, but the "
        f"checkpoint lacks {', '.join(missing)}: an engine would leave them random.", fix)


def _rotary(cfg: DrafterConfig, add) -> None:
    """Rotary settings no table can be built from (core/configs/rotary.py), and the base each reader builds the
    table on where they differ (TorchSpec's MLA YaRN table on 10000 whatever rope_theta says)."""
    scaling = cfg.rope_scaling or cfg.rope_parameters
    for settings in (cfg.rope_scaling, cfg.rope_parameters):
        problem = rope_scaling_problem(settings, theta=cfg.rope_theta)
        if problem:
            add("rope", "error", problem + ": no rotary table can be built from it (an accept length measured or "
                "served with it is meaningless).", "Write the rotary settings the drafter was trained with.")
            return
    if bases_differ(cfg.attention, cfg.rope_theta, scaling):
        add("rope", "warning", base_words(cfg.attention, cfg.rope_theta, scaling) + ": a drafter trained on one base "
            "and served on the other loses acceptance without an error.",
            "Measure both: eaglekit acceptance ... --rotary-base config and --rotary-base torchspec; if the torchspec "
            "figure is higher, the drafter was trained on base "
            f"{torchspec_base(cfg.attention, cfg.rope_theta, scaling):g}: set rope_theta to it for serving.")


def _moe_keys(cfg: DrafterConfig, add) -> None:
    """MoE keys the config leaves out, and what each reader fills in (core/configs/moe_readers.py)."""
    words = missing_words(cfg.raw)
    if words is None:
        return
    differ = any(readers_disagree(v) for v in missing_moe_keys(cfg.raw).values())
    add("moe keys", "warning" if differ else "info", words + ".",
        "Write every MoE key the drafter was trained with into config.json (TorchSpec's values above); eaglekit "
        "measures with TorchSpec's.")


def _target(cfg: DrafterConfig, tgt: TargetConfig | None, add) -> bool:
    if tgt is None:
        add("target", "info", "no target given: vocabulary, hidden size, aux ranges and rope were not checked "
            "against one.", "Run with --target T (the target's config.json or checkpoint location).")
        return False
    ok = True
    for fld, value, want in target_fit(cfg.target_hidden_size, cfg.vocab_size, tgt):
        if value != want:
            ok = False
            add("target", "error", f"the drafter's {fld} {value} does not match the target's {want}: it was built "
                "for another model.", "Use a drafter trained for this target.")
    if ok:
        add("target", "ok", f"hidden size {tgt.hidden_size} and vocabulary {tgt.vocab_size:,} fit the target.")
    return ok


def _aux(cfg: DrafterConfig, aux: AuxEngineView, tgt, fits: bool, per_engine: Severity, add) -> None:
    """Per engine release reading: in range, as trained, or AMBIGUOUS (training not settled by the
    config, core/configs/aux_view.py); each finding is tagged with the reading it concerns."""
    if tgt is None or not fits:
        if tgt is not None:
            add("aux layers", "info", "aux ids not judged against the target: the drafter does not fit it.")
        return
    L = tgt.num_hidden_layers
    training = aux.training
    if training.in_range is False:
        add("aux layers", "error", f"aux ids {list(aux.ids)} name layers a {L}-layer target does not have.",
            f"Write the ids of the layers training used, or drop them: without ids every engine captures the inputs "
            f"of layers {list(default_aux_layers(L, convention='inputs'))} (the outputs of {list(default_aux_layers(L, convention='outputs'))}).")
    guessed = "" if aux.trained_by.startswith("declared") else " (trainer guessed from the config format)"
    for e in aux.engines:
        ids = f"{list(e.ids)}" + (" (its default)" if e.from_default else "")
        if e.in_range is False:
            lo, hi = capture_range(e.rule, e.ids, L)
            fix = (_writes_fix(e, aux) if training.in_range and any(w for _, w in e.writes) else
                   f"Write ids in range {lo}..{hi} for {e.name}, or drop them (every engine's default).")
            add("aux layers", "error", f"{e.name} cannot capture aux ids {ids} of a {L}-layer target: fc would get "
                f"fewer hidden states than it reads.", fix, e.key)
        elif e.as_trained == "yes":
            add("aux layers", "ok", f"{e.name} feeds the outputs of layers {layer_names(e.outputs_of)} from ids {ids}, "
                f"as {training.name} did.", "", e.key)
        elif e.as_trained == "ambiguous":
            add("aux layers", "warning", f"{e.name} feeds the outputs of layers {layer_names(e.outputs_of)} from ids {ids}; "
                f"{training.name} used {training.describe()}: the config does not say which, so whether this is "
                f"as trained is ambiguous.", f"{SETTLE} Then, {_writes_fix(e, aux).replace('For ', 'for ', 1)}", e.key)
        elif training.in_range is not False and e.as_trained == "no":
            add("aux layers", per_engine, f"{e.name} feeds the outputs of layers {layer_names(e.outputs_of)} from ids {ids}; "
                f"{training.name} used {training.describe()}{guessed}. An off-by-one here costs acceptance silently.",
                _writes_fix(e, aux), e.key)
    for note in aux.notes:
        add("aux layers", "info", note)


def _writes_fix(e: EngineReading, aux: AuxEngineView) -> str:
    """What to write for reading ``e``, per meaning training may have had."""
    export = f"eaglekit export --engine {e.spec} rewrites them"
    if len(e.writes) == 1:
        w = e.writes[0][1]
        if w is None:
            return (f"No ids {e.name} can capture select the trained layers; retrain, or serve with another engine "
                    "release.")
        return f"For {e.name} write eagle_aux_hidden_state_layer_ids = {list(w)} ({export})."
    parts = [f"if trained on the outputs of {layer_names(o)}: " + (f"eagle_aux_hidden_state_layer_ids = {list(w)}" if w
                                                              else "no ids it can capture")
             for o, w in e.writes]
    return f"For {e.name} write, " + "; ".join(parts) + "."


def _dtype(cfg: DrafterConfig, tensors, add) -> None:
    weights = [t for n, t in tensors.items() if n.endswith(".weight")]
    dtypes = sorted({t.dtype for t in weights})
    label = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}.get(cfg.torch_dtype or "")
    if label and dtypes and dtypes != [label]:
        add("dtype", "warning", f"config.json says {cfg.torch_dtype} but the weights are {', '.join(dtypes)}.",
            "Set torch_dtype to the weights' dtype, or serve with an explicit --dtype.")
    elif "F32" in dtypes:
        add("dtype", "warning", "weights are float32: twice the memory of bf16; engines cast to the serving dtype.",
            "Export in bf16 for serving (the target's dtype).")
    else:
        add("dtype", "ok", f"weights are {', '.join(dtypes) or 'absent'}" + (", as config.json says" if label else ""))


def _rope(cfg: DrafterConfig, tgt: TargetConfig | None, add) -> None:
    if tgt is None:
        return
    if tgt.rope_theta is not None and cfg.rope_theta is not None and tgt.rope_theta != cfg.rope_theta:
        add("rope", "warning", f"rope_theta {cfg.rope_theta:g} differs from the target's {tgt.rope_theta:g} "
            f"({cfg.provenance.get('rope_theta')}).", "Fine only if the drafter was trained with it; otherwise "
            "set the target's value in config.json.")
    if tgt.rope_type and cfg.rope_type and tgt.rope_type != cfg.rope_type:
        add("rope", "warning", f"rope type {cfg.rope_type} differs from the target's {tgt.rope_type}.",
            "Long contexts position tokens differently from training: use the target's rope settings.")
    covered, how = cfg.max_position_embeddings, ""
    scaling = cfg.rope_scaling or {}
    factor, original = scaling.get("factor"), scaling.get("original_max_position_embeddings")
    if cfg.rope_type == "yarn" and isinstance(factor, (int, float)) and isinstance(original, int):
        # YaRN stretches the original context by its factor (vLLM's DeepSeek YaRN rotary cache covers
        # original_max_position_embeddings x factor whatever max_position_embeddings says).
        yarn = int(original * factor)
        if covered is None or yarn > covered:
            covered, how = yarn, f" (YaRN: {original:,} x {factor:g})"
    if tgt.max_position_embeddings and covered and covered < tgt.max_position_embeddings:
        add("rope", "warning", f"the drafter covers {covered:,} positions{how}, the target "
            f"{tgt.max_position_embeddings:,}: past that the drafter's rotary cache ends.",
            "Raise max_position_embeddings to the target's (the weights do not depend on it).")


def compare_embeddings(drafter, target, *, full: bool = False, rows: int = SAMPLE_ROWS,
                       chunk_rows: int = 4096) -> EmbedComparison | None:
    """embed_tokens.weight of two opened checkpoints, row by row, by byte range: ``rows`` rows spread
    over the vocabulary, or every row when ``full`` (streamed ``chunk_rows`` at a time). None when
    either side has no embedding."""
    import numpy as np
    from tqdm.auto import tqdm

    a, b = embedding_of(drafter.inventory), embedding_of(target.inventory)
    if a is None or b is None:
        return None
    if a.shape != b.shape:
        return EmbedComparison(0, a.shape[0], 0, None, full, f"shapes {list(a.shape)} vs {list(b.shape)}")
    n = a.shape[0]
    row_a, row_b = a.nbytes // n, b.nbytes // n
    if full:
        spans = [(s, min(chunk_rows, n - s)) for s in range(0, n, chunk_rows)]
    else:
        picks = np.unique(np.linspace(0, n - 1, min(rows, n)).astype(np.int64))
        spans = [(int(i), 1) for i in picks]
    differing, first = 0, None
    for start, count in tqdm(spans, desc="embed rows", unit="read", disable=not full, leave=False):
        xa = read_rows(drafter, a, start, count, row_a)
        xb = read_rows(target, b, start, count, row_b)
        bad = np.flatnonzero(~(xa == xb).all(axis=1))
        differing += int(bad.size)
        if bad.size and first is None:
            first = start + int(bad[0])
    return EmbedComparison(sum(c for _, c in spans), n, differing, first, full)


def check(drafter, *, target=None, engine: str | None = None, full: bool = False, endpoint: str | None = None, timeout: float | None = None,
          token: str | bool | None = None, name: str | None = None, target_name: str | None = None) -> CheckReport:
    """Pre-serving checks for ``drafter`` (a location or an opened checkpoint) against ``target`` (a
    target config.json, folder or location; with weights, embed_tokens is compared by value)."""

    check_engine(engine)
    with opened(drafter, endpoint=endpoint, timeout=timeout, token=token) as ck:
        tck, tcfg = open_target(target, endpoint=endpoint, timeout=timeout, token=token) if target is not None else (None, None)
        try:
            label = name or location_label(ck.location.raw)
            shown_target = target_name or (None if target is None else location_label(str(target)))
            if block_family(ck.inventory.config) is not None:  # DFlash, DFlash2, DSpark: no maps, no embedding
                report = check_block_drafter(ck.inventory, ck.inventory.config, target=tcfg,
                                             target_inventory=tck.inventory if tck is not None else None,
                                             engine=engine, name=label, target_name=shown_target)
            else:
                embed = None
                if tck is not None and embedding_of(ck.inventory) is not None:
                    embed = compare_embeddings(ck, tck, full=full)
                report = check_drafter(ck.inventory, ck.inventory.config, read_maps(ck), target=tcfg, embed=embed,
                                       engine=engine, name=label, target_name=shown_target)
            tokenizer = tokenizer_finding(ck.location, target, endpoint=endpoint, timeout=timeout, token=token)
            return report if tokenizer is None else replace(report, findings=(*report.findings, tokenizer))
        finally:
            if tck is not None:
                tck.close()


def tokenizer_finding(drafter_location, target, *, endpoint=None, timeout=None, token=None) -> Finding | None:
    """When a drafter ships tokenizer files (what it was trained with) and a target is given, whether the
    target's tokenizer and chat template are the same (``eaglekit tokenizer-diff`` names each difference);
    None when the drafter says nothing or the target has no tokenizer files."""
    if target is None or not isinstance(target, (str, os.PathLike)):
        return None
    claims = drafter_claims(drafter_location, endpoint=endpoint, timeout=timeout, token=token)
    if claims.tokenizer is None:
        return None
    try:
        diff = diff_tokenizers(claims.tokenizer, read_tokenizer(target, endpoint=endpoint, timeout=timeout, token=token))
    except EaglekitError as e:
        return Finding("tokenizer", "warning", f"the drafter ships tokenizer files, the target's could not be compared: {e}",
                       "Run eaglekit tokenizer-diff DRAFTER TARGET.")
    if diff.same:
        return Finding("tokenizer", "ok", "the drafter's tokenizer files and chat template equal the target's.")
    return Finding("tokenizer", "warning", "the drafter was saved with another tokenizer or chat template than the "
                   "target's: " + "; ".join(diff.differences)[:400],
                   "Compare with eaglekit tokenizer-diff and measure with eaglekit acceptance --compare-templates.")


__all__ = ["CheckReport", "Finding", "EmbedComparison", "check", "check_drafter", "compare_embeddings", "engine_loads"]
