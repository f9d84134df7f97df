"""Benchmark: target drift on two generated Kimi-K2-layout shards, FP8 blocks against INT4 packs.

Under ``--data`` (reused when present) two one-layer shards with Kimi-K2's real MoE layer shapes
(MLA attention q_a [1536, 7168], q_b [24576, 1536], kv_a [576, 7168], kv_b [32768, 512], o [7168, 16384];
a shared expert and ``--experts`` routed experts, gate/up [2048, 7168], down [7168, 2048]):

- A: FP8 e4m3 with 128 x 128 block ``weight_scale_inv`` (``model.layers.3.*``), as Kimi-K2 ships;
- B: A dequantised, plus 10% noise, re-quantised to compressed-tensors pack-quantised INT4 (group 32),
  under ``language_model.model.layers.3.*``, as Kimi-K2.5 ships.

Then, on warm page cache:

1. plain dequantise pass: the same row pieces read and dequantised on both sides into the same reused
   buffers, nothing compared (the floor);
2. full pass, single process (``scheduler="inline"``): GB/s of stored bytes and the ratio to (1);
3. full pass on a Dask LocalCluster with 2 worker processes: wall time, peak RSS per worker;
4. sampled passes at growing budgets: bytes read, wall time and the 95% interval of the whole-target
   cosine, until its half-width is at most 0.01 (the goal: under 2% of the full pass's bytes).

    python benchmarks/bench_drift.py               # 16 routed experts: about 1.2 GB of shards
    python benchmarks/bench_drift.py --experts 4   # quicker
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

H, MOE, QA, QB, KVA, KVB_IN, KVB, O_IN = 7168, 2048, 1536, 24576, 576, 512, 32768, 16384


def shapes(experts: int) -> dict[str, tuple[int, int]]:
    p = "layers.3."
    s = {p + "self_attn.q_a_proj.weight": (QA, H), p + "self_attn.q_b_proj.weight": (QB, QA),
         p + "self_attn.kv_a_proj_with_mqa.weight": (KVA, H), p + "self_attn.kv_b_proj.weight": (KVB, KVB_IN),
         p + "self_attn.o_proj.weight": (H, O_IN)}
    for e in ["shared_experts"] + [f"experts.{j}" for j in range(experts)]:
        s.update({p + f"mlp.{e}.gate_proj.weight": (MOE, H), p + f"mlp.{e}.up_proj.weight": (MOE, H),
                  p + f"mlp.{e}.down_proj.weight": (H, MOE)})
    return s


def write_pair(folder: Path, experts: int) -> tuple[Path, Path]:
    """Stream both shards to disk, 256 rows at a time (never a whole tensor in memory)."""
    import json

    import numpy as np

    from eaglekit.analysis.drift.dequant import E4M3
    from eaglekit.core.checkpoint.header import encode_header

    a_dir, b_dir = folder / "k2-fp8", folder / "k25-int4"
    if (a_dir / "model.safetensors").exists() and (b_dir / "model.safetensors").exists():
        return a_dir, b_dir
    a_dir.mkdir(parents=True, exist_ok=True)
    b_dir.mkdir(parents=True, exist_ok=True)
    sh = shapes(experts)
    spec_a, spec_b = {}, {}
    for k, (r, c) in sh.items():
        spec_a["model." + k] = ("F8_E4M3", (r, c))
        spec_a["model." + k + "_scale_inv"] = ("F32", (-(-r // 128), -(-c // 128)))
        m = "language_model.model." + k[:-len(".weight")]
        spec_b[m + ".weight_packed"] = ("I32", (r, c // 8))
        spec_b[m + ".weight_scale"] = ("BF16", (r, c // 32))
        spec_b[m + ".weight_shape"] = ("I64", (2,))
    head_a, off_a = encode_header(spec_a, metadata={"format": "pt"})
    head_b, off_b = encode_header(spec_b, metadata={"format": "pt"})
    rng = np.random.default_rng(0)
    finite = np.flatnonzero(np.isfinite(E4M3) & (np.abs(E4M3) < 64)).astype(np.uint8)  # e4m3 codes to draw
    with open(a_dir / "model.safetensors", "wb") as fa, open(b_dir / "model.safetensors", "wb") as fb:
        fa.write(head_a)
        fb.write(head_b)
        for k, (r, c) in sh.items():  # every tensor's data, then its scales: the header order
            scale_inv = (rng.random((-(-r // 128), -(-c // 128))) * 0.002 + 0.001).astype(np.float32)
            packed_rows, scale_rows = [], []
            for r0 in range(0, r, 256):
                n = min(256, r - r0)
                codes = finite[rng.integers(0, len(finite), (n, c))]  # (n, c) uint8
                fa.write(codes.tobytes())
                x = E4M3[codes] * np.repeat(np.repeat(scale_inv[r0 // 128:(r0 + n - 1) // 128 + 1], 128, 0), 128, 1)[
                    (r0 % 128):(r0 % 128) + n, :c]
                x = x + 0.1 * x.std() * rng.standard_normal(x.shape).astype(np.float32)
                g = x.reshape(n, c // 32, 32)
                s = np.maximum(np.abs(g).max(-1) / 7, 1e-12).astype(np.float32)
                s_bf = ((s.view(np.uint32) + 0x8000) >> 16).astype(np.uint16)  # round to bf16
                s_back = (s_bf.astype(np.uint32) << 16).view(np.float32)
                q = np.clip(np.rint(g / s_back[..., None]), -8, 7).astype(np.int64).reshape(n, c) + 8
                nibbles = q.reshape(n, c // 8, 8).astype(np.uint32) << (np.arange(8, dtype=np.uint32) * 4)
                words = nibbles.sum(-1, dtype=np.uint32)  # (n, c / 8): element i at bit 4 i
                packed_rows.append(words.view(np.int32).tobytes())
                scale_rows.append(s_bf.tobytes())
            fa.write(scale_inv.tobytes())
            fb.write(b"".join(packed_rows))
            fb.write(b"".join(scale_rows))
            fb.write(np.array([r, c], dtype="<i8").tobytes())
    cfg_a = {"model_type": "kimi_k2", "num_hidden_layers": 61, "hidden_size": H,
             "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    cfg_b = {"model_type": "kimi_k25", "text_config": {"num_hidden_layers": 61, "hidden_size": H},
             "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                     "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 32}}}}}
    (a_dir / "config.json").write_text(json.dumps(cfg_a))
    (b_dir / "config.json").write_text(json.dumps(cfg_b))
    assert (a_dir / "model.safetensors").stat().st_size == len(head_a) + max(e for _, e in off_a.values())
    assert (b_dir / "model.safetensors").stat().st_size == len(head_b) + max(e for _, e in off_b.values())
    return a_dir, b_dir


def plain_pass(a: Path, b: Path) -> tuple[float, float]:
    """Read and dequantise every unit of both sides, no comparison: (seconds, stored bytes)."""
    from eaglekit.analysis.drift.dequant import Scratch, quant_weights, read_rows
    from eaglekit.analysis.drift.measure import CHUNK_BYTES, _reader, _source
    from eaglekit.analysis.drift.plan import make_plan, pair_weights
    from eaglekit.io.reader import open_checkpoint

    with open_checkpoint(a) as ca, open_checkpoint(b) as cb:
        pairs, *rest = pair_weights(quant_weights(ca.inventory), quant_weights(cb.inventory))
    plan = make_plan(pairs, *rest, unit_bytes=CHUNK_BYTES)  # the pieces the full pass decodes at a time
    ra, rb = _reader(_source(str(a), None)), _reader(_source(str(b), None))
    scratch = Scratch()  # the same reused buffers as the full pass
    t = time.perf_counter()
    total = 0.0
    for i in range(len(plan)):
        u = plan.unit(i)
        p = plan.pairs[u.pair]
        read_rows(ra, p.a, u.r0, u.r1, scratch=scratch, key="a")
        read_rows(rb, p.b, u.r0, u.r1, scratch=scratch, key="b")
        total += plan.nbytes[i]
    return time.perf_counter() - t, total


def plan_at_scale() -> None:
    """DriftPlan (no bytes read) a whole Kimi-K2 FP8 / K2.5 INT4 pair from in-memory headers: 61 layers,
    384 routed experts each; how long planning and drawing a sample take, and how much memory."""
    from eaglekit.analysis.drift.dequant import quant_weights
    from eaglekit.analysis.drift.measure import _unit_bytes
    from eaglekit.analysis.drift.plan import make_plan, pair_weights, sample
    from eaglekit.io.inventory import Inventory, TensorEntry
    import numpy as np

    def inventory(prefix: str, int4: bool) -> Inventory:
        entries, off = [], 0

        def add(name, dtype, shape, itembits):
            nonlocal off
            n = int(np.prod(shape)) * itembits // 8
            entries.append(TensorEntry(name, dtype, tuple(shape), int(np.prod(shape)), n, "model.safetensors", off))
            off += n

        def weight(name, r, c):
            if int4:
                add(prefix + name + "_packed", "I32", (r, c // 8), 32)
                add(prefix + name + "_scale", "BF16", (r, c // 32), 16)
                add(prefix + name + "_shape", "I64", (2,), 64)
            else:
                add(prefix + name, "F8_E4M3", (r, c), 8)
                add(prefix + name + "_scale_inv", "F32", (-(-r // 128), -(-c // 128)), 32)

        add(prefix + "embed_tokens.weight", "BF16", (163840, H), 16)
        for layer in range(61):
            for k, (r, c) in shapes(384).items():
                if layer == 0 and ".experts." in k:
                    continue
                weight(k.replace("layers.3.", f"layers.{layer}."), r, c)
        cfg = {"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                       "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 32}}}}} \
            if int4 else {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
        return Inventory("k25" if int4 else "k2", (), tuple(sorted(entries, key=lambda e: e.name)), config=cfg)

    reset_peak()
    t = time.perf_counter()
    ia, ib = inventory("model.", False), inventory("language_model.model.", True)
    t_inv = time.perf_counter() - t
    t = time.perf_counter()
    pairs, *rest = pair_weights(quant_weights(ia), quant_weights(ib))
    budget = 4 << 30
    plan = make_plan(pairs, *rest, unit_bytes=_unit_bytes(pairs, budget))
    t_plan = time.perf_counter() - t
    t = time.perf_counter()
    chosen = sample(plan, budget, np.random.default_rng(0))
    t_sample = time.perf_counter() - t
    n = sum(len(v) for v in chosen.values())
    read = float(sum(plan.nbytes[v].sum() for v in chosen.values()))
    print(f"planning a whole K2/K2.5 pair ({len(ia.tensors) + len(ib.tensors)} tensors, "
          f"{(ia.total_bytes + ib.total_bytes) / 1e12:.2f} TB): inventories {t_inv:.1f} s, pairing and "
          f"{len(plan):,} units {t_plan:.1f} s, drawing {n:,} units of {len(plan.strata)} strata "
          f"({read / 1e9:.2f} GB) {t_sample:.2f} s; peak RSS {peak_mib():.0f} MiB")


def reset_peak() -> None:
    """Reset this process's peak RSS (Linux: writing 5 to /proc/self/clear_refs), so VmHWM measures what follows."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_mib() -> float:
    """VmHWM of this process, MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def warm(*folders: Path) -> None:
    for f in folders:
        for p in f.glob("*.safetensors"):
            with open(p, "rb") as fh:
                while fh.read(64 << 20):
                    pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/tmp/eaglekit-bench-drift")
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--skip-dask", action="store_true")
    args = ap.parse_args()
    import eaglekit

    t = time.perf_counter()
    a, b = write_pair(Path(args.data) / f"e{args.experts}", args.experts)
    size = sum(p.stat().st_size for d in (a, b) for p in d.glob("*.safetensors"))
    print(f"shards: {size / 1e9:.2f} GB in all ({time.perf_counter() - t:.0f} s to write or find); "
          f"load average {os.getloadavg()[0]:.2f}")
    warm(a, b)

    reset_peak()
    secs, stored = plain_pass(a, b)
    plain_peak = peak_mib()
    print(f"plain dequantise pass: {secs:.2f} s, {stored / secs / 1e9:.3f} GB/s of stored bytes; "
          f"peak RSS {plain_peak:.0f} MiB")
    reset_peak()
    r = eaglekit.drift(a, b, full=True, scheduler="inline", progress=False)
    full_gbs = sum(r.bytes_read) / r.seconds / 1e9
    print(f"full, single process: {r.seconds:.2f} s, {full_gbs:.3f} GB/s, ratio to plain "
          f"{full_gbs / (stored / secs / 1e9):.2f}; whole cosine {r.whole.cosine.value:.6f}; "
          f"peak RSS {peak_mib():.0f} MiB")

    if not args.skip_dask:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                          memory_limit="2GiB") as cluster, Client(cluster) as client:
            client.run(lambda: bool(__import__("eaglekit.analysis.drift.measure")))  # imports outside the timing
            client.run(reset_peak)
            rd = eaglekit.drift(a, b, full=True, scheduler=client, progress=False)
            peaks = client.run(peak_mib)
        same = [f.to_json() for f in rd.strata] == [f.to_json() for f in r.strata]
        print(f"full, LocalCluster 2 workers: {rd.seconds:.2f} s ({r.seconds / rd.seconds:.2f}x the single process), "
              f"{sum(rd.bytes_read) / rd.seconds / 1e9:.3f} GB/s; identical figures: {same}; peak RSS per worker "
              + ", ".join(f"{v:.0f} MiB" for v in peaks.values()))

    full_bytes = sum(r.bytes_read)
    truth = r.whole.cosine.value
    for frac in (0.0025, 0.005, 0.01, 0.02, 0.05):
        s = eaglekit.drift(a, b, full=False, budget=int(frac * full_bytes), progress=False, seed=1)
        c = s.whole.cosine
        print(f"sampled, budget {frac:.2%}: read {sum(s.bytes_read) / 1e6:.1f} MB "
              f"({sum(s.bytes_read) / full_bytes:.2%} of full) in {s.seconds:.2f} s "
              f"({s.seconds / r.seconds:.1%} of the full pass's time); cosine {c.value:.5f} "
              f"[{c.low:.5f}, {c.high:.5f}], half-width {c.half_width:.5f}, covers full: {c.low <= truth <= c.high}")
    plan_at_scale()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
