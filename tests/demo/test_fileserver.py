"""eaglekit.fileserver: byte ranges, the request log, fault injection and the plain /files/ mode,
checked on the wire with http.client (no client library smoothing anything over)."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from eaglekit.core.errors import InputError, LocationError, NotFoundError
from eaglekit.demo.fileserver import FileServer, HttpError, RequestRecord, parse_range

DATA = bytes(range(256)) * 4  # 1024 bytes


def fetch(server: FileServer, path: str, *, method: str = "GET", headers: dict | None = None):
    host, port = server.endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "data.bin").write_bytes(DATA)
    (root / "sub" / "x.txt").write_text("x")
    (root / ".secret").write_text("hidden")
    (tmp_path / "elsewhere.bin").write_bytes(b"outside the root")
    (root / "escape.bin").symlink_to(tmp_path / "elsewhere.bin")
    with FileServer(root) as server:
        yield server


def test_get_without_range_is_200_with_the_whole_file(server):
    status, headers, body = fetch(server, "/files/data.bin")
    assert (status, body) == (200, DATA)
    assert headers["Content-Length"] == "1024"
    assert headers["Accept-Ranges"] == "bytes"
    assert headers["ETag"].startswith('"') and headers["ETag"].endswith('"')
    assert "Content-Range" not in headers
    assert server.log == [RequestRecord("GET", "/files/data.bin", "", None, 200, 1024, False)]


@pytest.mark.parametrize(
    ("range_header", "start", "end"),
    [("bytes=10-19", 10, 19), ("bytes=1000-", 1000, 1023), ("bytes=-24", 1000, 1023),
     ("bytes=0-5000", 0, 1023), ("bytes=-5000", 0, 1023), ("bytes=1023-1023", 1023, 1023)],
)
def test_one_range_is_206_with_exact_length_and_bytes_sent(server, range_header, start, end):
    status, headers, body = fetch(server, "/files/data.bin", headers={"Range": range_header})
    assert status == 206
    assert body == DATA[start : end + 1]
    assert headers["Content-Range"] == f"bytes {start}-{end}/1024"
    assert headers["Content-Length"] == str(end - start + 1)
    (record,) = server.log
    assert (record.range, record.status, record.bytes_sent) == (range_header, 206, end - start + 1)


@pytest.mark.parametrize("range_header", ["bytes=1024-", "bytes=5000-6000", "bytes=-0"])
def test_unsatisfiable_range_is_416_with_the_size(server, range_header):
    status, headers, _ = fetch(server, "/files/data.bin", headers={"Range": range_header})
    assert status == 416
    assert headers["Content-Range"] == "bytes */1024"


@pytest.mark.parametrize("range_header", ["bytes=abc", "bytes=0-1,5-9", "bytes=9-3", "items=0-5"])
def test_malformed_or_multi_range_is_ignored(server, range_header):
    status, _, body = fetch(server, "/files/data.bin", headers={"Range": range_header})
    assert (status, body) == (200, DATA)


def test_parse_range_on_an_empty_file():
    assert parse_range(None, 0) is None
    with pytest.raises(HttpError, match="Not Satisfiable"):
        parse_range("bytes=0-", 0)


def test_head_sends_headers_only(server):
    status, headers, body = fetch(server, "/files/data.bin", method="HEAD", headers={"Range": "bytes=0-9"})
    assert (status, body, headers["Content-Length"]) == (206, b"", "10")
    assert server.log[-1].bytes_sent == 0


def test_ignore_range_answers_200_with_the_whole_body(server):
    server.ignore_range = True
    status, headers, body = fetch(server, "/files/data.bin", headers={"Range": "bytes=0-9"})
    assert (status, body, headers["Content-Length"]) == (200, DATA, "1024")
    assert server.log[-1].bytes_sent == 1024


@pytest.mark.parametrize("path", ["/files/missing.bin", "/files/.secret", "/files/sub", "/files/../data.bin",
                                  "/files/%2e%2e/data.bin", "/files/sub/%2F..%2Fdata.bin", "/nothing",
                                  "/files/escape.bin"])
def test_missing_hidden_or_escaping_paths_are_a_plain_404(server, path):
    status, headers, body = fetch(server, path)
    assert (status, body, headers["Content-Type"]) == (404, b"Not Found", "text/plain")
    assert "X-Error-Code" not in headers


def test_nested_file_and_wrong_method(server):
    assert fetch(server, "/files/sub/x.txt")[2] == b"x"
    status, headers, _ = fetch(server, "/files/sub/x.txt", method="POST")
    assert (status, headers["Allow"]) == (405, "GET, HEAD")


def test_inject_answers_the_next_requests_then_serves_again(server):
    server.inject("/files/data", 429, {"Retry-After": "17"}, times=2)
    for _ in range(2):
        status, headers, body = fetch(server, "/files/data.bin")
        assert (status, headers["Retry-After"]) == (429, "17")
        assert json.loads(body) == {"error": "Injected fault: HTTP 429"}
    assert fetch(server, "/files/sub/x.txt")[0] == 200  # another prefix is untouched
    assert fetch(server, "/files/data.bin")[0] == 200
    # the log is written by the handler threads after each answer: its order can differ from the answers'
    assert sorted(r.status for r in server.log) == [200, 200, 429, 429]


def test_inject_rejects_zero_times(server):
    with pytest.raises(InputError, match="times must be at least 1, got 0"):
        server.inject("/files", 503, times=0)


def test_log_records_auth_but_never_the_token(server):
    fetch(server, "/files/sub/x.txt", headers={"Authorization": "Bearer hf_secret_value"})
    (record,) = server.log
    assert record.auth is True
    assert "hf_secret_value" not in repr(server.log)
    server.clear_log()
    assert server.log == []


def test_stop_closes_idle_keepalive_connections_and_the_port(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    server = FileServer(tmp_path).start()
    host, port = server.endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/files/f")
    assert conn.getresponse().read() == b"abc"  # the connection stays open (HTTP/1.1 keep-alive)
    server.stop()  # returns although a keep-alive connection is still open
    conn.close()
    with pytest.raises(InputError, match="FileServer is not running"):
        server.endpoint
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=1).close()


def test_constructor_errors(tmp_path):
    with pytest.raises(NotFoundError, match="Cannot serve .*missing: it is not a folder"):
        FileServer(tmp_path / "missing")
    with FileServer(tmp_path) as first:
        port = int(first.endpoint.rsplit(":", 1)[1])
        with pytest.raises(LocationError, match=f"Cannot listen on 127.0.0.1:{port} .*choose another port"):
            FileServer(tmp_path, port=port).start()


def test_log_is_in_arrival_order_even_when_an_earlier_request_finishes_last(tmp_path):
    """A request still being answered when a later one completes keeps its place: the log is
    ordered by arrival, so "the second read" in a test is the second request the client sent."""
    import threading

    (tmp_path / "a.bin").write_bytes(b"a")
    (tmp_path / "b.bin").write_bytes(b"b")
    entered, release = threading.Event(), threading.Event()

    class Held(FileServer.handler):
        def _static(self, rel):
            if rel == "a.bin":
                entered.set()
                release.wait(10)
            return super()._static(rel)

    class HeldServer(FileServer):
        handler = Held

    with HeldServer(tmp_path) as server:
        first = threading.Thread(target=fetch, args=(server, "/files/a.bin"))
        first.start()
        assert entered.wait(10)
        assert fetch(server, "/files/b.bin")[0] == 200  # answered while a.bin is still held
        release.set()
        first.join(10)
        assert [r.path for r in server.log] == ["/files/a.bin", "/files/b.bin"]
