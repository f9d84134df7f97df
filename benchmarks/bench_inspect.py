"""Header-only inventory vs the seed's method, locally and through the loopback Hub.

Prints, measured in the same run:
1. A real-scale Kimi-K2 drafter layout (about 2.4 GB; a sparse file): eaglekit's read_inventory vs the
   seed's ``safe_open`` + ``get_tensor(k)`` twice per key (shape, then dtype): time and bytes read.
2. Through the Hub-compatible server on 127.0.0.1: requests and bytes per file for a single-file repo
   and a 64-shard repo, and parallel vs sequential header fetching of the shards (with and without an
   emulated 20 ms per-request latency, since loopback has none).

Usage: python benchmarks/bench_inspect.py [--data benchmarks/data]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from kimi_layout import KIMI_K2_TENSORS, write_sharded, write_sparse  # noqa: E402


def rchar() -> int:
    """Bytes this process read through read()/pread() so far (/proc/self/io)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


def seed_method(path: Path) -> tuple[float, int]:
    """The seed's loop: get_tensor twice per key. Bytes = what get_tensor materialises."""
    from safetensors import safe_open

    t0, touched = time.perf_counter(), 0
    f = safe_open(str(path), framework="pt")
    for k in sorted(f.keys()):
        a, b = f.get_tensor(k), f.get_tensor(k)
        line = f"{k}: {a.shape} {b.dtype}"
        touched += a.numel() * a.element_size() + b.numel() * b.element_size()
        del a, b, line
    return time.perf_counter() - t0, touched


def local(data: Path) -> None:
    from eaglekit.io.reader import read_inventory

    path = data / "kimi-k2-drafter" / "model.safetensors"
    size = write_sparse(path, KIMI_K2_TENSORS) if not path.exists() else path.stat().st_size
    before, t0 = rchar(), time.perf_counter()
    inv = read_inventory(path.parent)
    t_ek, read_ek = time.perf_counter() - t0, rchar() - before
    t_seed, read_seed = seed_method(path)
    print(f"## Local, real-scale Kimi-K2 drafter layout ({size / 1e9:.2f} GB file, {len(inv)} tensors, "
          f"{inv.parameters / 1e9:.3f} B parameters)")
    print(f"eaglekit read_inventory : {t_ek * 1e3:9.2f} ms, {read_ek:>13,} bytes read (header {inv.files[0].header_bytes:,} B"
          f" + config probe)")
    print(f"seed safe_open+get_tensor x2: {t_seed * 1e3:9.2f} ms, {read_seed:>13,} bytes materialised")
    print(f"ratio: {t_seed / t_ek:,.0f}x faster, {read_seed / max(read_ek, 1):,.0f}x fewer bytes")
    print(f"peak RSS of this process so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB\n")


def hub(data: Path) -> None:
    from eaglekit import reader
    from eaglekit.demo.hubserver import HubServer

    root = data / "hub"
    single = root / "bench" / "kimi-k2-drafter"
    if not (single / "model.safetensors").exists():
        write_sparse(single / "model.safetensors", KIMI_K2_TENSORS)
    sharded = root / "bench" / "kimi-k2-drafter-64"
    if not (sharded / "model.safetensors.index.json").exists():
        write_sharded(sharded, KIMI_K2_TENSORS, 64)
    print("## Through the loopback Hub (huggingface_hub 2.x client, Hub-compatible server on 127.0.0.1)")
    with HubServer(root) as server:
        for repo in ("bench/kimi-k2-drafter", "bench/kimi-k2-drafter-64"):
            reader.read_inventory(f"hf://{repo}", endpoint=server.endpoint)  # warm the server's caches
            server.clear_log()
            inv = reader.read_inventory(f"hf://{repo}", endpoint=server.endpoint)
            log = server.log
            weights = [r for r in log if r.path.endswith(".safetensors")]
            print(f"{repo}: {len(inv.files)} files, {len(log)} requests in all ({len(weights)} for safetensors "
                  f"headers: {len(weights) / len(inv.files):.2f} per file), {sum(r.bytes_sent for r in log):,} bytes "
                  f"sent ({sum(r.bytes_sent for r in weights) / len(inv.files):,.0f} per file) for "
                  f"{inv.total_bytes / 1e9:.2f} GB of tensors")
        for latency in (0.0, 0.020):
            _latency(server, latency)
            times = {}
            for workers in (1, reader.MAX_WORKERS):
                reader.MAX_WORKERS, saved = workers, reader.MAX_WORKERS
                t0 = time.perf_counter()
                reader.read_inventory("hf://bench/kimi-k2-drafter-64", endpoint=server.endpoint)
                times[workers] = time.perf_counter() - t0
                reader.MAX_WORKERS = saved
            seq, par = times[1], times[max(times)]
            print(f"64 shards, {latency * 1e3:.0f} ms emulated latency per request: sequential {seq * 1e3:.0f} ms, "
                  f"parallel ({max(times)} threads) {par * 1e3:.0f} ms: {seq / par:.1f}x")


def _latency(server, seconds: float) -> None:
    """Emulate a network round trip: delay every answer by ``seconds`` (benchmark only)."""
    original = type(server)._take_fault

    def delayed(self, path):
        if seconds:
            time.sleep(seconds)
        return original(self, path)

    server._take_fault = delayed.__get__(server)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path(__file__).parent / "data")
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}\n")
    local(args.data)
    hub(args.data)


if __name__ == "__main__":
    main()
