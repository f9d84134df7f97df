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
