"""eaglekit.config: the three drafter formats normalised into one record, targets, bad input."""

import copy
import json

import pytest

from eaglekit.core.configs.config import (DrafterConfig, detect_format, is_eagle3_config, load_config_bytes, looks_like_target,
                             normalize_config, normalize_target)
from eaglekit.core.errors import ConfigError

# SpecForge configs/kimi-k2-eagle3.json (the family of AQ-MedAI's Kimi-K2 drafter).
K2 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True},
    "attention_bias": False, "head_dim": 128, "hidden_act": "silu", "hidden_size": 7168,
    "intermediate_size": 18432, "max_position_embeddings": 131072, "model_type": "kimi_k2",
    "num_attention_heads": 64, "num_hidden_layers": 1, "num_key_value_heads": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "torch_dtype": "bfloat16", "vocab_size": 163840,
    "draft_vocab_size": 32000,
}
# The same drafter in vllm-project/speculators format.
K2_SPECULATORS = {
    "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "draft_vocab_size": 32000,
    "norm_before_residual": True, "target_hidden_size": None, "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
    "speculators_config": {"algorithm": "eagle3", "proposal_methods": [{"proposal_type": "greedy",
                                                                        "speculative_tokens": 3}],
                           "verifier": {"name_or_path": "moonshotai/Kimi-K2-Instruct",
                                        "architectures": ["DeepseekV3ForCausalLM"]}},
    "transformer_layer_config": {"model_type": "llama", "hidden_size": 7168, "intermediate_size": 18432,
                                 "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 128,
                                 "vocab_size": 163840, "num_hidden_layers": 1, "max_position_embeddings": 131072,
                                 "rope_theta": 1000000.0, "torch_dtype": "bfloat16"},
}
K2_MLA = {
    "architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "num_attention_heads": 64, "num_key_value_heads": 64, "vocab_size": 163840,
    "num_hidden_layers": 1, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]},
    "max_position_embeddings": 262144,
}
K2_TARGET = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "num_hidden_layers": 61,
             "hidden_size": 7168, "vocab_size": 163840, "max_position_embeddings": 131072}
K25_TARGET = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
              "vision_config": {"hidden_size": 1152},
              "text_config": {"model_type": "kimi_k2", "num_hidden_layers": 61, "hidden_size": 7168,
                              "vocab_size": 163840, "max_position_embeddings": 262144}}


def test_specforge_k2():
    c = normalize_config(K2)
    assert c.format == "specforge" and c.architecture == "LlamaForCausalLMEagle3"
    assert (c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (
        7168, 18432, 64, 64, 128)
    assert (c.vocab_size, c.draft_vocab_size, c.num_hidden_layers) == (163840, 32000, 1)
    assert c.target_hidden_size == 7168 and c.target_hidden_size_explicit is False
    # SpecForge trained on the outputs of the configured layers.
    assert c.aux_layer_ids == (2, 30, 58) and c.aux_convention == "outputs" and c.trained_by == "specforge"
    assert c.sources["aux_layer_ids"] == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert (c.rope_theta, c.max_position_embeddings, c.torch_dtype) == (1e6, 131072, "bfloat16")
    assert c.declared_target is None
    assert set(c.defaulted) >= {"target_hidden_size", "norm_before_fc", "fc_norm"}
    assert c.aux_report(61).outputs_of == (2, 30, 58)


@pytest.mark.parametrize("arch", ["Eagle3LlamaForCausalLM", "Eagle3DraftModel"])
def test_specforge_aliases(arch):
    c = normalize_config({**K2, "architectures": [arch]})
    assert c.format == "specforge" and c.architecture == arch


def test_speculators_twin_normalises_to_the_same_fields():
    s, k = normalize_config(K2_SPECULATORS), normalize_config(K2)
    assert s.format == "speculators"
    for name in ("hidden_size", "target_hidden_size", "intermediate_size", "num_attention_heads",
                 "num_key_value_heads", "head_dim", "vocab_size", "draft_vocab_size", "aux_layer_ids",
                 "rope_theta", "max_position_embeddings", "torch_dtype"):
        assert getattr(s, name) == getattr(k, name), name
    assert s.sources["hidden_size"] == "transformer_layer_config.hidden_size"
    assert s.sources["aux_layer_ids"] == "eagle_aux_hidden_state_layer_ids"
    assert s.norm_before_residual is True
    assert s.declared_target == "moonshotai/Kimi-K2-Instruct"
    assert s.declared_target_architectures == ("DeepseekV3ForCausalLM",)


def test_speculators_absent_layer_fields_take_llama_defaults():
    # speculators writes transformer_layer_config with to_diff_dict(): values equal to LlamaConfig's go.
    raw = {"speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"], "draft_vocab_size": 32000,
           "transformer_layer_config": {"num_hidden_layers": 1, "vocab_size": 128256, "num_key_value_heads": 8}}
    c = normalize_config(raw)
    assert (c.hidden_size, c.intermediate_size, c.num_attention_heads, c.head_dim) == (4096, 11008, 32, 128)
    assert (c.num_key_value_heads, c.vocab_size, c.rope_theta, c.max_position_embeddings) == (8, 128256, 1e4, 2048)
    assert "hidden_size" in c.defaulted and c.aux_layer_ids is None and c.aux_report(32) is None


def test_target_hidden_size_explicit():
    c = normalize_config({**K2, "target_hidden_size": 5120})
    assert c.target_hidden_size == 5120 and c.target_hidden_size_explicit


def test_mla_keeps_its_ranks():
    c = normalize_config(K2_MLA)
    assert c.format == "mla" and c.architecture == "Eagle3DeepseekV2ForCausalLM"
    assert dict(c.mla) == {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                           "qk_rope_head_dim": 64, "v_head_dim": 128, "rope_interleave": True,
                           "mla_use_nope": False}
    assert c.provenance["mla.rope_interleave"] == "default: DeepseekV3Config" and c.moe == {}
    assert c.head_dim == 192  # qk_nope + qk_rope
    assert c.draft_vocab_size == 163840  # no reduced vocabulary
    assert c.rms_norm_eps == 1e-6  # DeepseekV3Config's defaults, not LlamaConfig's
    assert c.provenance["rms_norm_eps"] == "default: DeepseekV3Config"
    assert c.max_position_embeddings == 262144


def test_detection_is_by_fields_not_names():
    assert is_eagle3_config(K2) and is_eagle3_config(K2_SPECULATORS) and is_eagle3_config(K2_MLA)
    assert not is_eagle3_config(K2_TARGET) and not is_eagle3_config([K2])
    assert not is_eagle3_config({"speculators_model_type": "eagle", "architectures": ["Eagle3Speculator"]})
    unnamed = {"architectures": ["LlamaForCausalLM"], "draft_vocab_size": 32000,
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}
    assert detect_format(unnamed) == "specforge"
    # RedHatAI speculators checkpoints may name the architecture Eagle3DraftModel: the marker decides.
    assert detect_format({"architectures": ["Eagle3DraftModel"], "speculators_model_type": "eagle3"}) == "speculators"
    assert looks_like_target(K2_TARGET) and looks_like_target(K25_TARGET) and not looks_like_target(K2)


def test_targets_and_the_k25_text_config_wrapper():
    k2 = normalize_target(K2_TARGET)
    assert (k2.num_hidden_layers, k2.hidden_size, k2.vocab_size, k2.text_config_key) == (61, 7168, 163840, None)
    k25 = normalize_target(K25_TARGET)
    assert (k25.num_hidden_layers, k25.hidden_size, k25.vocab_size) == (61, 7168, 163840)
    assert (k25.text_config_key, k25.model_type, k25.text_model_type) == ("text_config", "kimi_k25", "kimi_k2")
    assert k25.architecture == "KimiK25ForConditionalGeneration" and k25.max_position_embeddings == 262144
    with pytest.raises(ConfigError, match=r"^t.json is not a target model config: no num_hidden_layers "
                                          r"\(looked at the top level\)"):
        normalize_target({"hidden_size": 1}, source="t.json")
    with pytest.raises(ConfigError, match="is an EAGLE-3 drafter config, not a target model config"):
        normalize_target(K2)


def test_load_config_bytes_errors():
    with pytest.raises(ConfigError, match=r"^d/config.json is not valid JSON: Expecting ',' delimiter "
                                          r"\(line 2 column 1\)\.$"):
        load_config_bytes(b'{"a": 1\n"b": 2}', source="d/config.json")
    with pytest.raises(ConfigError, match=r"^c.json is a JSON array, not an object"):
        load_config_bytes(b"[1, 2]", source="c.json")
    with pytest.raises(ConfigError, match=r"^c.json is not valid JSON: it is not UTF-8 text"):
        load_config_bytes(b'{"a": "\xff"}', source="c.json")
    with pytest.raises(ConfigError) as e:
        load_config_bytes(json.dumps(K2_TARGET).encode(), source="k2/config.json")
    assert str(e.value) == (
        "k2/config.json has no recognisable EAGLE-3 fields: expected architectures to include one of "
        "LlamaForCausalLMEagle3, Eagle3LlamaForCausalLM, Eagle3DraftModel, Eagle3Speculator, "
        "Eagle3DeepseekV2ForCausalLM, Eagle3DeepseekV3ForCausalLM, DeepseekV3ForCausalLMEagle3, or "
        "speculators_model_type \"eagle3\", or the original EAGLE-3 layout (LlamaForCausalLM with draft_vocab_size "
        "and one layer) (got architectures ['DeepseekV3ForCausalLM'], model_type 'kimi_k2'). "
        "A target model config goes in the target argument.")
    assert load_config_bytes(json.dumps(K2).encode()) == K2
    assert load_config_bytes(json.dumps(K25_TARGET).encode(), kind="target") == K25_TARGET
    assert load_config_bytes(b'{"x": 1}', kind="any") == {"x": 1}
    with pytest.raises(ConfigError, match="is an EAGLE-3 drafter config, not a target"):
        load_config_bytes(json.dumps(K2).encode(), kind="target")


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c.pop("hidden_size"), "^config.json \\(specforge format\\) lacks hidden_size: an EAGLE-3"),
    (lambda c: c.update(hidden_size="7168"), "^config.json: hidden_size must be a positive integer, got '7168'"),
    (lambda c: c.update(num_attention_heads=True), "num_attention_heads must be a positive integer, got True"),
    (lambda c: c.update(rope_theta="1e6"), "rope_theta must be a number, got '1e6'"),
    (lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids="2,30,58"),
     "^config.json: eagle_config.eagle_aux_hidden_state_layer_ids: aux layer ids must be a list of integers, "
     "got '2,30,58'"),
    (lambda c: c.update(eagle_aux_hidden_state_layer_ids=[1, 29, 57]),
     "gives two different aux layer id lists: eagle_config.eagle_aux_hidden_state_layer_ids = \\[2, 30, 58\\] "
     "and eagle_aux_hidden_state_layer_ids = \\[1, 29, 57\\]"),
])
def test_bad_drafter_fields(mutate, message):
    raw = copy.deepcopy(K2)
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        normalize_config(raw)


def test_speculators_without_layer_config():
    raw = {k: v for k, v in K2_SPECULATORS.items() if k != "transformer_layer_config"}
    with pytest.raises(ConfigError, match="lacks transformer_layer_config"):
        normalize_config(raw, source="s.json")


def test_renders_as_a_key_value_table():
    c = normalize_config(K2, source="k2/config.json")
    text = str(c)
    assert text.splitlines()[0] == "EAGLE-3 drafter config: k2/config.json"
    assert "aux_layer_ids            [2, 30, 58] (trained as outputs, specforge)" in text
    assert "target_hidden_size       7168 (default: hidden_size (drafter and target share it))" in text
    assert "<table" in c._repr_html_() and "k2/config.json" in c._repr_html_()
    assert isinstance(c, DrafterConfig) and c.to_json()["aux_layer_ids"] == [2, 30, 58]
