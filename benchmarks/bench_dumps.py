"""Benchmark: accept length from a training dump, Kimi-K2-sized, on CPU.

A synthetic SpecForge dump (``rows_0-2000/data_i.ckpt``: aux [1, T, 3H], hidden_state [1, T, H] post-norm,
bf16) whose text follows the target's greedy tokens everywhere (each final hidden state is the
``lm_head`` row of the next token, so the argmax lands on it: coverage 100%, every position drafted),
a random drafter in the Kimi-K2 EAGLE-3 shapes (hidden 7168, 64 heads x 128, intermediate 18432, draft
vocabulary 32,000, fc [7168, 21504]) and a target head of Kimi-K2's size (lm_head [163840, 7168] and its
embedding, bf16). Reports, per worker:

* positions per second through ``measure_dump`` (read, target head, drafting K steps, counting);
* the share of that time spent in the target's ``lm_head`` (the same head timed alone on the same files);
* the head chunked as eaglekit computes it against the naive way (all positions' full logits at once),
  in time and peak memory, in the same run;
* ``--workers 1 2``: the same dump on a Dask LocalCluster of 1 and 2 worker processes.

    python benchmarks/bench_dumps.py                                   # one process, Kimi-sized (~8 GB RAM)
    python benchmarks/bench_dumps.py --vocab 32768 --intermediate 4608 --workers 1 2   # cluster, smaller head
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from eaglekit.analysis.acceptance.dumps import measure_dump
from eaglekit.analysis.acceptance.head import read_target_head
from eaglekit.io.dumps.detect import open_training_dump


def build(root: Path, a) -> tuple[Path, Path, Path]:
    g = torch.Generator().manual_seed(0)
    H, V, N, dt = a.hidden, a.vocab, a.draft_vocab, torch.bfloat16

    def w(*shape, scale=None):
        """Random bf16, filled 4096 rows at a time (no float32 copy of a 2 GB tensor)."""
        out = torch.empty(*shape, dtype=dt)
        flat = out.view(-1, shape[-1])
        for r in range(0, flat.shape[0], 4096):
            flat[r:r + 4096] = torch.randn(min(4096, flat.shape[0] - r), shape[-1], generator=g) * (
                shape[-1] ** -0.5 if scale is None else scale)
        return out

    target = root / "target"
    target.mkdir()
    lm_head = w(V, H, scale=1.0)
    # the embedding's values cost no time in the forward (a row lookup): zeros, to build it fast
    save_file({"model.embed_tokens.weight": torch.zeros(V, H, dtype=dt), "model.norm.weight": torch.ones(H, dtype=dt),
               "lm_head.weight": lm_head}, str(target / "model.safetensors"))
    (target / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": H, "vocab_size": V,
                                                    "num_hidden_layers": 61, "rms_norm_eps": 1e-6}))
    drafter = root / "drafter"
    drafter.mkdir()
    q = a.heads * a.head_dim
    p = "midlayer."
    tensors = {"fc.weight": w(H, 3 * H), p + "self_attn.q_proj.weight": w(q, 2 * H),
               p + "self_attn.k_proj.weight": w(q, 2 * H), p + "self_attn.v_proj.weight": w(q, 2 * H),
               p + "self_attn.o_proj.weight": w(H, q), p + "mlp.gate_proj.weight": w(a.intermediate, H),
               p + "mlp.up_proj.weight": w(a.intermediate, H), p + "mlp.down_proj.weight": w(H, a.intermediate),
               p + "hidden_norm.weight": torch.ones(H, dtype=dt), p + "input_layernorm.weight": torch.ones(H, dtype=dt),
               p + "post_attention_layernorm.weight": torch.ones(H, dtype=dt), "norm.weight": torch.ones(H, dtype=dt),
               "lm_head.weight": w(N, H), "d2t": torch.zeros(N, dtype=torch.int64)}
    save_file(tensors, str(drafter / "model.safetensors"))
    del tensors
    (drafter / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
        "intermediate_size": a.intermediate, "num_attention_heads": a.heads, "num_key_value_heads": a.heads,
        "head_dim": a.head_dim, "vocab_size": V, "draft_vocab_size": N, "rms_norm_eps": 1e-6, "rope_theta": 50000.0,
        "max_position_embeddings": 8192, "hidden_act": "silu", "num_hidden_layers": 1,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True}}))
    dump = root / "dump" / "rows_0-2000"
    dump.mkdir(parents=True)
    T = a.positions
    for i in range(a.samples):
        ids = torch.randint(0, N, (T,), generator=g)           # draft-vocabulary tokens (d2t = 0 maps them 1:1)
        final = w(T, H, scale=1.0)
        final[:-1] = lm_head[ids[1:]]                            # argmax(lm_head @ row_k) = k: greedy text
        torch.save({"input_ids": ids, "loss_mask": torch.ones(T, dtype=torch.int64), "hidden_state": final[None],
                    "aux_hidden_state": w(1, T, 3 * H)}, dump / f"data_{i}.ckpt")
    return drafter, target, root / "dump"


def head_timing(target: Path, dump: Path, dtype, repeat: int = 2) -> dict:
    """The target head alone on every file: eaglekit's chunked pass against all logits at once, interleaved
    (best of ``repeat`` each); memory is the largest float32 logits block each one holds."""
    head = read_target_head(str(target), dtype=dtype)
    d = open_training_dump(dump)
    finals = [d.read(i).final for i in range(len(d))]
    best = {"chunked": float("inf"), "naive": float("inf"), "chunked_cpu": float("inf")}
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        chunked = [head.next_tokens(f, normed=True)[0] for f in finals]
        t1, c1 = time.perf_counter(), time.process_time()
        naive = [head.logits(f, normed=True).argmax(-1) for f in finals]    # (T, V) float32 at once
        t2 = time.perf_counter()
        best = {"chunked": min(best["chunked"], t1 - t0), "naive": min(best["naive"], t2 - t1),
                "chunked_cpu": min(best["chunked_cpu"], c1 - c0)}
    assert all(torch.equal(a, b) for a, b in zip(chunked, naive))
    longest = max(f.shape[0] for f in finals)
    return {"head_s": best["chunked"], "head_cpu_s": best["chunked_cpu"], "naive_head_s": best["naive"],
            "chunk_positions": head.chunk(), "chunk_mib": min(head.chunk(), longest) * head.vocab_size * 4 / 2 ** 20,
            "naive_mib": longest * head.vocab_size * 4 / 2 ** 20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--vocab", type=int, default=163840)
    ap.add_argument("--draft-vocab", type=int, default=32000)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=18432)
    ap.add_argument("--positions", type=int, default=256, help="tokens per sample")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    ap.add_argument("--workers", type=int, nargs="*", default=[], help="also run on Dask LocalClusters of these sizes")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    root = Path(tempfile.mkdtemp(prefix="eaglekit-bench-dumps-"))
    try:
        t0 = time.perf_counter()
        drafter, target, dump = build(root, a)
        print(f"built the synthetic dump and weights in {time.perf_counter() - t0:.0f} s under {root}")
        positions = a.samples * (a.positions - 1)
        kw = {"target_head": str(target), "steps": a.steps, "dtype": "bfloat16", "progress": False}
        measure_dump(drafter, dump, limit=1, **kw)                       # warm up: weights read, kernels chosen
        t0, c0 = time.perf_counter(), time.process_time()
        r = measure_dump(drafter, dump, **kw)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        c1 = time.process_time()
        h = head_timing(target, dump, torch.bfloat16)
        print(f"one process, {a.threads} thread(s): {positions / cpu:.2f} positions per CPU-second "
              f"({cpu:.1f} CPU-s, {total:.1f} s wall on a shared machine, for {positions} positions, K = {a.steps}, "
              f"coverage {r.coverage:.0%}, accept length {r.accept_length:.2f})")
        print(f"  target lm_head [{a.vocab}, {a.hidden}]: {h['head_cpu_s']:.1f} CPU-s = {h['head_cpu_s'] / cpu:.0%} of "
              f"the CPU time (wall: {h['head_s']:.1f} s = {h['head_s'] / total:.0%}); head timing itself "
              f"{time.process_time() - c1:.0f} CPU-s")
        print(f"  head chunked ({h['chunk_positions']} positions per matmul) vs all logits at once (best of 2, "
              f"interleaved): {h['head_s']:.2f} s vs {h['naive_head_s']:.2f} s wall; logits held: "
              f"{h['chunk_mib']:.0f} MiB vs {h['naive_mib']:.0f} MiB (a 2,048-token sample: "
              f"{min(h['chunk_positions'], 2048) * a.vocab * 4 / 2 ** 20:.0f} MiB vs {2048 * a.vocab * 4 / 2 ** 20:.0f} MiB)")
        print(f"  peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GiB")
        for n in a.workers:
            from distributed import Client, LocalCluster

            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                              memory_limit=0) as cluster, Client(cluster) as client:
                client.run(torch.set_num_threads, a.threads)
                measure_dump(drafter, dump, limit=2 * n, scheduler=client, **kw)   # workers load their weights
                cpu0 = sum(client.run(time.process_time).values())
                t0 = time.perf_counter()
                rd = measure_dump(drafter, dump, scheduler=client, **kw)
                dt = time.perf_counter() - t0
                wcpu = sum(client.run(time.process_time).values()) - cpu0
                peak = max(client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
            same = rd.to_json()["accept_length_by_steps"] == r.to_json()["accept_length_by_steps"]
            print(f"Dask, {n} worker(s): {positions / dt:.2f} positions/s wall in all ({dt:.1f} s), "
                  f"{positions / wcpu:.2f} positions per worker CPU-second ({wcpu:.1f} CPU-s over the workers); "
                  f"peak worker RSS {peak / 1024 ** 2:.2f} GiB; same figures as one process: {same}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
