"""Targets in the real quantised layouts: the trained world's, and a planted-drift pair for tests.

:func:`write_target_forms` writes two targets' weights the way the real ones ship:

- ``k2-fp8``: Kimi-K2's layout: ``model.*`` names, FP8 e4m3 weights with 128 x 128 block
  ``weight_scale_inv`` (ragged: every matrix is narrower than a block), bf16 embedding, norms, router and
  lm_head, two shards and an index.
- ``k25-int4``: Kimi-K2.5's layout: the language model under ``language_model.``, compressed-tensors
  pack-quantised INT4 (``weight_packed``/``weight_scale``/``weight_shape``, group 32, symmetric), plus a
  vision tower only it has; three shards.

The demo world (:mod:`eaglekit.demo.trained`) writes its trained K2 and K2.5 targets with it: the drift
pages read those. :func:`build_targets` writes a SYNTHETIC pair with known drift for the drift tests and
benchmark: random weights in Kimi's depth (61 DeepseekV3-style layers, the first dense and the rest MoE
with shared and routed experts, MLA attention projections, a vocabulary of 10,240 tokens) but thin
(hidden 64, 4 routed experts), a few MB in about a second. Its K2.5 is K2 plus drift that grows with depth
(routed experts most), :data:`MOVED_TOKENS` embedding rows re-learned and every other row unchanged, so a
test knows the true figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eaglekit.demo.build import built_once
from eaglekit.demo.spec import LABEL, LAYERS, VOCAB
from eaglekit.io.dumps.native import DumpManifest, DumpSample, write_dump

HIDDEN, EXPERTS, MOE_INTER, DENSE_INTER, GROUP = 64, 4, 32, 128, 32
Q_LORA, KV_LORA, HEAD_OUT = 32, 32, 64
MOVED_TOKENS = 300  # embedding rows the drifted copy re-learns (new chat-template tokens, say)
SEED = 20261130
NAMES = {"k2": "k2-fp8", "k25": "k25-int4"}


def _layer_shapes(i: int) -> dict[str, tuple[int, int]]:
    p = f"layers.{i}."
    s = {p + "self_attn.q_a_proj.weight": (Q_LORA, HIDDEN), p + "self_attn.q_b_proj.weight": (HEAD_OUT, Q_LORA),
         p + "self_attn.kv_a_proj_with_mqa.weight": (KV_LORA, HIDDEN),
         p + "self_attn.kv_b_proj.weight": (HEAD_OUT, KV_LORA), p + "self_attn.o_proj.weight": (HIDDEN, HEAD_OUT)}
    if i == 0:
        s.update({p + f"mlp.{n}_proj.weight": sh for n, sh in
                  (("gate", (DENSE_INTER, HIDDEN)), ("up", (DENSE_INTER, HIDDEN)), ("down", (HIDDEN, DENSE_INTER)))})
        return s
    for e in [f"experts.{j}" for j in range(EXPERTS)] + ["shared_experts"]:
        s.update({p + f"mlp.{e}.gate_proj.weight": (MOE_INTER, HIDDEN),
                  p + f"mlp.{e}.up_proj.weight": (MOE_INTER, HIDDEN),
                  p + f"mlp.{e}.down_proj.weight": (HIDDEN, MOE_INTER)})
    return s


def _drift_scale(name: str) -> float:
    """Relative drift of K2.5 over K2 by tensor: grows with depth, routed experts move most."""
    if not name.startswith("layers."):
        return 0.05
    depth = int(name.split(".")[1]) / (LAYERS - 1)
    base = 0.02 + 0.25 * depth
    return base * (2.0 if ".experts." in name else 1.0)


def target_tensors(gen) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(K2 bf16-valued float32 weights, K2.5's, the ids of the moved embedding rows), aligned names."""
    import torch

    a: dict[str, Any] = {"embed_tokens.weight": torch.randn(VOCAB, HIDDEN, generator=gen) * 0.02,
                         "lm_head.weight": torch.randn(VOCAB, HIDDEN, generator=gen) * 0.02,
                         "norm.weight": 1 + 0.05 * torch.randn(HIDDEN, generator=gen)}
    for i in range(LAYERS):
        for name, shape in _layer_shapes(i).items():
            a[name] = torch.randn(*shape, generator=gen) * 0.02
        p = f"layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attn.q_a_layernorm", "self_attn.kv_a_layernorm"):
            width = {"self_attn.q_a_layernorm": Q_LORA, "self_attn.kv_a_layernorm": KV_LORA}.get(n, HIDDEN)
            a[p + n + ".weight"] = 1 + 0.05 * torch.randn(width, generator=gen)
        if i > 0:
            a[p + "mlp.gate.weight"] = torch.randn(EXPERTS, HIDDEN, generator=gen) * 0.02
    a = {k: v.to(torch.bfloat16).float() for k, v in a.items()}  # bf16 values: unchanged rows stay equal
    b = {}
    moved = torch.randperm(VOCAB, generator=gen)[:MOVED_TOKENS].sort().values
    for k, v in a.items():
        if k == "embed_tokens.weight":
            w = v.clone()
            w[moved] = torch.randn(MOVED_TOKENS, HIDDEN, generator=gen) * 0.02
        else:
            w = v + torch.randn(v.shape, generator=gen) * v.std() * _drift_scale(k)
        b[k] = w.to(torch.bfloat16).float()
    return a, b, moved


def _fp8_block(w, block: int = 128) -> tuple[Any, Any]:
    """(F8_E4M3 weight, float32 weight_scale_inv) with per-block amax / 448 scales, as DeepSeek-V3 ships."""
    import torch

    rows, cols = w.shape
    nb_r, nb_c = -(-rows // block), -(-cols // block)
    pad = torch.zeros(nb_r * block, nb_c * block)
    pad[:rows, :cols] = w
    amax = pad.view(nb_r, block, nb_c, block).abs().amax(dim=(1, 3)).clamp(min=1e-12)  # (nb_r, nb_c)
    scale = amax / 448.0
    expanded = scale.repeat_interleave(block, 0)[:rows].repeat_interleave(block, 1)[:, :cols]
    return (w / expanded).to(torch.float8_e4m3fn), scale.float()


def _int4_pack(w, group: int = GROUP) -> dict[str, Any]:
    """compressed-tensors pack-quantized INT4, symmetric per group: weight_packed, weight_scale, weight_shape."""
    import numpy as np
    import torch

    rows, cols = w.shape
    x = w.numpy().reshape(rows, cols // group, group)
    scale = torch.from_numpy(np.maximum(np.abs(x).max(-1) / 7.0, 1e-12)).to(torch.bfloat16)  # (rows, groups)
    q = np.clip(np.rint(x / scale.float().numpy()[..., None]), -8, 7).reshape(rows, cols).astype(np.int64)
    u = (q + 8).astype(np.uint32)
    words = -(-cols // 8)
    if words * 8 != cols:
        u = np.pad(u, ((0, 0), (0, words * 8 - cols)))
    packed = (u.reshape(rows, words, 8) << (np.arange(8, dtype=np.uint32) * 4)).sum(-1, dtype=np.uint32)
    return {"weight_packed": torch.from_numpy(packed.view(np.int32).copy()), "weight_scale": scale,
            "weight_shape": torch.tensor([rows, cols], dtype=torch.int64)}


def _quantised(name: str, w) -> bool:
    return name.startswith("layers.") and w.dim() == 2 and ".mlp.gate." not in name and "norm" not in name


def _configs(text: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """K2's config (FP8 blocks) and K2.5's (``text_config`` + compressed-tensors INT4) around one text config."""
    if text is None:
        text = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "num_hidden_layers": LAYERS,
                "hidden_size": HIDDEN, "vocab_size": VOCAB, "n_routed_experts": EXPERTS, "n_shared_experts": 1,
                "moe_intermediate_size": MOE_INTER, "intermediate_size": DENSE_INTER, "first_k_dense_replace": 1,
                "q_lora_rank": Q_LORA, "kv_lora_rank": KV_LORA, "eaglekit_demo": LABEL}
    k2 = {**text, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                          "weight_block_size": [128, 128]}}
    k25 = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "text_config": text,
           "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                   "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                       "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                                       "group_size": GROUP}}},
                                   "ignore": ["lm_head", "re:.*mlp.gate$", "re:vision_tower.*"]},
           "eaglekit_demo": text.get("eaglekit_demo", LABEL)}
    return {"k2": k2, "k25": k25}


def _save(folder: Path, tensors: dict[str, Any], config: dict[str, Any], shards: int) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": "pt", "eaglekit_demo": LABEL}
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: tensors[k].contiguous() for k in names[s::shards]}
        weight_map.update({k: fname for k in part})
        save_file(part, str(folder / fname), metadata=meta)
    index = {"metadata": {}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def write_target_forms(folder: Path, a: dict[str, Any], b: dict[str, Any], text: dict[str, Any] | None = None,
                       *, seed: int = SEED) -> dict[str, str]:
    """Write K2's weights ``a`` as Kimi-K2 ships (``model.`` names, FP8 with 128x128 block scales, 2 shards)
    and K2.5's ``b`` as Kimi-K2.5 ships (``language_model.``, compressed-tensors INT4 group 32, a vision
    tower, 3 shards) under ``folder``. Names in ``a``/``b`` are without ``model.`` (``layers.0...``,
    ``embed_tokens.weight``, ``lm_head.weight``); float32 values. Returns {"k2": path, "k25": path}
    relative to ``folder``'s parent."""
    import torch

    cfg = _configs(text)
    hidden = int(cfg["k2"]["hidden_size"])
    k2: dict[str, Any] = {}
    for name, w in a.items():
        full = f"model.{name}" if name != "lm_head.weight" else name
        if _quantised(name, w):
            k2[full], k2[full + "_scale_inv"] = _fp8_block(w)
        else:
            k2[full] = w.to(torch.bfloat16)
    gen = torch.Generator().manual_seed(seed)
    k25: dict[str, Any] = {"vision_tower.patch_embed.proj.weight": (torch.randn(hidden, 48, generator=gen) * 0.02)
                           .to(torch.bfloat16)}
    for name, w in b.items():
        full = f"language_model.model.{name}" if name != "lm_head.weight" else f"language_model.{name}"
        if _quantised(name, w):
            module = full[:-len(".weight")]
            k25.update({f"{module}.{k}": v for k, v in _int4_pack(w).items()})
        else:
            k25[full] = w.to(torch.bfloat16)
    _save(folder / NAMES["k2"], k2, cfg["k2"], shards=2)
    _save(folder / NAMES["k25"], k25, cfg["k25"], shards=3)
    return {k: f"{folder.name}/{NAMES[k]}" for k in ("k2", "k25")}


def build_targets(root: Path) -> dict[str, Any]:
    """Write both planted-drift targets under ``root / "target-weights"`` and their synthetic dumps under
    ``root / "hidden-states"``; returns what was built (paths relative to ``root``, the planted figures)."""
    import torch

    def weights(folder: Path) -> None:
        a, b, _ = target_tensors(torch.Generator().manual_seed(SEED))
        write_target_forms(folder, a, b, seed=SEED + 1)

    built_once(Path(root) / "target-weights", {"planted-targets": 1}, weights, what="planted-drift target folder")
    paths = {k: f"target-weights/{NAMES[k]}" for k in ("k2", "k25")}
    dumps = build_dumps(root)
    return {**paths, "dumps": dumps, "moved_embedding_rows": MOVED_TOKENS, "hidden": HIDDEN, "layers": LAYERS,
            "experts": EXPERTS}


#: Hidden-state indices the demo dumps hold: outputs of layers 2, 30 and 58 (the demo drafter's aux ids
#: as SGLang reads them), and the final-normed output.
DUMP_LAYERS = (3, 31, 59, 61)


def build_dumps(root: Path, *, samples: int = 6, prompt_len: int = 16, new_tokens: int = 24) -> dict[str, str]:
    """Two SYNTHETIC hidden-state dumps of the same prompts, one per demo target (no model is run).

    K2's states are a token embedding plus a running context; K2.5's are K2's turned by a rotation and
    noised, both growing with depth, so cosine falls with depth while linear CKA (blind to rotations)
    falls less. K2.5's greedy continuation leaves K2's after a few tokens in some prompts."""
    out = {name: str(Path("hidden-states") / name) for name in ("k2", "k25")}
    built_once(Path(root) / "hidden-states", {"planted-dumps": [samples, prompt_len, new_tokens]},
               lambda folder: _write_dumps(folder, samples, prompt_len, new_tokens), what="planted-drift dump folder")
    return out


def _write_dumps(folder: Path, samples: int, prompt_len: int, new_tokens: int) -> None:
    import numpy as np

    rng = np.random.default_rng(SEED)
    emb = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32)
    turn = {k: _rotation(rng, 0.05 + 0.6 * k / LAYERS) for k in DUMP_LAYERS}
    noise = {k: 0.05 + 0.4 * k / LAYERS for k in DUMP_LAYERS}
    records: dict[str, list] = {"k2": [], "k25": []}
    for _ in range(samples):
        ids_a = rng.integers(0, VOCAB, prompt_len + new_tokens)
        ids_b = ids_a.copy()
        split = prompt_len + int(rng.integers(2, new_tokens + 1))
        ids_b[split:] = rng.integers(0, VOCAB, len(ids_b) - split)
        for name, ids in (("k2", ids_a), ("k25", ids_b)):
            x = emb[ids]
            ctx = np.cumsum(x, axis=0) / np.arange(1, len(ids) + 1)[:, None]
            states = []
            for k in DUMP_LAYERS:
                h = x + (k / LAYERS) * 2 * ctx  # (T, H)
                if name == "k25":
                    h = h @ turn[k] + noise[k] * rng.standard_normal(h.shape)
                states.append(h)
            hs = np.stack(states).astype(np.float32)  # (layers, T, H)
            records[name].append(DumpSample(ids.astype(np.int64), hs, np.roll(ids, -1).astype(np.int64), prompt_len))
    for name in ("k2", "k25"):
        manifest = DumpManifest(target=f"demo {NAMES[name]} (synthetic states)", hidden_size=HIDDEN,
                                num_hidden_layers=LAYERS, vocab_size=VOCAB, layers=DUMP_LAYERS, samples=samples,
                                dtype="bfloat16")
        write_dump(folder / name, manifest, records[name])


def _rotation(rng, angle: float):
    """An orthogonal [H, H] matrix about ``angle`` away from the identity: the polar factor of a
    second-order expansion of exp(angle x skew)."""
    import numpy as np

    g = rng.standard_normal((HIDDEN, HIDDEN))
    skew = (g - g.T) / np.sqrt(2 * HIDDEN)
    u, _, vt = np.linalg.svd(np.eye(HIDDEN) + angle * skew + 0.5 * angle ** 2 * skew @ skew)
    return (u @ vt).astype(np.float32)
