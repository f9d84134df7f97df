"""Compatibility verdicts on the demo drafters, locally and through the loopback Hub."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from eaglekit.analysis.compat.pair import compat
from eaglekit.demo.world import FT_SHARED, SCRATCH_SHARED
from eaglekit.core.errors import ConfigError


def test_k2_vs_finetuned_needs_remap(demo):
    r = compat(demo.drafter("k2"), demo.drafter("k25-finetuned"), target=str(demo.target("kimi-k25")))
    assert r.verdict == "compatible-after-remap" and r.exit_code == 3
    assert r.vocab["overlap"] == FT_SHARED == demo.manifest["overlap"]["k2~k25-finetuned"]
    assert r.vocab["overlap_fraction"] == pytest.approx(FT_SHARED / 2000)
    assert r.vocab["valid_a"] and r.vocab["valid_b"] and not r.vocab["equal"]
    assert 0 < r.vocab["rows_remapped"] <= 2000
    assert "Re-align lm_head rows by target token" in r.reasons[0]
    assert all(t.status == "match" for t in r.tensors)


def test_k2_vs_speculators_twin_is_compatible(demo):
    r = compat(demo.drafter("k2"), demo.drafter("k2-speculators"), target=str(demo.target("kimi-k2")))
    assert r.verdict == "compatible" and r.exit_code == 0
    assert r.vocab["equal"] and r.vocab["overlap"] == 2000
    assert {t.status for t in r.tensors} == {"match"}
    assert r.config_diff is not None and not r.config_diff.by_class("shape", "behaviour")
    assert r.aux_layers["same"]


def test_scratch_drafter_embedding_is_expected(demo):
    r = compat(demo.drafter("k2"), demo.drafter("k25-scratch"))
    emb = [t for t in r.tensors if t.name == "embed_tokens.weight"]
    assert emb and emb[0].status == "expected-absent"
    assert r.verdict == "compatible-after-remap"
    assert r.vocab["overlap"] == SCRATCH_SHARED


def test_changed_hidden_size_is_incompatible(demo):
    r = compat(demo.drafter("k2"), demo.drafter("llama-small"), target=str(demo.target("kimi-k2")))
    assert r.verdict == "incompatible" and r.exit_code == 4
    assert r.reasons[0].startswith("llama-small's")  # the target misfit comes first
    assert any("fc.weight: shape [448, 1344] in k2 vs [256, 768]" in x for x in r.reasons)
    assert any(not c.ok for c in r.target_checks)


def test_aux_layers_interpreted_for_the_target(demo):
    r = compat(demo.drafter("k2"), demo.drafter("k25-finetuned"), target=str(demo.target("kimi-k25")))
    a = r.aux_layers["a"]
    # SpecForge trained on the outputs of layers 2, 30, 58 (= inputs 3, 31, 59).
    assert a["ids"] == [2, 30, 58] and a["convention"] == "outputs"
    assert a["equivalent"]["ids"] == [3, 31, 59] and a["in_range"] and a["is_default"] is False
    assert r.aux_layers["target_layers"] == 61


def _copy(demo, name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(demo.drafter(name), dst)
    return dst


def _rewrite(folder, fn):
    tensors = load_file(str(folder / "model.safetensors"))
    fn(tensors)
    save_file(tensors, str(folder / "model.safetensors"))


@pytest.mark.parametrize("mutate, fragment", [
    (lambda t: t.pop("d2t"), "d2t is missing"),
    (lambda t: t.update(d2t=t["d2t"].to(torch.int32)), "int64"),
    (lambda t: t.update(t2d=t["t2d"].to(torch.uint8)), "bool"),
    (lambda t: t.update(d2t=t["d2t"].flip(0).contiguous()), "increasing"),
])
def test_broken_vocab_map_is_named(demo, tmp_path, mutate, fragment):
    folder = _copy(demo, "k25-finetuned", tmp_path)
    _rewrite(folder, mutate)
    r = compat(demo.drafter("k2"), folder)
    assert r.verdict == "incompatible"
    assert not r.vocab["valid_b"]
    assert any(fragment in p for p in r.vocab["problems"]), r.vocab["problems"]


def test_config_not_json(demo, tmp_path):
    folder = _copy(demo, "k2", tmp_path)
    (folder / "config.json").write_text("{oops")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        compat(folder, demo.drafter("k2"))


def test_config_not_eagle3(demo, tmp_path):
    folder = _copy(demo, "k2", tmp_path)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 448}))
    with pytest.raises(ConfigError, match="LlamaForCausalLMEagle3"):
        compat(folder, demo.drafter("k2"))


def test_remote_compat_reads_only_headers_and_maps(demo, hub):
    hub.clear_log()
    a = "hf://demo-aqmed/Kimi-K2-Instruct-eagle3"
    b = "hf://demo-team/Kimi-K2.5-eagle3-finetuned"
    r = compat(a, b, target="hf://demo-moonshot/Kimi-K2.5", endpoint=hub.endpoint)
    assert r.verdict == "compatible-after-remap" and r.vocab["overlap"] == FT_SHARED
    sent = sum(rec.bytes_sent for rec in hub.log if "/resolve/" in rec.path)
    maps = 2 * (2000 * 8 + 10240)  # d2t (I64) + t2d (BOOL), both drafters
    file_sizes = sum((demo.drafter(n) / "model.safetensors").stat().st_size for n in ("k2", "k25-finetuned"))
    # headers (64 KiB windows at most), two config.json files, a target config, and the maps: no weights
    assert maps < sent < maps + 4 * 64 * 1024 + 3 * 8192
    assert sent < file_sizes / 50


def test_cli_exit_codes(demo):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "eaglekit", "compat", *map(str, args)],
                              capture_output=True, text=True)

    assert run(demo.drafter("k2"), demo.drafter("k2-speculators")).returncode == 0
    r = run(demo.drafter("k2"), demo.drafter("k25-finetuned"), "--json")
    assert r.returncode == 3
    out = json.loads(r.stdout)
    assert out["verdict"] == "compatible-after-remap"
    assert set(out) >= {"verdict", "reasons", "tensors", "vocab", "aux_layers", "config_diff"}
    assert set(out["vocab"]) >= {"equal", "overlap", "overlap_fraction", "rows_remapped", "valid_a", "valid_b",
                                 "problems"}
    assert {"path", "a", "b", "class", "reason"} <= set(out["config_diff"][0])
    assert run(demo.drafter("k2"), demo.drafter("llama-small")).returncode == 4
    r = run(demo.drafter("k2"), demo.root / "nope")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_diff(demo):
    r = subprocess.run([sys.executable, "-m", "eaglekit", "diff", str(demo.drafter("k2")),
                        str(demo.drafter("k25-finetuned")), "--json"], capture_output=True, text=True)
    assert r.returncode == 0
    diffs = json.loads(r.stdout)
    assert [(d["path"], d["class"]) for d in diffs] == [("max_position_embeddings", "behaviour")]


def test_renders(demo):
    r = compat(demo.drafter("k2"), demo.drafter("k25-scratch"))
    html = r._repr_html_()
    assert "compatible-after-remap" in html and "expected-absent" in html and "<table" in html
    text = str(r)
    assert "k2 vs k25-scratch: compatible-after-remap" in text and "embed_tokens.weight" in text


def test_drafters_for_different_targets_are_not_remapped(demo):
    # issue 12 item 11: a Kimi drafter vs a Llama one. Their draft ids come from two tokenizers: the
    # report says so, offers no lm_head remap, and does not judge the Llama ids against Kimi's 61 layers.
    r = compat(demo.drafter("k2"), demo.drafter("llama-small"), target=str(demo.target("kimi-k2")))
    assert r.verdict == "incompatible"
    assert r.vocab["comparable"] is False and r.vocab["overlap"] == 0
    text = str(r) + r._repr_html_()
    assert "Re-align" not in text and "shared target tokens" not in text
    assert any("different targets (target vocabularies of 10,240 vs 8,016 tokens" in x for x in r.reasons)
    assert "fits a 61-layer target" not in r.aux_layers["b"]["explanation"]
    assert "drafter for another target" in r.aux_layers["b"]["explanation"]
    # Without a target the two vocabularies still are not compared.
    r = compat(demo.drafter("k2"), demo.drafter("llama-small"))
    assert r.vocab["comparable"] is False and not any("Re-align" in x for x in r.reasons)


def test_a_drop_in_is_qualified_when_one_reading_of_the_aux_ids_differs(demo, trained):
    """Review of page 03: "k2 is a drop-in for k2-speculators" beside a table where k2's SpecForge ids may mean
    other layers than the speculators ids: the verdict names the reading under which it holds."""
    from eaglekit.analysis.compat.pair import compat
    from eaglekit.analysis.investigation import conclude

    r = compat(demo.drafter("k2"), demo.drafter("k2-speculators"), target=str(demo.target("kimi-k2")))
    assert r.verdict == "compatible" and r.aux_layers["same_meaning"] is False
    assert "drop-in for k2-speculators only if both were trained on the outputs of layers [1, 29, 57]" in r.reasons[0]
    assert "k2 leaves its training ambiguous" in r.reasons[0]
    assert "may mean other layers" in conclude(r).sentences[0] and r.aux_layers["drop_in_only_if"] == [[1, 29, 57]]
    world = compat(trained.drafter("k2"), trained.drafter("k2-speculators"), target=str(trained.target("k2")))
    assert "only if both were trained on the outputs of layers [0, 1, 2]" in world.reasons[0]
    # two copies of one config mean the same whatever the reading: a plain drop-in
    same = compat(demo.drafter("k2"), demo.drafter("k2-sharded"), target=str(demo.target("kimi-k2")))
    assert same.reasons[0].endswith("k2 is a drop-in for k2-sharded.")
