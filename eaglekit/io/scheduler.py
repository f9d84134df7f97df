"""Connecting to a Dask scheduler the user named: checked first, under one deadline, over TLS when asked.

A Dask client trusts its scheduler completely, and distributed gives the client no switch to change
that (read in distributed 2026.8's source):

* any message may carry ``{"__Pickled__": n}``, which ``distributed/protocol/core.py`` ``loads()``
  hands to ``pickle.loads`` whatever ``deserializers=`` says: the handshake is the first such message,
  so a "scheduler" runs code in the client before any task is sent;
* ``distributed/comm/tcp.py`` ``TCP.read()`` reads an 8-byte length and allocates it (``numpy.empty``)
  before reading: random bytes ask for exabytes, a 3 GiB announcement maps 3 GiB; there is no cap;
* ``distributed/comm/core.py`` ``connect()`` bounds the TCP connect by ``timeout`` but waits for the
  handshake reply without one: a peer that accepts and stays silent hangs the client for ever.

So :func:`connect_scheduler` connects only to the address it is given, and before distributed sees the
address it speaks the handshake itself (:func:`probe_scheduler`): its own socket, an answer of at most
:data:`HANDSHAKE_LIMIT` bytes, msgpack decoded with no hooks (a pickle stays bytes and is refused), all
within the deadline. That stops a wrong port (an HTTP server, random bytes), a huge frame, silence and a
pickled handshake with one clear error. It cannot stop a scheduler that answers the check honestly and
pickles afterwards: only authenticating the scheduler does. ``tls://`` addresses use Dask's
:class:`distributed.Security` (the cluster's CA, this client's certificate and key; or the
``distributed.comm.tls`` settings of a Dask config file), so that no one without a certificate from
that CA can answer on the address. Then distributed's ``Client`` is built in a thread joined with the
time left, so its unbounded handshake cannot outlive the deadline either.
"""

from __future__ import annotations

import os
import pickle
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import msgpack  # distributed's wire format (a dependency of dask[distributed]); light, unlike distributed

from eaglekit.core.errors import InputError, LocationError
from eaglekit.io.sources.http import check_timeout, request_timeout

#: The most bytes a scheduler's handshake answer may take (a real one is about 100 bytes).
HANDSHAKE_LIMIT = 64 * 1024
#: The port ``dask scheduler`` listens on by default.
DEFAULT_PORT = 8786
_SCHEMES = ("tcp", "tls")
#: Keys distributed's msgpack hooks turn into objects (``__Pickled__`` and ``__Serialized__`` unpickle).
_HOOK_KEYS = ("__Pickled__", "__Serialized__", "__Enum__")


class SchedulerError(LocationError):
    """A Dask scheduler could not be reached, or answered something eaglekit refuses."""


@dataclass(frozen=True)
class SchedulerAddress:
    """A parsed ``tcp://`` or ``tls://`` scheduler address."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_address(address: str) -> SchedulerAddress:
    """``tcp://HOST:PORT``, ``tls://HOST:PORT`` or ``HOST[:PORT]`` (tcp, port 8786 by default)."""
    text = str(address).strip()
    if "://" not in text:
        text = f"tcp://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise InputError(f"{address!r} is not a scheduler address: {e}; give tcp://HOST:PORT or tls://HOST:PORT.") from e
    if parts.scheme not in _SCHEMES:
        raise InputError(f"scheduler address {address!r}: eaglekit connects over tcp:// or tls:// only.")
    if not parts.hostname or parts.path.strip("/") or parts.query or parts.username:
        raise InputError(f"{address!r} is not a scheduler address; give tcp://HOST:PORT or tls://HOST:PORT.")
    return SchedulerAddress(parts.scheme, parts.hostname, port or DEFAULT_PORT)


def tls_security(*, ca_file: str | None = None, cert: str | None = None, key: str | None = None) -> Any:
    """A :class:`distributed.Security` requiring encryption, from the files given or, when none is given,
    from the Dask config (``distributed.comm.tls.ca-file``, ``.client.cert``, ``.client.key``)."""
    from distributed import Security  # dask is heavy: only a cluster run needs it

    given = {k: v for k, v in (("tls_ca_file", ca_file), ("tls_client_cert", cert), ("tls_client_key", key)) if v}
    for option, path in given.items():
        if not os.path.isfile(path):
            raise InputError(f"{option.replace('_', '-')}: no such file {path!r}.")
    security = Security(require_encryption=True, **given)
    if not (security.tls_ca_file and security.tls_client_cert):
        raise InputError("a tls:// scheduler needs the cluster's CA and a client certificate: pass --tls-ca-file, "
                         "--tls-cert and --tls-key, or set distributed.comm.tls in a Dask config file.")
    return security


@contextmanager
def dask_client(scheduler: Any, *, security: Any = None, timeout: float | None = None, workers: int = 2,
                memory_limit: str | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for ``scheduler``, closed on exit when made here: a Client as it is,
    ``"local"`` for a LocalCluster on this machine (``workers`` processes at most, one thread each), or an
    address reached only through :func:`connect_scheduler` (checked first, within ``timeout``)."""
    try:
        from distributed import Client, LocalCluster  # heavy: only when a cluster is asked for
    except ImportError as e:  # pragma: no cover - dask is a dependency
        raise SchedulerError("a Dask cluster needs dask[distributed]; pip install 'dask[distributed]'.") from e
    if isinstance(scheduler, Client):
        yield scheduler
        return
    if scheduler == "local":
        with LocalCluster(n_workers=min(workers, os.cpu_count() or 1), threads_per_worker=1, processes=True,
                          dashboard_address=":0", memory_limit=memory_limit or "auto") as cluster, \
                Client(cluster) as client:
            yield client
        return
    if not isinstance(scheduler, str):
        raise SchedulerError(f"scheduler must be 'local', an address or a distributed.Client, got "
                             f"{type(scheduler).__name__}.")
    client = connect_scheduler(scheduler, timeout=timeout, security=security)
    try:
        yield client
    finally:
        client.close()


def connect_scheduler(address: str, *, timeout: float | None = None, security: Any = None) -> Any:
    """A ``distributed.Client`` on the scheduler at ``address``, checked by :func:`probe_scheduler`
    first; the whole of it (connect, TLS, both handshakes) within ``timeout`` seconds (default: the
    remote-request deadline, ``--timeout`` / ``EAGLEKIT_TIMEOUT`` / 60 s)."""
    where = parse_address(address)
    seconds = request_timeout() if timeout is None else check_timeout(timeout)
    deadline = time.monotonic() + seconds
    if where.scheme == "tls" and security is None:
        security = tls_security()
    context = _client_context(security) if where.scheme == "tls" else None
    probe_scheduler(where, deadline=deadline, context=context)
    return _client_within(where, deadline, security, seconds)


def probe_scheduler(where: SchedulerAddress, *, deadline: float, context: ssl.SSLContext | None = None) -> dict:
    """Speak distributed's handshake to ``where`` and return the answer, refusing (SchedulerError) a
    peer that is silent past ``deadline``, answers more than :data:`HANDSHAKE_LIMIT` bytes, or answers
    anything but a plain msgpack map (a pickle is never unpickled)."""
    name = where.url
    try:
        sock = socket.create_connection((where.host, where.port), timeout=_left(deadline, name))
    except OSError as e:
        raise SchedulerError(f"cannot reach the Dask scheduler at {name} ({_reason(e)}); start one with `dask "
                             "scheduler` and workers with `dask worker ADDRESS`, or omit --scheduler.") from e
    try:
        if context is not None:
            sock.settimeout(_left(deadline, name))
            try:
                sock = context.wrap_socket(sock)
            except (ssl.SSLError, OSError) as e:
                raise SchedulerError(f"TLS with the Dask scheduler at {name} failed ({_reason(e)}): is it a "
                                     "tls:// scheduler with a certificate from your CA?") from e
        _send_all(sock, _handshake_bytes(), deadline, name)
        (announced,) = struct.unpack("Q", _recv_exact(sock, 8, deadline, name, first=True))
        if announced > HANDSHAKE_LIMIT:
            raise SchedulerError(f"{name} does not speak Dask's protocol: its first answer announces "
                                 f"{announced:,} bytes (a Dask handshake is about 100){_looks_like(announced)}.")
        body = _recv_exact(sock, announced, deadline, name)
    finally:
        sock.close()
    return _parse_handshake(body, name)


def _parse_handshake(body: bytes, name: str) -> dict:
    """The handshake map in ``body`` (a frames prelude, then the frames), decoded with no object hooks."""
    bad = SchedulerError(f"{name} does not speak Dask's protocol: its handshake is not the frames of a "
                         "msgpack map; check the address.")
    if len(body) < 8:
        raise bad
    (count,) = struct.unpack_from("Q", body)
    if not 1 <= count <= 64 or len(body) < 8 * (1 + count):
        raise bad
    lengths = struct.unpack_from(f"{count}Q", body, 8)
    start = 8 * (1 + count)
    if sum(lengths) != len(body) - start:
        raise bad
    try:
        value = msgpack.unpackb(body[start:start + lengths[0]], raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises ValueError, ExtraData, StackError, FormatError...
        raise bad from e
    if _holds_hook(value):
        raise SchedulerError(f"{name} answered the handshake with a pickled object: eaglekit never unpickles "
                             "what a server sends, and a real scheduler does not do this; check the address.")
    if not (isinstance(value, dict) and isinstance(value.get("pickle-protocol"), int)
            and isinstance(value.get("python"), (list, tuple))):
        raise bad
    return value


def _holds_hook(value: Any) -> bool:
    """Whether a decoded msgpack value holds a map key distributed would turn into an object, or an
    extension type. Iterative (msgpack itself bounds nesting)."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, msgpack.ExtType):
            return True
        if isinstance(item, dict):
            if any(k in item for k in _HOOK_KEYS):
                return True
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return False


def _handshake_bytes() -> bytes:
    """What distributed's client sends first (``Comm.handshake_info``), framed as ``comm/tcp.py`` does."""
    frame = msgpack.packb({"compression": None, "python": tuple(sys.version_info)[:3],
                           "pickle-protocol": pickle.HIGHEST_PROTOCOL}, use_bin_type=True)
    prelude = struct.pack("QQ", 1, len(frame))
    return struct.pack("Q", len(prelude) + len(frame)) + prelude + frame


def _client_within(where: SchedulerAddress, deadline: float, security: Any, seconds: float) -> Any:
    """distributed's Client, built in a thread joined with the time left (its handshake has no deadline);
    a client that arrives after the deadline is closed by that thread."""
    from distributed import Client  # dask is heavy: only a cluster run needs it

    box: dict[str, Any] = {}
    late = threading.Event()

    def build() -> None:
        try:
            client = Client(where.url, timeout=max(deadline - time.monotonic(), 0.1), security=security)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e
            return
        if late.is_set():
            client.close()
        else:
            box["client"] = client

    thread = threading.Thread(target=build, name="eaglekit-dask-connect", daemon=True)
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0))
    if thread.is_alive():
        late.set()
        raise SchedulerError(f"the Dask scheduler at {where.url} did not complete its handshake within "
                             f"{seconds:g} s (--timeout); is it a Dask scheduler, and is it overloaded?")
    if "error" in box:
        e = box["error"]
        raise SchedulerError(f"cannot connect to the Dask scheduler at {where.url} ({_reason(e)}).") from e
    return box["client"]


def _client_context(security: Any) -> ssl.SSLContext:
    try:
        return security.get_connection_args("client")["ssl_context"]
    except (OSError, ssl.SSLError, ValueError) as e:
        raise InputError(f"cannot use the TLS certificate files ({_reason(e)}): check --tls-ca-file, --tls-cert and "
                         "--tls-key.") from e


def _left(deadline: float, name: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise SchedulerError(f"the Dask scheduler at {name} did not answer in time (--timeout).")
    return left


def _send_all(sock: socket.socket, data: bytes, deadline: float, name: str) -> None:
    try:
        sock.settimeout(_left(deadline, name))
        sock.sendall(data)
    except OSError as e:
        raise SchedulerError(f"the Dask scheduler at {name} closed the connection ({_reason(e)}).") from e


def _recv_exact(sock: socket.socket, n: int, deadline: float, name: str, *, first: bool = False) -> bytes:
    """``n`` bytes, or SchedulerError when the peer closes or the deadline passes first."""
    out = bytearray()
    while len(out) < n:
        try:
            sock.settimeout(_left(deadline, name))
            chunk = sock.recv(min(n - len(out), 65536))
        except TimeoutError as e:
            raise SchedulerError(f"{name} accepted the connection but did not answer Dask's handshake in time "
                                 "(--timeout); is it a Dask scheduler?") from e
        except OSError as e:
            raise SchedulerError(f"the connection to {name} failed during the handshake ({_reason(e)}).") from e
        if not chunk:
            what = "closed the connection without answering" if first and not out else "closed the connection mid-answer"
            raise SchedulerError(f"{name} {what} Dask's handshake; is it a Dask scheduler?")
        out += chunk
    return bytes(out)


def _looks_like(announced: int) -> str:
    return "; an HTTP server answered" if announced.to_bytes(8, sys.byteorder).startswith(b"HTTP/") else ""


def _reason(e: BaseException) -> str:
    """A short reason for ``e``: its strerror, else its message's first line, else its type."""
    text = getattr(e, "strerror", None) or str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
