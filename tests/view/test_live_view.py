"""The live readings drawn (error bars, the offline band) and the read-again widget, against a loopback server."""

from __future__ import annotations

import pytest
from livefixtures import LiveHostile

from eaglekit.analysis.live.read import read_live_series
from eaglekit.core.errors import InputError
from eaglekit.demo.metricsserver import serve_metrics_replay
from eaglekit.view.live import LiveWidget, live_readings_figure

OFFLINE = {"steps": 3, "accept_length": 3.2, "accept_length_low": 3.1, "accept_length_high": 3.3,
           "per_step_acceptance": [0.9, 0.8, 0.75], "accept_length_by_steps": [1.9, 2.6, 3.2], "temperature": 0.0}


def test_the_figure_shows_each_window_with_its_interval_beside_the_offline_band():
    server = serve_metrics_replay([0.7, 0.75, 0.7], seed=3, drafts_per_scrape=800)
    try:
        series = read_live_series(server.url, readings=3, window=0.01)
    finally:
        server.stop()
    fig = live_readings_figure(series, offline=OFFLINE)
    band, line, engine = fig.data
    assert list(band.y) == [3.1, 3.1, 3.3, 3.3] and list(line.y) == [3.2, 3.2]
    assert list(engine.y) == [r.accept_length.value for r in series.readings]
    assert list(engine.error_y.array) == [r.accept_length.high - r.accept_length.value for r in series.readings]
    assert server.scrapes == 4 and len({r.drafts for r in series.readings}) > 1  # the replay moves on, unevenly


def test_the_widget_reads_again_and_shows_the_gap():
    with LiveHostile() as s:
        w = LiveWidget(s.url("vllm"), offline=OFFLINE, window=0.01)
        assert "Press to read" in w.output.value
        w.refresh()
        assert "gap" in w.output.value and "REAL GAP" in w.output.value and not w.button.disabled
        assert w.last.live.drafts == 500
        broken = LiveWidget(s.url("notmetrics"), window=0.01)
        broken.refresh()
        assert "not Prometheus text" in broken.output.value and "b42318" in broken.output.value
    with pytest.raises(InputError, match="accept_length must be a number"):
        LiveWidget("http://127.0.0.1:9", offline={"steps": 3})
