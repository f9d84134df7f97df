"""Crafted safetensors headers through the CLI: refused with one line and exit 2, in bounded memory and time.

Each case runs ``eaglekit inspect FILE`` in a child process that reports its exit code, stderr and peak
resident memory (VmHWM from /proc): the parse must not build gigabytes before saying no.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time

import pytest

CHILD = r"""
import contextlib, io, json, sys
from eaglekit.cli import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    rc = main(["inspect", sys.argv[1]])
status = open("/proc/self/status").read()
hwm = int(status.split("VmHWM:")[1].split()[0]) * 1024
print(json.dumps({"rc": rc, "stderr": err.getvalue(), "vmhwm": hwm}))
"""


def _file(tmp_path, text: bytes, name: str) -> str:
    path = tmp_path / f"{name}.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text)
    return str(path)


def _zero_size_flood() -> bytes:
    """A header at the 100 MB cap describing 1.7 M zero-size tensors (75 s and 1.65 GB before)."""
    entry = b'"%x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    text = b"{" + b",".join(entry % i for i in range(1_700_000)) + b"}"
    assert 90_000_000 < len(text) <= 100_000_000
    return text


CASES = {
    "zero-size flood": (_zero_size_flood, "more than 500,000 tensors"),
    "long shape": (lambda: b'{"t":{"dtype":"F32","shape":[' + b"2," * 1_000_000 + b'0],"data_offsets":[0,0]}}',
                   "overflows 64 bits"),
    "deep nesting": (lambda: b'{"t":' + b"[" * 500_000 + b"]" * 500_000 + b"}", "nests JSON"),
    "5000 digits": (lambda: b'{"t":{"dtype":"F32","shape":[' + b"7" * 5000 + b'],"data_offsets":[0,0]}}',
                    "number too long"),
    "10^400 shape": (lambda: b'{"t":{"dtype":"F32","shape":[1' + b"0" * 400 + b'],"data_offsets":[0,0]}}',
                     "overflows 64 bits"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_crafted_header_is_refused_in_one_line(tmp_path, case):
    make, fragment = CASES[case]
    path = _file(tmp_path, make(), case.replace(" ", "-").replace("^", ""))
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    assert out.returncode == 0, out.stderr[-2000:]  # the child itself ran to the end: no traceback
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rc"] == 2
    lines = result["stderr"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eaglekit inspect: error:") and fragment in lines[0], lines
    assert result["vmhwm"] < 512 * 1024 * 1024, f"peak memory {result['vmhwm'] / 2**20:.0f} MiB"
    assert wall < 60, f"{wall:.1f} s"  # the deadline a user would accept; the old parser took 36-75 s
