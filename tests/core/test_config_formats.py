"""Every drafter config format seen in the wild, read right (tests/fixtures/configs, written for eaglekit).

Each test names the failure it pins: the kit used to ignore rope_parameters, refuse the original EAGLE-3
layout (then take it for a one-layer target), assume three aux layers, fill a Qwen3 layer config with
Llama defaults, not know norm_output, and flag library defaults as behaviour differences.
"""

import json
import re
from pathlib import Path

import pytest

from eaglekit.core.configs.config import NORMALISED_FIELDS, load_config_bytes, looks_like_target, normalize_config
from eaglekit.core.configs.diff import diff_configs
from eaglekit.core.errors import ConfigError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "configs"


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def cfg(name: str):
    return normalize_config(load(name), source=f"{name}.json")


@pytest.mark.parametrize("name, fmt, n_aux", [
    ("specforge_kimi_k2", "specforge", 3), ("specforge_4aux", "specforge", 4), ("eagle_original", "eagle", 3),
    ("speculators_08_rope_theta", "speculators", 3), ("speculators_09_qwen3", "speculators", 3),
    ("speculators_5aux", "speculators", 5), ("eagle3_draft_model", "speculators", 3),
    ("converted_null_ids", "speculators", 3), ("mla_deepseekv3_eagle3", "mla", 3),
    ("mla_eagle3_deepseekv2", "mla", 3), ("torchspec_kimi_k25_eagle3_moe", "mla", 3),
])
def test_every_fixture_normalises(name, fmt, n_aux):
    c = cfg(name)
    assert c.format == fmt and c.n_aux == n_aux
    # Provenance for every field: a path in the file, or a default and whose.
    assert set(c.provenance) >= set(NORMALISED_FIELDS)
    assert all(p.startswith(("file: ", "default: ")) for p in c.provenance.values())


def test_rope_parameters_are_read():
    c = cfg("speculators_09_qwen3")
    assert c.rope_theta == 1e6 and c.rope_type == "default"  # was the 10000.0 default: rope_parameters ignored
    assert c.provenance["rope_theta"] == "file: transformer_layer_config.rope_parameters.rope_theta"
    yarn = cfg("speculators_5aux")
    assert (yarn.rope_theta, yarn.rope_type) == (150000.0, "yarn")
    assert yarn.rope_scaling["factor"] == 32.0 and yarn.rope_parameters["original_max_position_embeddings"] == 4096
    # The same settings spelled the old way normalise to the same record.
    old = cfg("speculators_08_rope_theta")
    assert old.rope_parameters == c.rope_parameters


def test_original_eagle3_layout_is_a_drafter_not_a_target():
    raw = load("eagle_original")
    c = normalize_config(raw)
    assert c.format == "eagle" and c.trained_by == "eagle" and c.aux_convention == "inputs"
    assert (c.hidden_size, c.vocab_size, c.draft_vocab_size, c.aux_layer_ids) == (4096, 128256, 32000, None)
    assert not looks_like_target(raw)
    with pytest.raises(ConfigError, match="is an EAGLE-3 drafter config, not a target model config"):
        load_config_bytes(json.dumps(raw).encode(), kind="target")
    # A full Llama model stays a target: no draft_vocab_size, many layers.
    target = {k: v for k, v in raw.items() if k != "draft_vocab_size"} | {"num_hidden_layers": 32}
    assert looks_like_target(target)


def test_any_number_of_aux_layers():
    four, five = cfg("specforge_4aux"), cfg("speculators_5aux")
    assert four.aux_layer_ids == (1, 15, 29, 43) and four.n_aux == 4
    assert five.n_aux == 5 and five.target_hidden_size == 2880 and five.norm_before_fc
    assert four.aux_report(48).ok and five.aux_report(24).ok  # no "expected 3 aux layer ids"


def test_defaults_follow_the_layer_configs_model_type():
    # speculators writes the layer config as a diff against its class: a Qwen3 layer omits vocab 151936.
    c = cfg("speculators_09_qwen3")
    assert c.layer_model_type == "qwen3"
    assert (c.vocab_size, c.hidden_size, c.head_dim) == (151936, 4096, 128)  # not Llama's 32000 vocabulary
    assert c.provenance["vocab_size"] == "default: Qwen3Config"
    assert c.max_position_embeddings == 40960 and c.num_key_value_heads == 8
    # Eagle3DraftModel's layer config without a model_type starts from Qwen3Config too.
    d = cfg("eagle3_draft_model")
    assert d.vocab_size == 151936 and d.provenance["max_position_embeddings"] == "file: " \
        "transformer_layer_config.max_position_embeddings" and d.provenance["rope_theta"] == "default: Qwen3Config"


def test_norm_options_are_known():
    c = cfg("speculators_09_qwen3")
    assert c.norm_output is True and c.fc_norm is True and c.norm_before_fc is False
    assert c.provenance["norm_output"] == "file: norm_output"
    assert cfg("speculators_08_rope_theta").provenance["norm_output"] == "default: speculators"
    assert cfg("mla_eagle3_deepseekv2").input_norm is False  # use_input_layernorm_in_first_layer: false


def test_converted_config_with_null_ids():
    c = cfg("converted_null_ids")
    assert c.aux_layer_ids is None and c.n_aux == 3
    assert c.provenance["aux_layer_ids"] == "default: each engine's own default (none in the config)"
    view = c.aux_view(32)
    assert view.engines_agree  # with no ids each engine's default names the same tensors


def test_mla_drafters():
    v3, v2 = cfg("mla_deepseekv3_eagle3"), cfg("mla_eagle3_deepseekv2")
    assert v3.draft_vocab_size == v3.vocab_size == 163840 and v3.head_dim == 192
    assert v3.rope_type == "yarn" and v2.draft_vocab_size == 32000
    assert v3.trained_by == "modelopt" and v3.aux_convention == "outputs"


def test_library_defaults_are_not_behaviour_differences():
    old = load("speculators_08_rope_theta")
    new = load("speculators_09_qwen3") | {"fc_norm": False, "norm_output": False}
    d = diff_configs(old, new, a_name="0.8", b_name="0.9")
    assert not d.by_class("shape", "behaviour"), d.render_text(colour=False)
    paths = {x.path for x in d}
    assert "speculators_config.proposal_methods[0].accept_tolerance" in paths  # listed, as metadata
    # A real change still shows.
    d = diff_configs(old, load("speculators_09_qwen3"))
    assert {x.path for x in d.by_class("behaviour")} == {"norm_output"}
    assert {x.path for x in d.by_class("shape")} == {"fc_norm"}


def test_target_quantization_is_not_a_drafter_shape_difference():
    # issue 12 item 12: a target's quantisation changes no drafter tensor.
    k2 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "hidden_size": 7168,
          "vocab_size": 163840, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    k25 = {**k2, "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized"}}
    d = diff_configs(k2, k25)
    assert not d.by_class("shape")
    q = d.by_class("behaviour")
    assert q and all(x.path.startswith("quantization_config") for x in q)
    assert "no drafter tensor changes shape" in q[0].reason
    # In a drafter's own config, quantisation does change its tensors.
    a = load("specforge_kimi_k2")
    d = diff_configs(a, {**a, "quantization_config": {"quant_method": "fp8"}})
    assert d.by_class("shape")


def test_torchspec_moe_drafter_reads_into_typed_fields():
    c = cfg("torchspec_kimi_k25_eagle3_moe")
    assert c.attention == "mla" and c.full_vocabulary and c.draft_vocab_size == 163840
    assert dict(c.moe) == {"use_moe": True, "n_routed_experts": 384, "num_experts_per_tok": 8,
                           "moe_intermediate_size": 2048, "n_group": 1, "topk_group": 1, "n_shared_experts": 1,
                           "first_k_dense_replace": 0, "norm_topk_prob": True, "routed_scaling_factor": 2.827,
                           "scoring_func": "sigmoid", "topk_method": "noaux_tc"}
    # topk_method is not in the file: TorchSpec's router (bias-corrected top-k) is the default, and says so.
    assert c.provenance["moe.topk_method"].startswith("default: TorchSpec's router")
    assert c.provenance["moe.routed_scaling_factor"] == "file: routed_scaling_factor"
    assert c.mla["q_lora_rank"] == 1536 and c.mla["rope_interleave"] is True
    assert c.use_last_layernorm is True and c.use_mtp_layernorm is False and c.input_norm is True
    # max_position_embeddings is absent: DeepseekV3Config's 4096, named as such.
    assert c.max_position_embeddings == 4096 and c.provenance["max_position_embeddings"] == "default: DeepseekV3Config"
    text, html, js = str(c), c._repr_html_(), c.to_json()
    assert "MoE: 8 of 384 routed experts of width 2048" in text and "moe.routed_scaling_factor" in html
    assert "full vocabulary (163,840 tokens): no d2t/t2d needed" in text
    assert js["moe"]["n_routed_experts"] == 384 and js["mlp"] == "moe" and js["attention"] == "mla"
    assert json.loads(json.dumps(js))["mla"]["mla_use_nope"] is False


def test_dense_mla_drafter_has_no_moe_and_a_null_q_lora_rank_is_kept():
    c = cfg("mla_eagle3_deepseekv2")
    assert c.moe == {} and not c.full_vocabulary and "reduced: 32,000 of 163,840" in c.vocabulary
    assert "dense (gate/up/down_proj)" in str(c)
    raw = load("mla_eagle3_deepseekv2") | {"q_lora_rank": None, "mla_use_nope": True}
    c = normalize_config(raw)
    assert c.mla["q_lora_rank"] is None and c.mla["mla_use_nope"] is True
    assert c.provenance["mla.q_lora_rank"] == "file: q_lora_rank"


@pytest.mark.parametrize("change, fragment", [
    ({"num_experts_per_tok": 400}, "num_experts_per_tok 400 is more than n_routed_experts 384"),
    ({"n_group": 5}, "n_routed_experts 384 is not divisible by n_group 5"),
    ({"n_group": 8, "topk_group": 9}, "topk_group 9 is more than n_group 8"),
    ({"n_group": 64, "topk_group": 1}, "topk_group 1 groups of 6 experts hold fewer than num_experts_per_tok 8"),
    ({"scoring_func": "sqrtsoftplus"}, "scoring_func is 'sqrtsoftplus'; eaglekit knows sigmoid, softmax"),
    ({"topk_method": "magic"}, "topk_method is 'magic'"),
    ({"n_routed_experts": 0}, "n_routed_experts must be a positive integer"),
    ({"n_routed_experts": 1 << 20, "num_experts_per_tok": 8}, "no published MoE has more than 65,536"),
    ({"moe_intermediate_size": 2.5}, "moe_intermediate_size must be a positive integer"),
    ({"n_shared_experts": -1}, "n_shared_experts must be a whole number from 0"),
    ({"routed_scaling_factor": -2.0}, "routed_scaling_factor must be a positive number"),
    ({"norm_topk_prob": "yes"}, "norm_topk_prob must be true or false"),
    ({"use_moe": 1}, "use_moe must be true or false"),
    ({"qk_rope_head_dim": 63}, "qk_rope_head_dim is 63, an odd number"),
    ({"rope_interleave": "true"}, "rope_interleave must be true or false"),
])
def test_bad_moe_and_mla_settings_are_one_clear_error(change, fragment):
    raw = load("torchspec_kimi_k25_eagle3_moe") | change
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        normalize_config(raw, source="moe.json")


def test_use_moe_decides_not_the_expert_keys():
    # TorchSpec switches on use_moe alone: expert keys without it (or with it false) build a dense MLP.
    raw = load("torchspec_kimi_k25_eagle3_moe")
    assert normalize_config({k: v for k, v in raw.items() if k != "use_moe"}).moe == {}
    assert normalize_config(raw | {"use_moe": False}).moe == {}
    # Absent routing keys take DeepseekV3Config's defaults, with that provenance.
    bare = {k: v for k, v in raw.items() if k not in ("n_group", "topk_group", "routed_scaling_factor")}
    c = normalize_config(bare)
    assert (c.moe["n_group"], c.moe["topk_group"], c.moe["routed_scaling_factor"]) == (8, 4, 2.5)
    assert c.provenance["moe.n_group"] == "default: DeepseekV3Config"
