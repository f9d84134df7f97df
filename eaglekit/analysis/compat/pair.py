"""Can drafter A initialise or replace drafter B? A verdict that checks values, not only shapes.

Pure core (:func:`compare`): two inventories, two configs, the two vocabulary maps and optionally a
target config in; a :class:`CompatReport` out. :func:`compat` is the thin I/O edge: it opens both
locations, reads headers, config.json and only the d2t/t2d bytes (by range, also remotely).

Verdicts (issue 3): ``compatible`` (drop-in: every trainable tensor matches and the maps are equal),
``compatible-after-remap`` (shapes match, vocabulary maps differ: lm_head rows must be re-aligned by
target token, docs/check-and-export.md), ``incompatible`` (a trainable tensor's shape, a target
dimension, or a valid vocabulary map is missing).

Beyond the verdict, :attr:`CompatReport.warm_start` says family by family (fc, attention, MLP, norms,
lm_head, vocabulary map; :func:`eaglekit.core.checkpoint.names.family`) what a warm start of B can take from
A: a Llama drafter and an MLA drafter share fc, the norms, a dense MLP of the same width, lm_head (rows by
target token) and the vocabulary map, never the attention (q/k/v_proj against q_a/kv_a/kv_b projections);
a MoE MLP and a dense one share nothing. A drafter whose draft vocabulary is the whole target vocabulary
(``draft_vocab_size == vocab_size``) needs no d2t/t2d: its lm_head row i drafts target token i, and it is
compared as that identity map. :attr:`CompatReport.engines` says which engine loads each drafter's
architecture name (:func:`eaglekit.analysis.compat.check.engine_loads`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from eaglekit.analysis.compat.block_pair import compare_block
from eaglekit.analysis.compat.check import engine_loads, tokenizer_finding
from eaglekit.core.configs.block import block_family
from eaglekit.core.checkpoint.names import (attention_kind, attention_words, expert_layout, family, mlp_kind,
                                            mlp_words, normalize_name, role)
from eaglekit.core.configs.layers import ENGINES, layer_names, layout_of
from eaglekit.core.configs.config import normalize_config, normalize_target, target_fit
from eaglekit.core.configs.diff import diff_configs
from eaglekit.core.configs.moe_readers import missing_words
from eaglekit.core.configs.rotary import base_words, bases_differ
from eaglekit.core.redact import location_label
from eaglekit.core.tokens.vocab import check_vocab_map, compare_vocab_maps
from eaglekit.io.drafter import read_maps
from eaglekit.io.inventory import Inventory
from eaglekit.io.reader import load_config, opened
from eaglekit.analysis.compat.compat_report import match_tensors
from eaglekit.analysis.compat.compat_report import (  # noqa: F401  (the record's names stay importable from here)
    _STATUS_COLOUR,
    _TAKE_COLOUR,
    _VERDICT_COLOUR,
    EXIT_CODES,
    CompatReport,
    Status,
    Take,
    TargetCheck,
    TensorMatch,
    Verdict,
    WarmStartPart,
)


def compare_tensors(inv_a: Inventory, inv_b: Inventory) -> tuple[TensorMatch, ...]:
    """Tensor by tensor, names normalised; an embedding absent on one side is expected (frozen)."""
    return match_tensors(inv_a, inv_b, normalize_name,
                         lambda name: "frozen: taken from the target at load time"
                         if role(name) == "frozen-embedding" else None)


def compare(inv_a: Inventory, inv_b: Inventory, *, config_a: Mapping | None, config_b: Mapping | None,
            maps_a: tuple[Any, Any], maps_b: tuple[Any, Any], target: Mapping | None = None,
            a_name: str = "A", b_name: str = "B") -> CompatReport:
    """The pure verdict. ``maps_*`` are (d2t, t2d) numpy arrays, None where a buffer is absent."""

    if any(c is not None and block_family(c) is not None for c in (config_a, config_b)):
        return compare_block(inv_a, inv_b, config_a=config_a, config_b=config_b, target=target, a_name=a_name,
                             b_name=b_name)  # DFlash, DFlash2, DSpark: no vocabulary maps, other parts
    fatal: list[str] = []
    remap: list[str] = []
    warnings: list[str] = []
    # read through the layout rule, as check and acceptance read them (core/configs/layers.py layout_trainer)
    cfg_a = normalize_config(config_a, source=f"{a_name} config.json").for_layout(layout_of(inv_a.names)) \
        if config_a is not None else None
    cfg_b = normalize_config(config_b, source=f"{b_name} config.json").for_layout(layout_of(inv_b.names)) \
        if config_b is not None else None
    tgt = normalize_target(target, source="target config.json") if target is not None else None
    for name, cfg in ((a_name, cfg_a), (b_name, cfg_b)):
        if cfg is None:
            warnings.append(f"{name} has no config.json beside its weights: only tensors and maps were compared.")
            continue
        scaling = cfg.rope_scaling or cfg.rope_parameters
        if bases_differ(cfg.attention, cfg.rope_theta, scaling):  # the same words check uses
            warnings.append(f"{name}: {base_words(cfg.attention, cfg.rope_theta, scaling)} (measure both: eaglekit "
                            "acceptance --rotary-base config and torchspec).")
        moe = missing_words(cfg.raw)
        if moe is not None:
            warnings.append(f"{name}: {moe}.")

    tensors = compare_tensors(inv_a, inv_b)
    kinds = _kinds(inv_a, inv_b)
    other_kind = {fam for fam, (ka, kb) in kinds.items() if ka and kb and ka != kb and fam != "experts"}
    for fam in sorted(other_kind):
        ka, kb = kinds[fam]
        words = attention_words if fam == "attention" else mlp_words
        fatal.append(f"{fam}: {words(ka)} in {a_name} vs {words(kb)} in {b_name}: different tensors, none carries "
                     "over.")
    for t in tensors:
        if family(t.name) in other_kind:
            continue  # said once for the whole family above
        if t.status == "shape-mismatch" and role(t.name) != "vocab-map":
            fatal.append(f"{t.name}: shape {list(t.a[1])} in {a_name} vs {list(t.b[1])} in {b_name}.")
        elif t.status in ("only-a", "only-b") and role(t.name) == "trainable":
            fatal.append(f"{t.name} exists only in {a_name if t.status == 'only-a' else b_name}: "
                         "the architectures differ.")
        elif t.status == "dtype-mismatch":
            warnings.append(f"{t.name}: dtype {t.a[0]} vs {t.b[0]} (same shape; cast when loading).")
    embeds = [t for t in tensors if t.status == "expected-absent"]
    if embeds:
        warnings.append(f"embed_tokens.weight is saved only in {b_name if embeds[0].a is None else a_name}: "
                        "expected, the embedding is frozen and taken from the target at load time.")

    # A full-vocabulary drafter has no d2t/t2d: its map is the identity (draft id i = target id i).
    full = [c is not None and c.full_vocabulary and maps[0] is None and maps[1] is None
            for maps, c in ((maps_a, cfg_a), (maps_b, cfg_b))]
    maps_a, maps_b = (_identity(c) if f else m for m, c, f in ((maps_a, cfg_a, full[0]), (maps_b, cfg_b, full[1])))
    checks = [check_vocab_map(*maps, name=n, vocab_size=c.vocab_size if c else None,
                              draft_vocab_size=c.draft_vocab_size if c else None)
              for n, maps, c in ((a_name, maps_a, cfg_a), (b_name, maps_b, cfg_b))]
    vocab: dict[str, Any] = {"equal": False, "overlap": 0, "overlap_fraction": 0.0, "rows_remapped": 0,
                             "valid_a": checks[0].valid, "valid_b": checks[1].valid, "comparable": True,
                             "full_a": full[0], "full_b": full[1],
                             "problems": [p for c in checks for p in c.problems]}
    for c in checks:
        if not c.valid:
            fatal.append(f"{c.name}'s vocabulary map is invalid: {c.problems[0]}")
    other_space = _different_targets(cfg_a, cfg_b, checks)
    if other_space:
        # Token ids of two tokenizers: overlaps and row remaps between them mean nothing.
        vocab["comparable"] = False
        vocab["problems"].append(other_space)
        fatal.append(other_space)
    elif all(c.valid for c in checks):
        cmp = compare_vocab_maps(maps_a[0], maps_b[0], a_name=a_name, b_name=b_name)
        vocab.update(cmp.to_json())
        if not cmp.equal:
            remap.append(f"The {cmp.summary}. Re-align lm_head rows by target token "
                         "(i + d2t[i]) before reusing them.")

    tgt_fits = {}
    if tgt is not None:
        for name, cfg in ((a_name, cfg_a), (b_name, cfg_b)):
            if cfg is not None:
                tgt_fits[name] = all(v == w for _, v, w in target_fit(cfg.target_hidden_size, cfg.vocab_size, tgt))
    aux: dict[str, Any] = {}
    layers = tgt.num_hidden_layers if tgt else None
    for key, name, cfg in (("a", a_name, cfg_a), ("b", b_name, cfg_b)):
        fits = tgt_fits.get(name, True)
        # A drafter for another target is not judged against this one's layers (its ids number other layers).
        report = cfg.aux_report(layers if fits else None) if cfg else None
        aux[key] = report.to_json() if report else None
        if report is not None and not fits:
            aux[key]["explanation"] = (f"{list(report.ids)}: not judged against the target's {layers} layers, "
                                       f"because {name} is a drafter for another target")
        if report is not None and report.in_range is False:
            fatal.append(f"{name}'s aux layer ids {list(report.ids)} do not fit the target's {layers} layers: "
                         f"{'; '.join(report.problems)}")
    # What each drafter's ids meant in training (layer outputs; more than one where its config leaves it
    # ambiguous, core/configs/aux_view.py). Warn only when the meanings differ, not when the spellings do: an
    # export for vLLM writes [3, 31, 59] (inputs) for what SpecForge calls [2, 30, 58] (outputs).
    meant = {}
    for key, name, cfg in (("a", a_name, cfg_a), ("b", b_name, cfg_b)):
        if cfg is not None and tgt_fits.get(name, True):
            training = cfg.aux_view(layers, architecture=tgt.architecture if tgt else None).training
            meant[key] = {c.outputs_of for c in training.candidates} if training.candidates else None
            if aux.get(key) is not None:
                aux[key]["trained_outputs_of"] = [list(o) for o in sorted(meant[key] or ())]
                if training.ambiguous:
                    aux[key]["explanation"] += (f"; training AMBIGUOUS: {training.describe()} "
                                                "(docs/aux-layers.md)")
    same = None
    if meant.get("a") and meant.get("b"):
        same = meant["a"] == meant["b"] and len(meant["a"]) == 1
        if not meant["a"] & meant["b"] and not other_space:
            show = lambda m: " or ".join(layer_names(o) for o in sorted(m))  # noqa: E731
            warnings.append(f"aux layer ids mean different tensors: {a_name} {list(cfg_a.aux_layer_ids or ())} the "
                            f"outputs of layers {show(meant['a'])}, {b_name} {list(cfg_b.aux_layer_ids or ())} those "
                            f"of {show(meant['b'])}: an engine feeds fc's column blocks from other layers than "
                            "one of them was trained on.")
    # The same ids select the same tensors in any one engine release; ``same_meaning``: trained on the same.
    aux["same"] = bool(cfg_a and cfg_b and cfg_a.aux_layer_ids == cfg_b.aux_layer_ids)
    aux["same_meaning"] = same
    aux["target_layers"] = layers

    target_checks: list[TargetCheck] = []
    if tgt is not None:
        for name, cfg in ((a_name, cfg_a), (b_name, cfg_b)):
            if cfg is None:
                continue
            for fld, value, want in target_fit(cfg.target_hidden_size, cfg.vocab_size, tgt):
                target_checks.append(TargetCheck(fld, name, value, want, value == want))
                if value != want:
                    fatal.insert(0, f"{name}'s {fld} {value} does not match the target's {want}.")

    diff = diff_configs(config_a, config_b, a_name=a_name, b_name=b_name) if cfg_a and cfg_b else None
    if diff is not None:
        for d in diff.by_class("behaviour"):
            if d.path.endswith("eagle_aux_hidden_state_layer_ids") or d.path == "eaglekit_export.aux_ids_read_as":
                continue  # judged above by what the ids mean, not how they are spelled
            warnings.append(f"config {d.path} differs ({d.a!r} vs {d.b!r}): {d.reason}")

    parts = warm_start(tensors, kinds, vocab, a_name=a_name, b_name=b_name)
    engines = {name: {e: engine_loads(cfg, e)[1] for e in ENGINES} for name, cfg in ((a_name, cfg_a), (b_name, cfg_b))
               if cfg is not None}
    verdict: Verdict = "incompatible" if fatal else "compatible-after-remap" if remap else "compatible"
    if verdict == "compatible":
        reasons = [f"Every trainable tensor matches in shape and dtype and the vocabulary maps are equal: "
                   f"{a_name} is a drop-in for {b_name}."]
        if same is False and meant["a"] != meant["b"] and meant["a"] & meant["b"]:
            # one reading of the ids agrees, another does not: a drop-in only under the reading they share
            show = lambda m: " or ".join(layer_names(o) for o in sorted(m))  # noqa: E731
            unsure = [n for n, k in ((a_name, "a"), (b_name, "b")) if len(meant[k]) > 1]
            aux["drop_in_only_if"] = [list(o) for o in sorted(meant["a"] & meant["b"])]  # trained on these outputs
            reasons = [f"Every trainable tensor matches in shape and dtype and the vocabulary maps are equal: "
                       f"{a_name} is a drop-in for {b_name} only if both were trained on the outputs of layers "
                       f"{show(meant['a'] & meant['b'])}; {' and '.join(unsure)} leave{'s' * (len(unsure) == 1)} "
                       f"{'its' if len(unsure) == 1 else 'their'} training ambiguous ({a_name}: the outputs of "
                       f"{show(meant['a'])}; {b_name}: of {show(meant['b'])}): measure both readings (eaglekit "
                       "acceptance --aux-convention outputs and inputs) or ask the publisher before swapping."]
    else:
        reasons = fatal + remap
    if verdict == "incompatible" and any(p.take != "cannot" for p in parts):
        taken = [p.family + (" (rows re-aligned by target token)" if p.take == "take after remap" else "")
                 for p in parts if p.take in ("take", "take after remap")]
        cannot = [p.family for p in parts if p.take == "cannot"]
        reasons.append(f"Not a drop-in, but a warm start of {b_name} can take from {a_name}: "
                       f"{', '.join(taken) or 'nothing'}; it cannot take {', '.join(cannot) or 'nothing'} (trained "
                       "from scratch).")
    if tgt is not None and not fatal:
        reasons.append(f"Both fit the target ({tgt.num_hidden_layers} layers, hidden {tgt.hidden_size}, "
                       f"vocab {tgt.vocab_size}).")
    return CompatReport(a_name, b_name, verdict, tuple(reasons), tensors, vocab, aux, diff,
                        tuple(target_checks), tuple(warnings), parts, engines)


def _identity(cfg) -> tuple[np.ndarray, np.ndarray]:
    """The map a full-vocabulary drafter means: d2t all zeros (draft id i = target id i), t2d all true."""
    return np.zeros(cfg.vocab_size, np.int64), np.ones(cfg.vocab_size, np.bool_)


def _kinds(inv_a: Inventory, inv_b: Inventory) -> dict[str, tuple[str | None, str | None]]:
    """The attention kind (llama, mla) and MLP kind (dense, moe) of each side, from tensor names."""
    return {"attention": (attention_kind(inv_a.names), attention_kind(inv_b.names)),
            "mlp": (mlp_kind(inv_a.names), mlp_kind(inv_b.names)),
            "experts": (expert_layout(inv_a.names), expert_layout(inv_b.names))}


def warm_start(tensors: tuple[TensorMatch, ...], kinds: Mapping[str, tuple[str | None, str | None]],
               vocab: Mapping[str, Any], *, a_name: str = "A", b_name: str = "B") -> tuple[WarmStartPart, ...]:
    """Family by family, what a warm start of B can take from A (see :class:`WarmStartPart`)."""
    by_family: dict[str, list[TensorMatch]] = {}
    for t in tensors:
        by_family.setdefault(family(t.name), []).append(t)
    out = []
    for fam in ("fc", "attention", "mlp", "norms", "lm_head"):
        ts = by_family.get(fam, [])
        names = tuple(t.name for t in ts)
        ka, kb = kinds.get(fam, (None, None))
        words = attention_words if fam == "attention" else mlp_words
        if not ts:
            continue
        if ka and kb and ka != kb:
            out.append(WarmStartPart(fam, "cannot", f"{fam} not comparable: {ka} vs {kb} ({words(ka)} in {a_name}, "
                                     f"{words(kb)} in {b_name}); trained from scratch", names))
            continue
        if fam == "lm_head":
            out.append(_lm_head_part(ts[0], vocab, a_name, b_name))
            continue
        bad = [t for t in ts if t.status in ("shape-mismatch", "only-a", "only-b")]
        layouts = kinds.get("experts", (None, None))
        if fam == "mlp" and layouts[0] and layouts[1] and layouts[0] != layouts[1] \
                and all(".experts." in t.name for t in bad):
            out.append(WarmStartPart(fam, "take after remap", f"routed experts stored {layouts[0]} in {a_name}, "
                                     f"{layouts[1]} in {b_name} (TorchSpec's fused experts.gate_up_proj [E, H, 2I] / "
                                     "down_proj [E, I, H] are the per-expert gate/up/down_proj transposed and "
                                     "stacked); router and shared experts match", names))
            continue
        if not bad:
            kind = f" ({words(ka)})" if fam in ("attention", "mlp") and ka else ""
            cast = " (cast to one dtype)" if any(t.status == "dtype-mismatch" for t in ts) else ""
            out.append(WarmStartPart(fam, "take", f"same tensors and shapes{kind}{cast}", names))
        else:
            shown = ", ".join(f"{t.name} ({_side(t, a_name, b_name)})" for t in bad[:3])
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            out.append(WarmStartPart(fam, "cannot", f"shapes differ: {shown}{more}", names))
    out.append(_vocab_part(vocab, a_name, b_name))
    return tuple(out)


def _side(t: TensorMatch, a_name: str, b_name: str) -> str:
    if t.status == "only-a":
        return f"only in {a_name}"
    if t.status == "only-b":
        return f"only in {b_name}"
    return f"{list(t.a[1])} vs {list(t.b[1])}"


def _lm_head_part(t: TensorMatch, vocab: Mapping[str, Any], a_name: str, b_name: str) -> WarmStartPart:
    if t.a is None or t.b is None:
        return WarmStartPart("lm_head", "cannot", f"lm_head.weight {_side(t, a_name, b_name)}", (t.name,))
    (ra, ha), (rb, hb) = (t.a[1][0], t.a[1][-1]), (t.b[1][0], t.b[1][-1])
    if ha != hb:
        return WarmStartPart("lm_head", "cannot", f"hidden sizes differ ({ha} vs {hb})", (t.name,))
    if vocab.get("comparable") is False:
        return WarmStartPart("lm_head", "cannot", "different target vocabularies: rows mean tokens of other "
                             "tokenizers", (t.name,))
    if vocab.get("equal") and ra == rb:
        return WarmStartPart("lm_head", "take", "same rows: the vocabulary maps are equal", (t.name,))
    full = [n for n, k in ((a_name, "full_a"), (b_name, "full_b")) if vocab.get(k)]
    how = (f"{' and '.join(full)} draft{'s' * (len(full) == 1)} the full vocabulary (row i = token i); "
           if full else "")
    shared = vocab.get("overlap", 0)
    return WarmStartPart("lm_head", "take after remap", f"{how}{shared:,} target tokens shared: rows re-aligned by "
                         "target token (eaglekit export --vocab-map), the others from the target's lm_head", (t.name,))


def _vocab_part(vocab: Mapping[str, Any], a_name: str, b_name: str) -> WarmStartPart:
    full_a, full_b = vocab.get("full_a"), vocab.get("full_b")
    if vocab.get("comparable") is False:
        return WarmStartPart("vocab map", "cannot", "different tokenizers: token ids do not carry over")
    if full_a and full_b:
        return WarmStartPart("vocab map", "not needed", "full vocabulary on both sides: no d2t/t2d, every target "
                             "token can be drafted")
    if full_b:
        return WarmStartPart("vocab map", "not needed", f"{b_name} drafts the full vocabulary (no d2t/t2d); "
                             f"{a_name}'s reduced map is not used")
    if not (vocab.get("valid_a") and vocab.get("valid_b")):
        return WarmStartPart("vocab map", "cannot", "; ".join(vocab.get("problems", [])[:2]) or "invalid map")
    if full_a:
        return WarmStartPart("vocab map", "take", f"{a_name} drafts the full vocabulary; {b_name} keeps its own "
                             "d2t/t2d and takes A's lm_head rows for its tokens", ("d2t", "t2d"))
    if vocab.get("equal"):
        return WarmStartPart("vocab map", "take", "equal d2t/t2d", ("d2t", "t2d"))
    return WarmStartPart("vocab map", "take after remap", f"maps differ ({vocab.get('overlap', 0):,} shared tokens): "
                         "keep one, lm_head rows follow it", ("d2t", "t2d"))


def _different_targets(cfg_a, cfg_b, checks) -> str | None:
    """Why two drafters serve different targets (another vocabulary or hidden size), or None."""
    va = cfg_a.vocab_size if cfg_a else checks[0].vocab_size
    vb = cfg_b.vocab_size if cfg_b else checks[1].vocab_size
    what = []
    if va is not None and vb is not None and va != vb:
        what.append(f"target vocabularies of {va:,} vs {vb:,} tokens")
    if cfg_a and cfg_b and cfg_a.target_hidden_size != cfg_b.target_hidden_size:
        what.append(f"target hidden sizes {cfg_a.target_hidden_size} vs {cfg_b.target_hidden_size}")
    if not what:
        return None
    return (f"{checks[0].name} and {checks[1].name} are drafters for different targets ({'; '.join(what)}): "
            "their token ids come from different tokenizers, so their draft vocabularies cannot be compared "
            "and no lm_head remap carries rows from one to the other.")


def compat(a, b, *, target: str | Mapping | None = None, endpoint: str | None = None, timeout: float | None = None,
           token: str | bool | None = None, a_name: str | None = None, b_name: str | None = None) -> CompatReport:
    """Judge two drafters: locations, or checkpoints already opened with ``open_checkpoint`` (reused,
    not re-read). ``target``: a target config dict, file or location."""

    with opened(a, endpoint=endpoint, timeout=timeout, token=token) as ca, opened(b, endpoint=endpoint, timeout=timeout, token=token) as cb:
        blocks = any(block_family(c.inventory.config) is not None for c in (ca, cb))
        maps_a, maps_b = ((None, None), (None, None)) if blocks else (read_maps(ca), read_maps(cb))
        target_cfg = target if isinstance(target, Mapping) or target is None else \
            load_config(target, kind="target", endpoint=endpoint, timeout=timeout, token=token)
        report = compare(ca.inventory, cb.inventory, config_a=ca.inventory.config, config_b=cb.inventory.config,
                         maps_a=maps_a, maps_b=maps_b, target=target_cfg,
                         a_name=a_name or location_label(ca.location.raw),
                         b_name=b_name or location_label(cb.location.raw))
        tokenizer = [f"{name}: {f.message}" for name, ck in ((report.a_name, ca), (report.b_name, cb))
                     if (f := tokenizer_finding(ck.location, target, endpoint=endpoint, timeout=timeout, token=token)) is not None
                     and f.severity != "ok"]
        return replace(report, warnings=(*report.warnings, *tokenizer)) if tokenizer else report
