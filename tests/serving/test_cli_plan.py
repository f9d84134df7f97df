"""``eaglekit plan``: the interface as the issue writes it, the --json contract, one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from eaglekit.cli import main
from eaglekit.core.serving.published import KIMI_K25_INT4


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "costs.csv").write_text("batch,tokens,ms\n1,1,12.2\n1,3,30\n")
    (tmp_path / "draft.csv").write_text("batch,ms\n1,1.6667\n")
    (tmp_path / "runs.csv").write_text("batch,steps,topk,draft_tokens,accept_length,tokens_per_s\n1,0,,,,82\n"
                                       "1,2,1,3,2.0,60\n")
    (tmp_path / "config.json").write_text(json.dumps(KIMI_K25_INT4))
    return tmp_path


def _json(capsys, *args: str) -> dict:
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_costs_table_and_draft_table_give_the_seed_figures(capsys, files):
    out = _json(capsys, "--per-step", "0.6180339887,0.6180339887", "--costs", str(files / "costs.csv"),
                "--measured", str(files / "runs.csv"), "--batch", "1", "--max-steps", "8", "--extrapolate",
                "--target", str(files / "config.json"), "--tp", "8")
    (row,) = out["batches"]
    assert row["batch"] == 1 and row["best_steps"] == 0 and round(row["tokens_per_s"]) == 82
    k2 = row["steps"][2]
    assert k2["accept_length"] == pytest.approx(2.0) and k2["tokens_per_s"] == pytest.approx(60.0, abs=0.01)
    assert k2["verify_measured"] and not row["steps"][3]["verify_measured"] and k2["measured"]
    assert len(row["steps"]) == 9 and all(s["tokens_per_s_low"] < s["tokens_per_s_high"] for s in row["steps"])
    assert out["schedule"] == {"1-1": 0} and out["stops_paying_at"] == 1
    assert out["engine_config"]["vllm"]["speculative_config"] is None
    assert out["verify_vs_decode"]["measured"] == pytest.approx(30 / 12.2, rel=1e-3)
    assert 1.6 < out["verify_vs_decode"]["from_config"] < 1.75  # K2.5's INT4 experts, from the config alone


def test_estimate_from_config_and_gpu_with_calibration(capsys, files):
    out = _json(capsys, "--per-step", "0.8,0.75,0.7,0.65,0.6", "--target", str(files / "config.json"), "--gpu", "H20",
                "--tp", "8", "--context", "2048", "--calibrate", "1,1,12.2",
                "--batch", "1,2,4,8,16,32,64,128,256,512,1024")
    steps = [b["best_steps"] for b in out["batches"] if b["fits"]]
    assert steps[0] > steps[-1] and out["largest_batch"] < 256 and out["batches"][-1]["best_steps"] is None
    assert out["cost_model"]["kind"] == "calibrated" and out["drafting_free"] is False
    assert out["schedule"][next(iter(out["schedule"]))] == steps[0]
    assert list(out["schedule"])[0].startswith("1-")


def test_columns_in_any_order_and_a_one_row_draft_table(capsys, files):
    (files / "swapped.csv").write_text("tokens, ms, batch\n1, 12.2, 1\n3, 30, 1\n1, 13, 4\n")
    out = _json(capsys, "--per-step", "0.7", "--costs", str(files / "swapped.csv"), "--draft-costs",
                str(files / "draft.csv"), "--batch", "1,4", "--max-steps", "2")
    one, four = out["batches"]
    assert one["steps"][0]["verify_ms"] == 12.2 and four["steps"][0]["verify_ms"] == 13.0
    # one measured row sets the step's floor; what each of the 3 more rows adds is the prior's per-row term
    terms = {t["term"]: t for t in out["fit"]["cycle"]["terms"]}
    per_row = terms["draft_ms_per_row"]["value"]
    assert terms["draft_ms_per_row"]["set_by"] == "prior" and 0 < per_row < 0.1
    assert four["steps"][1]["draft_ms"] == pytest.approx(one["steps"][1]["draft_ms"] + 3 * per_row, rel=0.02)
    assert not four["steps"][1]["draft_measured"]
    assert one["steps"][1]["draft_ms"] == pytest.approx(1.6667) and one["steps"][1]["draft_measured"]
    # without the target's config three forwards are fitted as fixed + per token row + per verified token:
    # exactly, not with a compute term that misses all three by 30-60%
    assert all(abs(r["residual"]) < 1e-6 for r in out["fit"]["target"]["rows"])
    assert one["steps"][1]["verify_ms"] == pytest.approx(11.9333 + 2 * 0.26667 + 8.6333, rel=1e-3)


def test_text_output_names_the_schedule_and_the_estimate(capsys, files):
    assert main(["plan", "--per-step", "0.8,0.7", "--target", str(files / "config.json"), "--gpu", "H200",
                 "--tp", "8", "--batch", "1,8"]) == 0
    out = capsys.readouterr().out
    assert "vLLM schedule" in out and "lower bound on time" in out and "uncalibrated estimate" in out


@pytest.mark.parametrize("args, message", [
    (["--per-step", "0.8", "--costs", "{bad_csv}"], "negative"),
    (["--per-step", "0.8,1.2", "--costs", "{costs}"], "per-step acceptance 2 is 1.2"),
    (["--per-step", "0.8", "--costs", "{one_row}"], "at least two"),
    (["--per-step", "0.8", "--target", "{config}", "--gpu", "H300", "--tp", "8"], "unknown GPU 'H300'"),
    (["--per-step", "0.8", "--target", "{config}"], "--costs COSTS.csv"),
    (["--per-step", "0.8", "--costs", "{costs}", "--calibrate", "1,1,12"], "--calibrate goes with the estimate"),
    (["--per-step", "0.8", "--costs", "{costs}", "--batch", "4,2"], "must rise"),
    (["--per-step", "0.8", "--costs", "{costs}", "--tp", "0"], "tensor-parallel degree"),
    (["--per-step", "-0.1", "--costs", "{costs}"], "per-step acceptance 1 is -0.1"),
    (["--per-step", "0.8", "--target", "{config}", "--gpu", "H200", "--calibrate", "1,1,-3"], "positive number"),
    (["--per-position", "0.5,0.7", "--costs", "{costs}"], "cannot rise"),
    (["--per-step", "0.8", "--costs", "{costs}", "--draft-costs", "{bad_draft}"], "ms must be a number"),
])
def test_bad_input_is_one_line_and_exit_2(files, args, message):
    (files / "bad.csv").write_text("batch,tokens,ms\n1,1,12.2\n1,3,-30\n")
    (files / "one.csv").write_text("batch,tokens,ms\n1,1,12.2\n")
    (files / "bad_draft.csv").write_text("batch,ms\n1,fast\n")
    names = {"bad_csv": files / "bad.csv", "costs": files / "costs.csv", "one_row": files / "one.csv",
             "config": files / "config.json", "bad_draft": files / "bad_draft.csv"}
    argv = [a.format(**names) for a in args]
    r = subprocess.run([sys.executable, "-m", "eaglekit", "plan", *argv], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eaglekit plan: error:") and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_hostile_acceptance_files_are_one_line_errors(files):
    (files / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (files / "notjson.json").write_text("{per_step_acceptance: [0.8]")
    for name, message in (("deep.json", "nests"), ("notjson.json", "not valid JSON")):
        r = subprocess.run([sys.executable, "-m", "eaglekit", "plan", "--acceptance", str(files / name), "--costs",
                            str(files / "costs.csv")], capture_output=True, text=True, check=False)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr


def test_a_device_as_costs_table_is_refused_unread(tmp_path, capsys):
    """/dev/zero would fill memory: refused before reading."""
    path = tmp_path / "costs.csv"
    path.symlink_to("/dev/zero")
    code = main(["plan", "--per-step", "0.8", "--costs", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not a regular file" in err[0]


def _bash(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False, timeout=300)


def test_costs_by_shell_process_substitution_read_as_the_file(files):
    """``--costs <(printf ...)``: how people pass small tables; read with the same cap as a file."""
    py = f"{sys.executable} -m eaglekit plan --per-step 0.7,0.6 --batch 1 --json --costs"
    by_file = _bash(f"{py} {files / 'costs.csv'}")
    by_pipe = _bash(py + " <(printf 'batch,tokens,ms\\n1,1,12.2\\n1,3,30\\n')")
    assert by_file.returncode == by_pipe.returncode == 0, by_pipe.stderr
    assert json.loads(by_pipe.stdout) == json.loads(by_file.stdout)
    endless = _bash(f"{py} <(yes 1,1,12.2)")     # never ends: cut at the cap, one line, exit 2
    assert endless.returncode == 2 and endless.stderr.count("\n") == 1 and "more than 16,777,216 bytes" in endless.stderr


def test_a_pipe_that_never_ends_or_never_writes_is_cut(tmp_path):
    import os

    from eaglekit.core.errors import LocationError, TooLargeError
    from eaglekit.io.sources.local import read_local_file

    reader, writer = os.pipe()   # a shell's pipe (as <(command) passes it) whose writer sends nothing
    pipe = f"/proc/self/fd/{reader}"
    try:
        with pytest.raises(LocationError, match="did not end within 0.2 s"):
            read_local_file(pipe, limit=100, what="--costs", pipe_wait=0.2)
        os.write(writer, b"x" * 101)   # more than the cap, the writer still open: refused at the cap
        with pytest.raises(TooLargeError, match="more than 100 bytes"):
            read_local_file(pipe, limit=100, what="--costs", pipe_wait=60)
    finally:
        os.close(writer)
        os.close(reader)
    fifo = tmp_path / "costs.csv"   # a named pipe: refused unopened, whatever pipe_wait allows
    os.mkfifo(fifo)
    with pytest.raises(LocationError, match="named pipe"):
        read_local_file(fifo, limit=100, what="--costs", pipe_wait=600)
