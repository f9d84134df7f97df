"""export of MLA drafters (dense and MoE, either layout): tensors copied by value under midlayer.*, the
config kept with its MLA/MoE keys, aux ids rewritten per engine, a full-vocabulary drafter cut to a reduced
map by target token; the speculators format refuses MLA with one clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from mlafixtures import DRAFT, VOCAB, drafter_tensors, mla_config, write_drafter
from safetensors.torch import load_file, save_file

from eaglekit.analysis.compat.export import export, is_export
from eaglekit.analysis.compat.pair import compat
from eaglekit.core.checkpoint.names import normalize_name
from eaglekit.core.configs.config import normalize_config
from eaglekit.core.errors import InputError
from eaglekit.core.tokens.vocab import build_vocab_map, target_ids


def test_moe_drafter_exports_by_value_with_its_config(tmp_path):
    cfg = mla_config(moe=True, draft_vocab=VOCAB, rope_scaling={"type": "yarn", "factor": 64.0, "mscale": 1.0,
                                                                "mscale_all_dim": 1.0, "beta_fast": 1.0,
                                                                "beta_slow": 1.0,
                                                                "original_max_position_embeddings": 4096})
    src = write_drafter(tmp_path / "src", cfg, seed=1, layout="layers.0")
    out = tmp_path / "out"
    r = export(src, out)
    assert is_export(out) and r.format == "specforge"
    written, original = load_file(str(out / "model.safetensors")), load_file(str(src / "model.safetensors"))
    assert set(written) == {normalize_name(k) for k in original} and "d2t" not in written  # still full vocabulary
    assert all(torch.equal(written[normalize_name(k)], v) for k, v in original.items())
    config = json.loads((out / "config.json").read_text())
    back = normalize_config(config)
    assert back.attention == "mla" and dict(back.moe) == dict(normalize_config(cfg).moe)
    assert back.rope_scaling == cfg["rope_scaling"] and back.mla == normalize_config(cfg).mla
    assert config["architectures"] == ["Eagle3DeepseekV2ForCausalLM"] and config["eaglekit_export"]["source"]
    assert compat(src, out).verdict == "compatible"


def test_engine_rewrites_the_aux_ids_as_torchspec_does_for_vllm(tmp_path):
    src = write_drafter(tmp_path / "src", mla_config(), seed=2)
    r = export(src, tmp_path / "vllm", engine="vllm")
    # TorchSpec's --vllm export adds one to kimi_k2 ids (outputs of layer i = inputs of layer i + 1).
    assert list(r.aux_layer_ids) == [2, 4, 6] and r.aux_ids_read_as == "inputs"
    config = json.loads((tmp_path / "vllm" / "config.json").read_text())
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 4, 6]
    assert config["eagle_config"]["use_last_layernorm"] is True  # the other flags kept as written


def test_specforge_training_name_is_written_as_the_engines_name(tmp_path):
    src = write_drafter(tmp_path / "src", mla_config(architectures=["DeepseekV3ForCausalLMEagle3"]), seed=3)
    r = export(src, tmp_path / "out")
    assert r.config["architectures"] == ["Eagle3DeepseekV2ForCausalLM"]
    assert "registered by neither vLLM nor SGLang" in r.note


def test_full_vocabulary_drafter_cut_to_a_reduced_map(tmp_path):
    src = write_drafter(tmp_path / "src", mla_config(draft_vocab=VOCAB), seed=4)
    ids = np.sort(np.random.default_rng(0).permutation(VOCAB)[:DRAFT])
    d2t, t2d = build_vocab_map(ids, VOCAB)
    save_file({"d2t": torch.from_numpy(d2t), "t2d": torch.from_numpy(t2d)}, str(tmp_path / "map.safetensors"))
    r = export(src, tmp_path / "out", vocab_map=tmp_path / "map.safetensors")
    assert r.rows_kept == DRAFT and r.rows_from_target == 0  # every token is a row of the full head
    head = load_file(str(tmp_path / "out" / "model.safetensors"))
    full = drafter_tensors(mla_config(draft_vocab=VOCAB), seed=4)["lm_head.weight"]
    assert torch.equal(head["lm_head.weight"], full[torch.from_numpy(target_ids(head["d2t"].numpy()))])
    assert normalize_config(r.config).draft_vocab_size == DRAFT


def test_speculators_format_refuses_mla_in_one_line(tmp_path):
    src = write_drafter(tmp_path / "src", mla_config(), seed=5)
    with pytest.raises(InputError, match="the speculators format has no MLA layer config") as e:
        export(src, tmp_path / "out", format="speculators")
    assert "--format specforge" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()
