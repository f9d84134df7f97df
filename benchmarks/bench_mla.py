"""Benchmark: a Kimi-sized MLA + MoE EAGLE-3 drafter on CPU, memory bounded, and the MLA pass's FLOP rate.

1. ``moe``: a checkpoint in the shapes of TorchSpec's ``kimi_k25_eagle3_moe`` (hidden 7168, 64 heads, MLA
   ranks 1536/512, head dims 128 + 64 rope / 128 values, YaRN factor 64; 384 routed experts of 2048, 8 a
   token, one shared expert, fused as TorchSpec stores them; a full 163,840-row head and embedding, no
   d2t/t2d) is written to a temporary folder: the attention, fc, head and embedding with random bf16
   values, the 33.8 GB of routed experts as a sparse hole (zeros, no disk blocks: the router still spreads
   every position over its 8 experts and each expert's bytes are still read and multiplied). The drafter
   is loaded with ``DraftModel.load`` (experts, head and embedding stay in the checkpoint, read by range
   when a pass uses them) and drafts K steps from every position of a synthetic hidden-state sequence,
   the work an accept length from a dump does on the drafter's side. Then the dump path's other large term:
   a Kimi-sized target head (``lm_head`` [163840, 7168], 2.3 GB of random bf16, and the final norm) is
   written beside it and read with ``read_target_head`` as ``eaglekit acceptance --hidden-states`` reads it
   (past ``KEEP_HEAD`` it is streamed in row blocks, never held), and gives the target's next token at every
   position. Printed: positions per second, peak RSS of the process after each stage.
2. ``flops``: the MLA attention's projections and attention on T positions (float32), its FLOP rate
   against plain torch matmuls of the same shapes, measured in the same run.

    python benchmarks/bench_mla.py                         # both parts (~40 GB of sparse file, ~1 GB written)
    python benchmarks/bench_mla.py --part flops --positions 512
    python benchmarks/bench_mla.py --part moe --positions 128 --steps 3 --dir /tmp
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import struct
import tempfile
import time
from pathlib import Path

import torch

from eaglekit.analysis.acceptance.head import read_target_head
from eaglekit.analysis.draft import DraftModel

H, HEADS, QR, KVR, NOPE, ROPE, VD = 7168, 64, 1536, 512, 128, 64, 128
E, TOPK, MI, VOCAB, N_AUX = 384, 8, 2048, 163840, 3
QK = NOPE + ROPE


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def config() -> dict:
    return {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": H,
            "intermediate_size": 18432, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
            "num_hidden_layers": 1, "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "q_lora_rank": QR,
            "kv_lora_rank": KVR, "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE, "v_head_dim": VD,
            "rope_theta": 50000.0, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
            "rope_scaling": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                             "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
            "use_moe": True, "n_routed_experts": E, "num_experts_per_tok": TOPK, "moe_intermediate_size": MI,
            "n_shared_experts": 1, "scoring_func": "sigmoid", "norm_topk_prob": True,
            "routed_scaling_factor": 2.827, "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}


def shapes() -> dict[str, tuple[int, ...]]:
    p, a = "midlayer.", "midlayer.self_attn."
    return {"fc.weight": (H, N_AUX * H), "embed_tokens.weight": (VOCAB, H), "lm_head.weight": (VOCAB, H),
            "norm.weight": (H,), p + "hidden_norm.weight": (H,), p + "input_layernorm.weight": (H,),
            p + "post_attention_layernorm.weight": (H,), a + "q_a_proj.weight": (QR, 2 * H),
            a + "q_a_layernorm.weight": (QR,), a + "q_b_proj.weight": (HEADS * QK, QR),
            a + "kv_a_proj_with_mqa.weight": (KVR + ROPE, 2 * H), a + "kv_a_layernorm.weight": (KVR,),
            a + "kv_b_proj.weight": (HEADS * (NOPE + VD), KVR), a + "o_proj.weight": (H, HEADS * VD),
            p + "mlp.gate.weight": (E, H), p + "mlp.gate.e_score_correction_bias": (E,),
            p + "mlp.shared_experts.gate_proj.weight": (MI, H), p + "mlp.shared_experts.up_proj.weight": (MI, H),
            p + "mlp.shared_experts.down_proj.weight": (H, MI),
            p + "mlp.experts.gate_up_proj": (E, H, 2 * MI), p + "mlp.experts.down_proj": (E, MI, H)}


def safetensors_header(entries: list[tuple[str, str, tuple[int, ...]]]) -> tuple[bytes, int]:
    """The padded JSON header of (name, dtype, shape) tensors laid out in order, and their bytes in all."""
    header, offset = {}, 0
    for n, dtype, shape in entries:
        size = math.prod(shape) * (4 if dtype == "F32" else 2)
        header[n] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    return raw + b" " * (-len(raw) % 8), offset


def write_checkpoint(folder: Path) -> None:
    """One safetensors file: every tensor but the routed experts written in 64 MiB chunks of random bf16
    values; the experts (last in the file) left as a sparse hole of zeros."""
    names = sorted(shapes(), key=lambda n: "experts." in n)
    raw, offset = safetensors_header([(n, "F32" if n.endswith("bias") else "BF16", shapes()[n]) for n in names])
    g = torch.Generator().manual_seed(0)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for n in names:
            if "experts." in n and "shared" not in n:
                break
            shape = shapes()[n]
            count = 1
            for d in shape:
                count *= d
            if n.endswith("bias"):
                f.write((torch.randn(count, generator=g) * 0.01).numpy().tobytes())
                continue
            scale = 1.0 if len(shape) == 1 else shape[-1] ** -0.5
            left = count
            while left:
                m = min(left, 32 << 20)
                chunk = torch.randn(m, generator=g) * scale + (1.0 if len(shape) == 1 else 0.0)
                f.write(chunk.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
                left -= m
        f.truncate(8 + len(raw) + offset)
    (folder / "config.json").write_text(json.dumps(config()))


def part_moe(args) -> None:
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        write_checkpoint(folder)
        print(f"moe: a Kimi-sized MLA + MoE drafter written in {time.perf_counter() - t0:.0f} s "
              f"({(folder / 'model.safetensors').stat().st_size / 2**30:.1f} GiB, experts sparse)")
        before = peak_rss_mib()
        with DraftModel.load(folder, dtype=args.dtype) as model:
            print(f"  loaded: families {model.families}, full vocabulary {model.full_vocabulary}, head kept "
                  f"{model.head.weight is not None}; peak RSS {peak_rss_mib():,.0f} MiB (before load {before:,.0f})")
            g = torch.Generator().manual_seed(1)
            T = args.positions
            aux = torch.randn(N_AUX, T, H, generator=g)
            ids = torch.randint(0, VOCAB, (T,), generator=g)
            t0 = time.perf_counter()
            out = model.draft(model.project(aux), ids, args.steps)
            dt = time.perf_counter() - t0
        print(f"  {T} positions x K = {args.steps}: {dt:.1f} s, {T / dt:.2f} positions/s "
              f"(drafts {tuple(out.tokens.shape)}); peak RSS {peak_rss_mib():,.0f} MiB")
        target = folder / "target"
        target.mkdir()
        t0 = time.perf_counter()
        write_target_head(target)
        print(f"  a Kimi-sized target head written in {time.perf_counter() - t0:.0f} s "
              f"({(target / 'model.safetensors').stat().st_size / 2**30:.2f} GiB)")
        head = read_target_head(target, dtype=getattr(torch, args.dtype))
        try:
            final = torch.randn(T, H, generator=torch.Generator().manual_seed(2))
            t0 = time.perf_counter()
            nxt, _ = head.next_tokens(final, normed=False)
            dt = time.perf_counter() - t0
        finally:
            head.close()
        print(f"  target head streamed {head.streamed}: next tokens of {T} positions in {dt:.1f} s "
              f"({len(set(nxt.tolist()))} distinct); peak RSS of the whole dump path {peak_rss_mib():,.0f} MiB")


def write_target_head(folder: Path) -> None:
    """A target checkpoint holding only what the dump path reads: ``lm_head`` (random bf16, written in chunks) and
    the final norm, with its config."""
    shapes_ = {"lm_head.weight": (VOCAB, H), "model.norm.weight": (H,)}
    raw, _ = safetensors_header([(n, "BF16", shape) for n, shape in shapes_.items()])
    g = torch.Generator().manual_seed(3)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for n, shape in shapes_.items():
            left = math.prod(shape)
            while left:
                m = min(left, 32 << 20)
                chunk = torch.randn(m, generator=g) * (H ** -0.5) if len(shape) == 2 else torch.ones(m)
                f.write(chunk.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
                left -= m
    (folder / "config.json").write_text(json.dumps({"model_type": "kimi_k2", "vocab_size": VOCAB, "hidden_size": H,
                                                    "rms_norm_eps": 1e-6, "num_hidden_layers": 61}))


def part_flops(args) -> None:
    """The MLA attention pass against plain matmuls of the same shapes (float32, T positions)."""
    from eaglekit.analysis.draft.mla_attention import MLAAttention
    from eaglekit.analysis.draft.weights import Weights
    from eaglekit.core.configs.config import normalize_config

    cfg = normalize_config(config())
    g = torch.Generator().manual_seed(2)
    a = "midlayer.self_attn."
    t = {n: torch.randn(*s, generator=g) * (s[-1] ** -0.5 if len(s) > 1 else 1.0) for n, s in shapes().items()
         if n.startswith(a)}
    attn = MLAAttention(cfg, Weights(t, device=torch.device("cpu"), dtype=torch.float32), "midlayer.")
    T = args.positions
    x = torch.randn(T, 2 * H, generator=g)
    pos = torch.arange(T)
    mats = [t[a + n] for n in ("q_a_proj.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight",
                               "kv_b_proj.weight", "o_proj.weight")]
    proj = sum(2 * T * w.shape[0] * w.shape[1] for w in mats)
    att = 2 * 2 * HEADS * T * T * (QK + VD) // 2          # causal scores and values: half of the T x T
    flops = proj + att

    def mla():
        q, k, v = attn.entries(x, pos)
        s = (q @ k.transpose(1, 2)) * attn.scale
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return attn.output(torch.softmax(s, -1) @ v)

    inputs = [torch.randn(T, w.shape[1], generator=g) for w in mats]
    qh, kh, vh = (torch.randn(HEADS, T, d, generator=g) for d in (QK, QK, VD))

    def plain():
        for xi, w in zip(inputs, mats):
            xi @ w.T
        (qh @ kh.transpose(1, 2)) @ vh

    plain_flops = proj + 2 * 2 * HEADS * T * T * (QK + VD) // 2 * 2   # plain does the full T x T

    def best(fn):
        fn()
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    t_mla, t_plain = best(mla), best(plain)
    r_mla, r_plain = flops / t_mla / 1e9, plain_flops / t_plain / 1e9
    print(f"flops: MLA attention on {T} positions: {flops / 1e9:.1f} GFLOP in {t_mla * 1e3:.0f} ms = {r_mla:.1f} GFLOP/s; "
          f"plain matmuls of the same shapes {r_plain:.1f} GFLOP/s; ratio {r_mla / r_plain:.2f} "
          f"({torch.get_num_threads()} threads)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("moe", "flops", "all"), default="all")
    ap.add_argument("--positions", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the temporary checkpoint goes")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.part in ("flops", "all"):
        part_flops(args)
    if args.part in ("moe", "all"):
        part_moe(args)


if __name__ == "__main__":
    main()
