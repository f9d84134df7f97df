"""The lab's token (issue 23): never on a command line (another local user reads /proc/PID/cmdline), given
to Jupyter through a file only this user can read, shown once in the URL; the server on 127.0.0.1 only.
Runs the real ``eaglekit lab`` on the session demo, in a subprocess, and stops it."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


from eaglekit.cli.lab import lab_env, token_file

REPO = Path(__file__).resolve().parents[2]
#: A guard against a hang only: the command prints its URL once JupyterLab serves (it waits for the server's
#: jpserver-<pid>.json, however slow the start), so nothing here races the server's start.
START_LIMIT = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_url(proc: subprocess.Popen, deadline: float) -> tuple[str, str]:
    """The URL the command prints (and everything it printed so far), read without blocking past ``deadline``."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    out = ""
    while time.monotonic() < deadline:
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        chunk = os.read(proc.stdout.fileno(), 65536).decode()
        if not chunk:
            break
        out += chunk
        m = re.search(r"http://127\.0\.0\.1:\d+/lab\?token=([0-9a-f]+)\n", out)
        if m:
            return m[0].strip(), out
    raise AssertionError(f"no URL printed: {out!r}")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _every_cmdline() -> list[bytes]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    return lines


def test_the_token_is_on_no_command_line_and_reaches_jupyter_by_a_private_file(demo, tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTER_TOKEN": "an-inherited-token-jupyter-would-prefer",
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "eaglekit", "lab", "--demo", str(demo.root), "--port", str(port),
                             "--notebooks", str(notebooks)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + START_LIMIT
        url, printed = _read_url(proc, deadline)
        token = url.rsplit("=", 1)[1]
        base = f"http://127.0.0.1:{port}/api/status"
        assert "JupyterLab is serving" in printed
        assert _status(f"{base}?token={token}") == 200        # printed only once it serves: no wait, no retry
        assert _status(base) == 403 and _status(f"{base}?token=an-inherited-token-jupyter-would-prefer") == 403
        assert printed.count(token) == 1  # shown once, in the URL
        assert _listening(port) == {"0100007F"}  # 127.0.0.1 only (no 0.0.0.0, no IPv6 wildcard)

        tree = _descendants(proc.pid)
        assert len(tree) >= 2  # this command and the Jupyter server
        assert not any(token.encode() in line for line in _every_cmdline())
        server_env = [(Path(f"/proc/{p}/environ").read_bytes().split(b"\0")) for p in tree[1:]]
        files = {v.split(b"=", 1)[1].decode() for e in server_env for v in e if v.startswith(b"JUPYTER_TOKEN_FILE=")}
        assert len(files) == 1 and not any(v.startswith(b"JUPYTER_TOKEN=") for e in server_env for v in e)
        secret = Path(files.pop())
        assert secret.read_text() == token
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    finally:
        proc.send_signal(signal.SIGTERM)  # the command stops its server, then removes the token file
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert not secret.exists() and not secret.parent.exists()
    assert proc.stderr.read().decode().count(token) == 0  # Jupyter's own log masks a token it did not make


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp* write them) with a socket listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def _status_or_none(url: str) -> int | None:
    try:
        return _status(url)
    except OSError:
        return None


def test_the_token_file_is_private_and_removed(tmp_path):
    with token_file("abc123") as path:
        assert path.read_text() == "abc123"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists() and not path.parent.exists()


def test_an_inherited_token_never_reaches_the_server(tmp_path):
    env = lab_env(demo=tmp_path, root_dir=tmp_path, base={"JUPYTER_TOKEN": "x", "JUPYTER_TOKEN_FILE": "/elsewhere"},
                  token=tmp_path / "t")
    assert "JUPYTER_TOKEN" not in env and env["JUPYTER_TOKEN_FILE"] == str(tmp_path / "t")
