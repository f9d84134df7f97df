"""A folder on another machine, read over SFTP: ``ssh://[user@]host[:port]/abs/path`` or ``host:/abs/path``.

SFTP needs nothing on the remote host but sshd (no Python). Connection settings follow OpenSSH:
``~/.ssh/config`` (HostName, User, Port, IdentityFile, IdentitiesOnly, ConnectTimeout, ProxyCommand,
ProxyJump, UserKnownHostsFile), the keys in ``~/.ssh`` and the ssh-agent. A user or port written in the
location wins over the config. Every ``~`` goes through ``os.path.expanduser``, as paramiko does, so a
test can point HOME at a temporary folder.

Host keys are checked against ``~/.ssh/known_hosts`` and ``/etc/ssh/ssh_known_hosts``; an unknown key is
refused (``paramiko.RejectPolicy``) and a changed one too, each with the command that fixes it.
StrictHostKeyChecking in the config is deliberately ignored. This is also why the module does not
use fsspec's SFTPFileSystem: it installs ``paramiko.AutoAddPolicy``, which silently trusts any host key
it has never seen, so a man in the middle would get the connection without a word.
"""

from __future__ import annotations

import errno
import getpass
import logging
import os
import posixpath
import stat
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

import paramiko
from paramiko.sftp import CMD_DATA, CMD_READ, CMD_STATUS, int64

from eaglekit.core.errors import AuthError, HostKeyError, LocationError, NotFoundError, TooLargeError
from eaglekit.core.redact import shown
from eaglekit.io.sources.base import SMALL_FILE_LIMIT, Chunk, Source
from eaglekit.io.location import check_ssh_host

SSH_PORT = 22
DEFAULT_TIMEOUT = 15.0  # seconds, for connecting, the banner and authentication (ConnectTimeout wins)
KNOWN_HOSTS = "~/.ssh/known_hosts"
SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
# What paramiko's look_for_keys tries, named in the AuthError message.
DEFAULT_KEYS = ("~/.ssh/id_rsa", "~/.ssh/id_dsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")

# Throughput (see _pipelined_read). Measured on a shared 2-core machine, loopback, 200 MB file read as
# 64 MiB chunks: about 250 MB/s, 0.5 s of client CPU per 200 MB. OpenSSH's sftp-server answers reads of
# up to 255 KiB (smaller caps elsewhere are detected from the first short reply); 16 of them fill the
# 4 MiB channel window. A wider window did not help here: paramiko's channel buffer shifts its whole
# content on every read, so a full buffer costs CPU; on a long-distance link it rarely fills.
READ_REQUEST_SIZE = 255 * 1024
MAX_IN_FLIGHT = 16
WINDOW_SIZE = 4 * 1024 * 1024
FAST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")

# paramiko's transport thread logs a traceback at ERROR for every failed handshake; with no logging set
# up Python would print it to stderr beside our own one-line error. A NullHandler stops that fallback
# and still lets an application that configures logging see paramiko's records.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

_FROM_CONFIG = object()  # _connect's default sock: whatever ~/.ssh/config says (proxy or plain TCP)


def _host_port(host: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts: ``host`` on port 22, ``[host]:port`` elsewhere."""
    return host if port == SSH_PORT else f"[{host}]:{port}"


def _keyscan(host: str, port: int) -> str:
    return f"ssh-keyscan {'' if port == SSH_PORT else f'-p {port} '}{host} >> {KNOWN_HOSTS}"


class _RejectUnknownHost(paramiko.RejectPolicy):
    """RejectPolicy, raising our HostKeyError with the command that trusts the host."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def missing_host_key(self, client, hostname, key) -> None:
        raise HostKeyError(
            f"Host key for {self.host}:{self.port} is not in {KNOWN_HOSTS}; eaglekit never accepts unknown "
            f"host keys. If you trust this host, add it with: {_keyscan(self.host, self.port)} "
            f"(or connect once with ssh and answer yes); the server offered {key.get_name()} "
            f"{key.fingerprint}.")


def _fast_transport(sock, **kwargs) -> paramiko.Transport:
    """A Transport with a wider window that prefers AES-GCM (about 30% faster than paramiko's AES-CTR+HMAC)."""
    t = paramiko.Transport(sock, default_window_size=WINDOW_SIZE, **kwargs)
    opts = t.get_security_options()
    opts.ciphers = tuple(c for c in FAST_CIPHERS if c in opts.ciphers) + tuple(
        c for c in opts.ciphers if c not in FAST_CIPHERS)
    return t


class _ProxyCommand(paramiko.ProxyCommand):
    """paramiko's ProxyCommand, closed safely: paramiko kills by pid, even after the process has exited
    and been reaped, so a ProxyCommand that exits early made its transport thread and its atexit handler
    print a ProcessLookupError traceback (and could signal an unrelated process that reused the pid)."""

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.terminate()
            except ProcessLookupError:
                pass


class _Replies:
    """Collects the answers to pipelined requests: paramiko's SFTPClient hands each reply to the object
    passed to ``_async_request`` by calling its ``_async_response``, as it does for SFTPFile."""

    def __init__(self) -> None:
        self.got: dict[int, tuple[int, paramiko.Message]] = {}

    def _async_response(self, t: int, msg: paramiko.Message, num: int) -> None:
        self.got[num] = (t, msg)


def _pipelined_read(f: paramiko.SFTPFile, start: int, end: int) -> bytes:
    """Bytes [start, end) of an open remote file, with up to MAX_IN_FLIGHT read requests outstanding.

    One request at a time costs a round trip per request. paramiko's public pipelining (readv,
    prefetch) was measured and dropped: a race between its prefetch thread and the replies can fall
    back to one round trip per request (16 MB/s instead of 300 for a 64 MiB read), it scans its buffer
    dict on every read (slower the wider the window), and BufferedFile.read grows bytes by
    concatenation (quadratic). This loop uses the same private SFTPClient calls SFTPFile itself uses
    (``_async_request``, ``_read_response``, ``_convert_status``; stable since paramiko 1.x), on a session
    no other thread touches. A short reply (servers cap a read, at 255 KiB for OpenSSH) is completed by
    asking for the rest.
    """
    sftp, buf, replies = f.sftp, bytearray(end - start), _Replies()
    request_size, cursor = READ_REQUEST_SIZE, start
    retry: deque[tuple[int, int]] = deque()  # remainders of short replies
    in_flight: deque[tuple[int, int, int]] = deque()  # (request number, offset, length)
    while cursor < end or retry or in_flight:
        while (retry or cursor < end) and len(in_flight) < MAX_IN_FLIGHT:
            if retry:
                offset, n = retry.popleft()
            else:
                offset, n = cursor, min(request_size, end - cursor)
                cursor += n
            in_flight.append((sftp._async_request(replies, CMD_READ, f.handle, int64(offset), n), offset, n))
        num, offset, n = in_flight.popleft()
        while num not in replies.got:
            sftp._read_response()  # reads one reply, whichever it is, into replies.got
        t, msg = replies.got.pop(num)
        if t == CMD_STATUS:
            sftp._convert_status(msg)  # raises EOFError past the end, OSError on an error status
        if t != CMD_DATA:
            raise paramiko.SFTPError(f"expected data in reply to a read, got packet type {t}")
        data = msg.get_string()
        if not data:
            raise EOFError("empty read")
        buf[offset - start:offset - start + len(data)] = data
        if len(data) < n:  # the server caps reads: ask for the rest, and ask that much from now on
            retry.append((offset + len(data), n - len(data)))
            request_size = min(request_size, len(data))
    return bytes(buf)


def _allowed_roots(real_folder: str) -> tuple[str, ...]:
    """The folder, and the repo's blobs/ when it is a Hugging Face cache snapshot (all links into blobs/)."""
    parts = real_folder.rstrip("/").split("/")
    roots = [real_folder]
    if "snapshots" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("snapshots")
        roots.append("/".join(parts[:i] + ["blobs"]))
    return tuple(roots)


def _read_config(alias: str) -> dict:
    path = os.path.expanduser("~/.ssh/config")
    if not os.path.isfile(path):
        return {}
    try:
        return dict(paramiko.SSHConfig.from_path(path).lookup(alias))
    except Exception as e:  # a malformed line, or "Match exec" without invoke installed
        raise LocationError(f"Cannot read {path} for host {alias!r}: {type(e).__name__}: {e}") from e


class _Session:
    """One SFTP channel and the files it has open. Used by one thread at a time (see SshSource)."""

    def __init__(self, sftp: paramiko.SFTPClient) -> None:
        self.sftp = sftp
        self.files: dict[str, paramiko.SFTPFile] = {}
        #: Set when a read failed midway: the session is closed instead of going back to the pool.
        self.broken = False

    def open(self, path: str) -> paramiko.SFTPFile:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = self.sftp.open(path, "rb")
        return f

    def close(self) -> None:
        for path in list(self.files):
            self.forget(path)
        try:
            self.sftp.close()
        except Exception:  # the connection may already be gone
            pass

    def forget(self, path: str) -> None:
        f = self.files.pop(path, None)
        if f is not None:
            try:
                f.close()
            except Exception:  # the handle may be half-read; the channel stays usable
                pass


class SshSource(Source):
    """Files in ``folder`` on ``host``, read by byte range over SFTP.

    Connects in the constructor, so a wrong host, key or path fails at once with a message saying what
    to do. Thread-safe: paramiko's SFTPClient is not (a thread waiting for its reply may swallow another
    thread's), so each thread borrows a whole SFTP session from a small pool over the one SSH
    connection. That keeps parallel shard reads truly parallel instead of queueing on one lock, and
    ``max_sessions`` stays under OpenSSH's MaxSessions (default 10) per connection.
    """

    kind = "ssh"

    def __init__(self, host: str, folder: str, *, user: str | None = None, port: int | None = None,
                 display: str | None = None, timeout: float | None = None, max_sessions: int = 4) -> None:

        super().__init__(display or f"ssh://{host}{folder}")
        check_ssh_host(host)  # a name with spaces would become extra words of a ProxyCommand's %h
        self.folder = folder.rstrip("/") or "/"
        self._roots: tuple[str, ...] = ()  # real folders files may resolve into (see _size)
        cfg = _read_config(host)
        self.host = cfg.get("hostname", host)
        self.port = int(port or cfg.get("port") or SSH_PORT)
        self.user = user or cfg.get("user") or getpass.getuser()
        self.timeout = float(timeout or cfg.get("connecttimeout") or DEFAULT_TIMEOUT)
        self._jumps: list[paramiko.SSHClient] = []
        self._proxies: list[paramiko.ProxyCommand] = []
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._idle: list[_Session] = []
        self._sessions: list[_Session] = []
        self._slots = threading.BoundedSemaphore(max_sessions)
        self._client: paramiko.SSHClient | None = None
        try:
            self._client = self._connect(self.host, self.port, self.user, cfg, alias=host)
            with self._session() as s, self._sftp_errors(self.folder, "folder"):
                s.sftp.stat(self.folder)
                self._roots = _allowed_roots(s.sftp.normalize(self.folder))
        except BaseException:
            self.close()
            raise

    # -- connecting -------------------------------------------------------------------------------

    def _connect(self, host: str, port: int, user: str, cfg: dict, *, alias: str,
                 sock: object = _FROM_CONFIG) -> paramiko.SSHClient:
        """An authenticated SSHClient over ``sock`` (default: the config's ProxyCommand/ProxyJump, or TCP)."""
        where = f"{user}@{host}:{port}"
        client = paramiko.SSHClient()
        known = [os.path.expanduser(p) for p in cfg.get("userknownhostsfile", KNOWN_HOSTS).split()]
        for path in [SYSTEM_KNOWN_HOSTS, *known]:
            if os.path.isfile(path):
                client.load_system_host_keys(path)
        client.set_missing_host_key_policy(_RejectUnknownHost(host, port))
        identities = [os.path.expanduser(p) for p in cfg.get("identityfile", [])]
        identities_only = cfg.get("identitiesonly", "no").lower() == "yes"
        try:
            if sock is _FROM_CONFIG:
                sock = self._proxy(host, port, cfg)
            client.connect(host, port, username=user, key_filename=[p for p in identities if os.path.isfile(p)],
                           allow_agent=True, look_for_keys=not identities_only, sock=sock,
                           timeout=self.timeout, banner_timeout=self.timeout, auth_timeout=self.timeout,
                           transport_factory=_fast_transport)
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as e:
            client.close()
            raise HostKeyError(
                f"Host key for {host}:{port} does not match the one in {KNOWN_HOSTS}: the server offered "
                f"{e.key.get_name()} {e.key.fingerprint}, known_hosts has {e.expected_key.fingerprint}. "
                "Either the server was reinstalled or someone is intercepting the connection (man in the "
                "middle); eaglekit refuses to connect. Confirm the new key with the server's owner, then "
                f"remove the old entry with: ssh-keygen -R '{_host_port(host, port)}' and add the new one "
                f"with: {_keyscan(host, port)}") from e
        except paramiko.AuthenticationException as e:
            client.close()
            tried = ["ssh-agent" if os.environ.get("SSH_AUTH_SOCK") else "ssh-agent (not running)"]
            keys = identities + ([] if identities_only else [os.path.expanduser(k) for k in DEFAULT_KEYS])
            tried += [k for k in dict.fromkeys(keys) if os.path.isfile(k)] or ["no key files found"]
            raise AuthError(
                f"SSH authentication failed for {where} (host {alias!r}); tried: {', '.join(tried)}. "
                f"Load the right key into the agent with ssh-add, or name it under 'Host {alias}' in "
                "~/.ssh/config with IdentityFile (and User if the login name differs). "
                f"({type(e).__name__}: {e})") from e
        except (OSError, paramiko.SSHException, EOFError) as e:  # refused, DNS, timeout, not an SSH server
            client.close()
            raise LocationError(
                f"Cannot reach SSH server {host}:{port} (as {user}): {type(e).__name__}: {e}. Check the host "
                f"name, the port and that sshd is running (try: ssh -p {port} {user}@{host}).") from e
        client.get_transport().set_keepalive(30)
        return client

    def _proxy(self, host: str, port: int, cfg: dict):
        """What to reach ``host`` through: a ProxyCommand process, a ProxyJump tunnel, or None (TCP)."""
        command = cfg.get("proxycommand")
        if command and command.lower() != "none":  # paramiko already expanded %h and %p
            proxy = _ProxyCommand(command)
            self._proxies.append(proxy)
            return proxy
        jumps = cfg.get("proxyjump")
        if not jumps or jumps.lower() == "none":
            return None
        # Each hop "[user@]host[:port]" is reached through the previous one, as ssh -J does; a hop's own
        # ProxyJump/ProxyCommand is not followed (a "Host *" ProxyJump would otherwise loop).
        hops = []
        for hop in jumps.split(","):
            hop_user, _, hop_host = hop.strip().rpartition("@")
            hop_host, _, hop_port = hop_host.partition(":")
            hop_cfg = _read_config(hop_host)
            hops.append((hop_user or hop_cfg.get("user") or getpass.getuser(), hop_cfg.get("hostname", hop_host),
                         int(hop_port or hop_cfg.get("port") or SSH_PORT), hop_cfg, hop_host))
        sock = None
        for i, (hop_user, hop_host, hop_port, hop_cfg, alias) in enumerate(hops):
            jump = self._connect(hop_host, hop_port, hop_user, hop_cfg, alias=alias, sock=sock)
            self._jumps.append(jump)
            dest = hops[i + 1][1:3] if i + 1 < len(hops) else (host, port)
            try:
                sock = jump.get_transport().open_channel("direct-tcpip", dest, ("127.0.0.1", 0),
                                                         timeout=self.timeout)
            except (paramiko.SSHException, OSError) as e:
                raise LocationError(f"ProxyJump host {alias} cannot open a tunnel to {dest[0]}:{dest[1]}: "
                                    f"{type(e).__name__}: {e} (is AllowTcpForwarding enabled there?)") from e
        return sock

    # -- sessions and errors ----------------------------------------------------------------------

    @contextmanager
    def _session(self) -> Iterator[_Session]:
        """Borrow an SFTP session for this thread; opens a new one while fewer than max_sessions exist."""
        with self._slots:
            with self._lock:
                session = self._idle.pop() if self._idle else None
            if session is None:
                if self._client is None:
                    raise LocationError(f"{self.display}: this source was closed; open the location again.")
                try:
                    sftp = self._client.open_sftp()
                except (paramiko.SSHException, OSError, EOFError) as e:
                    raise LocationError(f"{self.display}: cannot start an SFTP session on {self.host}:{self.port}"
                                        f" ({type(e).__name__}: {e}); is the sftp Subsystem enabled in the"
                                        " server's sshd_config?") from e
                sftp.get_channel().settimeout(max(60.0, self.timeout))
                session = _Session(sftp)
                with self._lock:
                    self._sessions.append(session)
            try:
                yield session
            finally:
                with self._lock:
                    if not session.broken:
                        self._idle.append(session)
                    elif session in self._sessions:
                        self._sessions.remove(session)
                if session.broken:
                    session.close()

    @contextmanager
    def _sftp_errors(self, path: str, what: str = "file") -> Iterator[None]:
        where = f"{self.user}@{self.host}:{self.port}"
        try:
            yield
        except LocationError:
            raise
        except OSError as e:
            if e.errno == errno.ENOENT:
                raise NotFoundError(f"{self.display}: no such {what} {path} on {where}.") from e
            if e.errno == errno.EACCES:
                raise AuthError(f"{self.display}: permission denied reading {path} on {where}; "
                                f"ask the owner to make it readable by {self.user}, or log in as another "
                                "user (user@host in the location).") from e
            raise LocationError(f"{self.display}: cannot read {path} on {where}: {type(e).__name__}: {e}") from e
        except (paramiko.SSHException, EOFError) as e:
            raise LocationError(f"{self.display}: the SSH connection to {where} failed while reading {path}: "
                                f"{type(e).__name__}: {e}") from e

    def _path(self, name: str) -> str:
        path = posixpath.normpath(posixpath.join(self.folder, name))
        if name.startswith("/") or not path.startswith(self.folder.rstrip("/") + "/"):
            raise LocationError(f"{self.display}: refusing file name {name!r}, which points outside the folder.")
        return path

    def _size(self, session: _Session, path: str) -> int:
        """The size of a regular file inside the folder (links resolved), checked before it is opened."""
        size = self._sizes.get(path)
        if size is None:
            real = session.sftp.normalize(path)
            if self._roots and not any(real == r or real.startswith(r.rstrip("/") + "/") for r in self._roots):
                raise LocationError(f"{self.display}: {shown(path)} is a symbolic link to {shown(real)}, outside the "
                                    "checkpoint folder; refusing to follow it.")
            attrs = session.sftp.stat(path)
            if not stat.S_ISREG(attrs.st_mode or 0):
                kind = "a folder, not a file" if stat.S_ISDIR(attrs.st_mode or 0) else "not a regular file"
                raise LocationError(f"{self.display}: {shown(path)} is {kind}; refusing to read it.")
            size = self._sizes[path] = attrs.st_size
        return size

    # -- the Source interface ---------------------------------------------------------------------

    def read(self, name: str, start: int, length: int) -> Chunk:
        path = self._path(name)
        with self._session() as s, self._sftp_errors(path):
            size = self._size(s, path)
            end = min(start + length, size)
            if end <= start:
                return Chunk(b"", size)
            try:
                return Chunk(_pipelined_read(s.open(path), start, end), size)
            except EOFError as e:
                s.broken = True
                raise LocationError(f"{self.display}: {path} on {self.host} ended before byte {end} "
                                    f"(it was {size} bytes when opened); the file changed while being read.") from e
            except BaseException:
                s.broken = True  # replies to our requests may still be on their way: drop the session
                raise

    def read_small(self, name: str, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        path = self._path(name)
        try:
            with self._session() as s, self._sftp_errors(path):
                size = self._size(s, path)
        except NotFoundError:
            return None
        if size > limit:
            raise TooLargeError(f"{self.display}: {path} is {size} bytes, larger than {limit}; "
                                "expected a small JSON file.")
        return self.read(name, 0, size).data if size else b""

    def list(self) -> list[str]:
        with self._session() as s, self._sftp_errors(self.folder, "folder"):
            names = []
            for entry in s.sftp.listdir_attr(self.folder):
                mode = entry.st_mode or 0
                if stat.S_ISLNK(mode):  # a Hub cache snapshot is all symlinks into blobs/
                    try:
                        mode = s.sftp.stat(posixpath.join(self.folder, entry.filename)).st_mode or 0
                    except OSError:
                        continue  # dangling link
                if stat.S_ISREG(mode):
                    names.append(entry.filename)
        return sorted(names)

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions, self._idle = self._sessions, [], []
        for s in sessions:
            s.close()
        clients = [c for c in [self._client, *reversed(self._jumps)] if c is not None]
        self._client, self._jumps = None, []
        transports = [t for t in (c.get_transport() for c in clients) if t is not None]
        for client in clients:
            client.close()
        for t in transports:  # its thread closes the socket (or the proxy) once more on the way out
            t.join(timeout=5)
        for proxy in self._proxies:  # paramiko only signals the process: reap it and close its pipes
            try:
                proxy.process.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proxy.process.kill()
                proxy.process.communicate()
        self._proxies = []
