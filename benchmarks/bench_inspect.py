"""Header-only inventory vs the seed's method, locally and through the loopback Hub.

Prints, measured in the same run:
1. A real-scale Kimi-K2 drafter layout (about 2.4 GB; a sparse file): eaglekit's read_inventory vs the
   seed's ``safe_open`` + ``get_tensor(k)`` twice per key (shape, then dtype): time and bytes read.
2. Through the Hub-compatible server on 127.0.0.1, a single-file repo and a 64-shard repo, eaglekit's
   read_inventory against huggingface_hub's get_safetensors_metadata: requests, bytes and wall time at
   0, 20 and 50 ms emulated latency per request (``server.latency``; loopback has none), interleaved
   runs, medians; and parallel vs sequential header fetching of the shards.
3. The loopback servers: a small GET with and without TCP_NODELAY, and a repo found from its first
   scan against a full rescan.

Usage: python benchmarks/bench_inspect.py [--data benchmarks/data] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
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


def hub(data: Path, repeat: int) -> None:
    from eaglekit import reader
    from eaglekit.demo.hubserver import HubServer

    root = data / "hub"
    single = root / "bench" / "kimi-k2-drafter"
    if not (single / "model.safetensors").exists():
        write_sparse(single / "model.safetensors", KIMI_K2_TENSORS)
    sharded = root / "bench" / "kimi-k2-drafter-64"
    if not (sharded / "model.safetensors.index.json").exists():
        write_sharded(sharded, KIMI_K2_TENSORS, 64)
    repos = ("bench/kimi-k2-drafter", "bench/kimi-k2-drafter-64")
    print("## Through the loopback Hub (huggingface_hub client, Hub-compatible server on 127.0.0.1)")
    print(f"eaglekit read_inventory vs huggingface_hub get_safetensors_metadata on the same server; median of "
          f"{repeat} interleaved runs; latency: every answer delayed that long (a round trip to a distant Hub)")
    print(f"{'repo':<28}{'latency':>8}  {'eaglekit req':>12}{'hf req':>7}  {'eaglekit bytes':>15}{'hf bytes':>11}"
          f"  {'eaglekit ms':>11}{'hf ms':>8}{'hf/eaglekit':>12}")
    with HubServer(root) as server:
        methods = {"eaglekit": lambda repo: reader.read_inventory(f"hf://{repo}", endpoint=server.endpoint,
                                                                  progress=False),
                   "hf": lambda repo: _hf_metadata(server.endpoint, repo)}
        for repo in repos:
            for latency in (0.0, 0.020, 0.050):
                server.latency = latency
                walls: dict[str, list[float]] = {m: [] for m in methods}
                counts: dict[str, tuple[int, int]] = {}
                for _ in range(repeat):
                    for name, fn in methods.items():
                        server.clear_log()
                        t0 = time.perf_counter()
                        fn(repo)
                        walls[name].append(time.perf_counter() - t0)
                        log = server.log
                        counts[name] = (len(log), sum(r.bytes_sent for r in log))
                e, h = statistics.median(walls["eaglekit"]), statistics.median(walls["hf"])
                print(f"{repo:<28}{latency * 1e3:>6.0f}ms  {counts['eaglekit'][0]:>12}{counts['hf'][0]:>7}  "
                      f"{counts['eaglekit'][1]:>15,}{counts['hf'][1]:>11,}  {e * 1e3:>11.1f}{h * 1e3:>8.1f}{h / e:>11.2f}x")
        server.latency = 0.020
        times = {}
        for workers in (1, reader.MAX_WORKERS):
            reader.MAX_WORKERS, saved = workers, reader.MAX_WORKERS
            t0 = time.perf_counter()
            reader.read_inventory("hf://bench/kimi-k2-drafter-64", endpoint=server.endpoint, progress=False)
            times[workers] = time.perf_counter() - t0
            reader.MAX_WORKERS = saved
        seq, par = times[1], times[max(times)]
        print(f"64 shards, 20 ms: sequential {seq * 1e3:.0f} ms, parallel ({max(times)} threads) {par * 1e3:.0f} ms: "
              f"{seq / par:.1f}x")


def servers(data: Path) -> None:
    """The loopback servers: a small GET with TCP_NODELAY (as served) against Nagle's algorithm left on,
    and finding a repo from the first scan's stat (as served) against scanning it again."""
    import socket

    import httpx

    from eaglekit.demo import hubserver
    from eaglekit.demo.fileserver import FileHandler
    from eaglekit.demo.hubserver import HubServer

    root = data / "hub"
    served = FileHandler.setup

    def nagle(handler) -> None:
        served(handler)
        handler.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)

    times: dict[str, list[float]] = {"TCP_NODELAY": [], "Nagle on": []}
    for _ in range(2):  # interleaved
        for mode, setup in (("TCP_NODELAY", served), ("Nagle on", nagle)):
            FileHandler.setup = setup
            try:
                with HubServer(root) as server, httpx.Client() as client:
                    url = f"{server.endpoint}/bench/kimi-k2-drafter/resolve/main/config.json"
                    client.get(url)
                    for _ in range(15):
                        t0 = time.perf_counter()
                        client.get(url)
                        times[mode].append(time.perf_counter() - t0)
            finally:
                FileHandler.setup = served
    server = HubServer(root)
    server.repo("bench", "kimi-k2-drafter-64")
    scan, cached = [], []
    for _ in range(30):
        t0 = time.perf_counter()
        hubserver._load_repo(root, "bench", "kimi-k2-drafter-64")
        scan.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        server.repo("bench", "kimi-k2-drafter-64")
        cached.append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print("\n## The loopback servers (30 requests each, medians)")
    print(f"small GET (config.json) on a keep-alive connection: TCP_NODELAY {med['TCP_NODELAY']:.2f} ms, "
          f"Nagle on {med['Nagle on']:.2f} ms")
    print(f"finding the 64-shard repo per request: stat of the first scan {statistics.median(cached) * 1e3:.2f} ms, "
          f"full scan {statistics.median(scan) * 1e3:.2f} ms")


def _hf_metadata(endpoint: str, repo: str):
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    return HfApi(endpoint=endpoint).get_safetensors_metadata(repo)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path(__file__).parent / "data")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}\n")
    local(args.data)
    hub(args.data, args.repeat)
    servers(args.data)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
