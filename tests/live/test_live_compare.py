"""The live reading beside the offline figure: the gap, its verdict, the causes; and the plan's measured run."""

from __future__ import annotations

import json
import math

import pytest
from livefixtures import VLLM_AFTER, VLLM_BEFORE, LiveHostile, vllm_pages

from eaglekit.analysis.live.compare import compare_live, offline_at
from eaglekit.cli import main
from eaglekit.core.configs.aux_view import aux_engine_view
from eaglekit.core.errors import InputError
from eaglekit.core.serving.live import difference, parse_metrics
from eaglekit.core.serving.runs import parse_runs

Z = 1.959963984540054


@pytest.fixture(scope="module")
def live():
    before, after = (parse_metrics(t) for t in vllm_pages(VLLM_BEFORE, VLLM_AFTER))
    return difference(before, after, 4.0)  # 2.66 at 3 steps; per step 0.71, 0.746, 0.792


def offline(L=3.2, low=3.1, high=3.3, steps=3, per_step=(0.9, 0.8, 0.75), by_steps=None, **extra):
    return {"steps": steps, "accept_length": L, "accept_length_low": low, "accept_length_high": high,
            "accept_length_interval": "bootstrap over 12 prompts, 95%", "per_step_acceptance": list(per_step),
            "accept_length_by_steps": list(by_steps or [1.9, 2.6, L][:steps]), "temperature": 0.0,
            "chat_template_sha256": None, **extra}


def cause(c, name):
    return next(x for x in c.causes if x.name == name)


def test_a_gap_wider_than_both_intervals_is_real(live):
    c = compare_live(live, offline())
    half_live = (live.accept_length.high - live.accept_length.low) / 2
    assert c.gap.value == pytest.approx(3.2 - 2.66)
    assert c.gap.high - c.gap.value == pytest.approx(math.hypot(0.1, half_live))
    assert c.verdict == "REAL GAP" and "engine accepts less" in c.meaning
    assert cause(c, "where the gap opens").status == "suspect" and "step 1" in cause(c, "where the gap opens").detail
    assert cause(c, "served steps").status == "fine"
    for name in ("chat template", "traffic mix", "draft-vocabulary coverage", "temperature",
                 "aux layer ids as the engine reads them"):
        assert cause(c, name).status == "uncheckable"
    j = c.to_json()
    assert j["verdict"] == "REAL GAP" and j["live_accept_length"] == live.accept_length.value and j["gap_low"] > 0
    assert "-> REAL GAP (the engine accepts less" in str(c) and "<table" in c._repr_html_()
    assert "GO" not in c.headline()  # GO / NO-GO mean "speculation pays" everywhere else


def test_a_gap_inside_the_noise_is_too_close_to_call(live):
    c = compare_live(live, offline(L=2.7, low=2.55, high=2.85, per_step=(0.72, 0.75, 0.8)))
    assert c.verdict == "TOO CLOSE TO CALL" and c.gap.low < 0 < c.gap.high
    assert cause(c, "where the gap opens").status == "fine"


def test_a_collapse_in_per_step_acceptance_names_the_trained_depth(live):
    c = compare_live(live, offline(per_step=(0.9, 0.8, 0.2)))
    d = cause(c, "trained depth vs served steps")
    assert d.status == "suspect" and "trained for 2 steps" in d.detail and "serve 2" in d.detail


def test_offline_read_at_the_served_steps(live):
    c = compare_live(live, offline(L=3.6, low=3.4, high=3.8, steps=5, by_steps=[1.9, 2.6, 3.05, 3.4, 3.6],
                                   per_step=(0.9, 0.8, 0.75, 0.7, 0.6)))
    assert c.offline.value == 3.05 and c.compared_at == 3 and not c.offline.has_interval
    assert c.verdict == "TOO CLOSE TO CALL" and "no interval" in c.gap.method
    short = compare_live(live, offline(steps=2, by_steps=[1.9, 2.6], per_step=(0.9, 0.8)))
    assert cause(short, "served steps").status == "suspect" and "--steps 3" in cause(short, "served steps").detail
    with pytest.raises(InputError, match="accept_length must be a number"):
        offline_at({"steps": 3, "accept_length": "3.2"}, 3)


def test_temperature_and_aux_ids_are_checked_when_known(live):
    view = aux_engine_view([2, 16, 29], trained_by="specforge", num_layers=32, engines=["vllm"])
    reading = view.reading("vllm")
    c = compare_live(live, offline(), aux_view=view, engine="vllm", temperature=0.7)
    aux = cause(c, "aux layer ids as the engine reads them")
    assert aux.status == {"yes": "fine", "no": "suspect"}.get(reading.as_trained, "uncheckable")
    assert str(list(reading.outputs_of)) in aux.detail
    t = cause(c, "temperature")
    assert t.status == "suspect" and "--temperature 0.7" in t.detail


def test_the_plan_reads_a_live_reading_as_a_measured_run(live):
    (run,) = parse_runs(json.dumps(live.to_json()), what="live.json")
    assert (run.batch, run.steps, run.topk, run.draft_tokens) == (8, 3, 1, 4)
    assert run.accept_length == live.accept_length.value and run.tokens_per_s == live.generation_tokens_per_s
    no_batch = {**live.to_json(), "batch": None}
    with pytest.raises(InputError, match="--batch N"):
        parse_runs(json.dumps(no_batch), what="live.json")


def test_the_cli_compares_with_an_offline_result(tmp_path, capsys):
    path = tmp_path / "acceptance.json"
    path.write_text(json.dumps(offline()))
    with LiveHostile() as s:
        assert main(["live", s.url("vllm"), "--window", "0.05", "--offline", str(path), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["verdict"] == "REAL GAP" and out["offline_accept_length"] == 3.2 and out["live"]["drafts"] == 500
        path.write_text('{"steps": 3}')
        assert main(["live", s.url("vllm"), "--window", "0.05", "--offline", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "accept_length must be a number" in err[0]
        assert len(s.log) == 6  # the first reading's 6 scrapes; the second refused before any


def test_the_cli_measures_the_offline_figure_and_reads_the_aux_ids(trained, capsys):
    """--drafter --target --prompts: the offline figure measured at the served steps (3), beside the live one;
    --engine: the drafter's aux ids as that release reads them (from its config.json)."""
    from eaglekit.demo.prompts import measurement_prompts

    prompts = measurement_prompts(trained, "k25", 12)
    with LiveHostile() as s:
        assert main(["live", s.url("vllm"), "--window", "0.05", "--drafter", str(trained.drafter("k25-warm")),
                     "--target", str(trained.target("k25")), "--prompts", str(prompts), "--max-new-tokens", "16",
                     "--engine", "vllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["offline_steps"] == 3 and out["compared_at_steps"] == 3
    assert out["offline_accept_length_low"] <= out["offline_accept_length"] <= out["offline_accept_length_high"]
    aux = next(c for c in out["causes"] if c["name"] == "aux layer ids as the engine reads them")
    assert aux["status"] in ("fine", "suspect") and "feeds the outputs of layers" in aux["detail"]
