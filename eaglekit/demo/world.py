"""A deterministic demo workspace: the trained demo world, and random drafters in real layout at 1/16 scale.

``trained/`` holds the demo's one world (:mod:`eaglekit.demo.trained`): small K2 and K2.5 targets trained on a
token language, in the real layouts (MoE with MLA names; FP8 and INT4 forms of the same trained weights),
the K2 drafter, the K2.5 scratch and warm-start drafters, and the targets' hidden-state dumps. Every page
that shows a drafter against a target uses it, and the demo Hub serves it (:data:`TRAINED_HUB_REPOS`).

The rest is where real shapes matter (header inspection, search, config diffs, the checks' planted faults,
streamed similarity at scale): REAL-SHAPE RANDOM weights, labelled so in every config and file metadata,
that accept nothing. The shapes, names, dtypes, ratios and config formats follow the public Kimi-K2 EAGLE-3 drafter (docs/config-formats.md)
scaled by 1/16 (hidden 7168 -> 448, vocab 163840 -> 10240, draft vocab 32000 -> 2000); the target
configs keep Kimi's 61 layers and are scaled the same way so the drafters fit them.

Drafters built (``drafters/<name>/model.safetensors`` + ``config.json``):

- ``k2``: the public Kimi-K2 drafter's stand-in. SpecForge config, no embed_tokens (frozen).
- ``k25-scratch``: a team's own K2.5 drafter trained from scratch: independent weights, embed_tokens
  saved, a different draft vocabulary.
- ``k25-finetuned``: K2 fine-tuned for K2.5: K2's weights plus structured drift (fc's high-layer
  block and the hidden half of q/k/v move most, the MLP drifts more with the row index) and a
  regenerated d2t sharing exactly ``FT_SHARED`` of K2's 2000 draft tokens; lm_head rows follow tokens.
- ``k2-speculators``: K2 again in the vllm-project/speculators layout (layers.0.*, Eagle3Speculator).
- ``k2-sharded``: K2's tensors split over 3 shards with a model.safetensors.index.json.
- ``llama-small``: a drafter for another target (hidden 256): incompatible with the others.

Targets (``targets/<name>/``) hold config.json and a partial checkpoint with only the two tensors a
drafter shares with its target: the token embedding and lm_head (K2.5's under ``language_model.``; its
embedding is the one k25-scratch saved). ``broken/<name>`` holds drafters with one fault each for
``eaglekit check`` (:mod:`eaglekit.demo.broken`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglekit.demo.spec import (AUX_IDS, DEMO_VERSION, DRAFT_VOCAB, FT_SHARED, HEAD_DIM, HEADS, LABEL, LAYERS, SCRATCH_SHARED,
                                 VOCAB, H, I, specforge_config, speculators_config)
from eaglekit.core.errors import InputError
from eaglekit.core.tokens.vocab import build_vocab_map
from eaglekit.demo.broken import build_broken
from eaglekit.demo.build import build_lock, built_beside, built_once, stamp_of
from eaglekit.demo.shelf import build_demo_hub_repos
from eaglekit.demo.trained import TrainedWorld, build_trained_demo
from eaglekit.io.write import write_atomic


@dataclass(frozen=True)
class DemoWorkspace:
    """Paths of a built demo workspace; ``manifest`` holds what was built in (overlaps, drift)."""

    root: Path
    manifest: dict[str, Any]

    def drafter(self, name: str) -> Path:
        return self.root / "drafters" / name

    def target(self, name: str) -> Path:
        return self.root / "targets" / name / "config.json"

    @property
    def trained(self) -> TrainedWorld:
        """The demo's one world (targets, drafters, dumps that fit each other): ``trained/``."""
        return build_trained_demo(self.root / "trained")

    def broken(self, name: str) -> Path:
        """A drafter with one deliberate fault (see :mod:`eaglekit.demo.broken`)."""
        return self.root / "broken" / name

    @property
    def hub_root(self) -> Path:
        return self.root / "hub"

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(f"<li><code>{escape(n)}</code>: {escape(d)}</li>"
                       for n, d in self.manifest["drafters"].items())
        return (f"<b>eaglekit demo workspace</b> at <code>{escape(str(self.root))}</code><br>"
                f"<code>trained/</code>: {escape(_TRAINED_LINE)}<br>real-shape random drafters ({LABEL}):"
                f"<ul>{rows}</ul>")

    def __str__(self) -> str:
        lines = [f"eaglekit demo workspace at {self.root}", f"  trained/: {_TRAINED_LINE}",
                 f"  real-shape random drafters ({LABEL}):"]
        lines += [f"  drafters/{n}: {d}" for n, d in self.manifest["drafters"].items()]
        return "\n".join(lines)


_TRAINED_LINE = ("the demo world: small K2 and K2.5 targets (FP8 and INT4 forms too), the K2 drafter, the K2.5 "
                 "scratch and warm-start drafters, hidden-state dumps; every page that shows a drafter against a "
                 "target uses it")


def target_configs() -> dict[str, dict[str, Any]]:
    """Kimi-K2 (DeepseekV3-style, FP8 block-quantised) and K2.5 (kimi_k2 text_config, 4-bit packed)."""
    text = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "num_hidden_layers": LAYERS,
            "hidden_size": H, "vocab_size": VOCAB, "n_routed_experts": 384, "num_experts_per_tok": 8,
            "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": 1536, "eaglekit_demo": LABEL}
    k2 = {**text, "max_position_embeddings": 131072,
          "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}
    k25 = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
           "text_config": {**text, "max_position_embeddings": 262144},
           "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                   "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 32}}}},
           "eaglekit_demo": LABEL}
    return {"kimi-k2": k2, "kimi-k25": k25}


def _vocab_sets(rng) -> dict[str, Any]:
    """Draft vocabularies as sets of target ids, with the overlaps built in exactly."""
    import numpy as np

    order = rng.permutation(VOCAB)             # token popularity ranking of the K2 training data
    k2 = order[:DRAFT_VOCAB]
    fresh = order[DRAFT_VOCAB:]
    keep_ft = rng.choice(k2, FT_SHARED, replace=False)
    ft = np.concatenate([keep_ft, fresh[:DRAFT_VOCAB - FT_SHARED]])
    keep_sc = rng.choice(k2, SCRATCH_SHARED, replace=False)
    sc = np.concatenate([keep_sc, fresh[-(DRAFT_VOCAB - SCRATCH_SHARED):]])
    return {"k2": np.sort(k2), "k25-finetuned": np.sort(ft), "k25-scratch": np.sort(sc)}


def _drafter_tensors(gen, *, hidden=H, inter=I, heads=HEADS, vocab=VOCAB, draft_vocab=DRAFT_VOCAB,
                     embed=False) -> dict[str, Any]:
    """float32 weights of a Llama-style EAGLE-3 drafter (the SpecForge layout), std 0.02 like a fresh init."""
    import torch

    qkv = heads * HEAD_DIM

    def w(*shape):
        return torch.randn(*shape, generator=gen) * 0.02

    def norm():
        return 1.0 + 0.05 * torch.randn(hidden, generator=gen)

    t = {
        "fc.weight": w(hidden, 3 * hidden),                        # (H, 3*Ht): low | mid | high blocks
        "midlayer.self_attn.q_proj.weight": w(qkv, 2 * hidden),    # (heads*hd, 2H): embed | hidden
        "midlayer.self_attn.k_proj.weight": w(qkv, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": w(qkv, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": w(hidden, qkv),
        "midlayer.mlp.gate_proj.weight": w(inter, hidden),
        "midlayer.mlp.up_proj.weight": w(inter, hidden),
        "midlayer.mlp.down_proj.weight": w(hidden, inter),
        "midlayer.hidden_norm.weight": norm(),
        "midlayer.input_layernorm.weight": norm(),
        "midlayer.post_attention_layernorm.weight": norm(),
        "norm.weight": norm(),
        "lm_head.weight": w(draft_vocab, hidden),                  # row i predicts draft token i
    }
    if embed:
        t["embed_tokens.weight"] = w(vocab, hidden)
    return t


#: Relative drift (std of the change / std of the weight) the fine-tune applies, by region.
FT_DRIFT = {"fc.low": 0.1, "fc.mid": 0.3, "fc.high": 0.6, "qkv.embed": 0.05, "qkv.hidden": 0.4,
            "o_proj": 0.2, "mlp.rows": (0.05, 0.5), "lm_head": 0.15, "norm": 0.02}


def _finetune(gen, base: dict[str, Any], k2_ids, ft_ids) -> dict[str, Any]:
    """K2's weights plus the structured drift of FT_DRIFT; lm_head rows move with their tokens."""
    import torch

    def drift(x, scale):
        return x + torch.randn(x.shape, generator=gen) * x.std() * scale

    out = {}
    for name, x in base.items():
        if name == "fc.weight":
            blocks = x.chunk(3, dim=1)
            out[name] = torch.cat([drift(b, FT_DRIFT[f"fc.{k}"]) for b, k in zip(blocks, ("low", "mid", "high"))], 1)
        elif name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
            e, h = x.chunk(2, dim=1)
            out[name] = torch.cat([drift(e, FT_DRIFT["qkv.embed"]), drift(h, FT_DRIFT["qkv.hidden"])], 1)
        elif name.endswith("o_proj.weight"):
            out[name] = drift(x, FT_DRIFT["o_proj"])
        elif ".mlp." in name:
            lo, hi = FT_DRIFT["mlp.rows"]
            ramp = torch.linspace(lo, hi, x.shape[0]).unsqueeze(1)      # (rows, 1): drift grows with row
            out[name] = x + torch.randn(x.shape, generator=gen) * x.std() * ramp
        elif name == "lm_head.weight":
            rows = drift(x, FT_DRIFT["lm_head"])
            new = torch.randn(len(ft_ids), x.shape[1], generator=gen) * 0.02
            pos = {int(t): i for i, t in enumerate(k2_ids)}
            for j, tok in enumerate(ft_ids):
                if int(tok) in pos:
                    new[j] = rows[pos[int(tok)]]
            out[name] = new
        else:
            out[name] = drift(x, FT_DRIFT["norm"])
    return out


def _write(folder: Path, tensors: dict[str, Any], config: dict[str, Any], d2t, t2d, *, rename=None,
           shards: int = 1) -> None:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    out = {(rename(k) if rename else k): v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}
    out["d2t"] = torch.from_numpy(d2t.astype("int64"))
    out["t2d"] = torch.from_numpy(t2d.astype(bool))
    meta = {"format": "pt", "eaglekit_demo": LABEL}
    if shards == 1:
        save_file(out, str(folder / "model.safetensors"), metadata=meta)
    else:
        names = sorted(out)
        weight_map = {}
        for s in range(shards):
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {k: out[k] for k in names[s::shards]}
            weight_map.update({k: fname for k in part})
            save_file(part, str(folder / fname), metadata=meta)
        total = sum(v.numel() * v.element_size() for v in out.values())
        (folder / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def build_demo(path: str | os.PathLike[str], *, force: bool = False, trained: str | os.PathLike[str] | None = None,
               progress: bool | None = None) -> DemoWorkspace:
    """Write (or reuse) the demo workspace at ``path``: the trained world, the real-shape random drafters, target
    configs and a Hub folder serving both. ``trained``: an already built trained world to link in as
    ``trained/`` instead of training one (under two minutes on an idle 2-core machine; cached either way)."""

    root = Path(path)
    if root.exists() and not root.is_dir():
        raise InputError(f"{root} is a file; give a folder for the demo workspace.")
    try:
        built_once(root, {"demo": DEMO_VERSION}, lambda folder: _build(folder, root, trained=trained, progress=progress),
                   ours=lambda folder: _read_manifest(folder) is not None or _only_a_trained_world(folder), force=force,
                   what="demo workspace")
        return _current_trained_hub(root, progress=progress)
    except OSError as e:
        raise InputError(f"Cannot write the demo workspace at {root}: {e.strerror or e}.") from e


def _trained_stamp(world: TrainedWorld) -> dict[str, Any]:
    return {"version": world.manifest["version"], "build": world.manifest.get("build"), "hub": dict(TRAINED_HUB_REPOS)}


def _current_trained_hub(root: Path, *, progress: bool | None) -> DemoWorkspace:
    """A built workspace whose trained world was retrained since (a new version, or built again by
    ``build_trained_demo``): its Hub repos are linked to the new files, so the Hub serves what the folders hold."""
    world = build_trained_demo(root / "trained", progress=progress)
    stamp = _trained_stamp(world)
    manifest = _read_manifest(root) or {}
    if manifest.get("trained") != stamp:
        try:
            with build_lock(root):  # one updater at a time; each repo folder is replaced whole
                manifest = _read_manifest(root) or {}
                if manifest.get("trained") != stamp:
                    _build_trained_hub(root, world)
                    manifest = {**manifest, "trained": stamp}
                    write_atomic(root / "manifest.json", json.dumps(manifest, indent=2) + "\n")
        except OSError as e:
            raise InputError(f"Cannot update the demo workspace's Hub at {root}: {e.strerror or e}.") from e
    return DemoWorkspace(root, manifest)


def _read_manifest(root: Path) -> dict[str, Any] | None:
    """The workspace's manifest when ``root`` holds one that eaglekit wrote, else None."""
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("label") == LABEL else None


def _only_a_trained_world(folder: Path) -> bool:
    """Whether ``folder`` holds nothing but a trained world eaglekit built there and its lock: what a notebook
    run on the default ``DEMO`` before ``eaglekit demo`` leaves (the workspace build then keeps that world)."""
    entries = list(folder.iterdir())
    trained = folder / "trained"
    return (trained in entries and not trained.is_symlink() and stamp_of(trained) is not None
            and all(e == trained or e.name == ".trained.lock" for e in entries))


def _build(root: Path, final: Path, *, trained: str | os.PathLike[str] | None, progress: bool | None) -> None:
    """Write the workspace into ``root`` (a fresh folder beside ``final``, renamed into place when done).

    A rebuild keeps the trained world (minutes of training) without moving it: ``final/trained`` is copied in as
    hard links (a link is copied as a link), so until the new workspace takes its place the old one holds its
    complete trained world, whatever happens to this build (a crash, SIGKILL)."""
    kept = final / "trained"
    if kept.is_symlink():
        os.symlink(os.readlink(kept), root / "trained", target_is_directory=True)
    elif kept.is_dir():
        with build_lock(kept):   # no trained build swaps it while it is copied
            shutil.copytree(kept, root / "trained", symlinks=True, copy_function=_link)
    _build_into(root, trained=trained, progress=progress)


def _build_into(root: Path, *, trained: str | os.PathLike[str] | None, progress: bool | None) -> None:
    import numpy as np
    import torch

    rng = np.random.default_rng(20261129)
    gen = torch.Generator().manual_seed(20261129)
    ids = _vocab_sets(rng)
    maps = {k: build_vocab_map(v, VOCAB) for k, v in ids.items()}
    drafters = root / "drafters"

    k2 = _drafter_tensors(gen)
    k2_cfg = specforge_config()
    _write(drafters / "k2", k2, k2_cfg, *maps["k2"])
    _write(drafters / "k2-sharded", k2, k2_cfg, *maps["k2"], shards=3)
    _write(drafters / "k2-speculators", k2, speculators_config(k2_cfg), *maps["k2"],
           rename=lambda n: n.replace("midlayer.", "layers.0."))
    ft = _finetune(gen, k2, ids["k2"], ids["k25-finetuned"])
    _write(drafters / "k25-finetuned", ft, specforge_config(max_pos=262144), *maps["k25-finetuned"])
    scratch = _drafter_tensors(gen, embed=True)
    _write(drafters / "k25-scratch", scratch, specforge_config(max_pos=262144), *maps["k25-scratch"])
    small_ids = np.sort(rng.permutation(8016)[:1000])
    small = _drafter_tensors(gen, hidden=256, inter=704, heads=2, vocab=8016, draft_vocab=1000)
    _write(drafters / "llama-small", small,
           {**specforge_config(hidden=256, inter=704, heads=2, vocab=8016, draft_vocab=1000),
            "model_type": "llama", "rope_theta": 500000.0,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 16, 29], "use_aux_hidden_state": True}},
           *build_vocab_map(small_ids, 8016))
    for name, cfg in target_configs().items():
        (root / "targets" / name).mkdir(parents=True, exist_ok=True)
        (root / "targets" / name / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    _write_target_head(root / "targets" / "kimi-k2", "", torch.randn(VOCAB, H, generator=gen) * 0.02, gen)
    _write_target_head(root / "targets" / "kimi-k25", "language_model.", scratch["embed_tokens.weight"], gen)

    broken = build_broken(root / "broken", gen, k2, *maps["k2"], write=_write)

    link = root / "trained"
    if trained is not None and not link.exists():
        link.symlink_to(Path(trained).resolve(), target_is_directory=True)
    world = build_trained_demo(link, progress=progress)

    manifest = {
        "version": DEMO_VERSION, "label": LABEL,
        "drafters": {
            "k2": "public Kimi-K2 drafter stand-in (SpecForge config, no embed_tokens)",
            "k2-sharded": "k2's tensors in 3 shards with an index",
            "k2-speculators": "k2 in the speculators layout (layers.0.*, Eagle3Speculator config)",
            "k25-finetuned": f"k2 fine-tuned for K2.5: structured drift, regenerated d2t ({FT_SHARED} shared tokens)",
            "k25-scratch": f"K2.5 drafter from scratch: independent weights, embed_tokens, {SCRATCH_SHARED} shared tokens",
            "llama-small": "a drafter for another target (hidden 256): incompatible",
        },
        "broken": broken,
        "trained": _trained_stamp(world),
        "overlap": {"k2~k25-finetuned": FT_SHARED, "k2~k25-scratch": SCRATCH_SHARED},
        "ft_drift": {k: list(v) if isinstance(v, tuple) else v for k, v in FT_DRIFT.items()},
        "shapes": {"hidden": H, "intermediate": I, "heads": HEADS, "head_dim": HEAD_DIM, "vocab": VOCAB,
                   "draft_vocab": DRAFT_VOCAB, "target_layers": LAYERS, "aux_layer_ids": AUX_IDS},
    }
    _build_hub(root)
    _build_trained_hub(root, world)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _write_target_head(folder: Path, prefix: str, embed, gen) -> None:
    """A target's partial checkpoint: its embedding and lm_head, the tensors a drafter shares with it."""
    import torch
    from safetensors.torch import save_file

    tensors = {f"{prefix}model.embed_tokens.weight": embed.to(torch.bfloat16).contiguous(),  # (V, H)
               f"{prefix}lm_head.weight": (torch.randn(VOCAB, H, generator=gen) * 0.02).to(torch.bfloat16)}  # (V, H)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt", "eaglekit_demo": LABEL})


#: Demo Hub repos (owner/name -> drafter or target folder). Owners say "demo" so nobody mistakes them.
HUB_REPOS = {
    "demo-aqmed/Kimi-K2-Instruct-eagle3": "drafters/k2",
    "demo-aqmed/Kimi-K2-Instruct-eagle3-sharded": "drafters/k2-sharded",
    "demo-redhat/Kimi-K2-Instruct-speculator.eagle3": "drafters/k2-speculators",
    "demo-team/Kimi-K2.5-eagle3-finetuned": "drafters/k25-finetuned",
    "demo-team/Kimi-K2.5-eagle3-scratch": "drafters/k25-scratch",
    "demo-lab/Llama-small-EAGLE3": "drafters/llama-small",
    "demo-moonshot/Kimi-K2-Instruct": "targets/kimi-k2",
    "demo-moonshot/Kimi-K2.5": "targets/kimi-k25",
}


#: The trained world on the demo Hub (owner/name -> folder of ``trained/``). Its targets are served in their
#: shipping layouts (FP8, INT4 under ``language_model.``) with the tokenizer of the trained folder.
TRAINED_HUB_REPOS = {
    "demo-mini/Kimi-K2-mini-eagle3": "drafters/k2",
    "demo-mini/Kimi-K2-mini-speculator.eagle3": "drafters/k2-speculators",
    "demo-team/Kimi-K2.5-mini-eagle3-scratch": "drafters/k25-scratch",
    "demo-mini/Kimi-K2-mini": "target-weights/k2-fp8",
    "demo-mini/Kimi-K2.5-mini": "target-weights/k25-int4",
}
_TOKENIZER_OF = {"demo-mini/Kimi-K2-mini": "targets/k2", "demo-mini/Kimi-K2.5-mini": "targets/k25"}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _build_trained_hub(root: Path, world: TrainedWorld) -> None:
    """Serve the trained world's drafters and targets from the demo Hub folder (files hard-linked)."""
    for n, (repo, src) in enumerate(TRAINED_HUB_REPOS.items()):
        meta = {"tags": ["eaglekit-demo", "synthetic", "trained-demo"], "downloads": 1000 - 100 * n, "likes": 5 - n,
                "lastModified": "2026-11-01T00:00:00.000Z", "cardData": {"tags": ["synthetic"]}}

        def fill(dst: Path, src: str = src, repo: str = repo, meta: dict = meta) -> None:
            for f in sorted((world.root / src).iterdir()):
                _link(f, dst / f.name)
            tok = world.root / _TOKENIZER_OF.get(repo, "-")
            for name in _TOKENIZER_FILES:
                if (tok / name).is_file():
                    _link(tok / name, dst / name)
            (dst / ".hub.json").write_text(json.dumps(meta, indent=2) + "\n")

        dst = root / "hub" / repo
        dst.parent.mkdir(parents=True, exist_ok=True)
        built_beside(dst, fill)  # replaced whole: the Hub server never lists a half-linked repo


def _build_hub(root: Path) -> None:
    """The Hub-compatible server's folder: one repo per drafter/target, files hard-linked (no copies)."""
    for repo, src in HUB_REPOS.items():
        dst = root / "hub" / repo
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted((root / src).iterdir()):
            _link(f, dst / f.name)
        meta = {"tags": ["eaglekit-demo", "synthetic"], "downloads": 0, "likes": 0,
                "lastModified": "2026-11-01T00:00:00.000Z", "cardData": {"tags": ["synthetic"]}}
        (dst / ".hub.json").write_text(json.dumps(meta, indent=2) + "\n")

    build_demo_hub_repos(root / "hub", root)
