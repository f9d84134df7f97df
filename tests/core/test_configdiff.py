"""eaglekit.configdiff: nested diff, every class of difference, cross-format equivalence, rendering."""

import copy
import json
from pathlib import Path

import pytest

from eaglekit.core.configs.config import normalize_config
from eaglekit.core.configs.diff import ABSENT, diff_configs
from eaglekit.core.errors import ConfigError

# SpecForge configs/kimi-k2-eagle3.json
K2 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True},
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 163584, "eos_token_id": 163585,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
    "intermediate_size": 18432, "max_position_embeddings": 131072, "model_type": "kimi_k2",
    "num_attention_heads": 64, "num_hidden_layers": 1, "num_key_value_heads": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.53.2", "use_cache": True, "vocab_size": 163840, "draft_vocab_size": 32000,
}
# A K2.5 drafter in the style of SpecForge configs/kimi-k25-eagle3.json, with K2.5's longer context.
K25 = {**{k: v for k, v in K2.items() if k != "torch_dtype"}, "dtype": "bfloat16", "mlp_bias": False,
       "model_type": "llama", "pretraining_tp": 1, "transformers_version": "4.57.0",
       "max_position_embeddings": 262144}
# K2 converted to vllm-project/speculators format: defaults dropped from transformer_layer_config.
K2_SPECULATORS = {
    "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.3.0",
    "draft_vocab_size": 32000, "norm_before_residual": False, "target_hidden_size": None,
    "eagle_aux_hidden_state_layer_ids": [2, 30, 58], "torch_dtype": "bfloat16",
    "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                           "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                           "verifier": {"name_or_path": "moonshotai/Kimi-K2-Instruct",
                                        "architectures": ["DeepseekV3ForCausalLM"]}},
    "transformer_layer_config": {"model_type": "llama", "hidden_size": 7168, "intermediate_size": 18432,
                                 "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 128,
                                 "vocab_size": 163840, "num_hidden_layers": 1, "max_position_embeddings": 131072,
                                 "rope_theta": 1000000.0, "bos_token_id": 163584, "eos_token_id": 163585},
}


def _one(diff, path):
    found = [d for d in diff.differences if d.path == path]
    assert len(found) == 1, [d.path for d in diff.differences]
    return found[0]


def test_identical_configs():
    d = diff_configs(K2, copy.deepcopy(K2))
    assert d.identical and len(d) == 0 and d.to_json() == []
    assert str(d) == "Config diff A (specforge) vs B (specforge): no differences"


def test_k2_vs_k25_drafter():
    d = diff_configs(K2, K25, a_name="K2", b_name="K2.5")
    assert [x.path for x in d.by_class("shape")] == []
    assert [(x.path, x.a, x.b) for x in d.by_class("behaviour")] == [("max_position_embeddings", 131072, 262144)]
    meta = {x.path: x for x in d.by_class("metadata")}
    assert set(meta) == {"model_type", "transformers_version", "mlp_bias", "pretraining_tp"}
    assert meta["mlp_bias"].a is ABSENT and meta["mlp_bias"].b is False
    assert meta["mlp_bias"].reason == "absent in K2, where the default false applies: same effective value"
    # dtype (transformers >= 4.56) and torch_dtype are one key: equal values are no difference.
    assert "torch_dtype" not in meta and "dtype" not in meta


@pytest.mark.parametrize("path, change, cls, reason", [
    ("hidden_size", lambda c: c.update(hidden_size=4096), "shape",
     "draft hidden size H sets every tensor's width (fc, attention, MLP, norms, lm_head)"),
    ("draft_vocab_size", lambda c: c.update(draft_vocab_size=64000), "shape", "lm_head rows and d2t length"),
    ("num_key_value_heads", lambda c: c.update(num_key_value_heads=8), "shape",
     "k_proj/v_proj shapes are kv_heads x head_dim"),
    ("target_hidden_size", lambda c: c.update(target_hidden_size=5120), "shape",
     "fc.weight's input width is 3 x target_hidden_size"),
    ("norm_before_fc", lambda c: c.update(norm_before_fc=True), "shape",
     "adds or removes input_norm.weight [3 x target hidden] before fc"),
    ("rope_theta", lambda c: c.update(rope_theta=50000.0), "behaviour", "rotary base: changes position encoding"),
    ("rope_scaling", lambda c: c.update(rope_scaling={"type": "yarn", "factor": 4.0}), "behaviour",
     "rotary scaling: changes position encoding (long context)"),
    ("eagle_config.eagle_aux_hidden_state_layer_ids",
     lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 29, 57]), "behaviour",
     "which target hidden states feed fc: same shapes, different tensors"),
    ("eagle_config.eagle_aux_hidden_state_layer_ids",
     lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[2, 30]), "shape",
     "the number of aux layers sets fc.weight's input width (n x target hidden size)"),
    ("rms_norm_eps", lambda c: c.update(rms_norm_eps=1e-5), "behaviour", "RMSNorm epsilon"),
    ("norm_before_residual", lambda c: c.update(norm_before_residual=True), "behaviour",
     "where hidden_norm applies relative to the residual"),
    ("torch_dtype", lambda c: c.update(torch_dtype="float16"), "metadata",
     "dtype label: the tensors' real dtypes are in the safetensors header"),
    ("_name_or_path", lambda c: c.update(_name_or_path="x/y"), "metadata", "a name, not a value the model uses"),
    ("architectures", lambda c: c.update(architectures=["Eagle3LlamaForCausalLM"]), "metadata",
     "aliases of the same drafter architecture"),
    ("some_new_knob", lambda c: c.update(some_new_knob=3), "behaviour",
     "not a key eaglekit knows: assumed to change behaviour until checked (unknown keys are not assumed harmless)"),
])
def test_every_class_of_difference(path, change, cls, reason):
    b = copy.deepcopy(K2)
    change(b)
    d = _one(diff_configs(K2, b), path)
    assert (d.cls, d.reason) == (cls, reason)


def test_nested_paths_for_dicts_and_lists_of_objects():
    a = copy.deepcopy(K2_SPECULATORS)
    b = copy.deepcopy(K2_SPECULATORS)
    a["rope_scaling"] = {"type": "yarn", "factor": 4.0}
    b["rope_scaling"] = {"type": "yarn", "factor": 8.0}
    b["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 5
    b["speculators_config"]["verifier"]["name_or_path"] = "moonshotai/Kimi-K2.5"
    b["transformer_layer_config"]["intermediate_size"] = 14336
    d = diff_configs(a, b)
    assert [(x.path, x.cls) for x in d] == [
        ("transformer_layer_config.intermediate_size", "shape"),
        ("speculators_config.proposal_methods[0].speculative_tokens", "behaviour"),
        ("rope_scaling.factor", "behaviour"),
        ("speculators_config.verifier.name_or_path", "metadata"),
    ]


def test_explicit_value_equal_to_the_default_is_metadata():
    b = {**K2, "target_hidden_size": 7168}
    d = _one(diff_configs(K2, b), "target_hidden_size")
    assert d.cls == "metadata"
    assert d.reason == "same effective target_hidden_size in both (7168): the key is spelled elsewhere or left " \
                       "to its default"


def test_mla_vs_llama_architecture_is_shape():
    b = {**K2, "architectures": ["Eagle3DeepseekV2ForCausalLM"], "kv_lora_rank": 512}
    d = diff_configs(K2, b)
    fmt = _one(d, "format")
    assert fmt.cls == "shape" and "Llama attention vs MLA" in fmt.reason
    assert _one(d, "kv_lora_rank").cls == "shape"


def test_specforge_and_its_speculators_twin_have_no_shape_or_behaviour_difference():
    d = diff_configs(K2, K2_SPECULATORS, a_name="K2", b_name="twin")
    assert d.cross_format and (d.a_format, d.b_format) == ("specforge", "speculators")
    assert d.by_class("shape", "behaviour") == ()
    paths = [x.path for x in d]
    assert len(paths) == len(set(paths))  # every format-only key listed once
    fmt = _one(d, "format")
    assert (fmt.a, fmt.b) == ("specforge (LlamaForCausalLMEagle3)", "speculators (Eagle3Speculator)")
    for key in ("speculators_model_type", "speculators_version", "speculators_config"):
        x = _one(d, key)
        assert x.cls == "metadata" and x.a is ABSENT and x.reason == "only speculators configs have this key"
    # Aux ids, hidden size and the architecture are spelled differently but equal: not listed.
    assert not {"aux_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids", "hidden_size",
                "architectures", "target_hidden_size"} & set(paths)
    # The same holds the other way round.
    assert diff_configs(K2_SPECULATORS, K2).by_class("shape", "behaviour") == ()


def test_cross_format_reports_real_differences_by_normalised_field():
    twin = copy.deepcopy(K2_SPECULATORS)
    twin["transformer_layer_config"]["hidden_size"] = 4096
    twin["eagle_aux_hidden_state_layer_ids"] = [1, 29, 57]
    d = diff_configs(K2, twin, a_name="K2", b_name="twin")
    h = _one(d, "hidden_size")
    assert (h.a, h.b, h.cls) == (7168, 4096, "shape")
    assert h.reason.endswith("(K2: hidden_size; twin: transformer_layer_config.hidden_size)")
    aux = _one(d, "aux_layer_ids")
    assert (aux.a, aux.b, aux.cls) == ([2, 30, 58], [1, 29, 57], "behaviour")
    assert [x.cls for x in d] == sorted((x.cls for x in d), key=["shape", "behaviour", "metadata"].index)


def test_cross_format_needs_normalisable_configs():
    broken = {k: v for k, v in K2.items() if k != "hidden_size"}
    with pytest.raises(ConfigError, match=r"^Cannot compare configs of different formats \(specforge vs "
                                          r"speculators\): B \(specforge format\) lacks hidden_size"):
        diff_configs(broken, K2_SPECULATORS, a_name="B", b_name="A")


def test_accepts_normalised_records():
    d = diff_configs(normalize_config(K2), normalize_config(K25))
    assert [x.path for x in d.by_class("behaviour")] == ["max_position_embeddings"]


def test_targets_k2_vs_k25_compare_text_config_with_top_level():
    k2 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "num_hidden_layers": 61,
          "hidden_size": 7168, "vocab_size": 163840, "max_position_embeddings": 131072}
    k25 = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
           "text_config": {"model_type": "kimi_k2", "num_hidden_layers": 61, "hidden_size": 7168,
                           "vocab_size": 163840, "max_position_embeddings": 262144}}
    d = diff_configs(k2, k25, a_name="K2", b_name="K2.5")
    assert (d.a_format, d.b_format) == (None, None)
    assert _one(d, "max_position_embeddings").cls == "behaviour"
    assert _one(d, "text_config").cls == "metadata"
    assert not {"hidden_size", "num_hidden_layers", "vocab_size", "model_type"} & {x.path for x in d}


def test_json_and_by_class():
    d = diff_configs(K2, {**K25, "hidden_size": 4096})
    rows = d.to_json()
    assert rows[0] == {"path": "hidden_size", "a": 7168, "b": 4096, "class": "shape",
                       "reason": "draft hidden size H sets every tensor's width (fc, attention, MLP, norms, "
                                 "lm_head)"}
    mlp = next(r for r in rows if r["path"] == "mlp_bias")
    assert mlp["a"] == "(absent)" and mlp["b"] is False
    assert d.counts == {"shape": 1, "behaviour": 1, "metadata": 4}
    with pytest.raises(ValueError, match="unknown difference class 'shapes'"):
        d.by_class("shapes")


def test_renders_coloured_only_when_asked_and_escapes_html():
    d = diff_configs(K2, {**K2, "hidden_size": 4096, "_name_or_path": "<evil>"}, a_name="K2", b_name="B")
    plain = str(d)  # pytest's stdout is not a terminal
    assert "\x1b[" not in plain
    assert plain.splitlines()[0] == "Config diff K2 (specforge) vs B (specforge): 1 shape, 1 metadata"
    assert plain.splitlines()[1].split() == ["class", "path", "K2", "B", "reason"]
    assert "(absent)" in plain
    assert "\x1b[31mshape\x1b[0m" in d.render_text(colour=True)
    html = d._repr_html_()
    assert "&lt;evil&gt;" in html and "<evil>" not in html
    assert "rgba(217, 45, 32, 0.12)" in html  # the shape row's tint
    assert ">shape</span>" in html


def test_refuses_non_objects():
    with pytest.raises(ConfigError, match="config B must be a JSON object \\(dict\\), got list"):
        diff_configs(K2, [1])


def test_original_eagle3_vs_specforge_is_llama_on_both_sides_and_rows_are_not_repeated():
    fixtures = Path(__file__).parent.parent / "fixtures" / "configs"
    original = json.loads((fixtures / "eagle_original.json").read_text())  # LlamaForCausalLM + draft_vocab_size
    specforge = json.loads((fixtures / "specforge_4aux.json").read_text())
    d = diff_configs(original, specforge)
    rows = {x.path: x for x in d}
    fmt = rows["format"]
    assert fmt.cls == "metadata" and "MLA" not in fmt.reason, fmt
    assert not any("not a key eaglekit knows" in x.reason for x in d), [x.path for x in d]
    # n_aux and rope_type only sum up aux_layer_ids and rope_scaling, which have their own rows.
    assert "n_aux" not in rows and "rope_type" not in rows and "rope_scaling" in rows
    # Three default aux layers against four: fc's width differs, a shape difference.
    assert rows["aux_layer_ids"].cls == "shape" and "3 vs 4 aux layers" in rows["aux_layer_ids"].reason


FIXTURES = Path(__file__).parent.parent / "fixtures" / "configs"


def _fixture(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_mla_and_moe_keys_are_known_and_classified():
    dense, moe = _fixture("mla_eagle3_deepseekv2"), _fixture("torchspec_kimi_k25_eagle3_moe")
    d = diff_configs(dense, moe, a_name="dense", b_name="moe")
    assert not any("not a key eaglekit knows" in x.reason for x in d), [(x.path, x.reason) for x in d]
    rows = {x.path: x for x in d}
    # Expert shapes: shape; routing: behaviour; training flags: metadata.
    for key in ("use_moe", "n_routed_experts", "moe_intermediate_size", "n_shared_experts"):
        assert rows[key].cls == "shape", rows[key]
    for key in ("num_experts_per_tok", "scoring_func", "norm_topk_prob", "routed_scaling_factor", "n_group",
                "topk_group"):
        assert rows[key].cls == "behaviour" and rows[key].reason.startswith("routing:"), rows[key]
    assert rows["train_router"].cls == "metadata"
    assert rows["eagle_config.use_input_layernorm_in_first_layer"].reason.startswith("norm:")


def test_yarn_and_mla_flags_changes_name_what_they_change():
    a = _fixture("mla_deepseekv3_eagle3")
    b = copy.deepcopy(a)
    b["rope_scaling"].update(factor=32.0, mscale_all_dim=0.707, original_max_position_embeddings=32768)
    b.update(rope_interleave=False, mla_use_nope=True, q_lora_rank=None, max_position_embeddings=1048576)
    b["eagle_config"]["use_last_layernorm"] = False
    d = diff_configs(a, b)
    assert not any("not a key eaglekit knows" in x.reason for x in d), [(x.path, x.reason) for x in d]
    rows = {x.path: x for x in d}
    assert rows["rope_scaling.factor"].cls == "behaviour" and "rotary/YaRN" in rows["rope_scaling.factor"].reason
    assert "softmax" in rows["rope_scaling.mscale_all_dim"].reason
    assert rows["rope_scaling.original_max_position_embeddings"].reason.startswith("rotary/YaRN")
    assert rows["rope_interleave"].cls == "behaviour" and "interleaved" in rows["rope_interleave"].reason
    assert rows["mla_use_nope"].cls == "behaviour" and "NoPE" in rows["mla_use_nope"].reason
    assert rows["q_lora_rank"].cls == "shape" and "q_proj" in rows["q_lora_rank"].reason
    assert rows["eagle_config.use_last_layernorm"].cls == "behaviour"


def test_llama_vs_moe_drafter_across_formats_lists_the_moe_once():
    d = diff_configs(K2, _fixture("torchspec_kimi_k25_eagle3_moe"), a_name="llama", b_name="moe")
    moe = _one(d, "moe")
    assert moe.cls == "shape" and moe.a is ABSENT and moe.b["n_routed_experts"] == 384
    assert "dense MLP" in moe.reason
    assert not {"n_routed_experts", "num_experts_per_tok"} & {x.path for x in d}  # summed up in the moe row
    assert _one(d, "kv_lora_rank").cls == "shape" and _one(d, "format").cls == "shape"
    assert json.loads(json.dumps(d.to_json()))  # JSON-ready


def test_two_moe_drafters_across_formats_compare_key_by_key():
    moe = _fixture("torchspec_kimi_k25_eagle3_moe")
    other = {**moe, "architectures": ["DeepseekV3ForCausalLMEagle3"], "num_experts_per_tok": 4,
             "moe_intermediate_size": 1024}
    d = diff_configs(moe, other)
    assert _one(d, "num_experts_per_tok").cls == "behaviour" and _one(d, "moe_intermediate_size").cls == "shape"
    assert _one(d, "architectures").cls == "metadata"  # two names of MLA drafters


def test_target_moe_keys_are_known():
    k2 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "hidden_size": 7168,
          "vocab_size": 163840, "n_routed_experts": 384, "num_experts_per_tok": 8, "first_k_dense_replace": 1}
    other = {**k2, "n_routed_experts": 256, "num_experts_per_tok": 6, "first_k_dense_replace": 3}
    d = diff_configs(k2, other)
    assert {x.path: x.cls for x in d} == {"n_routed_experts": "shape", "num_experts_per_tok": "behaviour",
                                         "first_k_dense_replace": "behaviour"}


def test_an_explicit_mla_or_moe_default_is_metadata():
    moe = _fixture("torchspec_kimi_k25_eagle3_moe")
    bare = {k: v for k, v in moe.items() if k not in ("n_group", "topk_group")}
    spelled = {**bare, "rope_interleave": True, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4}
    d = diff_configs(bare, spelled)
    rows = {x.path: x for x in d}
    assert {x.cls for x in d} == {"metadata"}, d.render_text(colour=False)
    assert "same effective mla.rope_interleave" in rows["rope_interleave"].reason
    assert "same effective moe.n_group" in rows["n_group"].reason
