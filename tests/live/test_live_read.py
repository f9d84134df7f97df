"""Reading a live server over loopback: the two scrapes, a restart, the token and redirects; the CLI's JSON."""

from __future__ import annotations

import json

import pytest
from livefixtures import SGLANG_LOG, LiveHostile

from eaglekit.analysis.live.read import read_live, read_live_log
from eaglekit.cli import main
from eaglekit.core.errors import LocationError
from eaglekit.io.metrics import metrics_url


@pytest.fixture()
def server():
    with LiveHostile() as s, LiveHostile() as other:
        s.elsewhere = other.endpoint
        s.other = other
        yield s


def no_wait(seconds: float) -> None:
    pass


def test_a_vllm_server_read_twice_gives_the_difference(server):
    r = read_live(server.url("vllm"), window=0.01, sleep=no_wait)
    assert (r.drafts, r.draft_tokens, r.accepted_tokens, r.accepted_per_position) == (500, 1500, 830, (355, 265, 210))
    assert r.accept_length.value == 1 + 830 / 500
    assert r.generation_tokens_per_s == 2000 / r.window_s
    assert [m for m, _ in server.log] == ["vllm"] * 6  # SPLITS + 1 scrapes
    assert any("1 of 5 sub-windows held drafts" in n for n in r.notes)  # the fixture drafts in the first only


def test_an_sglang_server_read_twice(server):
    r = read_live(server.url("sglang"), window=0.01, sleep=no_wait)
    assert r.engine == "sglang" and r.accept_length.value == (2440 - 40) / 800


def test_a_restart_counts_from_zero_and_is_said(server):
    """The server restarted between the scrapes: its counters after are what it drafted since (Prometheus' rule
    for a counter reset), and the reading names the series that reset."""
    r = read_live(server.url("restart"), window=0.01, sleep=no_wait)
    assert (r.drafts, r.accepted_tokens, r.accepted_per_position) == (510, 850, (365, 271, 214))
    assert any("reset during the window" in n and 'engine="0"' in n for n in r.notes)
    assert len(server.log) == 6
    down = read_live(server.url("down"), window=0.01, sleep=no_wait)  # every counter of the engine reset together
    assert (down.drafts, down.accepted_tokens) == (9_995, 100)  # the last of 6 scrapes, from zero


def test_correlated_drafts_widen_the_interval_by_the_sub_windows_spread(server):
    """Sub-windows alternately all accepted and none (requests easy or hard together): the per-draft interval is
    narrow (1.96 x 1.5 / sqrt(2000)), the bootstrap over the 5 sub-windows much wider, and that one is kept."""
    from eaglekit.core.serving.live import difference, parse_metrics
    from eaglekit.demo.metricsserver import vllm_metrics_text
    from livefixtures import STREAKY

    r = read_live(server.url("streaky"), window=0.05, sleep=no_wait)
    alone = difference(*(parse_metrics(vllm_metrics_text(c)) for c in (STREAKY[0], STREAKY[-1])), 1.0)
    assert r.accept_length.value == alone.accept_length.value == 1 + 3 * 1200 / 2000
    assert alone.accept_length.width < 0.3 < r.accept_length.width
    assert r.accept_length.low <= alone.accept_length.low and alone.accept_length.high <= r.accept_length.high
    assert "bootstrap over 5 sub-windows" in r.accept_length.method and "correlation" in r.accept_length.method


def test_the_token_goes_to_the_urls_host_only(server):
    read_live(server.url("local"), window=0.01, sleep=no_wait, token="s3cret")  # a same-host redirect is followed
    assert ("local", "Bearer s3cret") in server.log and ("vllm", "Bearer s3cret") in server.log
    with pytest.raises(LocationError, match="redirects to another host"):
        read_live(server.url("redirect"), window=0.01, sleep=no_wait, token="s3cret")
    assert server.other.log == []  # the other host was never asked, with or without the token


def test_the_address_may_be_the_server_or_its_metrics():
    assert metrics_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://h/prom/metrics") == "http://h/prom/metrics"


def test_the_cli_prints_the_reading_as_json(server, capsys):
    assert main(["live", server.url("vllm"), "--window", "0.05", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "eaglekit-live" and out["drafts"] == 500 and out["accept_length"] == 1 + 830 / 500
    assert out["per_position_acceptance"] == [355 / 500, 265 / 500, 210 / 500]


def test_the_cli_reads_an_sglang_log(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text(SGLANG_LOG)
    assert main(["live", str(log), "--steps", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "sglang" and out["accept_length"] == 2.5 and out["steps"] == 3
    assert read_live_log(log).accept_length.value == 2.5


def test_an_address_without_its_scheme_is_named(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["live", "localhost:8000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "http://localhost:8000" in err[0]
    assert main(["live", "nowhere.log"]) == 2
    assert "cannot read nowhere.log: No such file" in capsys.readouterr().err
