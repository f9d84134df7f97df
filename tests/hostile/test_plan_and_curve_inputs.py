"""Issue 47's remaining inputs: the accept-length curve on a training pipeline's dump (it raised a TypeError on
every run), ``--compare`` at 0 samples, CSV fields past the csv module's limit, 5,000-digit and superscript grid
fields, FIFOs given as files, 33,303 batch sizes, a tree pool too large for its positions. Each is the right
answer, or one line on stderr and exit 2, in bounded time and memory."""

from __future__ import annotations

import json

import pytest
from bounded_cli import run_limited
from test_plan_inputs import _one_line as one_line

from eaglekit.cli import main

K = 3  # the demo drafters' training-time-test depth


def _one_line(capsys, args) -> str:
    """The one stderr line of a run that exits 2 (paths given as they are)."""
    return one_line(capsys, [str(a) for a in args])


def test_the_curve_on_a_training_dump_runs_and_each_point_is_the_dumps_measurement(capsys, trained):
    """``acceptance-curve --hidden-states DUMP --target-head T`` (with --sample and --seed, which draw the dump's
    files) gives at each checkpoint what ``acceptance`` on the same dump gives."""
    from eaglekit.analysis.acceptance.dumps import measure_dump
    from eaglekit.demo.dumps import trained_dumps

    dump = trained_dumps(trained)["specforge"]
    head = str(trained.target("k2"))
    ckpts = [str(p) for p in trained.checkpoints("warm")[-3:]]
    code = main(["acceptance-curve", *ckpts, "--samples", "1K,2K,4K", "--hidden-states", str(dump), "--target-head",
                 head, "--steps", str(K), "--sample", "3", "--seed", "5", "--bootstrap-seed", "2", "--resamples", "100",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    points = json.loads(out)["checkpoints"]
    assert [p["samples"] for p in points] == [1000.0, 2000.0, 4000.0]
    for point, path in zip(points, ckpts):
        alone = measure_dump(path, dump, target_head=head, steps=K, sample=3, seed=5, progress=False)
        assert point["accept_length"] == alone.accept_length


@pytest.mark.parametrize("n", ["0", "0K", "-5", "1e400"])
def test_compare_at_no_samples_is_one_line(capsys, tmp_path, n):
    line = _one_line(capsys, ["acceptance-curve", "--label", "warm", "a", "b", "c", "--label", "scratch", "d", "e", "f",
                              "--hidden-states", tmp_path, "--break-even", "2.2", "--compare", "warm", "scratch", n])
    assert "--compare N" in line and "positive" in line or "expected one sample count" in line


# -- CSV fields past the csv module's limit ----------------------------------------------------------------------
@pytest.mark.parametrize("flag,text", [
    ("--measured", "batch,steps,topk,draft_tokens,accept_length,tokens_per_s," + "x" * 140_000 + "\n1,0,,,,80\n"),
    ("--costs", "batch,tokens," + "m" * 140_000 + "\n1,1,12\n"),
    ("--costs", "batch,tokens,ms\n1,1," + "1" * 140_000 + "\n"),
])
def test_a_csv_field_past_131072_characters_is_one_line(capsys, tmp_path, flag, text):
    f = tmp_path / "table.csv"
    f.write_text(text)
    extra = [] if flag == "--measured" else ["--per-step", "0.8"]
    line = _one_line(capsys, ["plan", flag, f, *extra, "--batch", "1"])
    assert "table.csv" in line and "field larger than field limit" in line


# -- --tree-grid fields ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("grid", ["6:10:" + "6" * 5000, "6:10:6²", "６:10:60", "6:10:+60", "6:10:60" * 2000])
def test_tree_grid_fields_are_ascii_digits_of_bounded_length(grid):
    from eaglekit.analysis.acceptance.tree import parse_tree_grid
    from eaglekit.core.errors import InputError

    with pytest.raises(InputError, match="STEPS:TOPK:DRAFT_TOKENS") as e:
        parse_tree_grid(grid)
    assert len(str(e.value)) < 300


def test_tree_grid_on_the_cli_is_one_line(capsys, tmp_path):
    line = _one_line(capsys, ["acceptance", tmp_path, "--hidden-states", tmp_path, "--tree-grid", "6:10:" + "9" * 5000])
    assert "six ASCII digits" in line


# -- FIFOs given as files ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--costs", "--measured", "--trees", "--acceptance"])
def test_a_named_pipe_without_a_writer_is_refused_unopened(tmp_path, flag):
    import os

    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    args = {"--costs": ["--per-step", "0.8"], "--measured": [], "--trees": ["--per-step", "0.8", "--costs",
            str(tmp_path / "c.csv")], "--acceptance": ["--costs", str(tmp_path / "c.csv")]}[flag]
    (tmp_path / "c.csv").write_text("batch,tokens,ms\n1,1,12\n1,3,30\n")
    r = run_limited("plan", flag, str(fifo), *args, "--batch", "1", tmp=tmp_path, limit_s=25)
    assert r.rc == 2 and len(r.error_lines) == 1 and "named pipe (FIFO)" in r.stderr, r


def test_a_curve_plan_named_pipe_is_refused_unopened(tmp_path):
    import os

    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    r = run_limited("acceptance-curve", "a", "b", "c", "--samples", "1,2,3", "--target", "t", "--prompts", "p.jsonl",
                    "--plan", str(fifo), tmp=tmp_path, limit_s=25)
    assert r.rc == 2 and len(r.error_lines) == 1 and "named pipe (FIFO)" in r.stderr, r


# -- grid axes -----------------------------------------------------------------------------------------------------
def test_more_distinct_runs_than_a_plan_reads_is_one_line(capsys, tmp_path):
    from eaglekit.core.serving.runs import MAX_RUNS

    rows = ["batch,steps,topk,draft_tokens,accept_length,tokens_per_s", "1,0,,,,80"]
    rows += [f"{b},3,1,4,2.5,{150 * b}" for b in range(1, 33_304)]   # 33,303 batch sizes
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    r = run_limited("plan", "--measured", str(tmp_path / "runs.csv"), "--batch", "1", tmp=tmp_path, limit_s=60)
    assert r.rc == 2 and len(r.error_lines) == 1, r
    assert f"33,304 distinct runs" in r.stderr and f"at most {MAX_RUNS:,}" in r.stderr


def test_the_run_cap_itself_is_priced(tmp_path):
    import eaglekit
    from eaglekit.core.serving.runs import MAX_RUNS

    rows = [(1, 0, None, None, None, 80.0)] + [(b, 3, 1, 4, 2.5, 40.0 * b) for b in range(1, MAX_RUNS)]
    p = eaglekit.plan(None, measured=rows, batches=(1, 2))
    assert len(p.runs.runs) == MAX_RUNS


@pytest.mark.parametrize("flag", ["--costs", "--draft-costs"])
def test_a_cost_table_of_33303_batch_sizes_is_one_line(capsys, tmp_path, flag):
    from eaglekit.core.serving.inputs import MAX_TABLE_ROWS

    (tmp_path / "c.csv").write_text("batch,tokens,ms\n1,1,12\n1,3,30\n")
    header, row = ("batch,tokens,ms", "{},1,{:.3f}") if flag == "--costs" else ("batch,ms", "{},{:.3f}")
    table = tmp_path / "big.csv"
    table.write_text("\n".join([header] + [row.format(b, 10 + 0.001 * b) for b in range(1, 33_304)]) + "\n")
    args = ["--costs", table] if flag == "--costs" else ["--costs", tmp_path / "c.csv", "--draft-costs", table]
    line = _one_line(capsys, ["plan", "--per-step", "0.8", *args, "--batch", "1"])
    assert "33,303 distinct" in line and f"at most {MAX_TABLE_ROWS:,}" in line


def test_a_draft_table_at_the_cap_is_fitted():
    import eaglekit
    from eaglekit.core.serving.inputs import MAX_TABLE_ROWS

    draft = {b: 1.0 + 0.001 * b for b in range(1, MAX_TABLE_ROWS + 1)}
    p = eaglekit.plan((0.8,), costs=[(1, 1, 12.0), (1, 3, 30.0)], draft_costs=draft, batches=(1,))
    assert len(p.draft.measured) == MAX_TABLE_ROWS


def test_more_trees_than_a_plan_prices_is_one_line(capsys, tmp_path):
    from eaglekit.analysis.serving.plan import MAX_TREES

    trees = [{"steps": 4, "topk": 8, "draft_tokens": n, "accept_length": 2.0} for n in range(2, 3 + MAX_TREES)]
    (tmp_path / "trees.json").write_text(json.dumps({"trees": trees}))
    (tmp_path / "c.csv").write_text("batch,tokens,ms\n1,1,12\n1,3,30\n")
    line = _one_line(capsys, ["plan", "--per-step", "0.8", "--costs", tmp_path / "c.csv", "--trees",
                              tmp_path / "trees.json", "--batch", "1"])
    assert f"{MAX_TREES + 1} tree configurations" in line and f"at most {MAX_TREES}" in line


# -- the tree search's work ----------------------------------------------------------------------------------------
def test_the_largest_pool_on_a_long_sequence_is_one_line(trained, tmp_path):
    """64 steps of top-32 (64,544 nodes per position) from each of 240 generated positions (the demo target's
    context is 256; a 2,000-position sample is the same check, :func:`check_tree_work` below): refused before
    any pool grows."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(trained.root.joinpath("prompts-k2.jsonl").read_text().splitlines()[0] + "\n")
    r = run_limited("acceptance", str(trained.drafter("k2")), "--target", str(trained.target("k2")), "--prompts",
                    str(prompts), "--steps", "3", "--max-new-tokens", "240", "--tree-grid", "64:32:60", "--no-cache",
                    tmp=tmp_path, limit_s=120)
    assert r.rc == 2 and len(r.error_lines) == 1, r
    assert "64,544 nodes" in r.stderr and "240 positions" in r.stderr and "8,388,608" in r.stderr


def test_the_tree_work_cap_admits_what_it_documents():
    from eaglekit.analysis.acceptance.tree import MAX_TREE_WORK, TreeConfig, check_tree_work
    from eaglekit.core.errors import InputError

    check_tree_work([TreeConfig(6, 10, 60)], 16_000)              # 510 x 16,000 < 2^23
    check_tree_work([TreeConfig(64, 32, 60)], MAX_TREE_WORK // 64_544)
    with pytest.raises(InputError, match="at most 129 positions"):
        check_tree_work([TreeConfig(64, 32, 60)], 130)
    with pytest.raises(InputError, match="2,000 positions, 129,088,000 in all"):   # the sample
        check_tree_work([TreeConfig(64, 32, 60)], 2000)
    check_tree_work([TreeConfig(3, 32, 60), TreeConfig(2, 32, 60)], MAX_TREE_WORK // TreeConfig(3, 32, 60).pool_size)


# -- a killed build's leftovers --------------------------------------------------------------------------------
def _leftover(parent, name):
    from eaglekit.demo.build import MARKER, SIGNATURE

    folder = parent / f".{name}.building-dead1234"
    folder.mkdir()
    (folder / MARKER).write_text(f"{SIGNATURE}\n{name}\n")
    (folder / "half").write_text("half a build")
    return folder


def test_a_dead_builds_folder_is_swept_when_the_folder_is_read_and_no_build_runs(tmp_path):
    import fcntl
    import os

    from eaglekit.demo.build import built_once

    path = tmp_path / "ws"
    built_once(path, 1, lambda f: (f / "ok").write_text("ok"))
    stale = _leftover(tmp_path, "ws")
    mine = tmp_path / ".ws.building-draft"   # a user's folder of a look-alike name: never touched
    mine.mkdir()
    # a live build holds the lock: its folder is left alone
    fd = os.open(tmp_path / ".ws.lock", os.O_WRONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        built_once(path, 1, lambda f: pytest.fail("rebuilt a current folder"))
        assert stale.is_dir()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    built_once(path, 1, lambda f: pytest.fail("rebuilt a current folder"))
    assert not stale.exists() and mine.is_dir() and (path / "ok").read_text() == "ok"


def test_the_demo_workspace_sweeps_a_dead_builds_folder(demo):
    from eaglekit.demo.world import build_demo

    root = demo.root
    stale = _leftover(root.parent, root.name)
    build_demo(root)
    assert not stale.exists()
