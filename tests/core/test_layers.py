"""eaglekit.layers: the two aux layer id conventions (docs/domain.md) and what ids mean for a target."""

import pytest

from eaglekit.core.errors import InputError
from eaglekit.core.configs.layers import (config_convention, convert_aux_layers, default_aux_layers, interpret_aux_layers,
                             parse_aux_layer_ids)


def test_defaults_for_61_layers_name_the_same_tensors_in_both_conventions():
    assert default_aux_layers(61, convention="inputs") == (2, 30, 58)
    assert default_aux_layers(61, convention="outputs") == (1, 29, 57)
    assert convert_aux_layers([2, 30, 58], from_convention="inputs", to_convention="outputs") == (1, 29, 57)
    assert convert_aux_layers([1, 29, 57], from_convention="outputs", to_convention="inputs") == (2, 30, 58)


def test_inputs_2_30_58_are_the_outputs_of_layers_1_29_57_and_the_k2_default():
    r = interpret_aux_layers([2, 30, 58], convention="inputs", num_layers=61)
    assert r.outputs_of == (1, 29, 57)
    assert r.equivalent == (1, 29, 57) and r.other_convention == "outputs"
    assert r.is_default is True and r.in_range is True and r.ok
    assert r.explanation == ("[2, 30, 58] counted as layer inputs = the outputs of decoder layers [1, 29, 57]; "
                             "the inputs default for 61 layers; fits a 61-layer target")


def test_outputs_convention_report():
    r = interpret_aux_layers([1, 29, 57], convention="outputs", num_layers=61)
    assert r.outputs_of == (1, 29, 57) and r.equivalent == (2, 30, 58)
    assert r.is_default is True
    # The same numbers read as inputs are off by one: not the default.
    r2 = interpret_aux_layers([1, 29, 57], convention="inputs", num_layers=61)
    assert r2.is_default is False and r2.outputs_of == (0, 28, 56)
    assert "not the inputs default for 61 layers ([2, 30, 58])" in r2.explanation


def test_ids_out_of_range_are_flagged_with_the_valid_range():
    r = interpret_aux_layers([2, 30, 61], convention="inputs", num_layers=61)
    assert r.in_range is False and r.out_of_range == (61,)
    assert r.problems == ("ids [61] are out of range for a 61-layer target (valid inputs ids: 0..60); "
                          "the engine would never capture them",)
    assert "does NOT fit a 61-layer target" in r.explanation
    # K2's ids do not fit a 32-layer target.
    assert interpret_aux_layers([2, 30, 58], convention="inputs", num_layers=32).out_of_range == (58,)


def test_last_layer_output_cannot_be_captured_by_inputs_engines():
    r = interpret_aux_layers([1, 29, 60], convention="outputs", num_layers=61)
    assert r.in_range is True
    assert any("as inputs it is 61" in p for p in r.problems)


def test_unknown_layer_count_converts_only():
    r = interpret_aux_layers([2, 30, 58], convention="inputs")
    assert r.in_range is None and r.is_default is None and r.default is None
    assert r.explanation.endswith("target layer count unknown")
    assert r.to_json()["equivalent"] == {"convention": "outputs", "ids": [1, 29, 57]}


def test_embedding_output_is_named():
    r = interpret_aux_layers([0, 5, 9], convention="inputs", num_layers=12)
    assert r.outputs_of == (-1, 4, 8)
    assert "embeddings, 4, 8" in r.explanation


def test_wrong_count_and_repeats_are_problems():
    assert "expected 3 aux layer ids" in interpret_aux_layers([2, 30], convention="inputs", expected=3).problems[0]
    assert interpret_aux_layers([2, 16, 30, 44, 58], convention="inputs", expected=5).ok  # five-aux drafters exist
    assert "repeat" in interpret_aux_layers([2, 2, 5], convention="inputs").problems[0]


@pytest.mark.parametrize("bad", ["2,30,58", [2, "30", 58], [2.0, 30, 58], [True, 30, 58], None])
def test_non_integer_ids_are_refused(bad):
    with pytest.raises(InputError, match=r"^aux layer ids must be a list of integers, got "):
        parse_aux_layer_ids(bad)
    with pytest.raises(InputError, match="aux layer ids must be a list of integers"):
        interpret_aux_layers(bad, convention="inputs", num_layers=61)


def test_bad_options_are_refused():
    with pytest.raises(InputError, match="Unknown aux layer convention 'input'"):
        interpret_aux_layers([2, 30, 58], convention="input")
    with pytest.raises(InputError, match="num_layers must be a positive integer, got 0"):
        interpret_aux_layers([2, 30, 58], convention="inputs", num_layers=0)


def test_training_convention_follows_the_trainer_of_each_format():
    # SpecForge and Model-Optimizer train on layer outputs; speculators and the original EAGLE-3 on inputs.
    assert {f: config_convention(f) for f in ("specforge", "mla", "speculators", "eagle")} == {
        "specforge": "outputs", "mla": "outputs", "speculators": "inputs", "eagle": "inputs"}


def test_report_renders_as_text_and_html():
    r = interpret_aux_layers([2, 30, 58], convention="inputs", num_layers=61)
    assert "as outputs         [1, 29, 57]" in str(r)
    assert "<table" in r._repr_html_()


def test_one_specforge_config_feeds_different_tensors_in_sglang_and_vllm():
    from eaglekit.core.configs.aux_view import aux_engine_view

    v = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=61)
    assert v.training.outputs_of == (2, 30, 58)                # SpecForge trains on outputs
    assert v.reading("sglang").outputs_of == (2, 30, 58)      # SGLang adds one: outputs, as trained
    assert v.reading("vllm").outputs_of == (1, 29, 57)        # vLLM reads inputs: one layer early
    assert v.reading("sglang").matches_training and not v.reading("vllm").matches_training
    assert v.reading("vllm").write == (3, 31, 59) and v.engines_agree is False
    assert "vLLM feeds [1, 29, 57]: NOT as trained (write [3, 31, 59])" in v.summary
    assert "write instead" in str(v) and "<table" in v._repr_html_()


def test_speculators_ids_and_defaults_agree_across_engines():
    from eaglekit.core.configs.aux_view import aux_engine_view

    v = aux_engine_view([2, 30, 58], trained_by="speculators", num_layers=61)
    assert v.reading("vllm").matches_training and v.reading("sglang").write == (1, 29, 57)
    none = aux_engine_view(None, trained_by="specforge", num_layers=61)
    assert none.engines_agree and all(e.matches_training and e.from_default for e in none.engines)
    # Without ids both engines capture the inputs of [2, 30, 58] (SGLang adds no one to its default list).
    assert none.reading("sglang").ids == (2, 30, 58) and none.reading("vllm").ids == (2, 30, 58)
    assert none.reading("sglang").outputs_of == none.reading("vllm").outputs_of == (1, 29, 57)
    assert aux_engine_view(None, trained_by="specforge").engines_agree is None  # layer count unknown


def test_engine_ranges():
    from eaglekit.core.configs.aux_view import aux_engine_view

    # SGLang captures id i at the input of layer i + 1: id 60 of 61 layers has no such layer.
    v = aux_engine_view([1, 29, 60], trained_by="specforge", num_layers=61)
    assert v.reading("sglang").in_range is False and v.reading("vllm").in_range is True
    assert any("SGLang cannot capture ids [60]" in p for p in v.problems)
    with pytest.raises(InputError, match="Unknown engine or trainer 'tgi'"):
        aux_engine_view([1], trained_by="tgi")


def test_no_out_of_range_ids_are_suggested():
    """Trained on outputs of [2, 30, 60] of a 61-layer target: vLLM would need ids [3, 31, 61], beyond its
    last layer, so the view suggests nothing for it instead of impossible ids."""
    from eaglekit.core.configs.aux_view import aux_engine_view

    view = aux_engine_view([2, 30, 60], num_layers=61, trained_by="specforge")
    vllm = view.reading("vllm")
    assert vllm.matches_training is False and vllm.write is None
    assert "61]" not in view.summary and "no ids it can capture" in view.summary


def test_a_shallow_targets_degenerate_default_is_not_named():
    """Review: "not the outputs default for 4 layers ([1, 1, 0])": engines' fallback [2, L//2, L-3] repeats layers
    on a 4-layer target, so no default is named there; at real depths it still is."""
    from eaglekit.core.configs.layers import interpret_aux_layers

    shallow = interpret_aux_layers([0, 1, 2], convention="outputs", num_layers=4).explanation
    assert "default" not in shallow and "fits a 4-layer target" in shallow
    deep = interpret_aux_layers([0, 1, 2], convention="outputs", num_layers=61).explanation
    assert "not the outputs default for 61 layers ([1, 29, 57])" in deep
