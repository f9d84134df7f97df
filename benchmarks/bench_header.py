"""Benchmark: a header of many tensors, eaglekit against safetensors' own parser, side by side.

One local file whose header describes ``--tensors`` tensors (default 100,000 small BF16 matrices; the
data section is a hole, so the file costs no disk), written under ``--data``. Each method runs in a
fresh subprocess (no objects left over from another method; a cold interpreter, a warm page cache),
repetitions interleaved, medians reported:

- eaglekit ``parse_header`` (header bytes already in memory: the parse and every validation rule);
- eaglekit ``read_inventory`` (open, read the header, parse, build the inventory);
- ``safe_open`` + ``keys()`` (safetensors parses and validates the header in Rust);
- ``safe_open`` + ``get_slice(k)`` dtype and shape for every key: the hand-written inventory;
- ``json_loads``: the standard library's JSON parse of the header alone (the part of ``parse_header`` a
  faster parser could shorten), and ``orjson_loads`` the same with orjson, when it is importable (it is not
  a dependency: measured to decide whether it should be).

    python benchmarks/bench_header.py [--tensors 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

METHODS = ("parse_header", "read_inventory", "safe_open_keys", "safe_open_inventory", "json_loads", "orjson_loads")


def write(path: Path, count: int) -> Path:
    from eaglekit.core.checkpoint.header import encode_header

    spec = {f"model.layers.{i // 64}.mlp.experts.{i % 64}.w{i % 3}.weight": ("BF16", (64, 32)) for i in range(count)}
    raw, offsets = encode_header(spec)
    size = len(raw) + max(end for _, end in offsets.values())
    if not (path.exists() and path.stat().st_size == size and path.read_bytes()[:len(raw)] == raw):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(raw)
            f.truncate(size)
    return path


def child(method: str, path: str) -> dict:
    t0 = time.perf_counter()
    if method == "parse_header":
        from eaglekit.core.checkpoint.header import PREFIX_BYTES, header_length, parse_header

        size = os.path.getsize(path)
        with open(path, "rb") as f:
            prefix = f.read(PREFIX_BYTES)
            data = prefix + f.read(header_length(prefix, file_size=size, filename=path))
        t0 = time.perf_counter()  # the parse alone
        n = len(parse_header(data, file_size=size, filename=path).tensors)
    elif method == "read_inventory":
        from eaglekit.io.reader import read_inventory

        t0 = time.perf_counter()
        n = len(read_inventory(path))
    elif method == "safe_open_keys":
        from safetensors import safe_open

        t0 = time.perf_counter()
        with safe_open(path, "np") as f:
            n = len(f.keys())
    elif method == "safe_open_inventory":
        from safetensors import safe_open

        t0 = time.perf_counter()
        with safe_open(path, "np") as f:
            inventory = {}
            for k in f.keys():
                s = f.get_slice(k)
                inventory[k] = (s.get_dtype(), s.get_shape())
            n = len(inventory)
    elif method in ("json_loads", "orjson_loads"):
        from eaglekit.core.gcpause import paused_gc  # parse_header parses with the collector paused too

        parse = __import__(method.split("_")[0]).loads
        with open(path, "rb") as f:
            data = f.read(int.from_bytes(f.read(8), "little"))
        with paused_gc():
            t0 = time.perf_counter()
            obj = parse(data)
            n = len(obj) - ("__metadata__" in obj)
    else:
        raise SystemExit(f"unknown method {method}")
    return {"method": method, "seconds": time.perf_counter() - t0, "tensors": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=HERE / "data")
    ap.add_argument("--tensors", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    path = write(args.data / f"header-{args.tensors}.safetensors", args.tensors)
    methods = [m for m in METHODS if m != "orjson_loads" or _importable("orjson")]
    runs: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(args.repeat):  # interleaved: load from other processes hits every method alike
        for m in methods:
            out = subprocess.run([sys.executable, __file__, "--child", m, str(path)], capture_output=True, text=True,
                                 check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            assert result["tensors"] == args.tensors, result
            runs[m].append(result["seconds"])
    med = {m: statistics.median(v) for m, v in runs.items()}
    print(f"## Header of {args.tensors:,} tensors ({path.stat().st_size / 1e9:.2f} GB file, header "
          f"{os.path.getsize(path) and _header_bytes(path):,} B), {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}, median of {args.repeat} interleaved runs")
    for m in methods:
        print(f"{m:<22}{med[m] * 1e3:9.1f} ms   (runs: {', '.join(f'{s * 1e3:.0f}' for s in runs[m])})")
    print(f"read_inventory / safe_open keys: {med['read_inventory'] / med['safe_open_keys']:.2f}x; "
          f"/ safe_open inventory loop: {med['read_inventory'] / med['safe_open_inventory']:.2f}x (goal <= 1.5x)")
    print(f"parse_header / safe_open keys: {med['parse_header'] / med['safe_open_keys']:.2f}x")
    if "orjson_loads" in med:
        print(f"json.loads / orjson.loads: {med['json_loads'] / med['orjson_loads']:.2f}x")


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _header_bytes(path: Path) -> int:
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


if __name__ == "__main__":
    main()
