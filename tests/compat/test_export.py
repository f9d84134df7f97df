"""eaglekit export: the warm-start checkpoint, round-tripped by value; bad input writes nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from eaglekit.analysis.compat.check import check
from eaglekit.analysis.compat.pair import compat
from eaglekit.analysis.compat.export import GREEDY_PROPOSAL_FIELDS, export
from eaglekit.core.configs.config import normalize_config
from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.checkpoint.names import normalize_name
from eaglekit.core.tokens.vocab import target_ids


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    return {normalize_name(k): v for k, v in load_file(str(folder / "model.safetensors")).items()}


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def test_layout_conversion_round_trips_by_value(demo, tmp_path):
    spec = tmp_path / "k2-speculators"
    r = export(demo.drafter("k2"), spec, format="speculators")
    assert r.format == "speculators" and r.out == spec
    names = set(load_file(str(spec / "model.safetensors")))
    assert "layers.0.self_attn.q_proj.weight" in names and not any(n.startswith("midlayer.") for n in names)
    src, out = _tensors(demo.drafter("k2")), _tensors(spec)
    assert src.keys() == out.keys() and all(torch.equal(src[k], out[k]) for k in src)
    rep = compat(demo.drafter("k2"), spec, target=str(demo.target("kimi-k2")))
    assert rep.verdict == "compatible" and not rep.warnings, rep.warnings
    # ... and back to SpecForge names.
    back = tmp_path / "k2-back"
    export(spec, back, format="specforge")
    assert "midlayer.self_attn.q_proj.weight" in load_file(str(back / "model.safetensors"))
    assert compat(demo.drafter("k2"), back).verdict == "compatible"
    a, b = normalize_config(_config(demo.drafter("k2"))), normalize_config(_config(back))
    assert (a.hidden_size, a.draft_vocab_size, a.aux_layer_ids, a.rope_theta) == (
        b.hidden_size, b.draft_vocab_size, b.aux_layer_ids, b.rope_theta)
    # The ids still mean the tensors training used: SpecForge's outputs of layers 2, 30, 58.
    assert b.aux_view(61).training.outputs_of == (2, 30, 58)


def test_speculators_config_carries_every_field_speculators_writes(demo, tmp_path):
    export(demo.drafter("k2"), tmp_path / "s", format="speculators", target=demo.target("kimi-k2").parent)
    cfg = _config(tmp_path / "s")
    # Written from speculators' own source, not from the kit's list: the pydantic fields of
    # Eagle3SpeculatorConfig (vllm-project/speculators src/speculators/models/eagle3/config.py, the version
    # with norm_before_fc, fc_norm and norm_output), those of SpeculatorModelConfig
    # (src/speculators/config.py: speculators_model_type, speculators_version, speculators_config), and what
    # PretrainedConfig.to_dict adds (transformers_version, dtype).
    speculators_writes = {
        "speculators_model_type", "architectures", "transformer_layer_config", "draft_vocab_size",
        "norm_before_residual", "target_hidden_size", "eagle_aux_hidden_state_layer_ids", "norm_before_fc", "fc_norm",
        "norm_output", "embed_requires_grad", "speculators_version", "speculators_config", "transformers_version",
        "dtype",
    }
    assert speculators_writes <= set(cfg), speculators_writes - set(cfg)
    assert cfg["architectures"] == ["Eagle3Speculator"] and cfg["speculators_model_type"] == "eagle3"
    spec = cfg["speculators_config"]
    assert set(spec) == {"algorithm", "proposal_methods", "default_proposal_method", "verifier"}
    assert set(spec["proposal_methods"][0]) == set(GREEDY_PROPOSAL_FIELDS)
    assert spec["verifier"]["architectures"] == ["DeepseekV3ForCausalLM"]
    layer = cfg["transformer_layer_config"]
    assert layer["model_type"] == "llama" and layer["vocab_size"] == 10240
    assert layer["rope_parameters"]["rope_theta"] == layer["rope_theta"] == 1e6
    assert "eaglekit export" in cfg["eaglekit_export"]["note"]


def test_remap_to_a_new_vocabulary_by_target_token(demo, tmp_path):
    out = tmp_path / "warm"
    r = export(demo.drafter("k2"), out, vocab_map=demo.drafter("k25-finetuned"), target=demo.target("kimi-k25").parent)
    assert (r.rows_kept, r.rows_from_target) == (1800, 200)
    rep = compat(demo.drafter("k2"), out, target=str(demo.target("kimi-k25")))
    assert rep.verdict == "compatible-after-remap"
    old, new = _tensors(demo.drafter("k2")), _tensors(out)
    ft = _tensors(demo.drafter("k25-finetuned"))
    assert torch.equal(new["d2t"], ft["d2t"]) and torch.equal(new["t2d"], ft["t2d"])
    old_t, new_t = target_ids(old["d2t"].numpy()), target_ids(new["d2t"].numpy())
    shared, rows_old, rows_new = np.intersect1d(old_t, new_t, return_indices=True)
    assert shared.size == 1800
    # lm_head rows equal for every shared token ...
    assert torch.equal(old["lm_head.weight"][rows_old], new["lm_head.weight"][rows_new])
    # ... and the new tokens' rows are the target's lm_head rows for them.
    head = load_file(str(demo.target("kimi-k25").parent / "model.safetensors"))["language_model.lm_head.weight"]
    fresh = np.setdiff1d(np.arange(2000), rows_new)
    assert torch.equal(new["lm_head.weight"][fresh], head[new_t[fresh]])
    # Every other tensor is the source's.
    assert all(torch.equal(old[k], new[k]) for k in old if k not in ("lm_head.weight", "d2t", "t2d"))
    assert check(out, target=demo.target("kimi-k25").parent).ready


def test_a_map_file_engine_ids_and_the_targets_embedding(demo, tmp_path):
    ft = _tensors(demo.drafter("k25-finetuned"))
    save_file({"d2t": ft["d2t"], "t2d": ft["t2d"]}, str(tmp_path / "vocab_mapping.safetensors"))
    out = tmp_path / "for-vllm"
    r = export(demo.drafter("k2"), out, vocab_map=tmp_path / "vocab_mapping.safetensors", engine="vllm",
               target=demo.target("kimi-k25").parent, embed_from_target=True, format="speculators")
    assert r.aux_layer_ids == (3, 31, 59) and r.aux_ids_read_as == "inputs"
    assert _config(out)["eagle_aux_hidden_state_layer_ids"] == [3, 31, 59]
    emb = load_file(str(demo.target("kimi-k25").parent / "model.safetensors"))["language_model.model.embed_tokens.weight"]
    assert torch.equal(_tensors(out)["embed_tokens.weight"], emb)
    rep = check(out, target=demo.target("kimi-k25").parent, engine="vllm", full=True)
    assert rep.ready, str(rep)
    assert rep.aux.reading("vllm").outputs_of == (2, 30, 58)  # what SpecForge trained on
    assert rep.embed.differing == 0 and rep.embed.full


def _nothing_written(parent: Path, out: Path) -> bool:
    leftovers = [p for p in parent.iterdir() if "eaglekit-export" in p.name]
    return not leftovers and (not out.exists() or not any(out.iterdir()))


@pytest.mark.parametrize("kwargs, error, fragment", [
    (dict(format="onnx"), InputError, "Unknown export format 'onnx': expected one of specforge, speculators"),
    (dict(engine="tgi"), InputError, "Unknown engine 'tgi'"),
    (dict(vocab_map="LLAMA"), VocabMapError, "maps a vocabulary of 8,016 tokens but the drafter's target has 10,240"),
    (dict(vocab_map="FT"), InputError, "200 tokens of the new vocabulary map are new to the drafter"),
    (dict(vocab_map="FT", target="CONFIG_ONLY"), InputError,
     "is a config without weights: it holds no lm_head to initialise the 200 tokens new to the drafter from; give "
     "the target's checkpoint"),
    (dict(embed_from_target=True, target="CONFIG_ONLY"), InputError, "is a config without weights: it holds no "
                                                                     "embed_tokens"),
    (dict(vocab_map="FT", target="NO_HEAD"), InputError, "has no lm_head weights to initialise the 200 tokens new to the drafter from"),
    (dict(embed_from_target=True), InputError, "--embed-from-target needs --target T"),
])
def test_bad_input_writes_nothing(demo, tmp_path, kwargs, error, fragment):
    no_head = tmp_path / "no-head"
    no_head.mkdir()
    (no_head / "config.json").write_text(demo.target("kimi-k2").read_text())
    save_file({"model.embed_tokens.weight": torch.zeros(10240, 448)}, str(no_head / "model.safetensors"))
    config_only = tmp_path / "config-only"
    config_only.mkdir()
    (config_only / "config.json").write_text(demo.target("kimi-k2").read_text())
    subst = {"LLAMA": demo.drafter("llama-small"), "FT": demo.drafter("k25-finetuned"),
             "CONFIG_ONLY": config_only, "NO_HEAD": no_head}
    kwargs = {k: subst.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    out = tmp_path / "out"
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        export(demo.drafter("k2"), out, **kwargs)
    assert _nothing_written(tmp_path, out)


def test_refuses_a_non_empty_folder_and_model_folders(demo, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="is not empty and is not an earlier eaglekit export"):
        export(demo.drafter("k2"), out)
    # --force replaces only an earlier export, never a folder of someone else's files.
    with pytest.raises(InputError, match="is not empty and is not an earlier eaglekit export"):
        export(demo.drafter("k2"), out, force=True)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"] and (out / "notes.txt").read_text() == "mine"
    # An export with a file added to it is no longer only an export.
    done = tmp_path / "done"
    export(demo.drafter("k2"), done)
    (done / "extra.bin").write_bytes(b"x")
    with pytest.raises(InputError, match="is not an earlier eaglekit export"):
        export(demo.drafter("k2"), done, force=True)
    (done / "extra.bin").unlink()
    with pytest.raises(InputError, match=r"an earlier eaglekit export\); give an empty or new folder, or --force"):
        export(demo.drafter("k2"), done)
    export(demo.drafter("k2"), done, force=True, format="speculators")
    assert sorted(p.name for p in done.iterdir()) == ["config.json", "model.safetensors"]
    assert _config(done)["architectures"] == ["Eagle3Speculator"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with pytest.raises(InputError, match="eaglekit never writes into a model's folder"):
        export(demo.drafter("k2"), demo.drafter("k2") / "sub")


def test_refuses_dot_dotdot_the_current_folder_its_ancestors_and_links(demo, tmp_path, monkeypatch):
    here = tmp_path / "x" / "a"
    here.mkdir(parents=True)
    (here / "mine.txt").write_text("mine")
    monkeypatch.chdir(here)
    for out, fragment in [("..", "names a folder by '.' or '..'"), (".", "names a folder by '.' or '..'"),
                          (str(here / ".."), "names a folder by '.' or '..'"),
                          (str(here), "is the current folder or one above it"),
                          (str(tmp_path / "x"), "is the current folder or one above it"),
                          (str(tmp_path), "is the current folder or one above it")]:
        with pytest.raises(InputError, match=fragment):
            export(demo.drafter("k2"), out, force=True)
    link = tmp_path / "link"
    link.symlink_to(here, target_is_directory=True)
    with pytest.raises(InputError, match="is a symbolic link"):
        export(demo.drafter("k2"), link, force=True)
    assert (here / "mine.txt").read_text() == "mine" and sorted(p.name for p in here.iterdir()) == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "x"]


def test_an_unwritable_out_is_a_one_line_error(demo, tmp_path, monkeypatch):
    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(InputError, match="Cannot create a folder in .*Permission denied; give --out in a folder you "
                                         "can write to"):
        export(demo.drafter("k2"), tmp_path / "out")
    monkeypatch.undo()

    def fail(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("eaglekit.analysis.compat.export.os.replace", fail)
    with pytest.raises(InputError, match="Cannot write the export into .*No space left on device"):
        export(demo.drafter("k2"), tmp_path / "out")
    monkeypatch.undo()
    assert _nothing_written(tmp_path, tmp_path / "out") and not (tmp_path / "out").exists()


def test_exported_folders_get_normal_permissions(demo, tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "perm"
        export(demo.drafter("k2"), out)
        assert stat.S_IMODE(out.stat().st_mode) == 0o755
        assert stat.S_IMODE((out / "model.safetensors").stat().st_mode) == 0o644
        export(demo.drafter("k2"), out, force=True)
        assert stat.S_IMODE(out.stat().st_mode) == 0o755
    finally:
        os.umask(old)


def test_an_oversized_vocab_map_is_refused_unread(demo, tmp_path, monkeypatch):
    big = tmp_path / "big-map.safetensors"
    save_file({"d2t": torch.zeros(2000, dtype=torch.int64), "t2d": torch.zeros(5_000_000, dtype=torch.bool)}, str(big))
    reads = []
    from eaglekit.io import reader

    real = reader.Checkpoint.read_numpy if hasattr(reader, "Checkpoint") else None
    if real is not None:
        monkeypatch.setattr(reader.Checkpoint, "read_numpy",
                            lambda self, name, *a, **k: reads.append((self.location.raw, name)) or real(self, name, *a, **k))
    with pytest.raises(VocabMapError, match=r"t2d has shape \[5000000\], more than 4,194,304 entries.*refusing to read"):
        export(demo.drafter("k2"), tmp_path / "out", vocab_map=big)
    assert not any(name == "t2d" and str(big) in loc for loc, name in reads)
    assert _nothing_written(tmp_path, tmp_path / "out")


def test_cli(demo, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "eaglekit", "export", *map(str, args)], capture_output=True,
                              text=True)

    r = run(demo.drafter("k2"), "--out", tmp_path / "a", "--format", "speculators", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["format"] == "speculators"
    for args in (["--format", "onnx"], ["--vocab-map", demo.drafter("llama-small")]):
        r = run(demo.drafter("k2"), "--out", tmp_path / "b", *args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    r = run(demo.drafter("k2"), "--out", tmp_path / "a")
    assert r.returncode == 2 and "is not empty" in r.stderr
    assert not (tmp_path / "b").exists()
    # From inside a folder: '..' with --force used to delete the current folder, '.' crashed.
    here = tmp_path / "x" / "a"
    here.mkdir(parents=True)
    (here / "mine.txt").write_text("mine")
    for out in ("..", ".", "/proc/eaglekit-test-out", tmp_path / "x"):
        r = subprocess.run([sys.executable, "-m", "eaglekit", "export", str(demo.drafter("k2")), "--out", str(out),
                            "--force"], capture_output=True, text=True, cwd=here)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in here.iterdir()) == ["mine.txt"]
