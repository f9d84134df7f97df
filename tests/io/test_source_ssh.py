"""SshSource against a real OpenSSH sshd on 127.0.0.1 (tests/sshd.py), HOME pointed at a temp folder."""

from __future__ import annotations

import os
import random
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sshd import SshServer, free_port, keygen, sshd  # noqa: F401 - sshd is the fixture

import eaglekit.io.sources.ssh as ssh_mod
from eaglekit.core.errors import AuthError, HostKeyError, LocationError, NotFoundError, TooLargeError
from eaglekit.io.sources import open_source
from eaglekit.io.sources.ssh import SshSource

pytestmark = pytest.mark.ssh

MODEL = "model.safetensors"


@pytest.fixture(scope="module")
def remote(sshd: SshServer) -> Path:
    """The 'remote' checkpoint folder (same machine, reached over SFTP): files, a subfolder, links."""
    folder = sshd.root / "ckpt"
    folder.mkdir()
    (folder / MODEL).write_bytes(random.Random(0).randbytes(3 * 1024 * 1024 + 123))
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    (folder / "empty.json").write_bytes(b"")
    (folder / "subdir").mkdir()
    (folder / "linked.json").symlink_to(folder / "config.json")
    (folder / "dangling.json").symlink_to(folder / "missing.json")
    return folder


@pytest.fixture
def home(sshd: SshServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME is the fixture's temp home (~/.ssh/config, known_hosts, id_ed25519); no ssh-agent."""
    monkeypatch.setenv("HOME", str(sshd.home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return sshd.home


def other_home(sshd: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **kwargs) -> Path:
    home = sshd.make_home(tmp_path / "home", **kwargs)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


# -- reading ------------------------------------------------------------------------------------------


def test_read_range_via_config_alias_url(sshd, remote, home):
    src, loc = open_source(f"ssh://{sshd.alias}{remote}/{MODEL}")
    with src:
        assert (loc.kind, loc.filename, loc.folder) == ("ssh", MODEL, str(remote))
        assert (src.host, src.port, src.user) == ("127.0.0.1", sshd.port, sshd.user)  # from ~/.ssh/config
        chunk = src.read(MODEL, 1000, 5000)
    local = (remote / MODEL).read_bytes()
    assert chunk.data == local[1000:6000]
    assert chunk.file_size == len(local)


def test_scp_style_alias_lists_regular_files_and_links_to_files(sshd, remote, home):
    src, loc = open_source(f"{sshd.alias}:{remote}")
    with src:
        assert loc.kind == "ssh" and loc.filename is None
        # no subfolder, no dangling link; a link to a file counts (Hub cache snapshots are links)
        assert src.list() == ["config.json", "empty.json", "linked.json", MODEL]


def test_explicit_user_and_port_without_config_entry(sshd, remote, home):
    # 127.0.0.1 has no Host entry: the key is found as ~/.ssh/id_ed25519 (look_for_keys)
    src, _ = open_source(f"ssh://{sshd.user}@127.0.0.1:{sshd.port}{remote}")
    with src:
        assert src.read_small("config.json") == (remote / "config.json").read_bytes()


def test_explicit_port_wins_over_config(sshd, remote, home, tmp_path, monkeypatch):
    config = f"Host {sshd.alias}\n  HostName 127.0.0.1\n  Port {free_port()}\n  User {sshd.user}\n"
    other_home(sshd, monkeypatch, tmp_path, config=config)
    with SshSource(sshd.alias, str(remote), port=sshd.port) as src:
        assert src.port == sshd.port
        assert src.read(MODEL, 0, 8).data == (remote / MODEL).read_bytes()[:8]


def test_read_after_close_says_so(sshd, remote, home):
    src = SshSource(sshd.alias, str(remote))
    src.close()
    src.close()  # closing twice is harmless
    with pytest.raises(LocationError, match="this source was closed"):
        src.read(MODEL, 0, 1)


def test_read_clips_at_end_of_file(sshd, remote, home):
    size = (remote / MODEL).stat().st_size
    with SshSource(sshd.alias, str(remote)) as src:
        tail = src.read(MODEL, size - 10, 1000)
        past = src.read(MODEL, size + 5, 10)
    assert tail.data == (remote / MODEL).read_bytes()[-10:]
    assert (past.data, past.file_size) == (b"", size)


def test_large_read_many_pipelined_requests(sshd, remote, home, monkeypatch):
    local = (remote / MODEL).read_bytes()
    monkeypatch.setattr(ssh_mod, "READ_REQUEST_SIZE", 4096)
    monkeypatch.setattr(ssh_mod, "MAX_IN_FLIGHT", 7)
    with SshSource(sshd.alias, str(remote)) as src:
        assert src.read(MODEL, 17, len(local)).data == local[17:]


def test_server_capped_replies_are_completed(sshd, remote, home, monkeypatch):
    # OpenSSH answers at most 255 KiB per read: asking 1 MiB gets short replies, which must be completed
    local = (remote / MODEL).read_bytes()
    monkeypatch.setattr(ssh_mod, "READ_REQUEST_SIZE", 1024 * 1024)
    with SshSource(sshd.alias, str(remote)) as src:
        assert src.read(MODEL, 5, len(local)).data == local[5:]


def test_concurrent_reads_from_threads(sshd, remote, home):
    local = (remote / MODEL).read_bytes()
    rng = random.Random(1)
    ranges = [(rng.randrange(len(local)), rng.randrange(1, 400_000)) for _ in range(48)]
    with SshSource(sshd.alias, str(remote), max_sessions=3) as src:
        with ThreadPoolExecutor(8) as pool:
            chunks = list(pool.map(lambda r: src.read(MODEL, *r), ranges))
        assert 1 <= len(src._sessions) <= 3
    for (start, length), chunk in zip(ranges, chunks):
        assert chunk.data == local[start:start + length]


def test_read_small_present_absent_empty_and_too_large(sshd, remote, home):
    with SshSource(sshd.alias, str(remote)) as src:
        assert src.read_small("config.json") == (remote / "config.json").read_bytes()
        assert src.read_small("absent.json") is None
        assert src.read_small("empty.json") == b""
        with pytest.raises(TooLargeError, match=r"model\.safetensors is \d+ bytes, larger than 1000"):
            src.read_small(MODEL, limit=1000)


# -- errors -------------------------------------------------------------------------------------------


def test_missing_file_is_not_found_naming_remote_path(sshd, remote, home):
    with SshSource(sshd.alias, str(remote)) as src:
        with pytest.raises(NotFoundError, match=f"no such file {remote}/absent.safetensors on "
                                                f"{sshd.user}@127.0.0.1:{sshd.port}"):
            src.read("absent.safetensors", 0, 10)
        # the session survives the error
        assert src.read(MODEL, 0, 4).data == (remote / MODEL).read_bytes()[:4]


def test_missing_folder_is_not_found_at_open(sshd, remote, home):
    with pytest.raises(NotFoundError, match=f"no such folder {remote}/nope on"):
        open_source(f"{sshd.alias}:{remote}/nope")


def test_names_outside_the_folder_are_refused(sshd, remote, home):
    with SshSource(sshd.alias, str(remote)) as src:
        with pytest.raises(LocationError, match="refusing file name '../sshd_config'"):
            src.read("../sshd_config", 0, 10)


def test_folder_name_is_not_a_file(sshd, remote, home):
    with SshSource(sshd.alias, str(remote)) as src:
        with pytest.raises(LocationError, match="subdir is a folder, not a file"):
            src.read("subdir", 0, 10)


def test_unknown_host_key_is_refused_with_keyscan_hint(sshd, remote, tmp_path, monkeypatch):
    other_home(sshd, monkeypatch, tmp_path, known_hosts="")
    with pytest.raises(HostKeyError) as e:
        open_source(f"{sshd.alias}:{remote}")
    msg = str(e.value)
    assert f"Host key for 127.0.0.1:{sshd.port} is not in ~/.ssh/known_hosts" in msg
    assert "eaglekit never accepts unknown host keys" in msg
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> ~/.ssh/known_hosts" in msg


def test_strict_host_key_checking_no_is_ignored(sshd, remote, tmp_path, monkeypatch):
    config = (f"Host {sshd.alias}\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
              "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n")
    other_home(sshd, monkeypatch, tmp_path, known_hosts="", config=config)
    with pytest.raises(HostKeyError, match="never accepts unknown host keys"):
        SshSource(sshd.alias, str(remote))


def test_host_key_on_port_22_form_does_not_match_other_port(sshd, remote, tmp_path, monkeypatch):
    # known_hosts stores non-22 ports as "[host]:port"; a bare "127.0.0.1" entry is another host
    other_home(sshd, monkeypatch, tmp_path, known_hosts=f"127.0.0.1 {sshd.host_key}\n")
    with pytest.raises(HostKeyError, match="is not in"):
        SshSource(sshd.alias, str(remote))


def test_changed_host_key_is_refused(sshd, remote, tmp_path, monkeypatch):
    impostor = keygen(tmp_path / "impostor")
    other_home(sshd, monkeypatch, tmp_path, known_hosts=f"[127.0.0.1]:{sshd.port} {impostor}\n")
    with pytest.raises(HostKeyError) as e:
        SshSource(sshd.alias, str(remote))
    msg = str(e.value)
    assert f"Host key for 127.0.0.1:{sshd.port} does not match the one in ~/.ssh/known_hosts" in msg
    assert "man in the middle" in msg
    assert f"ssh-keygen -R '[127.0.0.1]:{sshd.port}'" in msg


def test_wrong_key_is_auth_error_saying_what_was_tried(sshd, remote, tmp_path, monkeypatch):
    wrong = tmp_path / "wrong_key"
    keygen(wrong)
    home = other_home(sshd, monkeypatch, tmp_path, key_path=wrong)
    with pytest.raises(AuthError) as e:
        open_source(f"ssh://{sshd.alias}{remote}")
    msg = str(e.value)
    assert f"SSH authentication failed for {sshd.user}@127.0.0.1:{sshd.port} (host '{sshd.alias}')" in msg
    assert f"tried: ssh-agent (not running), {home}/.ssh/id_ed25519" in msg
    assert "ssh-add" in msg and "IdentityFile" in msg
    assert "PRIVATE KEY" not in msg


def test_connection_refused_names_host_and_port(sshd, remote, home):
    port = free_port()
    with pytest.raises(LocationError) as e:
        SshSource("127.0.0.1", str(remote), port=port)
    assert type(e.value) is LocationError
    assert f"Cannot reach SSH server 127.0.0.1:{port} (as " in str(e.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file_is_auth_error(sshd, remote, home):
    secret = remote / "secret.json"
    secret.write_text("{}")
    secret.chmod(0)
    with SshSource(sshd.alias, str(remote)) as src:
        with pytest.raises(AuthError, match="permission denied reading"):
            src.read("secret.json", 0, 2)


# -- proxies ------------------------------------------------------------------------------------------

RELAY = textwrap.dedent("""\
    import socket, sys, threading
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    def up():
        while data := sys.stdin.buffer.read1(65536):
            s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    threading.Thread(target=up, daemon=True).start()
    while data := s.recv(65536):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
""")


def test_proxy_command_from_config(sshd, remote, tmp_path, monkeypatch):
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    config = (f"Host viaproxy\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
              f"  ProxyCommand {sys.executable} {relay} %h %p\n")
    other_home(sshd, monkeypatch, tmp_path, config=config)
    with SshSource("viaproxy", str(remote)) as src:
        assert src.read(MODEL, 100, 50).data == (remote / MODEL).read_bytes()[100:150]


def test_proxy_jump_through_a_checked_host(sshd, remote, tmp_path, monkeypatch):
    config = (f"Host jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
              f"Host behind\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  ProxyJump jump\n")
    other_home(sshd, monkeypatch, tmp_path, config=config)
    with SshSource("behind", str(remote)) as src:
        assert len(src._jumps) == 1
        assert src.list()[-1] == MODEL


def test_proxy_jump_host_key_is_checked_too(sshd, remote, tmp_path, monkeypatch):
    config = (f"Host jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
              f"Host behind\n  HostName 10.0.0.1\n  ProxyJump jump\n")
    other_home(sshd, monkeypatch, tmp_path, config=config, known_hosts="")
    with pytest.raises(HostKeyError, match=f"Host key for 127.0.0.1:{sshd.port} is not in"):
        SshSource("behind", str(remote))


def test_too_large_is_its_own_error_on_every_source(tmp_path):
    """A small file past its cap raises TooLargeError (a LocationError) from the local and HTTP sources as from
    SSH above, so callers catch the type instead of matching message text."""
    from eaglekit.demo.fileserver import FileServer
    from eaglekit.io.sources import open_source

    (tmp_path / "config.json").write_bytes(b"{" + b" " * 5000 + b"}")
    (tmp_path / "model.safetensors").write_bytes(b"")  # an HTTP location names a file; config.json sits beside it
    local, _ = open_source(str(tmp_path))
    with local, pytest.raises(TooLargeError, match="larger than 1000 bytes"):
        local.read_small("config.json", limit=1000)
    with FileServer(tmp_path) as server:
        remote, _ = open_source(server.endpoint + "/files/model.safetensors")
        with remote, pytest.raises(TooLargeError, match="larger than 1000 bytes"):
            remote.read_small("config.json", limit=1000)
    assert issubclass(TooLargeError, LocationError)
