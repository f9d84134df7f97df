"""``eaglekit acceptance-curve`` on the trained demo world's checkpoint series: each point is
`eaglekit acceptance` on that checkpoint, the fit predicts a checkpoint it did not see, samples come from
SpecForge's training state or the folder name, the serving plan's break-even is joined, and bad input is
one line with exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eaglekit.analysis.acceptance.curve import acceptance_curve
from test_cli_acceptance import _error, _run  # the CLI runner of the acceptance tests (this folder)

K = 3  # the demo drafters' training-time-test depth


def cli(capsys, *args):
    return _run(capsys, *map(str, args))


def fails(capsys, *args) -> str:
    """The one stderr line of a run that exits 2."""
    return _error(capsys, *map(str, args))


@pytest.fixture(scope="module")
def series(trained):
    return {"scratch": trained.checkpoints("scratch"), "warm": trained.checkpoints("warm")}


@pytest.fixture(scope="module")
def batch(trained):
    return trained.manifest["curve_batch"]


@pytest.fixture(scope="module")
def both(trained, series, batch):
    """Both demo curves measured on the K2.5 hidden-state dump, samples read from the training states."""
    return acceptance_curve(series, batch_size=batch, hidden_states=trained.hidden_dump("k25"), steps=K,
                            predict=[2048], reach=[2.0, 3.0], break_even=2.2, progress=False)


def test_json_keys_and_each_point_equals_acceptance_alone(capsys, trained, series, batch):
    dump = trained.hidden_dump("k25")
    code, out, err = cli(capsys, "acceptance-curve", *series["scratch"], "--batch-size", batch, "--hidden-states",
                          dump, "--steps", K, "--predict", "1K,4K", "--reach", "2.5", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert {"checkpoints", "fit", "predictions", "reach", "curves"} <= set(got)
    assert [c["samples"] for c in got["checkpoints"]] == [
        float(int(p.name.rsplit("_", 1)[1]) * batch) for p in series["scratch"]]
    for point, path in zip(got["checkpoints"], series["scratch"]):
        assert {"path", "samples", "accept_length", "low", "high", "per_step"} <= set(point)
        assert point["path"] == str(path) and point["samples_from"].startswith("training_state.pt global_step")
        code, alone, _ = cli(capsys, "acceptance", path, "--hidden-states", dump, "--steps", K, "--json")
        alone = json.loads(alone)
        assert point["accept_length"] == alone["accept_length"]
        assert (point["low"], point["high"]) == (alone["accept_length_low"], alone["accept_length_high"])
        assert point["per_step"] == alone["per_step_acceptance"]
        assert point["accept_length_by_steps"] == alone["accept_length_by_steps"]
        assert point["low"] <= point["accept_length"] <= point["high"]
    assert got["fit"]["family"] == "average" and "bootstrap over 5 checkpoints" in got["fit"]["method"]
    forms = got["fit"]["forms"]
    assert [f["family"] for f in forms] == ["loglogistic", "power", "exp", "loglinear", "sigmoid", "growth"]
    assert sum(f["weight"] for f in forms) == pytest.approx(1.0)
    assert all((f["weight"] > 0) == f["plausible"] for f in forms) and got["fit"]["leading"]["form"]
    assert all("forms_disagree" in p for p in got["predictions"])
    assert [p["samples"] for p in got["predictions"]] == [1000.0, 4000.0]
    for p in got["predictions"]:
        assert p["low"] <= p["accept_length"] <= p["high"]
    (r,) = got["reach"]
    assert r["accept_length"] == 2.5 and r["low"] <= r["samples"] <= r["high"]


def test_against_a_target_each_point_equals_acceptance_alone(capsys, trained, series):
    ckpts = series["warm"][:3]
    t, p = trained.target("k25"), trained.prompts("k25")
    code, out, err = cli(capsys, "acceptance-curve", *ckpts, "--samples", "16,32,64", "--target", t, "--prompts", p,
                          "--max-new-tokens", "10", "--steps", K, "--json")
    assert code == 0, err
    got = json.loads(out)
    for point, path in zip(got["checkpoints"], ckpts):
        _, alone, _ = cli(capsys, "acceptance", path, "--target", t, "--prompts", p, "--max-new-tokens", "10",
                           "--steps", K, "--json")
        assert point["accept_length"] == json.loads(alone)["accept_length"]
        assert point["samples_from"] == "given"


def test_demo_fit_without_the_largest_checkpoint_predicts_it(both):
    """Held out: each demo curve fitted on all checkpoints but its largest predicts the largest within the
    prediction's interval."""
    from eaglekit.analysis.acceptance.curve import fit_points

    said = {}
    for curve in both.curves:
        last = curve.checkpoints[-1]
        held = fit_points(curve.label, curve.checkpoints[:-1], steps=K, predict=[last.samples])
        (n, predicted), = held.predictions
        assert predicted.low <= last.accept_length.value <= predicted.high, (curve.label, predicted, last.accept_length)
        said[curve.label] = (predicted.text(2), f"{last.accept_length.value:.2f}")
        # every form is scored on held-out checkpoints, and the text names the forms fitted
        assert set(curve.held_out) == {"loglogistic", "power", "exp", "loglinear", "sigmoid", "growth"}
        assert "forms fitted" in str(curve) and "union of the plausible forms' intervals" in str(curve)
    # docs/acceptance.md states these figures: they come from here
    docs = " ".join((Path(__file__).parents[2] / "docs" / "acceptance.md").read_text().split())
    assert (f"the average predicts it at {said['scratch'][0]} from scratch, measured {said['scratch'][1]}, and "
            f"{said['warm'][0]} for the warm start, measured {said['warm'][1]}") in docs, said
    errors = ", ".join(f"{f} {both['scratch'].held_out[f]:.3f} / {both['warm'].held_out[f]:.3f}"
                       for f in ("loglogistic", "power", "exp", "loglinear", "sigmoid", "growth"))
    assert f"scratch / warm start: {errors} accept length" in docs, errors


def test_seed_question_on_the_demo(both):
    """The warm start is ahead of scratch at every data size; each curve's points rise as the fit says."""
    scratch, warm = both["scratch"], both["warm"]
    assert scratch.samples == warm.samples
    assert warm.checkpoints[0].accept_length.value > scratch.checkpoints[0].accept_length.value
    for c in (scratch, warm):
        (n, i), = c.predictions
        assert i.low <= i.value <= i.high and n == 2048
        assert c.fit.fit.ceiling <= K + 1
    need_s = scratch.samples_for(2.2)
    need_w = warm.samples_for(2.2)
    assert need_w.value < need_s.value
    text = str(both)
    assert "Accept-length curve: scratch" in text and "break-even" in text and "samples to reach 3" in text
    assert "<table" in both._repr_html_()
    fig = __import__("eaglekit").accept_length_curve(both)
    names = [t.name for t in fig.data]
    assert "scratch: checkpoints" in names and "warm: 95% band" in names and "warm: extrapolated" in names
    # the log axis is labelled at powers of two, few enough not to crowd (issue 39)
    ticks = list(fig.layout.xaxis.tickvals)
    assert 3 <= len(ticks) <= 9 and all(float(t).is_integer() and int(t) & (int(t) - 1) == 0 for t in ticks)
    assert list(fig.layout.xaxis.ticktext)[:2] == [f"{int(ticks[0]):,}", f"{int(ticks[1]):,}"]


def test_samples_from_the_folder_name_and_specforge_state(capsys, trained, series, tmp_path, batch):
    import argparse

    import torch

    dump = trained.hidden_dump("k25")
    named = []
    for i, src in enumerate(series["scratch"][:3]):
        dst = tmp_path / f"run-a/step_{(i + 1) * 100}"
        shutil.copytree(src, dst)
        (dst / "training_state.pt").unlink()
        named.append(dst)
    code, out, err = cli(capsys, "acceptance-curve", *named, "--batch-size", 8, "--hidden-states", dump, "--steps", K,
                          "--json")
    assert code == 0, err
    got = json.loads(out)
    assert [c["samples"] for c in got["checkpoints"]] == [800.0, 1600.0, 2400.0]
    assert got["checkpoints"][0]["samples_from"] == "folder name 'step_100' = 100 x batch 8"
    # SpecForge saves its argparse.Namespace and the optimizer's tensors beside global_step: accepted
    spec = []
    for i, src in enumerate(series["scratch"][:3]):
        dst = tmp_path / f"run-b/epoch_0_step_{i + 1}"
        shutil.copytree(src, dst)
        torch.save({"epoch": 0, "global_step": 10 * (i + 1), "args": argparse.Namespace(batch_size=2, lr=1e-4),
                    "optimizer_state_dict": {"state": {0: {"exp_avg": torch.zeros(3)}}}}, dst / "training_state.pt")
        spec.append(dst)
    code, out, err = cli(capsys, "acceptance-curve", *spec, "--batch-size", 2, "--hidden-states", dump, "--steps", K,
                          "--json")
    assert code == 0, err
    assert [c["samples"] for c in json.loads(out)["checkpoints"]] == [20.0, 40.0, 60.0]


def test_plan_break_even_joined(capsys, trained, series, tmp_path):
    plan = {"batches": [
        {"batch": 1, "best_steps": 3, "tokens_per_s": 120.0,
         "steps": [{"steps": k, "cycle_ms": 10.0 + 4.0 * k} for k in range(5)]},               # break-even 22/10
        {"batch": 8, "break_even_accept_length": 2.9, "steps": []},                           # stated by the plan
    ]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    code, out, err = cli(capsys, "acceptance-curve", "--label", "scratch", *series["scratch"], "--label", "warm",
                          *series["warm"], "--batch-size", trained.manifest["curve_batch"], "--hidden-states",
                          trained.hidden_dump("k25"), "--steps", K, "--plan", tmp_path / "plan.json",
                          "--predict", "2048", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert [c["label"] for c in got["curves"]] == ["scratch", "warm"]
    one, eight = got["curves"][1]["plan"]
    assert one["break_even"] == pytest.approx(2.2) and one["source"].startswith("the plan's cycle")
    assert one["plan_best"] == {"steps": 3, "tokens_per_s": 120.0}
    need = one["samples_to_break_even"]
    assert need["low"] <= need["samples"] <= need["high"]
    assert one["last_checkpoint"]["tokens_per_s"] == pytest.approx(
        got["curves"][1]["checkpoints"][-1]["accept_length"] * 1000 / 22.0)
    assert eight["break_even"] == 2.9 and eight["source"] == "the plan's break-even"
    (pred,) = one["predicted_tokens_per_s"]
    assert pred["samples"] == 2048 and pred["low"] <= pred["tokens_per_s"] <= pred["high"]


def test_fewer_than_three_checkpoints_shows_points_without_a_fit(capsys, trained, series):
    code, out, err = cli(capsys, "acceptance-curve", *series["warm"][:2], "--samples", "16,32", "--hidden-states",
                          trained.hidden_dump("k25"), "--steps", K, "--predict", "1000", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert len(got["checkpoints"]) == 2 and got["fit"] is None and got["predictions"] == []
    assert "a curve needs at least 3" in got["notes"][0]
    code, out, _ = cli(capsys, "acceptance-curve", *series["warm"][:2], "--samples", "16,32", "--hidden-states",
                        trained.hidden_dump("k25"), "--steps", K)
    assert "fit" in out and "none: a curve needs at least 3 checkpoints" in out


def test_training_dump_on_a_dask_cluster_equals_acceptance(trained, series):
    from distributed import Client, LocalCluster

    from eaglekit.analysis.acceptance.dumps import measure_dump
    from eaglekit.demo.dumps import trained_dumps

    dump = trained_dumps(trained)["specforge"]
    head = str(trained.target("k2"))
    ckpts = series["warm"][-3:]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        curve = acceptance_curve(ckpts, samples=[1, 2, 3], hidden_states=dump, target_head=head, steps=K,
                                 scheduler=client, progress=False)
    for point, path in zip(curve.curves[0].checkpoints, ckpts):
        alone = measure_dump(path, dump, target_head=head, steps=K, progress=False)
        assert point.accept_length.value == alone.accept_length
    assert "target head" in curve.measured_on


def test_bad_input_is_one_line(capsys, trained, series, tmp_path):
    dump = trained.hidden_dump("k25")
    ck = series["scratch"]
    base = ["--hidden-states", dump, "--steps", K]
    assert "not increasing: checkpoint 3 has 16 after 64" in fails(
        capsys, "acceptance-curve", *ck[:3], "--samples", "32,64,16", *base)
    assert "3 sample counts for 2 checkpoints" in fails(capsys, "acceptance-curve", *ck[:2], "--samples", "1,2,3", *base)
    # another drafter's vocabulary map (the K2 drafter drafts K2's common tokens)
    line = fails(capsys, "acceptance-curve", ck[0], ck[1], trained.drafter("k2"), "--samples", "1,2,3", *base)
    assert "different vocabulary maps: d2t of checkpoint 3" in line and "entries differ" in line
    # another shape: the speculators layout names its layer tensors differently
    line = fails(capsys, "acceptance-curve", trained.drafter("k2"), trained.drafter("k2-speculators"), ck[0],
                  "--samples", "1,2,3", *base)
    assert "checkpoints of different shapes: layers.0.hidden_norm.weight is [64] in checkpoint 2" in line
    # a training state that would run code when unpickled: refused, and it did not run
    marker = tmp_path / "ran"
    bad = tmp_path / "evil/epoch_0_step_5"
    shutil.copytree(ck[0], bad)

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    import torch

    torch.save({"global_step": 5, "x": Evil()}, bad / "training_state.pt")
    line = fails(capsys, "acceptance-curve", bad, ck[1], ck[2], "--batch-size", 1, *base)
    assert "is not a plain tensor/number pickle" in line and "refused without running it" in line
    assert not marker.exists()
    assert "give --batch-size" in fails(capsys, "acceptance-curve", *ck[:3], *base)
    nowhere = tmp_path / "plain"
    shutil.copytree(ck[0], nowhere)
    (nowhere / "training_state.pt").unlink()
    assert "no step in the folder name" in fails(capsys, "acceptance-curve", nowhere, ck[1], ck[2],
                                                  "--batch-size", 1, *base)
    (tmp_path / "plan.json").write_text("{\"batches\": [{\"batch\": 1}]}")
    assert "states no break-even" in fails(capsys, "acceptance-curve", *ck[:3], "--samples", "1,2,3",
                                            "--plan", tmp_path / "plan.json", *base)
    assert "--label warm names no checkpoint" in fails(capsys, "acceptance-curve", "--label", "warm", *base)
    assert "not both" in fails(capsys, "acceptance-curve", ck[0], "--label", "w", ck[1], *base)


def test_three_checkpoints_never_claim_a_constrained_extrapolation(capsys, trained, series):
    code, out, err = cli(capsys, "acceptance-curve", *series["scratch"][:3], "--batch-size", 1, "--hidden-states",
                         trained.hidden_dump("k25"), "--steps", K, "--predict", "40,100K", "--reach", "3.5", "--json")
    assert code == 0, err
    got = json.loads(out)
    inside, beyond = got["predictions"]
    assert inside["constrained"] is True and beyond["constrained"] is False
    assert got["reach"][0]["constrained"] is False
    assert any("3 checkpoints for the curve's 3 parameters" in n for n in got["notes"])


def test_family_auto_keeps_the_lower_held_out_error(both):
    from eaglekit.analysis.acceptance.curve import fit_points

    for curve in both.curves:
        best = min(curve.held_out, key=curve.held_out.__getitem__)
        auto = fit_points(curve.label, curve.checkpoints, steps=K, family="auto")
        assert auto.fit.fit.family == best and f"family chosen by held-out error: {best}" in auto.notes


def test_cli_prints_the_pages_conclusion(capsys, trained, series, batch, both):
    """`--compare` prints the sentence notebook 06 ends with, from the same function (issue 39: the CLI omitted it)."""
    dump = trained.hidden_dump("k25")
    args = ["acceptance-curve", "--label", "scratch", *series["scratch"], "--label", "warm", *series["warm"],
            "--batch-size", batch, "--hidden-states", dump, "--steps", K, "--predict", "2048", "--reach", "2,3",
            "--break-even", "2.2"]
    code, out, err = cli(capsys, *args, "--compare", "warm", "scratch", "64")
    assert code == 0, err
    sentence = both.compare("warm", "scratch", samples=64, break_even=2.2)
    assert out.rstrip().endswith(sentence) and sentence.startswith("With 64 samples, warm measures")
    code, out, err = cli(capsys, *args, "--compare", "warm", "scratch", "64", "--json")
    assert json.loads(out)["comparison"] == sentence
    assert "not a curve" in fails(capsys, *args, "--compare", "warm", "nope", "64")
    assert "give --break-even" in fails(capsys, *args[:-2], "--compare", "warm", "scratch", "64")
    assert "one sample count" in fails(capsys, *args, "--compare", "warm", "scratch", "lots")
