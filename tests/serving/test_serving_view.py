"""The plan's figures and widget: the widget's Python twin agrees with the plan, its front end ships inline."""

from __future__ import annotations

import pytest

import eaglekit
from eaglekit.core.serving.plan import best_steps
from eaglekit.view.frontend import esm
from eaglekit.view.serving import FRONT_END, numbers, values_from_plan


@pytest.fixture(scope="module")
def plan():
    return eaglekit.plan((0.8, 0.72, 0.66, 0.6, 0.55), target="kimi-k25-int4", gpu="H20", tp=8, context=2048,
                         calibrate_points=[(1, 1, 12.2)], batches=(1, 4, 16, 64, 256, 1024),
                         draft_costs={1: 0.4, 256: 1.2})


def test_widget_numbers_are_the_plan_s_at_every_planned_batch(plan):
    for i, row in enumerate(plan.plans):
        values = values_from_plan(plan, batch=row.batch)
        got = numbers(values)
        assert got["batch"] == row.batch and got["best_steps"] == best_steps([o.tokens_per_s for o in row.options])
        # the widget draws drafting as the fitted line; a measured draft row differs by its residual
        assert [o["tokens_per_s"] for o in got["options"]] == pytest.approx([o.tokens_per_s for o in row.options],
                                                                            rel=1e-3)
        assert got["fits"] == row.fits
        if all(p.choice is None for p in plan.plans):  # the widget shows point values; the plan's schedule
            assert got["schedule"] == [list(r) for r in plan.ranges]  # also keeps to fewer steps on overlaps
        assert got["stops_paying_at"] == plan.stops_paying_at
    moved = numbers({**values_from_plan(plan), "context": 65536})
    assert moved["options"][0]["verify_ms"] > numbers(values_from_plan(plan))["options"][0]["verify_ms"]


def test_widget_displays_with_its_front_end_inline(plan):
    w = eaglekit.PlanWidget(plan, batch=16)
    assert w.values["batch_log2"] == 4 and w.readouts["batch"] == 16
    bundle = w._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    assert w.widget._esm == esm(FRONT_END) and "export function compute" in w.widget._esm


def test_a_table_without_a_target_gives_a_generic_widget():
    p = eaglekit.plan((0.9, 0.8), costs=[(1, 1, 10.0), (8, 1, 12.0), (1, 3, 14.0)], batches=(1, 8, 64))
    got = numbers(values_from_plan(p, batch=8))
    assert got["distinct_experts"] == [None] * 3  # k = 0..2: the acceptance's measured depth
    assert [o["verify_ms"] for o in got["options"][:3]] == pytest.approx([p.model.ms(8, n) for n in (1, 2, 3)])


def test_figures_draw_every_k_and_the_best(plan):
    fig = eaglekit.plan_throughput_figure(plan)
    assert len(fig.data) == plan.max_steps + 2 and fig.data[-1].name == "best k"
    assert list(fig.data[-1].y) == pytest.approx([p.best.tokens_per_s for p in plan.fitting])
    # the log axis is labelled at the batch sizes priced, not plotly's crowded 2s and 5s (issue 39)
    assert set(fig.layout.xaxis.tickvals) <= {p.batch for p in plan.fitting}
    assert len(fig.layout.xaxis.tickvals) <= 10 and fig.layout.xaxis.tickvals[0] == min(p.batch for p in plan.fitting)
    steps = eaglekit.plan_steps_figure(plan)
    assert list(steps.data[0].y) == list(plan.best_steps)
    stop = plan.stops_paying_at
    assert stop is None or f"stops paying at batch {stop}" in steps.layout.title.text
    grid = eaglekit.plan_grid_figure(plan)
    assert len(grid.data[0].z) == len(plan.plans) and grid.data[-1].name == "best k"
    assert [row[0] is None for row in grid.data[0].z] == [not p.fits for p in plan.plans]


def test_the_widget_carries_the_forward_s_per_request_and_per_token_terms():
    p = eaglekit.plan((0.8, 0.7), measured=[(1, 0, None, None, None, 141.4), (16, 0, None, None, None, 900.0),
                                            (64, 0, None, None, None, 1500.0)],
                      target="llama-3.1-8b", gpu="H100-SXM", batches=(1, 16, 64))
    assert p.model.per_request_ms > 0
    values = values_from_plan(p, batch=64)
    got = numbers(values)
    assert [o["verify_ms"] for o in got["options"]] == pytest.approx([p.model.ms(64, n) for n in (1, 2, 3)])
    assert values["per_request_ms"] == p.model.per_request_ms


def test_the_widget_shows_a_measured_run_as_the_plan_does():
    """The seed's run at k = 2 (accept length 2.0, 60 tok/s) beside an acceptance that agrees with it: the widget's
    point values take the measured cell as the plan does, not the modelled cycle."""
    runs = [(1, 0, None, None, None, 82.0), (1, 2, 1, 3, 2.0, 60.0)]
    p = eaglekit.plan((0.6, 2 / 3, 0.6), costs=[(1, 3, 30.0)], measured=runs, target="kimi-k25-int4", gpu="H20",
                      tp=8, context=2048, batches=(1, 8))
    values = values_from_plan(p)
    assert [1, 2, 2.0, pytest.approx(1000 * 2.0 / 60)] in values["measured_cells"]
    got = numbers(values)["options"]
    assert got[2]["tokens_per_s"] == pytest.approx(60.0) and got[2]["accept_length"] == pytest.approx(2.0)
    assert got[2]["tokens_per_s"] == pytest.approx(p.plans[0].options[2].tokens_per_s)


def test_the_widget_leaves_another_drafter_s_run_out_of_the_cells_as_the_plan_does():
    """Issue 49: a run whose accept length (2.0) disagrees with the acceptance given (2.38 at k = 2) was another
    drafter's: it fits the cycle, and neither the plan nor the widget shows its cell as this drafter's."""
    runs = [(1, 0, None, None, None, 82.0), (1, 2, 1, 3, 2.0, 60.0)]
    p = eaglekit.plan((0.8, 0.72, 0.66), costs=[(1, 3, 30.0)], measured=runs, target="kimi-k25-int4", gpu="H20",
                      tp=8, context=2048, batches=(1, 8))
    values = values_from_plan(p)
    assert [c[:2] for c in values["measured_cells"]] == [[1, 0]]  # the plain decode stays: no drafter in it
    got = numbers(values)["options"]
    assert got[2]["accept_length"] == pytest.approx(p.plans[0].options[2].accept_length)
    assert got[2]["tokens_per_s"] == pytest.approx(p.plans[0].options[2].tokens_per_s)
    assert got[2]["tokens_per_s"] != pytest.approx(60.0)
    at8 = numbers({**values, "batch_log2": 3})["options"]
    assert at8[2]["accept_length"] == pytest.approx(p.plans[1].options[2].accept_length)  # batch 8 was not measured
