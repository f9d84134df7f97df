"""The Calculator widget (sliders set from Python, no browser) and the static plotly what-if figure."""

from __future__ import annotations

import time

import pytest

from eaglekit.view.calculator import K_CURVES, Calculator, chart_traces, whatif_figure
from eaglekit.core.errors import InputError
from eaglekit.core.specmath import Scenario, estimate


@pytest.fixture(scope="module")
def calc():
    return Calculator.preset("seed")


def _trace(figure, name):
    return next(t for t in figure.data if t.name == name)


def test_seed_preset_readouts(calc):
    r = calc.readouts
    assert r["cycle_ms"] == 30.0
    assert round(r["break_even_accept_length"], 2) == 2.46
    assert (r["accept_length"], r["alpha"]) == (2.0, 0.5)
    assert r["tokens_per_s"] == pytest.approx(66.67, abs=0.01)
    assert (r["target_accept_length"], round(r["target_alpha"], 2)) == (4.5, 0.78)
    assert "2.46" in calc.readout.value


def test_slider_changes_update_readouts_and_figure_in_place(calc):
    figure = calc.figure
    point = _trace(figure, "current")
    calc.controls["verify_ms"].value = 20.0
    assert figure is calc.figure and point is _trace(figure, "current")  # same objects, updated in place
    assert calc.readouts["tokens_per_s"] == pytest.approx(100.0)
    assert calc.readouts["break_even_accept_length"] == pytest.approx(1.64)
    assert point.y == (pytest.approx(100.0),)
    assert figure.data[1].x == (pytest.approx(1.64), pytest.approx(1.64))  # break-even mark moved
    calc.controls["target_tps"].value = 200.0
    assert calc.readouts["target_accept_length"] == pytest.approx(4.0)
    assert _trace(figure, "needed for target").x == (pytest.approx(4.0),)
    calc.apply(Scenario.seed(), accept_length=2.0, target_tps=150.0)
    assert calc.readouts["tokens_per_s"] == pytest.approx(66.67, abs=0.01)


def test_bounded_chain_clamps_accept_length_and_hides_unreachable_target(calc):
    c = calc.controls
    try:
        c["unbounded"].value = False
        c["steps"].value = 2
        c["draft_ms"].value = 2.0
        assert calc.readouts["cycle_ms"] == 34.0
        k1 = next(t for t in calc.figure.data if (t.hovertemplate or "").startswith("k = 1,"))
        assert k1.hovertemplate.startswith("k = 1, cycle 32.0 ms") and k1.y[-1] == pytest.approx(2 / 0.032)
        c["accept_length"].value = 5.0  # above k+1: the slider's max is 3
        assert calc.readouts["accept_length"] == 3.0 and calc.readouts["alpha"] == 1.0
        assert calc.readouts["target_alpha"] is None  # 150 tok/s needs 5.1 > 3
        assert _trace(calc.figure, "needed for target").x == ()
    finally:
        calc.apply(Scenario.seed(), accept_length=2.0, target_tps=150.0)
    assert c["draft_ms"].disabled and calc.readouts["cycle_ms"] == 30.0


def test_alpha_mode_drives_accept_length(calc):
    c = calc.controls
    try:
        c["mode"].value = "alpha"
        c["alpha"].value = 0.75
        assert calc.readouts["accept_length"] == pytest.approx(4.0)
        assert c["accept_length"].value == pytest.approx(4.0)
        assert c["accept_length"].layout.display == "none"
    finally:
        calc.apply(Scenario.seed(), accept_length=2.0, target_tps=150.0)
    assert c["mode"].value == "accept_length" and c["alpha"].layout.display == "none"


def test_update_takes_milliseconds(calc):
    start = time.perf_counter()
    for v in range(60, 100):
        calc.controls["baseline_tps"].value = float(v)
    assert (time.perf_counter() - start) / 40 < 0.05
    calc.apply(Scenario.seed(), accept_length=2.0, target_tps=150.0)


def test_displays_as_a_widget(calc):
    bundle = calc._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_unknown_preset():
    with pytest.raises(InputError, match=r"unknown preset 'nope': choose one of \['seed'\]"):
        Calculator.preset("nope")


def test_chart_traces_keep_their_order():
    est = estimate(Scenario(82, 30, draft_ms=2, steps=4), accept_length=2.0)
    names = [t["name"] for t in chart_traces(est)]
    assert names[:4] == ["baseline 82 tok/s", "break-even L = 3.12", "target", "this scenario (k = 4, 38.0 ms)"]
    assert names[4:-2] == ["other chains: k = 1, 2, 3, 4, 6, 8"] * len(K_CURVES)
    hovers = [t["hovertemplate"] for t in chart_traces(est)[4:-2]]
    assert hovers[0].startswith("k = 1, cycle 32.0 ms<br>") and hovers[-1].startswith("k = 8, cycle 46.0 ms<br>")
    assert names[-2:] == ["current", "needed for target"]


# -- static what-if: plotly's own slider, no kernel --------------------------------------------------


def test_whatif_slider_steps_move_the_point_and_the_readout():
    scenario = Scenario.seed()
    figure = whatif_figure(scenario, accept_length=2.0, target_tps=150)
    point = [i for i, t in enumerate(figure.data) if t.name == "current"]
    (slider,) = figure.layout.sliders
    assert len(slider.steps) == 71 and slider.steps[0].label == "1.0" and slider.steps[-1].label == "8.0"
    assert slider.steps[slider.active].label == "2.0"
    seen = set()
    for step in slider.steps:
        data, layout, traces = step.args
        L = float(step.label)
        tps = L / 0.030
        assert step.method == "update" and list(traces) == point
        assert data["x"] == [[pytest.approx(L)]] and data["y"] == [[pytest.approx(tps)]]
        text = layout["annotations[0].text"]
        assert f"accept length {L:.2f}" in text and f"<b>{tps:.1f} tok/s</b>" in text
        assert f"{tps / 82:.2f}x baseline" in text and "break-even 2.46" in text
        seen.add(text)
    assert len(seen) == len(slider.steps)
    assert "<b>66.7 tok/s</b>, 0.81x baseline" in figure.layout.annotations[0].text
    assert _trace(figure, "current").x == (2.0,)


def test_whatif_bounded_chain_and_custom_grid():
    figure = whatif_figure(Scenario(82, 30, draft_ms=1, steps=3), accept_length=2.6, accept_lengths=[1, 2, 3, 4])
    (slider,) = figure.layout.sliders
    assert [s.label for s in slider.steps] == ["1.0", "2.0", "3.0", "4.0"] and slider.active == 2
    assert slider.steps[3].args[0]["y"] == [[pytest.approx(4 / 0.033)]]
    with pytest.raises(InputError, match="accept length 5 is above k\\+1 = 4"):
        whatif_figure(Scenario(82, 30, steps=3), accept_lengths=[5])
    with pytest.raises(InputError, match="accept_lengths is empty"):
        whatif_figure(Scenario.seed(), accept_lengths=[])
