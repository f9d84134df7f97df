"""Hostile plan inputs (issue 33): configs declaring 2e9 layers, 10^400 vocabularies or block sizes, 8 experts
per token of 4, a catastrophic regex in a quantisation ignore list; costs of 1e308 or 5e-324; 400-digit flags;
a custom GPU of 5e-324 TB/s. Each is one line on stderr and exit 2 (or, for the regex, an answer), in bounded
memory and time."""

from __future__ import annotations

import copy
import json
import time

import pytest
from bounded_cli import run_limited

from eaglekit.cli import main
from eaglekit.core.errors import InputError
from eaglekit.core.serving.costmodel import shape_from_config
from eaglekit.core.serving.published import KIMI_K2_FP8, KIMI_K25_INT4
from eaglekit.core.serving.saferegex import UnsafePattern, safe_match

BIG = "1" + "0" * 400


def _one_line(capsys, args) -> str:
    try:
        code = main(args)
    except SystemExit as e:  # refused while parsing: argparse's usage line
        code = e.code
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    assert len(lines[0]) < 600, lines[0]
    return lines[0]


def _config(tmp_path, base, **change) -> str:
    cfg = copy.deepcopy(base)
    body = cfg.get("text_config", cfg)
    for k, v in change.items():
        if k == "quantization_config":
            cfg[k] = v
        else:
            body[k] = v
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_two_billion_layers_are_refused_without_building_a_list(tmp_path):
    target = _config(tmp_path, KIMI_K25_INT4, num_hidden_layers=2_000_000_000)
    r = run_limited("plan", "--per-step", "0.8", "--target", target, "--gpu", "H200", tmp=tmp_path, limit_s=60)
    assert r.rc == 2 and len(r.error_lines) == 1, r
    assert "num_hidden_layers" in r.stderr and "more than any model has" in r.stderr


@pytest.mark.parametrize("field,value", [("vocab_size", 10 ** 400), ("hidden_size", 10 ** 400),
                                         ("moe_intermediate_size", 10 ** 400)])
def test_sizes_past_any_model_are_one_line(tmp_path, capsys, field, value):
    line = _one_line(capsys, ["plan", "--per-step", "0.8", "--target", _config(tmp_path, KIMI_K25_INT4, **{field: value}),
                              "--gpu", "H200"])
    assert field in line and "more than any model has" in line and "0" * 100 not in line


def test_a_block_size_of_ten_to_the_400_is_one_line(tmp_path, capsys):
    quant = {**KIMI_K2_FP8["quantization_config"], "weight_block_size": [10 ** 400, 128]}
    line = _one_line(capsys, ["plan", "--per-step", "0.8", "--target",
                              _config(tmp_path, KIMI_K2_FP8, quantization_config=quant), "--gpu", "H200"])
    assert "weight_block_size" in line


def test_more_experts_per_token_than_experts_is_refused(tmp_path, capsys):
    for k in (8, 16):
        line = _one_line(capsys, ["plan", "--per-step", "0.8", "--target",
                                  _config(tmp_path, KIMI_K25_INT4, n_routed_experts=4, num_experts_per_tok=k),
                                  "--gpu", "H200"])
        assert f"{k} experts (num_experts_per_tok) of 4" in line


def test_a_catastrophic_ignore_regex_runs_in_linear_time(tmp_path):
    quant = copy.deepcopy(KIMI_K25_INT4["quantization_config"])
    quant["ignore"] = ["re:((.)|(.))*Z", *quant.get("ignore", [])]
    target = _config(tmp_path, KIMI_K25_INT4, quantization_config=quant)
    r = run_limited("plan", "--per-step", "0.8", "--target", target, "--gpu", "H200", "--tp", "8", "--json", tmp=tmp_path,
                    limit_s=60)
    assert r.rc == 0, r
    assert json.loads(r.stdout)["batches"]


def test_the_safe_matcher_answers_as_re_does_and_refuses_what_it_cannot_bound():
    import re

    for pattern, subject in [(r".*mlp.gate$", "model.layers.1.mlp.gate"), (r"vision_tower.*", "model.x"),
                             (r"(?i)LM_HEAD", "lm_head"), (r"model\.layers\.\d+\.(self_attn|mlp)\.", "model.layers.12.mlp.x"),
                             (r"a{2,3}$", "aaaa"), (r"((.)|(.))*Z", "model.layers.Z")]:
        assert safe_match(pattern, subject) == (re.match(pattern, subject) is not None)
    start = time.process_time()  # re would backtrack 2^120 times here
    assert not safe_match(r"((.)|(.))*Z", "model.layers.1.self_attn.o_proj" * 4)
    assert time.process_time() - start < 5
    for pattern in (r"(a)\1", r"(?=x)", "a{99999}", "x" * 5000):
        with pytest.raises(UnsafePattern):
            safe_match(pattern, "xa")


def test_an_ignore_pattern_the_matcher_refuses_is_one_line(tmp_path, capsys):
    quant = copy.deepcopy(KIMI_K25_INT4["quantization_config"])
    quant["ignore"] = [r"re:(a)\1"]
    line = _one_line(capsys, ["plan", "--per-step", "0.8", "--target",
                              _config(tmp_path, KIMI_K25_INT4, quantization_config=quant), "--gpu", "H200"])
    assert "ignore entry" in line and "not supported" in line


def test_shape_from_config_refuses_layers_past_the_bound():
    cfg = copy.deepcopy(KIMI_K25_INT4)
    cfg["text_config"]["num_hidden_layers"] = 1 << 40
    with pytest.raises(InputError, match="more than any model has"):
        shape_from_config(cfg)


@pytest.mark.parametrize("costs,says", [("batch,tokens,ms\n1,1,1e308\n1,3,1e308\n", "ms 1e+308 is outside"),
                                        ("batch,tokens,ms\n1,1,5e-324\n1,3,5e-324\n", "ms is outside"),
                                        (f"batch,tokens,ms\n{BIG},1,12\n1,3,30\n", "batch must be from 1")])
def test_costs_past_any_forward_are_one_line(tmp_path, capsys, costs, says):
    (tmp_path / "costs.csv").write_text(costs)
    line = _one_line(capsys, ["plan", "--per-step", "0.8", "--costs", str(tmp_path / "costs.csv")])
    assert says in line and "0" * 100 not in line


def test_draft_costs_that_would_overflow_the_cycle_are_refused(tmp_path, capsys):
    (tmp_path / "costs.csv").write_text("batch,tokens,ms\n1,1,12.2\n1,3,30\n")
    (tmp_path / "draft.csv").write_text("batch,ms\n1,1e308\n")
    line = _one_line(capsys, ["plan", "--per-step", "0.8,0.7", "--costs", str(tmp_path / "costs.csv"),
                              "--draft-costs", str(tmp_path / "draft.csv")])
    assert "ms 1e+308 is outside" in line and "milliseconds" in line


@pytest.mark.parametrize("flag,value", [("--tp", BIG), ("--context", BIG), ("--tp", "0"), ("--context", "-1"),
                                        ("--max-steps", BIG), ("--batch", BIG), ("--calibrate", f"{BIG},1,3"),
                                        ("--calibrate", "1,1,1e308"), ("--gpu", "custom:5e-324,5e-324"),
                                        ("--gpu", "custom:1e308,1e308")])
def test_numeric_flags_past_their_bounds_are_one_line(tmp_path, capsys, flag, value):
    (tmp_path / "config.json").write_text(json.dumps(KIMI_K25_INT4))
    args = ["plan", "--per-step", "0.8", "--target", str(tmp_path / "config.json"), "--tp", "8"]
    if flag != "--gpu":
        args += ["--gpu", "H200"]
    line = _one_line(capsys, [*args, flag, value])
    assert "0" * 100 not in line


@pytest.mark.parametrize("args", [["acceptance", "d", "--hidden-states", "x", "--seed", "-1"],
                                  ["acceptance", "d", "--hidden-states", "x", "--limit", BIG],
                                  ["acceptance", "d", "--hidden-states", "x", "--aux-layers", "1,2," + "9" * 26],
                                  ["drift", "a", "b", "--seed", BIG],
                                  ["speedup", "--baseline-tps", "1e308", "--verify-ms", "1", "--alpha", "0.5"],
                                  ["speedup", "--baseline-tps", "50", "--verify-ms", "5e-324", "--alpha", "0.5"],
                                  ["vocab-coverage", "d", "--hidden-states", "x", "--max-new-tokens", BIG],
                                  ["similarity", "a", "b", "--grid", BIG, "2"]])
def test_every_numeric_flag_is_bounded_at_parse_time(capsys, args):
    with pytest.raises(SystemExit) as e:
        main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and "0" * 100 not in err, err


@pytest.mark.parametrize("field,value,says", [("vocab_size", 10 ** 400, "at most 16,777,216"),
                                              ("draft_vocab_size", 1 << 40, "at most 16,777,216"),
                                              ("hidden_size", 10 ** 400, "at most 2,147,483,648"),
                                              ("rms_norm_eps", float("nan"), "must be a number")])
def test_a_drafter_config_past_any_model_is_one_config_error(field, value, says):
    from eaglekit.core.configs.config import normalize_config
    from eaglekit.core.errors import ConfigError
    from eaglekit.demo.trained import drafter_config

    cfg = {**drafter_config(), field: value}
    with pytest.raises(ConfigError, match=says) as e:
        normalize_config(cfg)
    assert len(str(e.value)) < 300
