"""The Calculator (an anywidget computing in the browser; here its Python side) and the plotly what-if."""

from __future__ import annotations

import pytest

from eaglekit.core.account import Account
from eaglekit.core.errors import InputError
from eaglekit.core.specmath import Scenario, estimate
from eaglekit.view.calculator import (
    K_CURVES,
    Calculator,
    chart_traces,
    numbers,
    whatif_figure,
)


@pytest.fixture()
def calc():
    return Calculator.preset("seed")


def _trace(figure, name):
    return next(t for t in figure.data if t.name == name)


def test_seed_preset_is_the_measured_deployment(calc):
    r = calc.readouts
    assert r["cycle_ms"] == pytest.approx(100 / 3) and r["tokens_per_s"] == pytest.approx(60.0)
    assert round(r["break_even_accept_length"], 2) == 2.73
    assert calc.values["steps"] == 2 and not calc.values["unbounded"]
    assert calc.values["draft_ms"] == pytest.approx(Account.seed().draft_ms)
    assert r["target_alpha"] is None and r["target_min_steps"] == 5  # 150 tok/s: out of reach at k = 2
    verify_only = Calculator.preset("seed-verify-only").readouts
    assert verify_only["cycle_ms"] == 30.0 and verify_only["tokens_per_s"] == pytest.approx(66.67, abs=0.01)
    assert (verify_only["target_accept_length"], round(verify_only["target_alpha"], 2)) == (4.5, 0.78)


def test_moving_controls_recomputes(calc):
    calc.widget.verify_ms = 20.0
    calc.widget.draft_ms = 0.0
    assert calc.readouts["tokens_per_s"] == pytest.approx(100.0)
    assert calc.readouts["break_even_accept_length"] == pytest.approx(1.64)
    assert calc.estimate.tokens_per_s == pytest.approx(100.0)


def test_a_clamp_is_reported_never_silent(calc):
    """Item 4: unticking "unbounded chain" with accept length 5.91 computes at 3.00 and says so."""
    calc.widget.unbounded = True
    calc.widget.accept_length = 5.91
    assert calc.readouts["clamped"] is None and calc.readouts["accept_length"] == 5.91
    calc.widget.unbounded = False  # k = 2
    r = calc.readouts
    assert r["clamped"] == {"asked": 5.91, "ceiling": 3} and r["accept_length"] == 3.0 and r["alpha"] == 1.0
    assert calc.widget.accept_length == 5.91  # the control keeps what the reader asked for


def test_alpha_mode_drives_accept_length(calc):
    calc.widget.unbounded = True
    calc.widget.mode = "alpha"
    calc.widget.alpha = 0.75
    assert calc.readouts["accept_length"] == pytest.approx(4.0)


def test_displays_as_an_anywidget_with_its_front_end_inline(calc):
    bundle = calc._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    esm = calc.widget._esm
    assert "export function compute" in esm and "http" not in esm.replace("http://www.w3.org/2000/svg", "")


def test_unknown_preset_and_out_of_range_values():
    with pytest.raises(InputError, match=r"unknown preset 'nope': choose one of \['seed', 'seed-verify-only'\]"):
        Calculator.preset("nope")
    with pytest.raises(InputError, match="verify_ms = 500 is outside the calculator's range 1 to 200"):
        Calculator(Scenario(82, 500))


def test_numbers_agree_with_specmath_and_report_unreachable_targets():
    p = {"baseline_tps": 82, "verify_ms": 30, "draft_ms": 2, "steps": 3, "unbounded": False, "overhead_ms": 1,
         "mode": "accept_length", "accept_length": 2.5, "alpha": 0.5, "target_tps": 200}
    r = numbers(p)
    est = estimate(Scenario(82, 30, draft_ms=2, steps=3, overhead_ms=1), accept_length=2.5, target_tps=200)
    assert r["tokens_per_s"] == pytest.approx(est.tokens_per_s) and r["cycle_ms"] == 37.0
    assert r["target_alpha"] is None and r["target_max_draft_ms"] is None and r["target_min_steps"] == 9


def test_chart_traces_keep_their_order_and_other_chains_only_when_they_differ():
    est = estimate(Scenario(82, 30, draft_ms=2, steps=4), accept_length=2.0)
    names = [t["name"] for t in chart_traces(est)]
    assert names[:4] == ["baseline 82 tok/s", "break-even L = 3.12", "target", "this scenario (k = 4, 38.0 ms)"]
    assert names[4:-2] == ["other chains: k = 1, 2, 3, 4, 6, 8"] * len(K_CURVES)
    hovers = [t["hovertemplate"] for t in chart_traces(est)[4:-2]]
    assert hovers[0].startswith("k = 1, cycle 32.0 ms<br>") and hovers[-1].startswith("k = 8, cycle 46.0 ms<br>")
    assert names[-2:] == ["current", "needed for target"]
    free = estimate(Scenario.seed(), accept_length=2.0)  # no draft cost: every k lies on the main line
    assert not any(t["name"].startswith("other chains") for t in chart_traces(free))


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
