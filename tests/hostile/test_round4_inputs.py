"""Hostile input on round 4's surfaces (issue 40): impossible measured rows and trees, --max-steps past trees,
CSV fields past the csv module's limit, contradicting repeats, fits whose spread overflows, too many batch
sizes, a million echoed points; acceptance-curve's --plan from a device, a FIFO or a sparse file, resample and
seed flags out of range, duplicate checkpoints, steps past a float's range; tokenizer-diff's non-integer ids
and a 1 MB special token. Each is the right answer, or one line and exit 2, in bounded memory."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from bounded_cli import run_limited

from eaglekit.cli import main
from eaglekit.core.errors import InputError

RUNS = "batch,steps,topk,draft_tokens,accept_length,tokens_per_s\n"
BIG_FIELD = "x" * 140_000   # past the csv module's field limit (131,072)


def _write(tmp_path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def _one_line(capsys, args) -> str:
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:     # refused while parsing: argparse's usage line
        code = e.code
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, out[-2000:], err[-2000:])
    assert len(lines[0]) < 800, lines[0]
    return lines[0]


def _plan_json(capsys, args) -> dict:
    code = main([str(a) for a in args] + ["--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


# -- silently wrong answers ---------------------------------------------------------------------------------
def test_an_accept_length_above_the_draft_tokens_is_refused_with_its_row(tmp_path, capsys):
    runs = _write(tmp_path, "runs.csv", RUNS + "1,0,,,,100\n1,8,4,2,8.5,700\n")
    line = _one_line(capsys, ["plan", "--measured", runs])
    assert "runs.csv row 3" in line and "accept length 8.5 is more than the 2 draft tokens" in line
    ok = _write(tmp_path, "ok.csv", RUNS + "1,0,,,,100\n1,3,1,4,2.5,200\n")
    trees = _write(tmp_path, "trees.json", json.dumps({"trees": [{"steps": 8, "topk": 4, "draft_tokens": 2,
                                                                   "accept_length": 8.5}]}))
    line = _one_line(capsys, ["plan", "--measured", ok, "--trees", trees])
    assert "tree 1" in line and "more than the 2 draft tokens" in line
    # a possible tree (accept length at most its draft tokens) is priced
    fine = _write(tmp_path, "fine.json", json.dumps({"trees": [{"steps": 3, "topk": 2, "draft_tokens": 4,
                                                                 "accept_length": 3.5}]}))
    got = _plan_json(capsys, ["plan", "--measured", ok, "--trees", fine])
    assert got["trees"] == [{"steps": 3, "topk": 2, "draft_tokens": 4, "accept_length": 3.5}]


def test_max_steps_bounds_trees_and_measured_tree_rows(tmp_path, capsys):
    ok = _write(tmp_path, "ok.csv", RUNS + "1,0,,,,100\n1,2,1,3,2.2,180\n")
    trees = _write(tmp_path, "t.json", json.dumps({"trees": [{"steps": 12, "topk": 4, "draft_tokens": 16,
                                                               "accept_length": 3.5}]}))
    measured_tree = _write(tmp_path, "tree.csv", RUNS + "1,0,,,,100\n1,12,4,16,3.5,300\n1,2,1,3,2.2,180\n")
    for args in (["--measured", ok, "--trees", trees], ["--measured", measured_tree]):
        got = _plan_json(capsys, ["plan", *args, "--max-steps", "2"])
        steps = [o["steps"] for b in got["batches"] for o in b["steps"] + b.get("trees", [])]
        assert max(steps) <= 2 and got["trees"] == []
        assert all(r["steps"] <= 2 for r in got["engine_config"]["sglang"]["ranges"])
        assert any("trees of 12 steps are past max steps 2" in n for n in got["notes"])
    got = _plan_json(capsys, ["plan", "--measured", ok, "--trees", trees, "--max-steps", "16"])
    assert got["trees"][0]["steps"] == 12                            # within the limit: priced


# -- CSV fields, contradictions, overflowing spreads ---------------------------------------------------------
@pytest.mark.parametrize("flag,text", [
    ("--measured", RUNS + f"1,0,,,,\"{BIG_FIELD}\"\n"),
    ("--costs", f"batch,tokens,\"{BIG_FIELD}\"\n1,1,10\n"),
    ("--costs", f"batch,tokens,ms\n1,1,\"{BIG_FIELD}\"\n"),
    ("--draft-costs", f"batch,ms\n1,\"{BIG_FIELD}\"\n"),
])
def test_a_csv_field_past_the_csv_limit_is_one_line(tmp_path, capsys, flag, text):
    path = _write(tmp_path, "big.csv", text)
    costs = _write(tmp_path, "costs.csv", "batch,tokens,ms\n1,1,10\n1,4,12\n")
    args = ["plan", flag, path] + (["--costs", costs] if flag == "--draft-costs" else []) \
        + ([] if flag == "--measured" else ["--per-step", "0.8"])
    line = _one_line(capsys, args)
    assert "big.csv row" in line and "not a CSV row this table takes" in line and "x" * 200 not in line


@pytest.mark.parametrize("case", ["repeated-costs", "repeated-runs", "repeated-baseline", "calibrate",
                                  "scatter-costs", "baseline-1000x"])
def test_contradicting_rows_and_overflowing_spreads_are_one_line(tmp_path, capsys, case):
    costs = {"repeated-costs": "batch,tokens,ms\n1,1,0.001\n1,1,10000000\n2,1,5\n1,4,7\n",
             "scatter-costs": "batch,tokens,ms\n1,1,0.001\n2,1,10000000\n4,1,5\n1,4,7\n2,4,9\n"}.get(case)
    runs = {"repeated-runs": RUNS + "1,0,,,,100\n1,3,1,4,2.5,200\n1,3,1,4,2.5,0.2\n",
            "repeated-baseline": RUNS + "1,0,,,,100\n1,0,,,,100000\n1,3,1,4,2.5,200\n",
            "baseline-1000x": RUNS + "1,0,,,,100\n2,0,,,,100000\n4,0,,,,380\n1,3,1,4,2.5,200\n"}.get(case)
    if costs:
        args = ["plan", "--costs", _write(tmp_path, "c.csv", costs), "--per-step", "0.8"]
    elif runs:
        args = ["plan", "--measured", _write(tmp_path, "r.csv", runs)]
    else:
        args = ["plan", "--per-step", "0.8", "--target", "llama-3.1-8b", "--gpu", "H200", "--calibrate", "1,1,0.001",
                "--calibrate", "1,1,10000000", "--calibrate", "2,4,5"]
    line = _one_line(capsys, args)
    assert "contradict" in line or "scatter by" in line, line


def test_an_overflow_no_check_caught_is_still_one_line(tmp_path, capsys, monkeypatch):
    import eaglekit.analysis.serving.plan as plan_mod

    def overflows(*args, **kwargs):
        return 10.0 ** 400

    monkeypatch.setattr(plan_mod, "plan", overflows)
    line = _one_line(capsys, ["plan", "--per-step", "0.8", "--costs", _write(tmp_path, "c.csv", "batch,tokens,ms\n")])
    assert "too large to compute" in line


# -- unbounded time or memory ----------------------------------------------------------------------------------
def test_too_many_batch_sizes_are_refused_and_many_measured_ones_stay_bounded(tmp_path, capsys):
    ok = _write(tmp_path, "ok.csv", RUNS + "1,0,,,,100\n1,3,1,4,2.5,200\n")
    line = _one_line(capsys, ["plan", "--measured", ok, "--batch", ",".join(map(str, range(1, 20_001)))])
    assert "20,000 batch sizes" in line and "at most 512" in line
    # issue 47: 33,303 measured batch sizes took past 120 s; one plan reads at most MAX_RUNS distinct runs
    from eaglekit.core.serving.runs import MAX_RUNS

    def runs(top: int) -> str:
        return RUNS + "".join(f"{b},0,,,,{100 * b ** 0.9:.3f}\n{b},3,1,4,2.5,{150 * b ** 0.9:.3f}\n"
                              for b in range(1, top + 1))
    r = run_limited("plan", "--measured", _write(tmp_path, "many.csv", runs(33_303)), "--json", tmp=tmp_path,
                    limit_s=120)
    assert r.rc == 2 and "66,606 distinct runs" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_limited("plan", "--measured", _write(tmp_path, "cap.csv", runs(MAX_RUNS // 2)), "--json", tmp=tmp_path,
                    limit_s=600)
    assert r.rc == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["runs"]["count"] == MAX_RUNS and len(got["runs"]["first"]) == 20      # summarised, not echoed
    assert len(r.stdout) < 4 << 20


def test_many_cost_rows_print_a_summary_not_every_point(tmp_path):
    """A table at the cap (MAX_TABLE_ROWS distinct forwards): every list of the JSON past MAX_LISTED items is its
    count, first and last items. 200,000 forwards are one line (issue 47: a table is bounded)."""
    from eaglekit.core.safejson import MAX_LISTED, summarised
    from eaglekit.core.serving.inputs import MAX_TABLE_ROWS

    def table(n: int) -> str:
        return _write(tmp_path, f"c{n}.csv", "batch,tokens,ms\n" + "".join(
            f"{1 + i % 1000},{1 + i // 1000},{5 + (1 + i % 1000) * (1 + i // 1000) // 100}\n" for i in range(n)))
    r = run_limited("plan", "--costs", table(200_000), "--per-step", "0.8,0.7", "--json", tmp=tmp_path, limit_s=120)
    assert r.rc == 2 and "200,000 distinct" in r.stderr, r.stderr[-2000:]
    n = MAX_TABLE_ROWS
    r = run_limited("plan", "--costs", table(n), "--per-step", "0.8,0.7", "--json", tmp=tmp_path, limit_s=900)
    assert r.rc == 0, r.stderr[-2000:]
    assert len(r.stdout) < 1 << 20
    got = json.loads(r.stdout)
    assert got["cost_model"]["points"]["count"] == n and got["measured"]["count"] == n
    assert got["cost_model"]["points"]["first"][0] == [1, 1, 5.0]
    assert summarised(list(range(MAX_LISTED))) == list(range(MAX_LISTED))   # short lists stay whole


# -- acceptance-curve --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag,value,message", [
    ("--resamples", "1000000000", "a resample count from 100 to 20,000"),
    ("--resamples", "1" + "0" * 20, "a resample count from 100 to 20,000"),
    ("--bootstrap-seed", "-1", "a seed from 0"),
    ("--batch-size", "9" * 400, "a batch size from 1"),
    ("--steps", "1" * 250, "a number of draft steps"),
])
def test_curve_flags_out_of_range_are_one_usage_line(capsys, flag, value, message):
    line = _one_line(capsys, ["acceptance-curve", "a", "b", "c", "--hidden-states", "d", flag, value])
    assert message in line and "9" * 100 not in line


def test_the_resample_cap_is_the_librarys():
    from eaglekit.cli.acceptance_curve import MAX_RESAMPLES as CLI_CAP
    from eaglekit.core.acceptance.curve import MAX_RESAMPLES, PointCounts, bootstrap_fits

    assert CLI_CAP == MAX_RESAMPLES
    pts = [PointCounts(n, (3, 4, 3, 5), (1, 2, 1, 2)) for n in (100.0, 200.0, 400.0)]
    for bad in (10 ** 9, 10 ** 20, 0, True):
        with pytest.raises(InputError, match="resamples must be a whole number"):
            bootstrap_fits(pts, cap=8.0, resamples=bad)
    with pytest.raises(InputError, match="seed must be a whole number"):
        bootstrap_fits(pts, cap=8.0, seed=-1)


@pytest.mark.parametrize("kind", ["dev-zero", "link-to-urandom", "sparse-3gib"])
def test_curve_plan_files_are_read_with_the_input_caps(trained, tmp_path, kind):
    if kind == "dev-zero":
        plan = "/dev/zero"
    elif kind == "link-to-urandom":
        (tmp_path / "plan.json").symlink_to("/dev/urandom")
        plan = str(tmp_path / "plan.json")
    else:
        with open(tmp_path / "plan.json", "wb") as f:
            f.truncate(3 << 30)
        plan = str(tmp_path / "plan.json")
    ck = trained.checkpoints("scratch")
    r = run_limited("acceptance-curve", *map(str, ck[:3]), "--samples", "1,2,3", "--hidden-states",
                    str(trained.hidden_dump("k25")), "--plan", plan, tmp=tmp_path, limit_s=300)
    assert r.rc == 2 and len(r.error_lines) == 1 and "Traceback" not in r.stderr, r
    assert "not a regular file" in r.stderr or "larger than" in r.stderr


def test_a_curve_plan_fifo_without_a_writer_is_cut_by_the_pipe_limit(tmp_path):
    from eaglekit.analysis.acceptance.curve_inputs import read_plan_break_even
    from eaglekit.core.errors import EaglekitError

    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    with pytest.raises(EaglekitError, match="--plan"):
        read_plan_break_even(fifo, steps=3, pipe_wait=0.2)


def test_duplicate_checkpoints_are_refused_by_content(trained, tmp_path, capsys):
    ck = trained.checkpoints("scratch")
    dump = str(trained.hidden_dump("k25"))
    link = tmp_path / "link"
    link.symlink_to(ck[0], target_is_directory=True)
    copy = tmp_path / "copy"
    shutil.copytree(ck[1], copy)
    for three in ([ck[0], ck[0], ck[0]], [ck[0], link, ck[2]], [ck[0], ck[1], copy]):
        line = _one_line(capsys, ["acceptance-curve", *three, "--samples", "1,2,3", "--hidden-states", dump])
        assert "holds the same weights as checkpoint" in line
    # distinct checkpoints of the run are never taken for copies
    from eaglekit.analysis.acceptance.curve_inputs import check_series

    check_series([str(p) for p in ck])
    check_series([str(p) for p in trained.checkpoints("warm")])


def test_training_steps_past_a_float_are_one_line(trained, tmp_path, capsys):
    import torch

    ck = trained.checkpoints("scratch")
    dump = str(trained.hidden_dump("k25"))
    huge = tmp_path / "huge"
    shutil.copytree(ck[0], huge)
    torch.save({"global_step": 10 ** 400}, huge / "training_state.pt")
    line = _one_line(capsys, ["acceptance-curve", huge, ck[1], ck[2], "--batch-size", "8", "--hidden-states", dump])
    assert "more than any training run takes" in line and "0" * 100 not in line
    torch.save({"global_step": 10 ** 5000}, huge / "training_state.pt")   # past str()'s 4,300 digits too
    line = _one_line(capsys, ["acceptance-curve", huge, ck[1], ck[2], "--batch-size", "8", "--hidden-states", dump])
    assert "0" * 100 not in line
    named = tmp_path / f"step_{'1' * 250}"
    shutil.copytree(ck[0], named)
    (named / "training_state.pt").unlink()
    line = _one_line(capsys, ["acceptance-curve", named, ck[1], ck[2], "--batch-size", "8", "--hidden-states", dump])
    assert "more than any training run takes" in line


# -- tokenizer-diff ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [True, 7.9, "7.0"])
def test_a_token_id_that_is_not_a_whole_number_is_refused(tmp_path, capsys, bad):
    from tokenfixtures import write_tokenizer

    a = write_tokenizer(tmp_path / "a", special=("<s>",))
    b = write_tokenizer(tmp_path / "b", special=("<s>",))
    tj = json.loads((b / "tokenizer.json").read_text())
    tj["added_tokens"][0]["id"] = bad
    (b / "tokenizer.json").write_text(json.dumps(tj))
    line = _one_line(capsys, ["tokenizer-diff", a, b])
    assert "is not a token id (a whole number)" in line


def test_a_one_mib_special_token_is_cut_in_text_and_whole_in_json(tmp_path, capsys):
    from tokenfixtures import kimi_folder

    ranks = [f"t{i}".encode() for i in range(8)]
    huge = "<" + "z" * (1 << 20) + ">"
    a = kimi_folder(tmp_path / "a", ranks, {8: "[BOS]", 9: "[EOS]"})
    b = kimi_folder(tmp_path / "b", ranks, {8: "[BOS]", 9: "[EOS]", 10: huge})
    code = main(["tokenizer-diff", str(a), str(b)])
    out, _ = capsys.readouterr()
    assert code == 4 and len(out) < 20_000 and "characters)" in out
    code = main(["tokenizer-diff", str(a), str(b), "--json"])
    out, _ = capsys.readouterr()
    assert code == 4 and huge in json.loads(out)["added_only_b"][0]["content"]


@pytest.mark.parametrize("args,message", [
    (["--measured", "RUNS", "--batch", "1" * 5000], "(5,000 characters)' is not a batch size"),
    (["--per-step", "0.8", "--target", "llama-3.1-8b", "--gpu", "H200", "--calibrate", "1," + "1" * 5000 + ",3"],
     "(5,004 characters)': B and N are whole numbers"),
    (["--accept-length", "2", "--steps", "1" * 250, "--costs", "COSTS"], "expected a whole number no larger than"),
])
def test_huge_integers_in_plan_flags_are_one_short_line(tmp_path, capsys, args, message):
    runs = _write(tmp_path, "ok.csv", RUNS + "1,0,,,,100\n1,3,1,4,2.5,200\n")
    costs = _write(tmp_path, "costs.csv", "batch,tokens,ms\n1,1,10\n1,4,12\n")
    line = _one_line(capsys, ["plan", *[{"RUNS": runs, "COSTS": costs}.get(a, a) for a in args]])
    assert message in line and "1" * 100 not in line


def test_sample_counts_past_any_training_run_are_one_line(trained, capsys):
    ck = trained.checkpoints("scratch")
    dump = str(trained.hidden_dump("k25"))
    for flag, value in (("--samples", "1e300,1e305,1e307"), ("--predict", "1e308"), ("--reach", "1e300")):
        extra = [] if flag == "--samples" else ["--samples", "1,2,3"]
        line = _one_line(capsys, ["acceptance-curve", *ck[:3], flag, value, *extra, "--hidden-states", dump])
        assert "must be at most" in line


def test_a_long_draft_table_is_summarised_too(tmp_path, capsys):
    costs = _write(tmp_path, "costs.csv", "batch,tokens,ms\n1,1,10\n1,4,12\n")
    from eaglekit.core.serving.inputs import MAX_TABLE_ROWS

    n = MAX_TABLE_ROWS   # the most a table holds (issue 47); past MAX_LISTED, summarised
    draft = _write(tmp_path, "draft.csv", "batch,ms\n" + "".join(f"{b},{1 + b // 1000}\n" for b in range(1, n + 1)))
    got = _plan_json(capsys, ["plan", "--costs", costs, "--draft-costs", draft, "--per-step", "0.8"])
    measured = got["draft"]["measured"]
    assert measured["count"] == n and measured["first"]["1"] == 1.0 and len(measured["last"]) == 20
