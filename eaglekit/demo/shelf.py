"""The demo Hub's search shelf: drafters named every which way, look-alikes, and broken uploads.

``eaglekit.find_drafters`` must decide by config, not by name (docs/domain.md, "Finding drafters on
the Hub"). These repos, added beside the demo's own drafters, are what it decides on:

- EAGLE-3 drafters in every naming pattern and format: ``EAGLE3-*`` and ``sglang-EAGLE3-*`` (SpecForge
  configs), ``*-Eagle3`` (NVIDIA), ``*_eagle3`` (AngelSlim, the ``Eagle3LlamaForCausalLM`` alias),
  ``*-speculator.eagle3`` (vllm-project/speculators, tags speculators/eagle3), ``*-eagle3-mla``
  (``Eagle3DeepseekV2ForCausalLM``), and ``draft-head-v2``: a K2 drafter re-uploaded under a name no
  search for "eagle" finds. Targets: Kimi-K2, Llama-3.1-8B, Llama-3.3-70B and Qwen3-8B.
- Look-alikes a name filter would keep: ``Llama-3.1-8B-Instruct-EAGLE3`` holding a plain
  ``LlamaForCausalLM`` config, RWKV's ``Eagle-7B`` and ``EagleX-7B``, NVIDIA's ``Eagle2-1B`` VLM.
- Broken uploads: a drafter whose config.json is cut off mid-object, and one with no config.json.
- ``cardData.base_model`` that points at another drafter (as it sometimes does on the Hub).
- Target configs ``demo-meta-llama/Llama-3.1-8B-Instruct`` and ``demo-Qwen/Qwen3-8B``.

Everything keeps the demo's 1/16 scale (hidden 4096 -> 256, Kimi 7168 -> 448; Llama vocab
128256 -> 8016, Qwen 151936 -> 9496, Kimi 163840 -> 10240; layer counts unscaled). The Kimi-K2 and
Llama-3.1-8B drafters hard-link the demo's own weights (no extra disk). The others get a valid
safetensors file whose big matrices are zeros left as a sparse-file hole: real headers (so parameter
counts show and ``inspect``/``compat`` work), a valid d2t/t2d, norms of 1, a few kB on disk. Their
weights carry no signal: use them for search and inspection, not for similarity.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eaglekit.demo.spec import DRAFT_VOCAB, HEAD_DIM, LABEL, VOCAB, specforge_config, speculators_config
from eaglekit.demo.spec import H as KIMI_H
from eaglekit.demo.spec import I as KIMI_I
from eaglekit.core.checkpoint.header import encode_header
from eaglekit.core.tokens.vocab import build_vocab_map
from eaglekit.demo.build import build_lock, built_beside
from eaglekit.demo.hubserver import HubServer
from eaglekit.io.write import write_atomic

#: Bumped when the shelf changes; a workspace holding an older shelf gets it rebuilt.
SHELF_VERSION = 1
_MARKER = ".eaglekit-search-shelf.json"
_DTYPE_BYTES = {"BF16": 2, "I64": 8, "BOOL": 1}
LLAMA_VOCAB, QWEN_VOCAB = 8016, 9496
_LLAMA_IDS = {"bos_token_id": 128000, "eos_token_id": 128009}

#: (downloads, likes, last modified) for the demo's own repos, so ranking has something to rank.
_OWN_STATS = {
    "demo-aqmed/Kimi-K2-Instruct-eagle3": (5210, 61, "2025-08-12"),
    "demo-aqmed/Kimi-K2-Instruct-eagle3-sharded": (312, 2, "2025-08-12"),
    "demo-redhat/Kimi-K2-Instruct-speculator.eagle3": (1830, 9, "2025-09-30"),
    "demo-team/Kimi-K2.5-eagle3-finetuned": (14, 0, "2026-02-03"),
    "demo-team/Kimi-K2.5-eagle3-scratch": (9, 0, "2026-01-20"), "demo-lab/Llama-small-EAGLE3": (48, 1, "2025-05-05"),
    "demo-moonshot/Kimi-K2-Instruct": (402113, 2210, "2025-07-11"),
    "demo-moonshot/Kimi-K2.5": (188004, 930, "2026-01-27"),
}


def _meta(downloads: int, likes: int, updated: str, *, tags=(), base_model: str | None = None,
          library: str | None = "transformers") -> dict[str, Any]:
    card: dict[str, Any] = {"tags": ["synthetic", *tags], "license": "apache-2.0"}
    if base_model:
        card["base_model"] = base_model
    return {"tags": ["eaglekit-demo", "synthetic", *tags], "downloads": downloads, "likes": likes,
            "lastModified": f"{updated}T12:00:00.000Z", "createdAt": f"{updated}T09:00:00.000Z",
            "library_name": library, "cardData": card}


def _llama_target(hidden: int, inter: int, heads: int, layers: int, vocab: int, arch: str, model_type: str) -> dict:
    return {"architectures": [arch], "model_type": model_type, "hidden_size": hidden, "intermediate_size": inter,
            "num_attention_heads": heads, "num_key_value_heads": heads, "num_hidden_layers": layers,
            "vocab_size": vocab, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
            "eaglekit_demo": LABEL}


def _drafter_shapes(cfg: Mapping[str, Any], *, mla: bool = False) -> dict[str, list[int]]:
    """Tensor shapes of an EAGLE-3 drafter for ``cfg`` (docs/domain.md "Checkpoint layout"; MLA attention
    as NVIDIA Model-Optimizer exports it), without embed_tokens (frozen, taken from the target)."""
    h, inter, heads = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"]
    th = cfg.get("target_hidden_size") or h
    p = "midlayer."
    shapes = {"fc.weight": [h, 3 * th]}
    if mla:
        q_lora, kv_lora = cfg["q_lora_rank"], cfg["kv_lora_rank"]
        nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        shapes.update({
            p + "self_attn.q_a_proj.weight": [q_lora, 2 * h], p + "self_attn.q_a_layernorm.weight": [q_lora],
            p + "self_attn.q_b_proj.weight": [heads * (nope + rope), q_lora],
            p + "self_attn.kv_a_proj_with_mqa.weight": [kv_lora + rope, 2 * h],
            p + "self_attn.kv_a_layernorm.weight": [kv_lora],
            p + "self_attn.kv_b_proj.weight": [heads * (nope + v), kv_lora],
            p + "self_attn.o_proj.weight": [h, heads * v]})
    else:
        qkv, kv = heads * cfg["head_dim"], cfg.get("num_key_value_heads", heads) * cfg["head_dim"]
        shapes.update({p + "self_attn.q_proj.weight": [qkv, 2 * h], p + "self_attn.k_proj.weight": [kv, 2 * h],
                       p + "self_attn.v_proj.weight": [kv, 2 * h], p + "self_attn.o_proj.weight": [h, qkv]})
    shapes.update({p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                   p + "mlp.down_proj.weight": [h, inter]})
    for name in ("hidden_norm", "input_layernorm", "post_attention_layernorm"):
        shapes[p + name + ".weight"] = [h]
    shapes["norm.weight"] = [h]
    shapes["lm_head.weight"] = [cfg.get("draft_vocab_size", DRAFT_VOCAB), h]
    return shapes


def write_sparse_safetensors(path: Path, shapes: Mapping[str, list[int]], data: Mapping[str, tuple[str, bytes]],
                             *, metadata: Mapping[str, str]) -> None:
    """A valid safetensors file: BF16 ``shapes`` left as zeros (a hole: no disk blocks), norms (names
    ending ``norm.weight``) set to 1.0, and ``data`` (name -> (dtype, bytes)) written as given."""

    specs = {name: ("BF16", shape) for name, shape in shapes.items()}
    specs.update({name: (dtype, [len(raw) // _DTYPE_BYTES[dtype]]) for name, (dtype, raw) in data.items()})
    head, offsets = encode_header(specs, metadata=metadata)
    with open(path, "wb") as f:
        f.write(head)
        for name, (begin, end) in offsets.items():
            raw = data[name][1] if name in data else None
            if raw is None and name.endswith("norm.weight"):
                raw = b"\x80\x3f" * ((end - begin) // 2)  # bfloat16 1.0: a fresh RMSNorm
            if raw is not None:
                f.seek(len(head) + begin)
                f.write(raw)
        f.truncate(len(head) + max((end for _, end in offsets.values()), default=0))


def _vocab_map(seed: int, draft_vocab: int, vocab: int) -> dict[str, tuple[str, bytes]]:
    import numpy as np


    ids = np.random.default_rng(seed).permutation(vocab)[:draft_vocab]
    d2t, t2d = build_vocab_map(ids, vocab)
    return {"d2t": ("I64", d2t.astype("<i8").tobytes()), "t2d": ("BOOL", t2d.astype(bool).tobytes())}


def _speculators_names(shapes: Mapping[str, list[int]]) -> dict[str, list[int]]:
    return {k.replace("midlayer.", "layers.0."): v for k, v in shapes.items()}


def _shelf(demo_root: Path) -> dict[str, dict[str, Any]]:
    """repo id -> {"config": dict | bytes | None, "weights": a file to hard-link | (shapes, vocab) | None,
    "meta": the .hub.json}."""
    llama8b = {**specforge_config(hidden=256, inter=704, heads=2, vocab=LLAMA_VOCAB, draft_vocab=1000),
               "model_type": "llama", "rope_theta": 500000.0, **_LLAMA_IDS}
    yuhuili = {k: v for k, v in llama8b.items() if k != "eagle_config"}  # aux ids left to the engine default
    lmsys = {**llama8b, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 16, 29], "use_aux_hidden_state": True}}
    nvidia = {**specforge_config(hidden=512, inter=1792, heads=4, vocab=LLAMA_VOCAB, draft_vocab=DRAFT_VOCAB),
              "model_type": "llama", "rope_theta": 500000.0, "num_key_value_heads": 1, **_LLAMA_IDS,
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 40, 77], "use_aux_hidden_state": True}}
    angel = {**specforge_config(hidden=256, inter=768, heads=2, vocab=QWEN_VOCAB, draft_vocab=DRAFT_VOCAB),
             "architectures": ["Eagle3LlamaForCausalLM"], "model_type": "llama", "bos_token_id": 151643,
             "eos_token_id": 151645, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 18, 33]}}
    redhat = speculators_config({**angel, "rope_theta": 1000000.0})
    redhat["eagle_aux_hidden_state_layer_ids"] = [2, 18, 33]
    redhat["speculators_config"]["verifier"] = {"name_or_path": "demo-Qwen/Qwen3-8B",
                                                "architectures": ["Qwen3ForCausalLM"]}
    mla = {**specforge_config(hidden=KIMI_H, inter=KIMI_I, heads=4), "architectures": ["Eagle3DeepseekV2ForCausalLM"],
           "model_type": "deepseek_v2", "q_lora_rank": 96, "kv_lora_rank": 32, "qk_nope_head_dim": HEAD_DIM,
           "qk_rope_head_dim": 64, "v_head_dim": HEAD_DIM}
    del mla["head_dim"]
    broken = json.dumps(angel, indent=2).encode()[:300]  # an upload cut off mid-object
    k2_file = demo_root / "drafters" / "k2" / "model.safetensors"
    small_file = demo_root / "drafters" / "llama-small" / "model.safetensors"
    eagle_tags = ("eagle3", "speculative-decoding")
    return {
        "demo-yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": dict(
            config=yuhuili, weights=small_file,
            meta=_meta(25310, 44, "2025-03-10", tags=eagle_tags, base_model="demo-meta-llama/Llama-3.1-8B-Instruct")),
        "demo-lmsys/sglang-EAGLE3-Llama-3.1-8B-Instruct": dict(
            config=lmsys, weights=small_file, meta=_meta(48877, 19, "2025-06-02", tags=eagle_tags)),
        "demo-nvidia/Llama-3.3-70B-Instruct-Eagle3": dict(
            config=nvidia, weights=(_drafter_shapes(nvidia), LLAMA_VOCAB), meta=_meta(
                12480, 33, "2025-08-21", tags=("eagle3", "modelopt"), base_model="demo-meta-llama/Llama-3.3-70B-Instruct")),
        "demo-AngelSlim/Qwen3-8B_eagle3": dict(
            config=angel, weights=(_drafter_shapes(angel), QWEN_VOCAB),
            meta=_meta(3120, 12, "2025-07-15", tags=("eagle3",), base_model="demo-RedHatAI/Qwen3-8B-speculator.eagle3")),
        "demo-RedHatAI/Qwen3-8B-speculator.eagle3": dict(
            config=redhat, weights=(_speculators_names(_drafter_shapes(angel)), QWEN_VOCAB), meta=_meta(
                8034, 15, "2025-10-01", tags=("speculators", "eagle3", "speculative-decoding"), library="speculators",
                base_model="demo-Qwen/Qwen3-8B")),
        "demo-lightseekorg/kimi-k2-eagle3-mla": dict(
            config=mla, weights=(_drafter_shapes(mla, mla=True), VOCAB), meta=_meta(905, 7, "2025-11-20", tags=eagle_tags)),
        "demo-someone/draft-head-v2": dict(
            config=specforge_config(), weights=k2_file,
            meta=_meta(150, 1, "2025-12-01", base_model="demo-aqmed/Kimi-K2-Instruct-eagle3")),
        "demo-mirror/Llama-3.1-8B-Instruct-EAGLE3": dict(
            config=_llama_target(256, 896, 2, 32, LLAMA_VOCAB, "LlamaForCausalLM", "llama"), weights=None,
            meta=_meta(77, 0, "2025-04-04", tags=("eagle3",))),
        "demo-rwkv/Eagle-7B": dict(
            config={"architectures": ["Rwkv5ForCausalLM"], "model_type": "rwkv5", "hidden_size": 256,
                    "num_hidden_layers": 32, "vocab_size": 4096, "eaglekit_demo": LABEL},
            weights=None, meta=_meta(22010, 410, "2024-02-01", tags=("rwkv",))),
        "demo-recursal/EagleX-7B": dict(
            config={"architectures": ["Rwkv6ForCausalLM"], "model_type": "rwkv6", "hidden_size": 256,
                    "num_hidden_layers": 32, "vocab_size": 4096, "eaglekit_demo": LABEL},
            weights=None, meta=_meta(1220, 38, "2024-04-18", tags=("rwkv",))),
        "demo-nvidia/Eagle2-1B": dict(
            config={"architectures": ["Eagle2ChatModel"], "model_type": "eagle_chat", "eaglekit_demo": LABEL},
            weights=None, meta=_meta(30500, 120, "2025-01-28", tags=("vision", "multimodal"))),
        "demo-wip/Qwen3-4B-Eagle3": dict(config=broken, weights=None, meta=_meta(3, 0, "2025-09-09", tags=("eagle3",))),
        "demo-wip/Llama-3.1-8B-Instruct-eagle3-upload": dict(
            config=None, weights=(_drafter_shapes(lmsys), LLAMA_VOCAB), meta=_meta(0, 0, "2025-09-10", tags=("eagle3",))),
        "demo-meta-llama/Llama-3.1-8B-Instruct": dict(
            config=_llama_target(256, 896, 2, 32, LLAMA_VOCAB, "LlamaForCausalLM", "llama"), weights=None,
            meta=_meta(5120000, 4300, "2024-12-06", library="transformers")),
        "demo-Qwen/Qwen3-8B": dict(
            config=_llama_target(256, 768, 2, 36, QWEN_VOCAB, "Qwen3ForCausalLM", "qwen3"), weights=None,
            meta=_meta(2210000, 780, "2025-05-21")),
    }


def build_demo_hub_repos(hub_root: str | os.PathLike[str], demo_root: str | os.PathLike[str]) -> list[str]:
    """Add the search shelf to the demo Hub folder ``hub_root`` (``demo_root`` holds the drafters whose
    weights are hard-linked); returns the repo ids written. Idempotent: a current shelf is kept."""
    hub_root, demo_root = Path(hub_root), Path(demo_root)
    marker = hub_root / _MARKER
    shelf = _shelf(demo_root)
    if _current(marker):
        return list(shelf)
    with build_lock(marker):  # one writer at a time; each repo folder is replaced whole, the marker last
        if _current(marker):
            return list(shelf)
        for seed, (repo, spec) in enumerate(shelf.items()):
            folder = hub_root / repo
            folder.parent.mkdir(parents=True, exist_ok=True)
            built_beside(folder, lambda f, seed=seed, spec=spec: _write_repo(f, spec, seed))
        for repo, (downloads, likes, updated) in _OWN_STATS.items():
            path = hub_root / repo / ".hub.json"
            if path.is_file():
                meta = {**json.loads(path.read_text()), "downloads": downloads, "likes": likes,
                        "lastModified": f"{updated}T12:00:00.000Z"}
                write_atomic(path, json.dumps(meta, indent=2) + "\n")
        write_atomic(marker, json.dumps({"version": SHELF_VERSION, "repos": list(shelf)}, indent=2) + "\n")
    return list(shelf)


def _current(marker: Path) -> bool:
    try:
        return json.loads(marker.read_text()).get("version") == SHELF_VERSION
    except (OSError, ValueError, AttributeError):
        return False


def _write_repo(folder: Path, spec: dict[str, Any], seed: int) -> None:
    config = spec["config"]
    if isinstance(config, dict):
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    elif isinstance(config, bytes):
        (folder / "config.json").write_bytes(config)
    weights = spec["weights"]
    if isinstance(weights, Path):
        try:
            os.link(weights, folder / "model.safetensors")
        except OSError:
            shutil.copy2(weights, folder / "model.safetensors")
    elif weights is not None:
        shapes, vocab = weights
        buffers = _vocab_map(seed, shapes["lm_head.weight"][0], vocab)
        write_sparse_safetensors(folder / "model.safetensors", shapes, buffers,
                                 metadata={"format": "pt", "eaglekit_demo": LABEL})
    (folder / ".hub.json").write_text(json.dumps(spec["meta"], indent=2) + "\n")


def serve_demo_hub(ws, **kwargs):
    """Start the Hub-compatible server over a demo workspace's hub folder (adding the search shelf to a
    workspace built before it existed); returns the running :class:`~eaglekit.demo.hubserver.HubServer`.
    ``kwargs`` go to HubServer (``page_size``, ``tokens``...). Stop it with ``.stop()``."""

    build_demo_hub_repos(ws.hub_root, ws.root)
    return HubServer(ws.hub_root, **kwargs).start()
