"""The Calculator (an anywidget computing in the browser; here its Python side) and the plotly what-if."""

from __future__ import annotations

import pytest

from eaglekit.core.serving.account import Account
from eaglekit.core.errors import InputError
from eaglekit.core.speedup.specmath import Scenario, estimate
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
    # the verify grows with k as K2.5's cost model says (its mean slope): 150 tok/s is out of reach at any k
    assert calc.values["verify_growth_ms"] == pytest.approx(Account.seed().growing[0].slope_ms, abs=0.005)
    assert r["target_alpha"] is None and r["target_min_steps"] is None and r["growth_capped"] is None
    constant = Calculator.preset("seed-constant-verify").readouts  # the verify held at 30 ms: k = 5 would do
    assert constant["tokens_per_s"] == pytest.approx(60.0) and constant["target_min_steps"] == 5
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
    with pytest.raises(InputError,
                       match=r"unknown preset 'nope': choose one of \['seed', 'seed-constant-verify', 'seed-verify-only'\]"):
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


def test_verify_growth_moves_the_other_chains_and_the_steps_a_target_needs():
    from eaglekit.core.speedup.specmath import reach

    base = {"baseline_tps": 82.0, "verify_ms": 30.0, "verify_growth_ms": 0.0, "draft_ms": 1.0, "steps": 2,
            "unbounded": False, "overhead_ms": 0.0, "mode": "accept_length", "accept_length": 2.0, "alpha": 0.5,
            "target_tps": 120.0}
    flat, grown = numbers(base), numbers({**base, "verify_growth_ms": 3.0})
    assert flat["cycle_ms"] == grown["cycle_ms"] == 32.0  # the verify at the deployment's own k is as measured
    m = grown["target_min_steps"]
    assert m > flat["target_min_steps"]
    def need(j):  # accept length 120 tok/s needs at j steps: the verify grows 3 ms per step from k = 2
        return 120 * (30 + (j - 2) * 3 + j * 1) / 1000

    assert (flat["target_min_steps"], m) == (3, 4) and need(m) <= m + 1 and need(m - 1) > m
    assert reach(120, verify_ms=30, steps=2, draft_ms=1, verify_growth_ms=3).cycle_at(m) == 30 + (m - 2) * 3 + m
    capped = numbers({**base, "verify_growth_ms": 40.0})
    assert capped["growth_capped"] == {"asked": 40.0, "used": pytest.approx(27.0)}
    s = Scenario(82.0, 30.0, draft_ms=1.0, steps=2, verify_growth_ms=3.0)
    k4 = next(t for t in chart_traces(estimate(s, accept_length=2.0)) if t.get("hovertemplate", "").startswith("k = 4"))
    assert k4["hovertemplate"].startswith("k = 4, cycle 40.0 ms")  # 30 + 2 x 3 growth + 4 x 1 drafting
