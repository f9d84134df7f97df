"""Hostile metrics servers: one line on stderr, exit 2, in bounded time and memory, and no token elsewhere."""

from __future__ import annotations

import pytest
from hostile import run_cli
from livefixtures import LiveHostile


@pytest.fixture(scope="module")
def servers():
    with LiveHostile() as s, LiveHostile() as other:
        s.elsewhere = other.endpoint
        s.other = other
        yield s


@pytest.mark.parametrize("mode, says", [
    ("huge", "larger than"),
    ("trickle", "no complete answer within 2 s"),
    ("nan", "finite number >= 0"),
    ("negative", "finite number >= 0"),
    ("nolabel", "no position label"),
    ("many", "metric families"),
    ("redirect", "redirects to another host"),
    ("notmetrics", "not Prometheus text"),
    ("missing", "not found"),
])
def test_a_hostile_server_gets_one_line_and_exit_2(servers, tmp_path, mode, says):
    r = run_cli("live", servers.url(mode), "--window", "0.05", "--timeout", "2", limit_s=60, tmp=tmp_path,
                env={"EAGLEKIT_METRICS_TOKEN": "s3cret"})
    assert r.rc == 2, r.stderr
    assert len(r.error_lines) == 1 and says in r.error_lines[0], r.stderr
    assert "Traceback" not in r.stderr and "s3cret" not in r.stderr + r.stdout
    assert r.wall_s < 30 and r.peak_mib < 400
    assert servers.other.log == []  # nothing, least of all the token, went to another host


@pytest.mark.parametrize("mode, says", [
    ("gzipbomb", "inflates past 16,777,216 bytes"),
    ("duplicate", "is listed twice"),
    ("longline", "characters long"),
])
def test_a_hostile_page_gets_one_line_and_exit_2(servers, tmp_path, mode, says):
    """Two gzip layers around 256 MiB (inflated in chunks against the cap), every series listed twice, a 4 MB
    comment line (refused before prometheus_client's quadratic parser sees it)."""
    r = run_cli("live", servers.url(mode), "--window", "0.05", "--timeout", "20", limit_s=60, tmp=tmp_path)
    assert r.rc == 2, r.stderr
    assert len(r.error_lines) == 1 and says in r.error_lines[0], r.stderr
    assert "Traceback" not in r.stderr and r.peak_mib < 400


def test_an_honest_gzipped_page_is_read(servers):
    from eaglekit.analysis.live.read import read_live

    r = read_live(servers.url("gzip"), window=0.01, sleep=lambda s: None)
    assert (r.drafts, r.accepted_tokens) == (500, 830)


def test_inflating_stops_at_the_cap_layer_by_layer():
    """The bomb's first layer is small, its second 256 MiB: inflating stops once the cap is passed, having
    produced at most the cap and one chunk."""
    from livefixtures import gzip_bomb

    from eaglekit.core.errors import TooLargeError
    from eaglekit.io.metrics import CHUNK, inflate

    produced = 0
    with pytest.raises(TooLargeError, match="inflates past 1,048,576 bytes"):
        for part in inflate([gzip_bomb()], 2, limit=1 << 20):
            assert len(part) <= CHUNK
            produced += len(part)
    assert produced <= 1 << 20


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999/metrics", "http://h:x/metrics"])
def test_a_broken_url_is_one_line(tmp_path, url, capsys):
    from eaglekit.cli import main

    assert main(["live", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a URL" in err[0]


def test_a_fifo_is_refused_at_once(tmp_path, capsys):
    """A FIFO without a writer: open(O_NONBLOCK) returns at once and fstat says it is no regular file."""
    import os

    from eaglekit.cli import main

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert main(["live", "http://127.0.0.1:9", "--offline", str(fifo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a file" in err[0]
    assert main(["live", "--log", str(fifo)]) == 2
    assert "not a file" in capsys.readouterr().err
