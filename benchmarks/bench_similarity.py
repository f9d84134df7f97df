"""Benchmark: streamed weight similarity (eaglekit) against what a user would write instead, side by side.

Two real-scale drafters in the Kimi-K2 EAGLE-3 layout (fc [7168, 21504], q/k/v [8192, 14336],
o [7168, 8192], MLP [18432, 7168] x2 + [7168, 18432], lm_head [32000, 7168], norms, d2t/t2d; 2.38 GB
each in bf16) are generated under ``--data`` (random: B is A plus 10% drift, with a partly different
draft vocabulary), reused when present. Every mode runs in its own subprocess while the parent samples
the child's anonymous memory (RssAnon + RssShmem in /proc/PID/status, every 5 ms: the remote ring buffers
are shared anonymous maps, counted in RssShmem, not RssAnon); modes are interleaved
(``--repeat`` rounds of every mode in turn, so load from other processes hits them alike) and medians
are reported, with the load average seen during the runs.

Anchors, measured in the same run:

- ``cat``: ``cat A B > /dev/null`` (reading the bytes, nothing else);
- ``floor``: a plain single-thread bf16 -> float32 pass over the same bytes (2 MiB reads into one
  reused float32 buffer): the practical floor of any compute over them;
- ``loop64`` / ``loop32``: the hand-written 20 lines: ``safe_open`` both, ``get_slice`` row blocks of
  every float tensor, whole-tensor sums ``a.a``, ``b.b``, ``a.b`` in float64 (``.double()``) or with
  float32 products and sums; ``loop64`` is also the float64 reference for the accuracy check;
- ``naive`` (``--naive``): ``load_file`` both, upcast, cosine per tensor;
- ``before`` (``--before FILE``): an earlier version of eaglekit's similarity module, same rounds;
- ``eaglekit``: ``eaglekit.similarity(a, b)``, every tensor, 64 x 64 grids, lm_head aligned by token
  (``eaglekit-t2``, only when named in ``--modes``: the same with two torch threads);
- ``eaglekit-http``, ``eaglekit-hf``: the same through the loopback file server and Hub-compatible
  server (served from the parent process), and ``eaglekit-hf-20ms`` / ``-50ms`` with every answer
  delayed that long; ``curl``: curl fetching both files from the loopback file server. Suffixes combine
  (``eaglekit-hf-httpx-20ms``): ``-httpx`` turns range_get's socket path off (every range through httpx,
  as before issue 25), ``-t1`` / ``-t2`` allow at most one / two reader threads (requests in flight)
  per side instead of the adaptive 2..6, ``-s1`` starts the pipeline at one request in flight, ``-sw``
  keeps the interpreter's 5 ms switch interval while reader threads run (instead of 0.2 ms), ``-c4``
  requests 4 MiB blocks instead of 8 MiB, ``-f32`` allows 32 MiB in flight per side instead of 24 MiB.

Besides wall time, each mode reports the CPU seconds its process spent in the timed part (user + system,
from getrusage; curl's from its own rusage) and per GB read, and the CPU the parent (the loopback servers)
spent meanwhile.

    python benchmarks/bench_similarity.py               # real scale (about 5 GB of disk), a few minutes
    python benchmarks/bench_similarity.py --small       # 1/4 scale, seconds
    python benchmarks/bench_similarity.py --modes floor,eaglekit --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

H, I, HEADS_DIM, DRAFT_VOCAB, VOCAB = 7168, 18432, 8192, 32000, 163840
MODES = ("cat", "floor", "loop64", "loop32", "eaglekit", "eaglekit-http", "eaglekit-hf", "eaglekit-hf-20ms",
         "eaglekit-hf-50ms", "curl")
CHECKED = ("fc.weight", "midlayer.mlp.gate_proj.weight")  # accuracy against the float64 loop


def layout(scale: int = 1) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) of a Llama-style EAGLE-3 drafter for Kimi-K2 (hidden sizes / scale)."""
    h, i, q, n = H // scale, I // scale, HEADS_DIM // scale, DRAFT_VOCAB // scale
    bf = "BF16"
    return {
        "fc.weight": (bf, (h, 3 * h)), "lm_head.weight": (bf, (n, h)), "norm.weight": (bf, (h,)),
        **{f"midlayer.self_attn.{p}_proj.weight": (bf, (q, 2 * h)) for p in "qkv"},
        "midlayer.self_attn.o_proj.weight": (bf, (h, q)),
        "midlayer.mlp.gate_proj.weight": (bf, (i, h)), "midlayer.mlp.up_proj.weight": (bf, (i, h)),
        "midlayer.mlp.down_proj.weight": (bf, (h, i)),
        **{f"midlayer.{k}.weight": (bf, (h,)) for k in ("hidden_norm", "input_layernorm", "post_attention_layernorm")},
        "d2t": ("I64", (n,)), "t2d": ("BOOL", (VOCAB // scale,)),
    }


def write_pair(folder: Path, scale: int) -> tuple[Path, Path]:
    """Write a.safetensors and b.safetensors (B = A + 10% noise, 90% shared draft vocabulary), streamed."""
    import numpy as np
    import torch

    from eaglekit.core.checkpoint.header import encode_header
    from eaglekit.core.tokens.vocab import build_vocab_map

    folder.mkdir(parents=True, exist_ok=True)
    pa, pb, stamp = folder / "a.safetensors", folder / "b.safetensors", folder / "layout.json"
    spec = layout(scale)
    if pa.exists() and pb.exists() and stamp.exists() and json.loads(stamp.read_text()) == _jsonable(spec):
        return pa, pb
    raw, offsets = encode_header(spec, metadata={"format": "pt", "eaglekit_bench": "synthetic random weights"})
    offset = max(end for _, end in offsets.values())
    rng = np.random.default_rng(7)
    vocab = spec["t2d"][1][0]
    ids_a = rng.choice(vocab, spec["d2t"][1][0], replace=False)
    ids_b = np.concatenate([rng.choice(ids_a, int(ids_a.size * 0.9), replace=False),
                            rng.choice(np.setdiff1d(np.arange(vocab), ids_a), ids_a.size - int(ids_a.size * 0.9),
                                       replace=False)])
    maps = build_vocab_map(ids_a, vocab), build_vocab_map(ids_b, vocab)
    gen = torch.Generator().manual_seed(7)
    print(f"writing {pa} and {pb} ({offset * 2 / 1e9:.1f} GB)...", file=sys.stderr)
    with open(pa, "wb") as fa, open(pb, "wb") as fb:
        for f in (fa, fb):
            f.write(raw)
        for name, (dtype, shape) in spec.items():
            if dtype != "BF16":
                k = 0 if name == "d2t" else 1
                fa.write(maps[0][k].tobytes())
                fb.write(maps[1][k].tobytes())
                continue
            rows, cols = shape[0], int(np.prod(shape[1:]))
            step = max(1, (8 << 20) // cols)
            for r in range(0, rows, step):
                a = torch.randn(min(step, rows - r), cols, generator=gen) * 0.02
                b = a + torch.randn(a.shape, generator=gen) * 0.002
                fa.write(a.bfloat16().view(torch.int16).numpy().tobytes())
                fb.write(b.bfloat16().view(torch.int16).numpy().tobytes())
    stamp.write_text(json.dumps(_jsonable(spec)))
    return pa, pb


def _jsonable(spec):
    return {k: [d, list(s)] for k, (d, s) in spec.items()}


def hub_folder(data: Path, pa: Path, pb: Path) -> Path:
    """ROOT/bench/{a,b}/model.safetensors as hard links of the generated files (no disk, no symlinks)."""
    root = data / "hubroot"
    for src, repo in ((pa, "a"), (pb, "b")):
        dst = root / "bench" / repo / "model.safetensors"
        if not (dst.exists() and os.path.samefile(dst, src)):
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.unlink(missing_ok=True)
            os.link(src, dst)
    return root


# -- the modes, each run in a child process ---------------------------------------------------------
def child(mode: str, a: str, b: str, endpoint: str) -> dict:
    import torch

    import resource

    out, extra = {}, {}
    if mode.startswith("eaglekit"):
        import eaglekit.io.pipeline as pipeline
        import eaglekit.io.sources.http as http

        if "-httpx" in mode:
            http.FAST_MIN_BYTES = 1 << 62  # every range through httpx: the path before issue 25
        for flag, depth in (("-t1", 1), ("-t2", 2)):
            if flag in mode:
                pipeline.MAX_DEPTH = depth
        if "-s1" in mode:
            pipeline.START_DEPTH = 1
        if "-f32" in mode:
            pipeline.IN_FLIGHT_BYTES = 32 << 20
        if "-c4" in mode:
            import eaglekit.analysis.similarity.measure as measure

            measure.CHUNK_BYTES = 4 << 20
        if "-sw" in mode:
            import eaglekit.analysis.similarity.measure as measure

            measure.REMOTE_SWITCH_INTERVAL = sys.getswitchinterval()  # the interpreter's default (5 ms)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if mode == "naive":
        from safetensors.torch import load_file

        A, B = load_file(a), load_file(b)
        for k, x in A.items():
            if x.is_floating_point():
                out[k] = float(torch.nn.functional.cosine_similarity(x.float().flatten(), B[k].float().flatten(), dim=0))
    elif mode == "before":  # the implementation this benchmark replaced, from git (--before FILE)
        import importlib.util

        spec = importlib.util.spec_from_file_location("similarity_before", endpoint)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        report = module.similarity(a, b, progress=False)
        out = {t.name: t.cosine for t in report.tensors}
        s = sum(t.totals for t in report.tensors if t.tensor == "fc.weight")
        out["fc.weight"] = float(s[2] / (s[0] * s[1]) ** 0.5)
    elif mode.startswith("eaglekit"):
        from eaglekit.analysis.similarity.measure import similarity

        report = similarity(a, b, progress=False, endpoint=endpoint or None,
                            threads=2 if mode == "eaglekit-t2" else None)
        out = {t.name: t.cosine for t in report.tensors}
        s = sum(t.totals for t in report.tensors if t.tensor == "fc.weight")  # aa, bb, ab, dd
        out["fc.weight"] = float(s[2] / (s[0] * s[1]) ** 0.5)
        extra["bytes_read"] = sum(report.bytes_read)
    elif mode == "floor":
        import warnings

        from eaglekit.io.reader import open_checkpoint

        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        torch.set_num_threads(1)
        step = 2 << 20
        buf = torch.empty(step // 2, dtype=torch.float32)
        for p in (a, b):
            with open_checkpoint(p) as ck:
                for t in ck.inventory:
                    if t.dtype == "BF16":
                        for data in ck.iter_bytes(t.name, chunk_bytes=step):
                            x = torch.frombuffer(data, dtype=torch.bfloat16)
                            buf[:x.numel()].copy_(x)
    elif mode in ("loop64", "loop32"):
        from safetensors import safe_open

        torch.set_num_threads(1)
        wide = torch.float64 if mode == "loop64" else torch.float32
        with safe_open(a, "pt") as fa, safe_open(b, "pt") as fb:
            for name in fa.keys():
                sa, sb = fa.get_slice(name), fb.get_slice(name)
                if sa.get_dtype() != "BF16":
                    continue
                shape = sa.get_shape()
                step = max(1, (1 << 22) // max(1, int(torch.tensor(shape[1:]).prod()) if len(shape) > 1 else 1))
                ab = aa = bb = 0.0
                for r in range(0, shape[0], step):
                    x, y = sa[r:r + step].to(wide), sb[r:r + step].to(wide)
                    ab, aa, bb = ab + float((x * y).sum()), aa + float((x * x).sum()), bb + float((y * y).sum())
                out[name] = ab / (aa * bb) ** 0.5
    else:
        raise SystemExit(f"unknown mode {mode}")
    seconds = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime
    hwm = int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) * 1024
    return {"seconds": seconds, "vmhwm": hwm, "cosines": out, "cpu": cpu, **extra}


def run_child(mode: str, a: str, b: str, endpoint: str = "") -> dict:
    """Run one mode in a subprocess, sampling its anonymous memory; returns the child's figures plus peak_anon."""
    import resource

    parent0 = resource.getrusage(resource.RUSAGE_SELF)
    proc = subprocess.Popen([sys.executable, __file__, "--child", mode, a, b, endpoint], stdout=subprocess.PIPE,
                            text=True)
    peak = [0]

    def sample() -> None:
        path = f"/proc/{proc.pid}/status"
        while proc.poll() is None:
            try:
                status = Path(path).read_text()  # anonymous memory: private (RssAnon) and shared maps (RssShmem)
                peak[0] = max(peak[0], sum(int(status.split(f"{k}:")[1].split()[0]) * 1024 for k in ("RssAnon", "RssShmem")))
            except (OSError, IndexError):
                pass
            time.sleep(0.005)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    out, _ = proc.communicate()
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_anon"] = peak[0]
    result["server_cpu"] = _cpu_since(parent0, resource.RUSAGE_SELF)
    return result


def _cpu_since(before, who: int) -> float:
    import resource

    now = resource.getrusage(who)
    return now.ru_utime - before.ru_utime + now.ru_stime - before.ru_stime


def timed(cmd: list[str]) -> dict:
    import resource

    parent0, children0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"seconds": time.perf_counter() - t0, "peak_anon": 0, "vmhwm": 0, "cosines": {},
            "cpu": _cpu_since(children0, resource.RUSAGE_CHILDREN), "server_cpu": _cpu_since(parent0, resource.RUSAGE_SELF)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=HERE / "data", help="where the generated drafters go")
    ap.add_argument("--small", action="store_true", help="1/4 scale (about 150 MB per drafter)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds; medians are reported")
    ap.add_argument("--modes", default=",".join(MODES),
                    help=f"comma-separated, of {', '.join(MODES)}, eaglekit-t2 (two torch threads), naive")
    ap.add_argument("--naive", action="store_true", help="also the load_file mode (4.5 GB of memory)")
    ap.add_argument("--before", type=Path, help="a previous eaglekit/analysis/similarity.py (e.g. from "
                    "`git show REV:eaglekit/analysis/similarity.py`), run as mode 'before' in the same rounds")
    ap.add_argument("--child", nargs=4, metavar=("MODE", "A", "B", "ENDPOINT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    from eaglekit.demo.fileserver import FileServer
    from eaglekit.demo.hubserver import HubServer

    modes = [m for m in args.modes.split(",") if m] + (["naive"] if args.naive else []) + \
        (["before"] if args.before else [])
    scale = 4 if args.small else 1
    data = args.data / ("small" if args.small else "k2")
    pa, pb = write_pair(data, scale)
    root = hub_folder(data, pa, pb)
    size = pa.stat().st_size + pb.stat().st_size
    subprocess.run(["cat", str(pa), str(pb)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    loads = []
    with HubServer(root) as hub, FileServer(root) as files:
        urls = [f"{files.endpoint}/files/bench/{r}/model.safetensors" for r in ("a", "b")]
        import httpx

        for r in ("a", "b"):  # the Hub server hashes each file once for its ETag: not part of any mode's time
            httpx.head(f"{hub.endpoint}/bench/{r}/resolve/main/model.safetensors", timeout=600)
        for _ in range(args.repeat):
            for mode in modes:
                loads.append(os.getloadavg()[0])
                hub.latency = files.latency = 0.02 if "-20ms" in mode else 0.05 if "-50ms" in mode else 0.0
                if mode == "cat":
                    r = timed(["cat", str(pa), str(pb)])
                elif mode == "curl":
                    r = timed(["curl", "-sf", "-o", "/dev/null", urls[0], "-o", "/dev/null", urls[1]])
                elif mode == "before":
                    r = run_child(mode, str(pa), str(pb), str(args.before))
                elif mode.startswith("eaglekit-http"):
                    r = run_child(mode, *urls)
                elif mode.startswith("eaglekit-hf"):
                    r = run_child(mode, "hf://bench/a", "hf://bench/b", hub.endpoint)
                else:
                    r = run_child(mode, str(pa), str(pb))
                runs[mode].append(r)
                print(f"  {mode:<24}{r['seconds']:8.2f} s  cpu {r['cpu']:6.2f} s  servers {r['server_cpu']:6.2f} s  "
                      f"load {loads[-1]:.2f}", file=sys.stderr)
    med = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items()}
    mib = 1024 * 1024
    print(f"\ntwo drafters, {size / 1e9:.2f} GB of safetensors ({'1/4 scale' if args.small else 'Kimi-K2 scale'}), "
          f"{os.cpu_count()} CPUs, median of {args.repeat} interleaved rounds, load average during the runs "
          f"{min(loads):.2f}-{max(loads):.2f} (median {statistics.median(loads):.2f})")
    print(f"{'mode':<24}{'wall s':>8}{'GB/s':>7}{'CPU s':>7}{'CPU s/GB':>9}{'servers CPU s':>14}"
          f"{'peak anon MiB':>15}{'VmHWM MiB':>11}   runs (s)")
    cpu = {m: statistics.median(r["cpu"] for r in rs) for m, rs in runs.items()}
    for mode, rs in runs.items():
        anon = max(r["peak_anon"] for r in rs) / mib
        hwm = max(r["vmhwm"] for r in rs) / mib
        served = statistics.median(r["server_cpu"] for r in rs)
        print(f"{mode:<24}{med[mode]:>8.2f}{size / med[mode] / 1e9:>7.2f}{cpu[mode]:>7.2f}"
              f"{cpu[mode] / (size / 1e9):>9.3f}{served:>14.2f}{anon:>15.0f}{hwm:>11.0f}   "
              f"{', '.join(format(r['seconds'], '.2f') for r in rs)}")
    if "eaglekit" in med:
        e = med["eaglekit"]
        for anchor in ("floor", "cat", "loop64", "loop32", "naive", "before"):
            if anchor in med:
                print(f"eaglekit throughput / {anchor}: {med[anchor] / e:.2f}")
        for remote in (m for m in med if m.startswith(("eaglekit-http", "eaglekit-hf"))):
            line = f"{remote} throughput / local eaglekit: {e / med[remote]:.2f}"
            if "curl" in med:
                line += f", / curl: {med['curl'] / med[remote]:.2f}"
            line += f"; client CPU beyond local's: {(cpu[remote] - cpu['eaglekit']) / (size / 1e9):.3f} s/GB"
            base = remote.replace("-20ms", "").replace("-50ms", "")
            if base != remote and base in med:
                line += f"; wall / the same at 0 ms: {med[remote] / med[base]:.2f}"
            print(line)
    if "loop64" in runs:
        ref = runs["loop64"][0]["cosines"]
        for name in CHECKED:
            errs = {m: abs(rs[0]["cosines"][name] - ref[name]) for m, rs in runs.items() if name in rs[0]["cosines"]}
            print(f"{name}: float64 cosine {ref[name]:.10f}; |error| " +
                  ", ".join(f"{m} {v:.1e}" for m, v in errs.items() if m != "loop64"))


if __name__ == "__main__":
    main()
