"""The memory bound: comparing tensors far larger than the bound keeps a process's anonymous memory flat.

A child process compares two 768 MiB bf16 tensors (1.5 GiB as float32 each); the parent samples the
child's RssAnon from /proc every 2 ms (page cache of the read file is file-backed, not anonymous, so it
does not count). The files are sparse (holes read as zeros) with random rows at both ends, so they cost
almost no disk and are deleted afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from eaglekit.analysis.similarity.measure import LOCAL_CHUNK_BYTES

ROWS, COLS = 24576, 16384  # bf16: 768 MiB per tensor
MIB = 1024 * 1024

CHILD = """
import json, sys
import torch, tqdm.auto, eaglekit.analysis.similarity.measure as s
def anon():
    return int(open("/proc/self/status").read().split("RssAnon:")[1].split()[0]) * 1024
base = anon()
print(json.dumps({"baseline": base}), flush=True)
sys.stdin.readline()  # the parent has sampled the baseline
chunk = int(sys.argv[3]) if len(sys.argv) > 3 else None
r = s.similarity(sys.argv[1], sys.argv[2], progress=False, chunk_bytes=chunk)
t = r["w"]
print(json.dumps({"cosine": t.cosine, "rows": t.rows_compared, "read": sum(r.bytes_read)}), flush=True)
"""


def _sparse_safetensors(path: Path, seed: int) -> None:
    header = json.dumps({"w": {"dtype": "BF16", "shape": [ROWS, COLS], "data_offsets": [0, ROWS * COLS * 2]}}).encode()
    header += b" " * (-len(header) % 8)
    rng = np.random.default_rng(seed)
    edge = (rng.standard_normal((64, COLS)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # bf16 bits
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        start = f.tell()
        f.write(edge.tobytes())
        f.seek(start + (ROWS - 64) * COLS * 2)
        f.write(edge.tobytes())
        f.truncate(start + ROWS * COLS * 2)


def _peak_anon(args: list[str]) -> tuple[int, int, dict]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[2])
    baseline = json.loads(proc.stdout.readline())["baseline"]
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peak[0] = max(peak[0], int(status.split("RssAnon:")[1].split()[0]) * 1024)
            except (OSError, IndexError):
                pass
            time.sleep(0.002)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    time.sleep(0.05)
    out, _ = proc.communicate("go\n", timeout=120)
    watcher.join()
    assert proc.returncode == 0
    return baseline, peak[0], json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("chunk", [None, 16 * MIB], ids=["local-default", "remote-chunks"])
def test_peak_anonymous_memory_stays_flat(tmp_path, chunk):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    _sparse_safetensors(a, 1)
    _sparse_safetensors(b, 1)
    try:
        baseline, peak, out = _peak_anon([str(a), str(b)] + ([str(chunk)] if chunk else []))
    finally:
        a.unlink()
        b.unlink()
    tensor_bytes = ROWS * COLS * 2
    assert out["rows"] == ROWS and out["read"] == 2 * tensor_bytes
    assert out["cosine"] == pytest.approx(1.0)
    growth = peak - baseline
    # Two reads in flight per side (one computing, one prefetched) plus float32 scratch, and slack
    # for the allocator: 44 MiB with the local 2 MiB reads, 128 MiB with 16 MiB remote-sized reads.
    bound = 6 * (chunk or LOCAL_CHUNK_BYTES) + 32 * MIB
    assert growth < bound, f"anonymous memory grew by {growth / MIB:.0f} MiB while streaming"
    assert growth < tensor_bytes / 6  # each tensor is 768 MiB (1.5 GiB as float32)
    assert peak < 512 * MIB
