"""Hostile "Dask schedulers" on 127.0.0.1 for tests: each accepts connections and misbehaves one way.

``with FakeScheduler("pickle", marker=path) as s: s.address`` -> ``tcp://127.0.0.1:PORT``. Modes:

=============  ====================================================================================
``honest``     answers the handshake as distributed's scheduler does (a msgpack map), then is silent
``pickle``     answers the handshake with ``{"__Pickled__": 1}`` and a pickle that creates ``marker``
               (distributed's own client unpickles it: :func:`distributed.comm.core.connect`)
``http``       answers like an HTTP server (``HTTP/1.1 400 Bad Request``) and hangs up
``random``     answers 4 KiB of random bytes whose first 8 announce about 3 EiB
``bigframe``   announces a 3 GiB frame, sends 1 KiB of it, then nothing
``silent``     accepts, reads, never answers
=============  ====================================================================================

Every connection is handled in its own daemon thread; the server stops when the block ends, and every
wait inside is bounded (a silent connection waits for the stop, at most :data:`LIFETIME` seconds).
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import threading

import msgpack

LIFETIME = 120.0  # no connection is held longer than this, whatever the test does


class _Touch:
    """Unpickling this creates a folder: proof that a pickle ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.makedirs, (self.path,))


def frames(*payloads: bytes) -> bytes:
    """Messages framed as distributed's TCP comm writes them (comm/tcp.py ``_add_frames_header``)."""
    prelude = struct.pack(f"Q{len(payloads)}Q", len(payloads), *map(len, payloads))
    body = prelude + b"".join(payloads)
    return struct.pack("Q", len(body)) + body


def handshake() -> bytes:
    return frames(msgpack.packb({"compression": None, "python": (3, 11, 0), "pickle-protocol": 5},
                                use_bin_type=True))


def pickled_handshake(marker: str | os.PathLike[str]) -> bytes:
    """A handshake whose map holds ``{"__Pickled__": 1}``: frame 1 is the pickle's sub-header."""
    head = msgpack.packb({"compression": None, "python": (3, 11, 0), "pickle-protocol": 5,
                          "x": {"__Pickled__": 1}}, use_bin_type=True)
    sub = msgpack.packb({"pickled-obj": pickle.dumps(_Touch(str(marker))), "num-sub-frames": 0}, use_bin_type=True)
    return frames(head, sub)


class FakeScheduler:
    def __init__(self, mode: str, *, marker: str | os.PathLike[str] | None = None) -> None:
        self.mode, self.marker = mode, marker
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FakeScheduler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)  # the client's handshake
                if self.mode == "honest":
                    conn.sendall(handshake())
                elif self.mode == "pickle":
                    conn.sendall(pickled_handshake(self.marker))
                elif self.mode == "http":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                elif self.mode == "random":
                    conn.sendall(struct.pack("Q", 3 << 60) + os.urandom(4096))
                    return
                elif self.mode == "bigframe":
                    conn.sendall(struct.pack("Q", 3 << 30) + struct.pack("QQ", 1, (3 << 30) - 16) + bytes(1024))
            except OSError:
                return
            self._stop.wait(LIFETIME)  # hold the connection open, silent, until the server stops
