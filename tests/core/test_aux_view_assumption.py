"""A SpecForge config's aux ids read without the target's model code: the view says the Llama-style reading it
assumed, since on a DeepSeek-family target (Kimi-K2) the same ids are AMBIGUOUS (issue 30: page 02 said
"trained on outputs" where pages 00 and 03 said AMBIGUOUS)."""

from __future__ import annotations

from eaglekit.core.configs.aux_view import aux_engine_view


def test_unknown_target_code_says_the_reading_it_assumed():
    unknown = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=61).summary
    assert "on the outputs of layers [2, 30, 58] if the target runs Llama-style model code" in unknown
    assert "AMBIGUOUS: give the target's architecture" in unknown
    kimi = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=61, architecture="DeepseekV3ForCausalLM")
    assert "training AMBIGUOUS" in kimi.summary
    llama = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=61, architecture="LlamaForCausalLM")
    assert "Llama-style" not in llama.summary and "trained (SpecForge training) on the outputs" in llama.summary
    # ids starting at 1 read alike in every SGLang release: nothing assumed
    assert "Llama-style" not in aux_engine_view([1, 29, 57], trained_by="specforge", num_layers=61).summary
