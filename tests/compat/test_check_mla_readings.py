"""check and compat read an MLA drafter as acceptance does (issues 46 and 49): the layout rule for its aux ids,
the rotary base each reader builds its YaRN table on, what each reader fills a missing MoE key with, and the
tensors a named architecture needs.

Sources: TorchSpec ``tools/convert_to_hf.py --vllm`` (a kimi_k2 drafter's ids shifted to vLLM's count, ``layers.0.*``)
and ``torchspec/models/draft/deepseek_eagle.py`` ``_init_rope`` (YaRN without ``base=``: 10000) and
``torchspec/models/draft/moe.py`` (sigmoid, DeepseekV3Config defaults), lightseekorg/TorchSpec; vLLM
``vllm/model_executor/models/deepseek_v2.py`` (``getattr(config, "scoring_func", "softmax")``); transformers
``DeepseekV3Config``."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import save_file

from eaglekit.analysis.compat.check import check
from eaglekit.analysis.compat.pair import compat
from eaglekit.analysis.draft import trained_convention
from eaglekit.core.configs.config import normalize_config
from eaglekit.core.configs.moe_readers import missing_moe_keys, readers_disagree
from eaglekit.demo import trained as demo
from mlafixtures import drafter_tensors, mla_config, write_drafter

YARN = {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}


@pytest.fixture(scope="module")
def demo_mla(tmp_path_factory):
    """The demo world's public MLA drafter as the demo builds it (eaglekit/demo/trained.py: _mla_init weights,
    mla_drafter_config, saved in TorchSpec's vLLM export layout), untrained: check reads headers and config only;
    and the demo's K2.5 target config (target_config())."""
    root = tmp_path_factory.mktemp("demo-mla")
    demo._save_drafter(root / "k25-mla", demo._mla_init(9), None, None, layout="speculators",
                       config=demo.mla_drafter_config())
    (root / "k25").mkdir()
    (root / "k25" / "config.json").write_text(json.dumps(demo.target_config().to_dict()))
    return root


def test_check_reads_the_demo_mla_drafter_as_acceptance_does(demo_mla):
    """Issue 49: vLLM was NOT READY ("no ids vLLM can capture select the trained layers") because check read the
    ids as layer outputs while acceptance, under the layout rule, reads them as inputs."""
    r = check(demo_mla / "k25-mla", target=demo_mla / "k25", engine="vllm")
    assert r.ready and r.verdicts[0][2] == "READY", str(r)
    cfg = normalize_config(demo.mla_drafter_config())
    assert trained_convention(cfg, "speculators") == "inputs" == r.config.aux_convention  # one reading
    ok = r.by_check("aux layers")
    assert [f.severity for f in ok] == ["ok"] and "outputs of layers [0, 1, 2]" in ok[0].message
    # the midlayer copy of the same drafter counts outputs, in check as in acceptance
    assert trained_convention(cfg, "specforge") == "outputs" == cfg.for_layout("specforge").aux_convention


def test_one_wording_for_aux_layers_everywhere(demo_mla, tmp_path):
    """The embedding output is "embeddings" in check, compat and the aux table alike, never -1."""
    cfg = mla_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [0, 1, 2]})
    a = write_drafter(tmp_path / "a", cfg, layout="layers.0")              # vLLM export: inputs, [embeddings, 0, 1]
    b = write_drafter(tmp_path / "b", cfg)                                 # midlayer: outputs, [0, 1, 2]
    r = compat(a, b, a_name="a", b_name="b")
    text = str(r) + r._repr_html_()                                        # the words (JSON keeps the numbers)
    assert "[embeddings, 0, 1]" in text and "[-1, 0, 1]" not in text
    assert any("outputs of layers [embeddings, 0, 1]" in w for w in r.warnings)
    assert "[embeddings, 0, 1]" in str(check(a))


def test_check_and_compat_say_which_rotary_base_each_reader_uses(tmp_path):
    d = write_drafter(tmp_path / "d", mla_config(rope_scaling=YARN))
    r = check(d, engine="vllm")
    rope = r.by_check("rope")
    assert [f.severity for f in rope] == ["warning"] and r.ready              # said, not a fault of the engine
    assert "rope_theta 50000" in rope[0].message and "TorchSpec trains it on base 10000" in rope[0].message
    assert "--rotary-base torchspec" in rope[0].fix
    plain = check(write_drafter(tmp_path / "p", mla_config()), engine="vllm")
    assert not plain.by_check("rope")                                         # no YaRN: every reader agrees
    c = compat(d, write_drafter(tmp_path / "e", mla_config(rope_scaling=YARN), seed=1), a_name="a", b_name="b")
    assert any(w.startswith("a: vLLM, SGLang and transformers build its yarn rotary table on rope_theta 50000")
               for w in c.warnings)


def test_rotary_settings_no_table_can_be_built_from_are_an_error(tmp_path):
    r = check(write_drafter(tmp_path / "d", mla_config(rope_scaling={**YARN, "factor": "40"})), engine="vllm")
    assert not r.ready and "factor '40'" in r.by_check("rope")[0].message


def test_missing_moe_keys_are_read_as_each_reader_would(tmp_path):
    cfg = mla_config(moe=True)
    del cfg["scoring_func"], cfg["routed_scaling_factor"]
    table = missing_moe_keys(cfg)
    assert table["routed_scaling_factor"]["transformers DeepseekV3Config"] == 2.5 == table["routed_scaling_factor"]["TorchSpec"]
    assert table["scoring_func"]["vLLM DeepseekV2MoE"] == "softmax" and "sigmoid" in table["scoring_func"]["TorchSpec"]
    assert readers_disagree(table["scoring_func"]) and not readers_disagree(table["routed_scaling_factor"])
    assert normalize_config(cfg).moe["routed_scaling_factor"] == 2.5                  # eaglekit measures as TorchSpec
    r = check(write_drafter(tmp_path / "d", cfg))
    f = r.by_check("moe keys")[0]
    assert f.severity == "warning" and "scoring_func (READERS DIFFER" in f.message and "SGLang: not read" in f.message
    full = mla_config(moe=True, topk_method="noaux_tc")
    assert missing_moe_keys(full) == {} and not check(write_drafter(tmp_path / "f", full)).by_check("moe keys")


def test_a_llama_architecture_over_mla_tensors_is_not_ready_naming_the_missing_tensors(tmp_path):
    """Issue 47: check --engine vllm said READY for LlamaForCausalLMEagle3 over a checkpoint holding only MLA
    attention, which acceptance then refused."""
    tensors_cfg = mla_config()
    folder = tmp_path / "d"
    folder.mkdir()
    save_file({k: v.contiguous() for k, v in drafter_tensors(tensors_cfg).items()}, str(folder / "model.safetensors"))
    cfg = {**tensors_cfg, "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "head_dim": 16}
    (folder / "config.json").write_text(json.dumps(cfg))
    r = check(folder, engine="vllm")
    assert not r.ready and r.exit_code == 4
    f = r.by_check("layer")[0]
    assert "lacks midlayer.self_attn.q_proj.weight, midlayer.self_attn.k_proj.weight, " \
           "midlayer.self_attn.v_proj.weight" in f.message
    assert "Eagle3DeepseekV2ForCausalLM" in f.fix


def test_compat_reads_both_torchspec_exports_of_one_drafter_as_the_same_layers(tmp_path):
    """TorchSpec's midlayer.* copy says [1, 2, 3] (outputs) and its --vllm copy [2, 3, 4] (inputs): the same
    tensors, so compat does not warn that the ids mean different layers; read without the layout rule it did."""
    out = write_drafter(tmp_path / "midlayer", mla_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}))
    vllm = write_drafter(tmp_path / "vllm", mla_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 3, 4]}),
                         layout="layers.0")
    r = compat(out, vllm, a_name="midlayer", b_name="vllm")
    assert r.verdict == "compatible" and r.aux_layers["same_meaning"] is True
    assert not any("mean different tensors" in w for w in r.warnings)
    assert r.aux_layers["a"]["trained_outputs_of"] == r.aux_layers["b"]["trained_outputs_of"] == [[1, 2, 3]]
