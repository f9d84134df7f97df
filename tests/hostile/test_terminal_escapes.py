"""Terminal escapes (issue 23): text a command quotes from a file (tensor names, config values, a dump
manifest's target) reaches the terminal with its control characters shown as escapes, never raw: no
OSC 52 clipboard write, no screen clear. JSON output escapes them as JSON does."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from eaglekit.cli import main
from eaglekit.io.dumps.native import DumpManifest, DumpSample, write_dump

OSC52 = "\x1b]52;c;aGVsbG8=\x07"
CLEAR = "\x1b[2J"
EVIL = OSC52 + CLEAR


@pytest.fixture()
def folders(tmp_path):
    from safetensors.torch import save_file

    out = []
    for name, extra in (("a", {}), ("b", {"hidden_act": "silu" + EVIL})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({
            "architectures": ["LlamaForCausalLM" + EVIL], "model_type": "llama", "hidden_size": 8,
            "num_hidden_layers": 1, "vocab_size": 16, **extra}))
        save_file({"model.layers.0.mlp.up_proj.weight" + EVIL: torch.ones(8, 8).bfloat16()},
                  str(folder / "model.safetensors"))
        out.append(folder)
    return out


def _clean(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text[:400])


@pytest.mark.parametrize("command", ["diff", "similarity", "inspect"])
def test_reports_show_escapes_not_control_characters(folders, capsys, command):
    args = [command, str(folders[0])] + ([] if command == "inspect" else [str(folders[1])])
    assert main(args) == 0
    out, err = capsys.readouterr()
    _clean(out)
    _clean(err)
    if command == "diff":
        assert "silu\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J" in out  # shown, as escapes


def test_json_output_escapes_as_json_does(folders, capsys):
    assert main(["diff", str(folders[0]), str(folders[1]), "--json"]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert json.loads(out)[0]["b"] == "silu" + EVIL  # the value itself is intact, for programs


def test_a_dump_manifest_target_is_shown_escaped_in_drift(folders, tmp_path, capsys):
    ids = np.arange(6, dtype=np.int64)
    dumps = []
    for name, seed in (("da", 0), ("db", 1)):
        states = np.random.default_rng(seed).standard_normal((1, 6, 4)).astype(np.float32)
        write_dump(tmp_path / name, DumpManifest(target="k2" + EVIL, hidden_size=4, num_hidden_layers=1,
                                                 vocab_size=100, layers=(1,), samples=1),
                   [DumpSample(ids, states, ids, 3)])
        dumps.append(str(tmp_path / name))
    assert main(["drift", str(folders[0]), str(folders[0]), "--full", "--scheduler", "inline", "--hidden", *dumps]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert "k2\\x1b]52" in out


def test_eaglekit_colours_pass_and_nothing_else_does():
    from eaglekit.core.redact import visible_output
    from eaglekit.core.render import ansi

    for colour in ("red", "green", "yellow", "blue", "magenta", "cyan", "grey", "bold"):
        assert visible_output(ansi("x", colour)) == ansi("x", colour)
    assert visible_output("a\x1b[8mhidden" + EVIL + "\tb\n") == "a\\x1b[8mhidden\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J\tb\n"
