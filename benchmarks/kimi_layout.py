"""Real-scale Kimi-K2 EAGLE-3 drafter layout (docs/domain.md shapes), written as sparse safetensors files.

A sparse file has a real header and a data section of holes: perfect for header benchmarks (no 2.4 GB
written to disk) and still a valid safetensors file that safetensors itself loads (as zeros).
"""

from __future__ import annotations

import json
from pathlib import Path

from eaglekit.core.checkpoint.header import encode_header

H, I, QKV, VOCAB, DRAFT = 7168, 18432, 8192, 163840, 32000

KIMI_K2_TENSORS = {
    "d2t": ("I64", [DRAFT]),
    "t2d": ("BOOL", [VOCAB]),
    "fc.weight": ("BF16", [H, 3 * H]),
    "lm_head.weight": ("BF16", [DRAFT, H]),
    "midlayer.hidden_norm.weight": ("BF16", [H]),
    "midlayer.input_layernorm.weight": ("BF16", [H]),
    "midlayer.post_attention_layernorm.weight": ("BF16", [H]),
    "midlayer.self_attn.q_proj.weight": ("BF16", [QKV, 2 * H]),
    "midlayer.self_attn.k_proj.weight": ("BF16", [QKV, 2 * H]),
    "midlayer.self_attn.v_proj.weight": ("BF16", [QKV, 2 * H]),
    "midlayer.self_attn.o_proj.weight": ("BF16", [H, QKV]),
    "midlayer.mlp.gate_proj.weight": ("BF16", [I, H]),
    "midlayer.mlp.up_proj.weight": ("BF16", [I, H]),
    "midlayer.mlp.down_proj.weight": ("BF16", [H, I]),
    "norm.weight": ("BF16", [H]),
}


def write_sparse(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """Write a valid safetensors file whose data section is a hole; returns its size."""
    head, offsets = encode_header(tensors, metadata={"format": "pt", "note": "sparse benchmark file"})
    size = len(head) + max((end for _, end in offsets.values()), default=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return size


def write_sharded(folder: Path, tensors: dict[str, tuple[str, list[int]]], shards: int) -> None:
    """Split the layout over ``shards`` files (big matrices cut by rows) with an index."""
    pieces: dict[str, tuple[str, list[int]]] = {}
    for name, (dtype, shape) in tensors.items():
        if len(shape) == 2 and shape[0] >= 8192:
            k = 16
            for j in range(k):
                pieces[f"{name}.part{j}"] = (dtype, [shape[0] // k, shape[1]])
        else:
            pieces[name] = (dtype, shape)
    names = sorted(pieces)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: pieces[n] for n in names[s::shards]}
        write_sparse(folder / fname, part)
        weight_map.update({n: fname for n in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
