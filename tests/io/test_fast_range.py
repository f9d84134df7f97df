"""range_get's socket path (eaglekit/io/sources/fast_range.py): the same bytes as the httpx path, and every
refusal of docs/hostile-input.md on the socket path too.

Clients here are :class:`_SocketsOnly`: an httpx client whose own request path raises, so a range that
silently went back to httpx fails the test instead of passing it."""

from __future__ import annotations

import datetime
import ipaddress
import re
import ssl
import threading

import httpx
import numpy as np
import pytest
from hostile import MODES, HostileServer

from eaglekit.analysis.similarity import similarity
from eaglekit.core.errors import LocationError, NotFoundError, RangeNotSupportedError
from eaglekit.demo.fileserver import FileServer
from eaglekit.io.reader import open_checkpoint
from eaglekit.io.sources import http
from eaglekit.io.sources.fast_range import FAST_MIN_BYTES, HEAD_LIMIT, FastRanges
from eaglekit.io.sources.http import Deadline, guard_client, range_get

SIZE = 3 * FAST_MIN_BYTES + 12_345  # not a multiple of anything
DATA = np.random.default_rng(25).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
TOKEN = "hf_fast_range_secret"


class _SocketsOnly(httpx.Client):
    """An httpx client that must not carry a request itself (the socket path builds with it, only)."""

    def stream(self, *args, **kwargs):
        raise AssertionError("the range went through httpx, not the socket path")


# -- extra hostile modes (tests/hostile.py invites them) ---------------------------------------------------
def _short206(h, rest: str, q: dict) -> None:
    """206 with the right headers and Content-Length, then half the body and a hang-up."""
    data = h.file(rest)
    start, end = h.wanted(len(data))
    body = data[start:end + 1]
    h.send_response(206)
    for k, v in {"Content-Range": f"bytes {start}-{end}/{len(data)}", "Content-Length": str(len(body)),
                 "Connection": "close"}.items():
        h.send_header(k, v)
    h.end_headers()
    h.close_connection = True
    h.wfile.write(body[:len(body) // 2])


def _chunked206(h, rest: str, q: dict) -> None:
    """An honest 206 sent with Transfer-Encoding: chunked (the socket path leaves it to httpx)."""
    data = h.file(rest)
    start, end = h.wanted(len(data))
    body = data[start:end + 1]
    h.send_response(206)
    h.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    for i in range(0, len(body), 100_000):
        part = body[i:i + 100_000]
        h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
    h.wfile.write(b"0\r\n\r\n")


def _bighead(h, rest: str, q: dict) -> None:
    """206 whose headers go on past the socket path's limit."""
    h.send_response(206)
    for i in range(HEAD_LIMIT // 50 + 10):
        h.send_header(f"X-Filler-{i}", "z" * 40)
    h.end_headers()
    h.close_connection = True


def _redirect(h, rest: str, q: dict) -> None:
    """302 to ``?to=URL``."""
    h.send(302, b"moved", {"Location": q["to"][0]})


MODES.update({"short206": _short206, "chunked206": _chunked206, "bighead": _bighead, "redirect": _redirect})


@pytest.fixture(scope="module")
def server():
    with HostileServer() as s:
        s.files["model.safetensors"] = DATA
        yield s


@pytest.fixture(scope="module")
def elsewhere():
    with HostileServer() as s:
        s.files["model.safetensors"] = DATA
        yield s


@pytest.fixture
def fast():
    f = FastRanges()
    yield f
    f.close()


def _get(fast, client, url: str, start: int, length: int, *, into=True, timeout: float = 20, headers=None):
    buf = bytearray(length) if into else None
    return range_get(client, url, start, length, deadline=Deadline("test", timeout), into=buf, fast=fast,
                     headers=headers)


# -- the same bytes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("start,length", [(0, FAST_MIN_BYTES), (1, SIZE - 1), (12_345, 2 * FAST_MIN_BYTES + 7),
                                          (SIZE - FAST_MIN_BYTES, FAST_MIN_BYTES + 1000)],
                         ids=["first", "all-but-one", "middle", "past-the-end"])
def test_socket_path_reads_the_same_bytes_as_httpx(server, fast, start, length):
    url = server.url("static/model.safetensors")
    with _SocketsOnly() as sockets, httpx.Client() as plain:
        for into in (True, False):
            got = _get(fast, sockets, url, start, length, into=into)
            want = range_get(plain, url, start, length)
            assert bytes(got.data) == bytes(want.data) == DATA[start:start + length]
            assert got.file_size == want.file_size == SIZE
            assert isinstance(got.data, memoryview if into else bytes)


def test_keep_alive_connection_is_reused(server, fast):
    url = server.url("static/model.safetensors")
    with _SocketsOnly() as client:
        for start in (0, FAST_MIN_BYTES, 2 * FAST_MIN_BYTES):
            assert bytes(_get(fast, client, url, start, FAST_MIN_BYTES).data) == DATA[start:start + FAST_MIN_BYTES]
    assert [len(idle) for idle in fast._idle.values()] == [1]  # one connection served all three


def test_a_connection_the_server_closed_while_idle_is_replaced(tmp_path, fast):
    (tmp_path / "m.bin").write_bytes(DATA)
    with FileServer(tmp_path) as first:
        port = int(first.endpoint.rsplit(":", 1)[1])
        url = f"{first.endpoint}/files/m.bin"
        with _SocketsOnly() as client:
            assert bytes(_get(fast, client, url, 0, FAST_MIN_BYTES).data) == DATA[:FAST_MIN_BYTES]
    with FileServer(tmp_path, port=port), _SocketsOnly() as client:  # same address; the idle socket is dead
        assert bytes(_get(fast, client, url, 5, FAST_MIN_BYTES).data) == DATA[5:5 + FAST_MIN_BYTES]


def test_url_credentials_become_basic_auth_as_with_httpx(server, fast):
    url = server.url("static/model.safetensors").replace("http://", "http://alice:s%40me@")
    with _SocketsOnly() as client:
        _get(fast, client, url, 0, FAST_MIN_BYTES)
    with httpx.Client() as plain:
        range_get(plain, url, 0, FAST_MIN_BYTES)
    sent = [r.headers.get("authorization") for r in server.log[-2:]]
    assert sent[0] == sent[1] == httpx.BasicAuth("alice", "s@me")._auth_header
    moved = server.url(f"redirect/x?to={server.url('static/model.safetensors')}").replace("http://", "http://alice:s%40me@")
    with _SocketsOnly() as client:
        _get(fast, client, moved, 0, FAST_MIN_BYTES)  # kept across a redirect on the same origin, as httpx does
    assert [r.headers.get("authorization") for r in server.log[-2:]] == [sent[0]] * 2


# -- every refusal, on the socket path ------------------------------------------------------------------------------
def test_body_longer_than_the_range_is_cut_off(server, fast):
    with _SocketsOnly() as client:
        got = _get(fast, client, server.url("long206/model.safetensors"), 100, FAST_MIN_BYTES)
    assert bytes(got.data) == DATA[100:100 + FAST_MIN_BYTES]
    assert not any(fast._idle.values())  # that connection is closed, not reused


def test_encoded_range_answer_is_refused(server, fast):
    with _SocketsOnly() as client, pytest.raises(RangeNotSupportedError, match="Content-Encoding 'gzip'"):
        _get(fast, client, server.url("gzip206/model.safetensors"), 0, FAST_MIN_BYTES)


def test_content_range_that_is_not_the_one_asked_for_is_refused(server, fast):
    with _SocketsOnly() as client, pytest.raises(RangeNotSupportedError, match="not the one requested"):
        _get(fast, client, server.url("badrange/model.safetensors"), 0, FAST_MIN_BYTES)


def test_short_body_is_refused(server, fast):
    with _SocketsOnly() as client, pytest.raises(LocationError, match="ended after"):
        _get(fast, client, server.url("short206/model.safetensors"), 0, FAST_MIN_BYTES)


def test_headers_past_the_limit_are_refused(server, fast):
    with _SocketsOnly() as client, pytest.raises(LocationError, match="headers exceed"):
        _get(fast, client, server.url("bighead/model.safetensors"), 0, FAST_MIN_BYTES)


@pytest.mark.parametrize("mode", ["slow", "silent", "slowheaders"])
def test_total_deadline_on_the_socket_path(server, fast, mode):
    """A body at one byte per half second would take days; silence and trickled headers forever."""
    with _SocketsOnly() as client, pytest.raises(LocationError, match="within 1 s"):
        _get(fast, client, server.url(f"{mode}/model.safetensors"), 0, FAST_MIN_BYTES, timeout=1)


def test_unreachable_server_is_a_location_error(fast):
    with _SocketsOnly() as client, pytest.raises(LocationError, match="Cannot reach"):
        _get(fast, client, "http://127.0.0.1:9/model.safetensors", 0, FAST_MIN_BYTES)


# -- answers the socket path leaves to httpx, answered as before ----------------------------------------------------
def test_other_answers_go_through_httpx_as_before(server, fast):
    with httpx.Client() as client:
        chunked = _get(fast, client, server.url("chunked206/model.safetensors"), 7, FAST_MIN_BYTES)
        assert bytes(chunked.data) == DATA[7:7 + FAST_MIN_BYTES]
        with pytest.raises(NotFoundError):
            _get(fast, client, server.url("static/nothing.safetensors"), 0, FAST_MIN_BYTES)
        past = _get(fast, client, server.url("static/model.safetensors"), SIZE + 10, FAST_MIN_BYTES)
        assert bytes(past.data) == b"" and past.file_size == SIZE  # 416


def test_small_ranges_and_proxied_clients_stay_with_httpx(server, fast):
    url = server.url("static/model.safetensors")
    with _SocketsOnly() as client, pytest.raises(AssertionError, match="through httpx"):
        _get(fast, client, url, 0, FAST_MIN_BYTES - 1)
    with _SocketsOnly(event_hooks={"response": [lambda r: None]}) as hooked, \
            pytest.raises(AssertionError, match="through httpx"):
        _get(fast, hooked, url, 0, FAST_MIN_BYTES)  # response hooks see httpx responses only
    with _SocketsOnly(mounts={"http://": httpx.HTTPTransport(proxy="http://127.0.0.1:9")}) as proxied, \
            pytest.raises(AssertionError, match="through httpx"):
        _get(fast, proxied, url, 0, FAST_MIN_BYTES)


# -- redirects: followed, the token kept only on its own origin -----------------------------------------------------
def test_redirect_on_the_same_origin_keeps_the_token(server, fast):
    target = server.url("static/model.safetensors")
    with _SocketsOnly() as client:
        got = _get(fast, client, server.url(f"redirect/x?to={target}"), 3, FAST_MIN_BYTES,
                   headers={"Authorization": f"Bearer {TOKEN}"})
    assert bytes(got.data) == DATA[3:3 + FAST_MIN_BYTES]
    assert [r.headers.get("authorization") for r in server.log[-2:]] == [f"Bearer {TOKEN}"] * 2


def test_redirect_to_another_origin_drops_the_token(server, elsewhere, fast):
    target = elsewhere.url("static/model.safetensors")
    before = len(elsewhere.log)
    with _SocketsOnly() as client:
        got = _get(fast, client, server.url(f"redirect/x?to={target}"), 3, FAST_MIN_BYTES,
                   headers={"Authorization": f"Bearer {TOKEN}"})
    assert bytes(got.data) == DATA[3:3 + FAST_MIN_BYTES]
    assert server.log[-1].headers.get("authorization") == f"Bearer {TOKEN}"
    received = elsewhere.log[before:]
    assert len(received) == 1 and "authorization" not in received[0].headers


# -- https: the client's own SSL context ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A FileServer speaking TLS with a fresh self-signed certificate for 127.0.0.1, and a client context
    that trusts it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    (folder / "files").mkdir()
    (folder / "files" / "m.bin").write_bytes(DATA)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    with FileServer(folder / "files") as s:
        s._httpd.socket = server_ctx.wrap_socket(s._httpd.socket, server_side=True)
        yield s.endpoint.replace("http://", "https://"), ssl.create_default_context(cafile=str(folder / "cert.pem"))


def test_https_through_the_clients_ssl_context(tls, fast):
    endpoint, trusted = tls
    url = f"{endpoint}/files/m.bin"
    with _SocketsOnly(verify=trusted) as client:
        got = _get(fast, client, url, 11, 2 * FAST_MIN_BYTES)
    assert bytes(got.data) == DATA[11:11 + 2 * FAST_MIN_BYTES]
    with _SocketsOnly() as untrusting, pytest.raises(LocationError, match="Cannot reach"):
        _get(fast, untrusting, url, 0, FAST_MIN_BYTES)  # the default context does not know this certificate


# -- the sources and the pipeline --------------------------------------------------------------------------------
A, B = "hf://demo-aqmed/Kimi-K2-Instruct-eagle3", "hf://demo-team/Kimi-K2.5-eagle3-finetuned"


def test_remote_similarity_on_the_socket_path_requests_exactly_the_planned_ranges(demo, hub, monkeypatch):
    """test_pipeline's check, with every block on the socket path (the threshold lowered to the demo's scale)."""
    from test_pipeline import _expected_ranges

    chunk = 64 * 1024
    monkeypatch.setattr(http, "FAST_MIN_BYTES", 1024)
    opened = []
    real = FastRanges.open

    def spy(self, *args, **kwargs):
        response = real(self, *args, **kwargs)
        opened.append(response.status_code)
        return response

    monkeypatch.setattr(FastRanges, "open", spy)
    with open_checkpoint(A, endpoint=hub.endpoint, token="hf_test_token") as ca, \
            open_checkpoint(B, endpoint=hub.endpoint, token="hf_test_token") as cb:
        expected = _expected_ranges(ca, cb, chunk)
        hub.clear_log()
        keys = ["fc.weight", "midlayer.mlp.down_proj.weight", "lm_head.weight"]
        r = similarity(ca, cb, progress=False, chunk_bytes=chunk, tensors=keys)
        log = hub.log
    assert opened and set(opened) == {206}
    for side, repo in enumerate((A, B)):
        repo_path = "/" + repo.removeprefix("hf://") + "/resolve/"
        got = [(x.path.rsplit("/", 1)[1], *map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", x.range).groups()))
               for x in log if x.path.startswith(repo_path) and x.path.endswith(".safetensors")]
        assert len(got) == len(set(got)) and set(got) <= set(expected[side])
        assert sum(e - s + 1 for _, s, e in got) == r.bytes_read[side]
        assert all(x.auth for x in log if x.path.startswith(repo_path))  # the token went to its endpoint
    local = similarity(demo.drafter("k2"), demo.drafter("k25-finetuned"), progress=False, tensors=keys)
    for x, y in zip(r.tensors, local.tensors):
        np.testing.assert_array_equal(x.sums, y.sums)


def test_http_source_reads_and_reads_into_through_sockets(tmp_path, monkeypatch):
    from eaglekit.io.sources.http import HttpSource

    (tmp_path / "m.bin").write_bytes(DATA)
    calls = []
    real = FastRanges.open
    monkeypatch.setattr(FastRanges, "open", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    with FileServer(tmp_path) as s, HttpSource(f"{s.endpoint}/files") as source:
        assert source.read("m.bin", 9, FAST_MIN_BYTES).data == DATA[9:9 + FAST_MIN_BYTES]
        buf = bytearray(FAST_MIN_BYTES + 5)
        assert source.read_into("m.bin", SIZE - len(buf), buf) == len(buf) and bytes(buf) == DATA[-len(buf):]
        assert source.read("m.bin", 0, 100).data == DATA[:100]  # a small range: httpx
    assert len(calls) == 2


def test_closing_a_source_closes_its_idle_sockets(server):
    fast = FastRanges()
    with _SocketsOnly() as client:
        _get(fast, client, server.url("static/model.safetensors"), 0, FAST_MIN_BYTES)
    sockets = [s for idle in fast._idle.values() for s in idle]
    assert len(sockets) == 1
    fast.close()
    assert sockets[0].fileno() == -1 and not fast._idle


def test_threads_share_one_fast_ranges(server, fast):
    url = server.url("static/model.safetensors")
    errors, results = [], {}

    def work(k: int) -> None:
        try:
            with _SocketsOnly() as client:
                for j in range(3):
                    start = (k * 3 + j) * 1000
                    results[k, j] = bytes(_get(fast, client, url, start, FAST_MIN_BYTES).data) == \
                        DATA[start:start + FAST_MIN_BYTES]
        except (AssertionError, LocationError, OSError) as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 12 and all(results.values())



@pytest.mark.parametrize("to", ["http://[::1", "http://a..b/model.safetensors", "http://127.0.0.1:99999/x"])
def test_a_malformed_redirect_target_is_one_location_error(server, fast, to):
    """A redirect no socket can follow (a broken IPv6 literal, an empty host label, a port past 65535) ends
    as eaglekit's LocationError, on the socket path as on httpx's: never a raw ValueError or UnicodeError."""

    with guard_client(httpx.Client(follow_redirects=True)) as client, pytest.raises(LocationError):
        _get(fast, client, server.url(f"redirect/x?to={to}"), 0, FAST_MIN_BYTES, timeout=10)
