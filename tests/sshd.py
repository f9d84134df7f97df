"""A real OpenSSH ``sshd`` on 127.0.0.1 for tests, and a temporary HOME whose ~/.ssh knows it.

The server runs ``sshd -D -e -f CONFIG`` from a temp dir with a fresh ed25519 host key, public-key
authentication only and ``Subsystem sftp internal-sftp``. It works as root (CI, containers) and as an
ordinary user (sshd then only logs in the user it runs as). The HOME it prepares holds::

    .ssh/id_ed25519        the user's key (also what paramiko's look_for_keys finds)
    .ssh/config            Host <alias> -> HostName 127.0.0.1, Port, User, IdentityFile
    .ssh/known_hosts       [127.0.0.1]:PORT ssh-ed25519 AAAA...

Use it through the ``sshd`` fixture (one server per test module). When sshd is not installed the
fixture fails rather than skips: CI installs openssh-server, so a skip would hide a broken setup.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/opt/homebrew/sbin/sshd")
ALIAS = "eaglekit-test-host"


def find_sshd() -> str:
    """Absolute path of the sshd binary (sshd refuses to start from a relative path)."""
    found = shutil.which("sshd") or next((p for p in SSHD_CANDIDATES if os.access(p, os.X_OK)), None)
    if not found:
        raise RuntimeError("OpenSSH sshd is not installed; the SSH tests need a real server on 127.0.0.1. "
                           "Install it with: apt-get install -y openssh-server")
    return os.path.abspath(found)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, comment: str = "eaglekit-test") -> str:
    """Write an unencrypted ed25519 key pair at ``path`` (and ``path.pub``); return "ssh-ed25519 AAAA..."."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True)
    path.chmod(0o600)
    kind, blob = path.with_name(path.name + ".pub").read_text().split()[:2]
    return f"{kind} {blob}"


@dataclass
class SshServer:
    """A running sshd and the HOME prepared for it."""

    host: str
    port: int
    user: str
    home: Path
    alias: str
    key_path: Path
    known_hosts_path: Path
    #: "ssh-ed25519 AAAA...": the server's public host key.
    host_key: str
    root: Path
    process: subprocess.Popen = field(repr=False)

    @property
    def known_hosts_line(self) -> str:
        """The known_hosts entry OpenSSH writes for a non-22 port: ``[host]:port type key``."""
        return f"[{self.host}]:{self.port} {self.host_key}\n"

    def make_home(self, home: Path, *, key_path: Path | None = None, known_hosts: str | None = None,
                  config: str | None = None) -> Path:
        """Build a HOME at ``home``: its ~/.ssh holds ``key_path`` as id_ed25519 (default: the user's key),
        ``known_hosts`` (default: this server's line) and ``config`` (default: the alias entry)."""
        ssh_dir = home / ".ssh"
        ssh_dir.mkdir(parents=True, exist_ok=True)
        ssh_dir.chmod(0o700)
        identity = ssh_dir / "id_ed25519"
        shutil.copyfile(key_path or self.key_path, identity)
        identity.chmod(0o600)
        (ssh_dir / "known_hosts").write_text(self.known_hosts_line if known_hosts is None else known_hosts)
        if config is None:
            config = (f"Host {self.alias}\n    HostName {self.host}\n    Port {self.port}\n"
                      f"    User {self.user}\n    IdentityFile ~/.ssh/id_ed25519\n")
        (ssh_dir / "config").write_text(config)
        return home

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        """What sshd wrote to stderr so far (``-e``): the reason a login was refused."""
        return (self.root / "sshd.log").read_text(errors="replace")


def _sshd_config(root: Path, port: int, host_key: Path, authorized_keys: Path) -> str:
    lines = [
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {host_key}",
        f"PidFile {root / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized_keys}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "StrictModes no",  # temp dirs are world-traversable; sshd would refuse them
        "UsePAM no",
        "PermitRootLogin yes" if os.geteuid() == 0 else "PermitRootLogin no",
        "AllowTcpForwarding yes",  # ProxyJump tests tunnel through this same server
        "Subsystem sftp internal-sftp",
        "LogLevel VERBOSE",
    ]
    return "\n".join(lines) + "\n"


def _wait_for_port(server: SshServer, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"sshd exited with code {server.process.returncode}:\n{server.log()}")
        try:
            with socket.create_connection((server.host, server.port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"sshd did not accept connections on {server.host}:{server.port} within {timeout} s:\n"
                       f"{server.log()}")


def start_sshd(root: Path) -> SshServer:
    """Start sshd with its files under ``root`` and build ``root/home``; the caller stops it."""
    sshd = find_sshd()
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        # sshd's privilege-separation directory: absent in slim containers until the service first runs.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    host_key = keygen(root / "ssh_host_ed25519_key", "eaglekit-test-host")
    key_path = root / "user_ed25519"
    user_pub = keygen(key_path, "eaglekit-test-user")
    authorized_keys = root / "authorized_keys"
    authorized_keys.write_text(user_pub + "\n")
    port = free_port()
    config = root / "sshd_config"
    config.write_text(_sshd_config(root, port, root / "ssh_host_ed25519_key", authorized_keys))
    log = open(root / "sshd.log", "wb")  # noqa: SIM115 - sshd inherits the descriptor
    try:
        process = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()
    home = root / "home"
    server = SshServer(host="127.0.0.1", port=port, user=pwd.getpwuid(os.geteuid()).pw_name, home=home,
                       alias=ALIAS, key_path=key_path, known_hosts_path=home / ".ssh" / "known_hosts",
                       host_key=host_key, root=root, process=process)
    server.make_home(home)
    _wait_for_port(server)
    return server


@contextmanager
def running_sshd(root: Path) -> Iterator[SshServer]:
    server = start_sshd(root)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """One real sshd on 127.0.0.1 per test module (fails, never skips, when sshd is missing)."""
    try:
        find_sshd()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
