"""``eaglekit acceptance`` and ``eaglekit dump-hidden``: the exact --json keys, dumps read back with the
same figures, and one-line errors with exit 2 on bad input."""

from __future__ import annotations

import json

import pytest

from clirun import one_line_error as _error, run as _run

KEYS = ["steps", "temperature", "prompts", "generated_tokens", "cycles", "accept_length", "accept_length_low",
        "accept_length_high", "accept_length_interval", "per_step_acceptance", "accept_length_by_steps"]


def test_json_schema_and_dump_round_trip(capsys, trained, tmp_path):
    d, t, p = str(trained.drafter("k2")), str(trained.target("k2")), str(trained.prompts("k2"))
    code, out, _ = _run(capsys, "acceptance", d, "--target", t, "--prompts", p, "--max-new-tokens", "16",
                        "--steps", "3", "--json")
    assert code == 0
    direct = json.loads(out)
    assert list(direct)[:len(KEYS)] == KEYS
    assert direct["steps"] == 3 and direct["temperature"] == 0.0 and direct["prompts"] == 12
    assert direct["generated_tokens"] == 12 * 15
    assert direct["accept_length"] == pytest.approx(direct["generated_tokens"] / direct["cycles"])
    assert len(direct["per_step_acceptance"]) == 3 and len(direct["accept_length_by_steps"]) == 3
    assert isinstance(direct["temperature"], float) and all(isinstance(x, float) for x in direct["accept_length_by_steps"])

    dump = tmp_path / "dump"
    code, out, _ = _run(capsys, "dump-hidden", "--target", t, "--prompts", p, "--out", str(dump),
                        "--for-drafter", d, "--max-new-tokens", "16", "--dtype", "float32")
    assert code == 0 and "wrote 12 samples" in out
    manifest = json.loads((dump / "manifest.json").read_text())
    assert manifest["format"] == "eaglekit-hidden-states" and manifest["layers"] == [0, 1, 2, 3]
    code, out, _ = _run(capsys, "acceptance", d, "--hidden-states", str(dump), "--steps", "3", "--json")
    assert code == 0
    from_dump = json.loads(out)
    assert {k: from_dump[k] for k in KEYS} == {k: direct[k] for k in KEYS}

    code, out, _ = _run(capsys, "acceptance", d, "--hidden-states", str(dump), "--steps", "3")
    assert code == 0 and "Measured accept length" in out and "aux convention" in out

    # a second dump into the same folder is refused (never overwrites)
    line = _error(capsys, "dump-hidden", "--target", t, "--prompts", p, "--out", str(dump), "--layers", "1,2")
    assert "not an empty folder" in line


def test_one_line_errors(capsys, trained, tmp_path):
    d, t, p = str(trained.drafter("k2")), str(trained.target("k2")), str(trained.prompts("k2"))
    assert "no such target model folder" in _error(capsys, "acceptance", d, "--target", str(tmp_path / "nope"),
                                                   "--prompts", p)
    assert "needs --prompts" in _error(capsys, "acceptance", d, "--target", t)
    assert "context of 8192" in _error(capsys, "acceptance", d, "--target", t, "--prompts", p,
                                      "--max-new-tokens", "8200")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input_ids": [1]}\nnot json\n')
    assert f"{bad} line 2: not valid JSON" in _error(capsys, "acceptance", d, "--target", t, "--prompts", str(bad))
    assert "no such hidden-state dump" in _error(capsys, "acceptance", d, "--hidden-states", str(tmp_path / "x"))
    other = tmp_path / "other"
    assert _run(capsys, "dump-hidden", "--target", t, "--prompts", p, "--out", str(other), "--layers", "0,4",
                "--max-new-tokens", "4")[0] == 0
    assert "dump is from other layers" in _error(capsys, "acceptance", d, "--hidden-states", str(other))
    assert "outside 0..4" in _error(capsys, "dump-hidden", "--target", t, "--prompts", p,
                                    "--out", str(tmp_path / "o2"), "--layers", "9")
    assert "needs the target's full next-token distribution" in _error(
        capsys, "acceptance", d, "--hidden-states", str(other), "--temperature", "0.5")
    no_head = tmp_path / "no-head"
    no_head.mkdir()
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(trained.drafter("k2") / "model.safetensors"))
    del tensors["lm_head.weight"]
    save_file(tensors, str(no_head / "model.safetensors"))
    (no_head / "config.json").write_text((trained.drafter("k2") / "config.json").read_text())
    assert "no lm_head.weight" in _error(capsys, "acceptance", str(no_head), "--target", t, "--prompts", p)
