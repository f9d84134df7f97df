"""``eaglekit speedup``: the seed's numbers, the exact --json schema, one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eaglekit.cli import main

SEED = ["speedup", "--baseline-tps", "82", "--verify-ms", "30"]


def _json(capsys, *args: str) -> dict:
    assert main([*SEED, *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_schema_and_seed_figures(capsys):
    out = _json(capsys, "--accept-length", "2.0", "--target-tps", "150")
    assert list(out) == [
        "baseline_tps", "verify_ms", "draft_ms", "steps", "overhead_ms", "drafting_counted_free",
        "cycle_ms", "tokens_per_s", "speedup", "break_even_accept_length", "alpha", "accept_length", "target"
    ]
    assert list(out["target"]) == ["tokens_per_s", "accept_length", "alpha"]  # unbounded chain: no reach figures
    assert out["drafting_counted_free"] is True and out["steps"] is None
    assert out["cycle_ms"] == 30.0 and out["accept_length"] == 2.0 and out["alpha"] == 0.5
    assert round(out["break_even_accept_length"], 2) == 2.46
    assert out["tokens_per_s"] == pytest.approx(66.667, abs=0.001)
    assert out["speedup"] == pytest.approx(66.667 / 82, abs=1e-4)
    assert out["target"]["tokens_per_s"] == 150.0
    assert out["target"]["accept_length"] == pytest.approx(4.5)
    assert round(out["target"]["alpha"], 2) == 0.78
    assert all(isinstance(v, float) for k, v in out.items()
               if k not in ("target", "steps", "drafting_counted_free"))


def test_alpha_with_steps_and_unreachable_target(capsys):
    args = ["--alpha", "0.5", "--steps", "2", "--draft-ms", "1", "--overhead-ms", "2", "--target-tps", "200"]
    out = _json(capsys, *args)
    assert out["cycle_ms"] == 34.0 and out["accept_length"] == 1.75 and out["alpha"] == 0.5
    t = out["target"]
    assert (t["tokens_per_s"], t["alpha"], t["reachable"]) == (200.0, None, False)
    assert t["accept_length"] == pytest.approx(6.8)
    assert t["ceiling_tps"] == pytest.approx(3000 / 34) and t["fixed_part_alone_tps"] == pytest.approx(3000 / 32)


def test_no_target_is_null(capsys):
    assert _json(capsys, "--alpha", "0.83")["target"] is None


def test_text_output_is_aligned(capsys):
    assert main([*SEED, "--accept-length", "2", "--target-tps", "200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["Speculative decoding estimate", "field          value"]
    assert lines[3:] == [
        "cycle          30.00 ms (verify 30 + overhead 0; unbounded chain, drafting counted free)",
        "accept length  2.00 tokens/cycle (alpha 0.500, unbounded chain)",
        "throughput     66.7 tok/s",
        "speedup        0.81x over 82 tok/s baseline (-19%)",
        "break-even     accept length 2.46",
        "target         200 tok/s needs accept length 6.00 (alpha 0.833, unbounded chain, drafting counted free)",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--verify-ms", "-30", "--alpha", "0.5"], "verify time must be greater than 0 ms, got -30"),
        (["--draft-ms", "-1", "--steps", "2", "--alpha", "0.5"], "draft time per step cannot be negative, got -1 ms"),
        (["--overhead-ms", "-2", "--alpha", "0.5"], "overhead cannot be negative, got -2 ms"),
        (["--alpha", "1.0"], "alpha must be in [0, 1), got 1"),
        (["--alpha", "-0.2"], "alpha must be in [0, 1), got -0.2"),
        (["--accept-length", "0.5"], "accept length must be at least 1, got 0.5"),
        (["--accept-length", "4.5", "--steps", "2"], "accept length 4.5 is above k+1 = 3 (steps=2)"),
        (["--accept-length", "2", "--steps", "0"], "steps k must be a whole number of draft tokens >= 1"),
        (["--accept-length", "2", "--draft-ms", "2"], "a draft time of 2 ms per step needs a step count"),
        (["--accept-length", "2", "--target-tps", "0"], "target throughput must be greater than 0 tok/s, got 0"),
        (["--baseline-tps", "nan", "--alpha", "0.5"], "baseline throughput must be a finite number, got nan"),
    ],
)
def test_bad_values_give_one_line_and_exit_2(capsys, args, message):
    assert main([*SEED, *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("eaglekit speedup: error: ") and message in captured.err
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--accept-length", "2", "--alpha", "0.5"], "argument --alpha: not allowed with argument --accept-length"),
        ([], "one of the arguments --accept-length --alpha is required"),
    ],
)
def test_exactly_one_of_accept_length_and_alpha(capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main([*SEED, *args])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_subprocess_prints_no_traceback():
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "eaglekit", *SEED, "--alpha", "1.5"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("eaglekit speedup: error: alpha must be in [0, 1), got 1.5")
    ok = subprocess.run([*cmd[:-1], "0.5", "--json"], cwd=root, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout)["accept_length"] == 2.0


# -- --spec-tps: the cycle fitted from a measurement, the whole account -------------------------------

MEASURED = [*SEED, "--accept-length", "2.0", "--steps", "2", "--spec-tps", "60"]


def test_spec_tps_fits_the_cycle_and_prices_the_targets(capsys):
    assert main([*MEASURED, "--target-tps", "150", "--target-tps", "200", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cycle_ms"] == pytest.approx(33.333, abs=1e-3) and out["draft_ms"] == pytest.approx(1.667, abs=1e-3)
    assert round(out["break_even_accept_length"], 2) == 2.73
    assert round(out["verify_only_break_even_accept_length"], 2) == 2.46
    assert out["ceiling_tps"] == pytest.approx(90.0)
    t150, t200 = out["targets"]
    assert t150["alpha"] is None and t150["accept_length"] == pytest.approx(5.0)
    assert t150["max_draft_ms"] is None and t150["min_steps"] == 5  # 150 x (30 + 5 x 1.67) / 1000 = 5.75 <= 6
    assert t200["min_steps"] == 8


def test_spec_tps_text_says_steps_draft_cost_and_why_two_break_evens(capsys):
    assert main([*MEASURED, "--target-tps", "150"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "33.3 ms per draft-verify cycle: the 30 ms verify plus 3.3 ms of drafting" in text
    assert "2 steps of 1.67 ms" in text and "above accept length 2.73" in text
    assert "gives break-even 2.46; 150 tok/s needs 4.5 (78% per-token acceptance)" in text
    assert "150 tok/s is out of reach at k = 2 draft steps of 1.67 ms" in text
    assert "it takes k = 5 (cycle 38.3 ms)" in text


@pytest.mark.parametrize(("extra", "message"), [
    (["--steps", "2", "--spec-tps", "60", "--alpha", "0.5"], "--spec-tps needs --accept-length"),
    (["--accept-length", "2", "--spec-tps", "60"], "--spec-tps needs --steps"),
    (["--accept-length", "2", "--steps", "2", "--spec-tps", "90"], "shorter than the 30 ms verify alone"),
    (["--accept-length", "2", "--steps", "2", "--spec-tps", "60", "--draft-ms", "3"], "do not fit the measured"),
])
def test_spec_tps_bad_input_is_one_line(capsys, extra, message):
    assert main([*SEED, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_candidate_accept_lengths_print_the_libraries_account(capsys):
    from eaglekit.core.serving.account import Account

    assert main([*SEED, "--accept-length", "2.0", "--steps", "2", "--spec-tps", "60", "--target-tps", "150",
                 "--target-tps", "200", "--candidate-accept-length", "3.2", "--candidate-accept-length", "3.5",
                 "--verify-grows-for", "kimi-k25-int4", "--verify-grows-for", "kimi-k2-fp8", "--tp", "8"]) == 0
    out = capsys.readouterr().out
    assert out == f"{Account.seed()}\n"
    assert "With a verify that grows with k (K2.5, INT4 experts" in out
    assert "Accept length 3.2 needs at least 3 draft steps; there it gives 91 tok/s" in out and "11% faster" in out
    assert main([*SEED, "--accept-length", "2.0", "--steps", "2", "--spec-tps", "60",
                 "--candidate-accept-length", "3.2", "--json"]) == 0
    (p,) = json.loads(capsys.readouterr().out)["projections"]
    assert p["steps"] == 3 and round(p["tokens_per_s"]) == 91


def test_tp_sizes_the_growing_verify_and_needs_it(capsys):
    base = [*SEED, "--accept-length", "2.0", "--steps", "2", "--spec-tps", "60", "--verify-grows-for",
            "kimi-k25-int4", "--json"]
    verify = {}
    for tp in ("4", "8"):
        assert main([*base, "--tp", tp]) == 0
        out = json.loads(capsys.readouterr().out)
        verify[tp] = out["growing_verify"][0]["verify_ms"]
        assert out["growing_verify"][0]["tp"] == int(tp)
    assert verify["4"][1] == verify["8"][1] == 30.0 and verify["4"][2] != pytest.approx(verify["8"][2], abs=0.02)
    assert main([*base, "--tp", "1"]) == 2  # a 1T target does not fit on one GPU: the README's example needs --tp 8
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "594 GB per GPU on TP 1" in err and "--tp" in err
    assert main([*SEED, "--accept-length", "2.0", "--tp", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tp sizes the cost model of --verify-grows-for" in err


def test_candidate_accept_length_needs_the_measured_cycle(capsys):
    assert main([*SEED, "--accept-length", "2.0", "--candidate-accept-length", "3.2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--candidate-accept-length is priced on the measured cycle" in err


def _leaves(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _unprinted(text: str, obj: dict) -> list[str]:
    """Numbers of ``text`` that no JSON figure rounds to (at the printed precision; percentages as fractions)."""
    import re

    leaves = _leaves(obj)
    missing = []
    for m in re.finditer(r"(?<![\w.])([+-]?\d+(?:\.(\d+))?)(%?)", text):
        shown, places, pct = float(m.group(1)), len(m.group(2) or ""), m.group(3) == "%"
        candidates = [abs(v) * 100 if pct else v for v in leaves] + ([abs(v - 1) * 100 for v in leaves] if pct else [])
        if not any(abs(round(c, places) - (abs(shown) if pct else shown)) < 10 ** -places / 2 + 1e-9 for c in candidates):
            missing.append(m.group(0))
    return missing


@pytest.mark.parametrize("args", [
    ["--accept-length", "2.0", "--steps", "2", "--spec-tps", "60", "--target-tps", "150", "--target-tps", "200",
     "--candidate-accept-length", "3.2"],
    ["--accept-length", "2.0", "--steps", "2", "--draft-ms", "1.5", "--target-tps", "150"],
    ["--accept-length", "2.0", "--steps", "2", "--target-tps", "150"],
])
def test_json_carries_every_figure_the_text_prints(capsys, args):
    """Issue 24: the text printed the verify-only 4.5 and 6.0 that --json left out."""
    assert main([*SEED, *args]) == 0
    text = capsys.readouterr().out
    out = _json(capsys, *args)
    assert _unprinted(text, out) == []
    if "--spec-tps" in args:
        needs = [t["verify_only_accept_length"] for t in out["targets"]]
        assert needs == [pytest.approx(4.5), pytest.approx(6.0)]


def test_json_and_text_say_when_drafting_is_counted_free(capsys):
    assert main([*SEED, "--accept-length", "2.0", "--steps", "2"]) == 0
    assert "counted free" in capsys.readouterr().out
    assert _json(capsys, "--accept-length", "2.0", "--steps", "2")["drafting_counted_free"] is True
    assert _json(capsys, "--accept-length", "2.0", "--steps", "2", "--draft-ms", "1")["drafting_counted_free"] is False


def test_speedup_prints_both_readings_of_the_verify(capsys):
    base = [*SEED, "--accept-length", "2.0", "--steps", "2", "--spec-tps", "60", "--verify-grows-for",
            "kimi-k25-int4", "--tp", "8", "--candidate-accept-length", "3.2"]
    assert main(base) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "TP 8" in text and "73 tok/s per-token (-11%, NO-GO) and 88 tok/s per-forward (+7%, GO): TOO CLOSE TO " \
                              "CALL" in text
    assert main([*base, "--verify-split", "per-forward", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["growing_verify"][0]["reading"] == "per-forward" and out["verify_readings"]["rows"][0]["verdict"] == \
        "TOO CLOSE TO CALL"
    assert main([*base, "--verify-split", "sideways"]) == 2
    assert "verify split" in capsys.readouterr().err
