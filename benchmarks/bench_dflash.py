"""Benchmark: a Kimi-K2.5-sized DFlash block drafter measured from a hidden-state dump on CPU, memory bounded, and
its forward's FLOP rate against plain matmuls of the same shapes.

A DFlash drafter for a Kimi-K2.5 target (hidden 7168, 6 layers, 64 query / 8 KV heads of 128, FFN 18432, 5 target
layers read: fc [7168, 5 x 7168]) is 3.4 B parameters, 6.8 GB in bf16. It is written to a temporary folder as bf16
safetensors (random values: a few random 32 M-value blocks written in turn) with its config, beside a Kimi-sized
target checkpoint holding only what the dump path reads (``lm_head`` and ``embed_tokens`` [163840, 7168] in random
bf16, the final norm) and a small synthetic native hidden-state dump (``--samples`` samples of ``--positions``
positions, 5 aux layers of 7168). Then, in a child process (its peak RSS from ``wait4``: the whole measurement,
imports included), ``measure_acceptance(drafter, hidden_states=dump, embeddings=target, steps=K)``: the drafter's
largest matrices are read from the checkpoint by range in each pass (past ``KEEP_BYTES``), the target head streamed
in row blocks, the embedding read by rows. Printed: positions per second, the peak RSS, and the forward's rate:
linear-layer FLOPs (every projection the drafter ran, counted by shape) over the wall time of its context and
block passes (weights read, attention and norms included), against plain torch matmuls of exactly those shapes
with weights in memory, timed in the same run (bar: ratio >= 0.5).

    python benchmarks/bench_dflash.py                               # 2 samples x 64 positions, K = 3, bf16
    python benchmarks/bench_dflash.py --samples 1 --positions 32 --steps 2 --dir /tmp
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

H, LAYERS, HEADS, KV, D, I, VOCAB, TARGET_LAYERS = 7168, 6, 64, 8, 128, 18432, 163840, 61
TARGET_IDS = (1, 15, 30, 45, 59)      # 5 target layers read (hidden_states[id + 1])
MASK_ID = 163838


def config(block_size: int) -> dict:
    return {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": block_size,
            "dflash_config": {"mask_token_id": MASK_ID, "target_layer_ids": list(TARGET_IDS)},
            "num_target_layers": TARGET_LAYERS, "num_hidden_layers": LAYERS, "hidden_size": H,
            "intermediate_size": I, "head_dim": D, "num_attention_heads": HEADS, "num_key_value_heads": KV,
            "attention_bias": False, "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 50000.0,
            "rope_scaling": None, "max_position_embeddings": 262144, "tie_word_embeddings": False,
            "vocab_size": VOCAB, "note": "benchmark: random weights"}


def drafter_shapes() -> dict[str, tuple[int, ...]]:
    from eaglekit.analysis.draft.block import backbone_shapes
    from eaglekit.core.configs.block import read_block_config

    return {n: s for n, (s, _) in backbone_shapes(read_block_config(config(16))).items()}


def write_safetensors(path: Path, shapes: dict[str, tuple[int, ...]], *, seed: int) -> int:
    """bf16 tensors in name order: vectors near one (norms), matrices random of std 1/sqrt(in), written from a few
    random blocks in turn (random enough for a benchmark, and seconds, not minutes, for 6.8 GB)."""
    header, offset = {}, 0
    for n in sorted(shapes):
        size = math.prod(shapes[n]) * 2
        header[n] = {"dtype": "BF16", "shape": list(shapes[n]), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt", "note": "benchmark: random weights"}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    g = torch.Generator().manual_seed(seed)
    pool = [torch.randn(32 << 20, generator=g) for _ in range(3)]
    turn = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for n in sorted(shapes):
            shape = shapes[n]
            left = math.prod(shape)
            while left:
                m = min(left, 32 << 20)
                chunk = pool[turn % len(pool)][:m]
                turn += 1
                chunk = 1.0 + 0.05 * chunk if len(shape) == 1 else chunk * shape[-1] ** -0.5
                f.write(chunk.to(torch.bfloat16).view(torch.int16).numpy().tobytes())
                left -= m
    return 8 + len(raw) + offset


def write_world(root: Path, args) -> tuple[Path, Path, Path]:
    from eaglekit.io.dumps.native import DumpManifest, DumpSample, write_dump

    drafter, target, dump = root / "drafter", root / "target", root / "dump"
    drafter.mkdir()
    target.mkdir()
    write_safetensors(drafter / "model.safetensors", drafter_shapes(), seed=0)
    (drafter / "config.json").write_text(json.dumps(config(args.block_size)))
    write_safetensors(target / "model.safetensors", {"lm_head.weight": (VOCAB, H), "model.embed_tokens.weight":
                                                     (VOCAB, H), "model.norm.weight": (H,)}, seed=1)
    (target / "config.json").write_text(json.dumps({"model_type": "kimi_k2", "vocab_size": VOCAB, "hidden_size": H,
                                                    "rms_norm_eps": 1e-6, "num_hidden_layers": TARGET_LAYERS}))
    g = np.random.default_rng(2)
    T, prompt = args.positions, 8
    samples = [DumpSample(input_ids=g.integers(0, VOCAB - 2, T), hidden_states=g.standard_normal(
        (len(TARGET_IDS), T, H), dtype=np.float32), target_ids=g.integers(0, VOCAB - 2, T), prompt_len=prompt)
        for _ in range(args.samples)]
    write_dump(dump, DumpManifest(target=str(target), hidden_size=H, num_hidden_layers=TARGET_LAYERS,
                                  vocab_size=VOCAB, layers=tuple(i + 1 for i in TARGET_IDS), samples=len(samples)),
               samples)
    return drafter, target, dump


def child(args) -> None:
    """The measurement, alone in this process: its peak RSS is the parent's wait4 figure."""
    import resource

    from eaglekit.analysis.acceptance.measure import measure_acceptance
    from eaglekit.analysis.draft.dflash import DFlashDrafter

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = DFlashDrafter.load(args.drafter, dtype=args.dtype)
    load_s = time.perf_counter() - t0
    load_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    calls: list = []
    model.on_linear = lambda rows, out, inn: calls.append((rows, out, inn))
    spent = [0.0]

    def timed(fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t
        return run

    model.context, model.forward_many = timed(model.context), timed(model.forward_many)
    t0 = time.perf_counter()
    with model:
        r = measure_acceptance(model, hidden_states=args.dump, embeddings=args.target, steps=args.steps,
                               max_new_tokens=args.positions, dtype=args.dtype, cache=False, progress=False)
    wall = time.perf_counter() - t0
    print(json.dumps({"wall": wall, "forward": spent[0], "positions": r.positions, "load_s": load_s,
                      "load_rss_mib": load_rss, "kept_mib": sum(t.numel() * t.element_size() for t in model.w.values())
                      / 2**20, "read_by_range": len(model.stored), "accept_length": r.accept_length,
                      "threads": torch.get_num_threads(),
                      "calls": calls}))


def plain_seconds(calls, dtype: torch.dtype, repeat: int) -> list[float]:
    """Plain ``F.linear`` of every (rows, out, in) call the drafter made, in its order, each weight in memory
    (made once per shape, outside the clock): the whole replay timed end to end, ``repeat`` times."""
    g = torch.Generator().manual_seed(3)
    weights = {(o, i): (torch.randn(o, i, generator=g) * i ** -0.5).to(dtype) for _, o, i in set(calls)}
    inputs = {(r, i): torch.randn(r, i, generator=g).to(dtype) for r, _, i in set(calls)}
    times = []
    with torch.no_grad():
        for _ in range(repeat):
            t = time.perf_counter()
            for r, o, i in calls:
                torch.nn.functional.linear(inputs[(r, i)], weights[(o, i)])
            times.append(time.perf_counter() - t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--positions", type=int, default=64, help="positions per sample (prompt of 8 included)")
    ap.add_argument("--steps", type=int, default=3, help="drafts per block K (every K = 1..steps is measured)")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the temporary checkpoints go")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--drafter", help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-dflash-") as tmp:
        t0 = time.perf_counter()
        drafter, target, dump = write_world(Path(tmp), args)
        size = (drafter / "model.safetensors").stat().st_size
        print(f"a Kimi-K2.5-sized DFlash drafter ({size / 2**30:.2f} GiB of bf16, "
              f"{sum(math.prod(s) for s in drafter_shapes().values()) / 1e9:.2f} B parameters), a target head and "
              f"embedding ({(target / 'model.safetensors').stat().st_size / 2**30:.2f} GiB) and a dump of "
              f"{args.samples} x {args.positions} positions written in {time.perf_counter() - t0:.0f} s")
        cmd = [sys.executable, __file__, "--child", "--drafter", str(drafter), "--target", str(target), "--dump",
               str(dump), "--positions", str(args.positions), "--steps", str(args.steps), "--dtype", args.dtype]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")])})
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        if status:
            raise SystemExit(f"the measurement failed (status {status})")
        m = json.loads(out.decode().strip().splitlines()[-1])
        peak = usage.ru_maxrss / 1024
        print(f"dump path ({args.dtype}, {m['threads']} threads, K = 1..{args.steps}, block {args.block_size}): "
              f"{m['positions']} positions in {m['wall']:.1f} s = {m['positions'] / m['wall']:.2f} positions/s; "
              f"drafter loaded in {m['load_s']:.1f} s, {m['kept_mib']:.0f} MiB held, {m['read_by_range']} matrices "
              f"read by range; peak RSS of the whole measurement {peak:,.0f} MiB (after load {m['load_rss_mib']:,.0f})"
              f"; bar 3 GB = 2,861 MiB: {'met' if peak * 2**20 <= 3e9 else 'MISSED'}")
        calls = [tuple(c) for c in m["calls"]]
        flops = sum(2 * r * o * i for r, o, i in calls)
        times = plain_seconds(calls, getattr(torch, args.dtype), args.repeat)
        plain = float(np.median(times))
        fwd_rate, plain_rate = flops / m["forward"] / 1e9, flops / plain / 1e9
        print(f"forward: {flops / 1e12:.2f} TFLOP of projections in {m['forward']:.1f} s = {fwd_rate:.1f} GFLOP/s "
              f"(weights read by range, attention and norms included); the same {len(calls)} matmuls plain, weights "
              f"in memory: {', '.join(f'{t:.1f}' for t in times)} s, median {plain_rate:.1f} GFLOP/s; ratio "
              f"{fwd_rate / plain_rate:.2f} (bar 0.5); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
