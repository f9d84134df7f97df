"""compat between Llama, MLA and MoE drafters: what a warm start takes, which engine loads which name, and
full-vocabulary drafters (no d2t/t2d) on either side."""

from __future__ import annotations

import json

from mlafixtures import DRAFT, VOCAB, llama_config, mla_config, write_drafter

from eaglekit.analysis.compat.check import check_drafter, engine_loads
from eaglekit.analysis.compat.pair import compat
from eaglekit.core.configs.config import normalize_config
from eaglekit.io.reader import open_checkpoint


def _parts(report):
    return {p.family: p for p in report.warm_start}


def test_llama_vs_mla_says_what_a_warm_start_takes(tmp_path):
    llama = write_drafter(tmp_path / "llama", llama_config(), seed=1)
    mla = write_drafter(tmp_path / "mla", mla_config(), seed=1)  # same seed: the same vocabulary map
    r = compat(llama, mla, a_name="llama", b_name="mla")
    assert r.verdict == "incompatible"
    parts = _parts(r)
    assert parts["attention"].take == "cannot" and "attention not comparable: llama vs mla" in parts["attention"].why
    assert {p: parts[p].take for p in ("fc", "mlp", "norms", "lm_head", "vocab map")} == {
        "fc": "take", "mlp": "take", "norms": "take", "lm_head": "take", "vocab map": "take"}
    assert set(r.takes()) == {"fc", "mlp", "norms", "lm_head", "vocab map"}
    # One reason for the attention family, not one per projection, and the warm-start summary.
    assert sum("attention:" in x for x in r.reasons) == 1 and not any("q_a_proj" in x for x in r.reasons)
    assert any(x.startswith("Not a drop-in, but a warm start of mla can take from llama: fc, mlp, norms, lm_head")
               for x in r.reasons), r.reasons
    text, html, js = str(r), r._repr_html_(), r.to_json()
    assert "warm start of mla from llama" in text and "What a warm start of mla can take from llama" in html
    assert {p["family"]: p["take"] for p in js["warm_start"]}["attention"] == "cannot"
    json.dumps(js)


def test_moe_vs_dense_mlp_is_not_taken(tmp_path):
    dense = write_drafter(tmp_path / "dense", mla_config(), seed=2)
    moe = write_drafter(tmp_path / "moe", mla_config(moe=True), seed=2)
    r = compat(dense, moe, a_name="dense", b_name="moe")
    parts = _parts(r)
    assert parts["mlp"].take == "cannot" and "mlp not comparable: dense vs moe" in parts["mlp"].why
    assert parts["attention"].take == "take" and "MLA" in parts["attention"].why
    assert any(x.startswith("mlp: dense (gate/up/down_proj) in dense vs MoE") for x in r.reasons)
    # The engines' MLA drafter code builds a dense MLP: the MoE drafter loads in neither.
    assert "vLLM" in r.engines["moe"]["vllm"] and "MoE" in r.engines["moe"]["vllm"]
    assert r.engines["dense"]["vllm"].startswith("vLLM loads architecture Eagle3DeepseekV2ForCausalLM")


def test_two_moe_drafters_fused_and_per_expert_layouts(tmp_path):
    fused = write_drafter(tmp_path / "fused", mla_config(moe=True), seed=3)
    same = write_drafter(tmp_path / "same", mla_config(moe=True), seed=3, layout="layers.0")
    r = compat(fused, same)
    assert r.verdict == "compatible" and _parts(r)["mlp"].take == "take"
    split = write_drafter(tmp_path / "split", mla_config(moe=True), seed=3, fused_experts=False)
    r = compat(fused, split, a_name="A", b_name="B")
    mlp = _parts(r)["mlp"]
    assert mlp.take == "take after remap" and "stored fused in A, per-expert in B" in mlp.why, mlp
    assert r.verdict == "incompatible"  # not a drop-in: the tensors are named and shaped otherwise


def test_full_vocabulary_drafters_need_no_map(tmp_path):
    a = write_drafter(tmp_path / "a", mla_config(draft_vocab=VOCAB), seed=4)
    b = write_drafter(tmp_path / "b", mla_config(draft_vocab=VOCAB), seed=5)
    r = compat(a, b)
    assert r.verdict == "compatible", r.reasons  # no d2t/t2d on either side is not an invalid map
    assert r.vocab["full_a"] and r.vocab["full_b"] and r.vocab["equal"]
    assert _parts(r)["vocab map"].take == "not needed"
    assert "both full vocabulary: no d2t/t2d, every target token can be drafted" in str(r)


def test_full_vocabulary_against_a_reduced_one(tmp_path):
    full = write_drafter(tmp_path / "full", mla_config(draft_vocab=VOCAB), seed=6)
    reduced = write_drafter(tmp_path / "reduced", llama_config(), seed=6)
    r = compat(full, reduced, a_name="full", b_name="reduced")
    assert r.vocab["full_a"] and not r.vocab["full_b"] and r.vocab["valid_a"]
    assert r.vocab["overlap"] == DRAFT  # every reduced token is in the full vocabulary
    head = _parts(r)["lm_head"]
    assert head.take == "take after remap" and "full drafts the full vocabulary (row i = token i)" in head.why
    assert _parts(r)["vocab map"].take == "take"
    assert "vocabulary full" in str(r) and "full vocabulary: no d2t/t2d" in str(r)
    r = compat(reduced, full, a_name="reduced", b_name="full")
    assert _parts(r)["vocab map"].take == "not needed"


def test_engine_names_for_mla_drafters():
    v2 = normalize_config(mla_config())
    assert engine_loads(v2, "vllm")[0] and engine_loads(v2, "sglang")[0]
    v3 = normalize_config(mla_config(architectures=["Eagle3DeepseekV3ForCausalLM"]))
    assert engine_loads(v3, "vllm")[0] and engine_loads(v3, "sglang")[0]
    specforge = normalize_config(mla_config(architectures=["DeepseekV3ForCausalLMEagle3"]))
    ok, why = engine_loads(specforge, "vllm")
    assert not ok and "does not load architecture DeepseekV3ForCausalLMEagle3" in why
    nolora = normalize_config(mla_config(q_lora=None))
    assert "kimi_k25_eagle3.py refuses a null q_lora_rank" in engine_loads(nolora, "sglang")[1]


def test_check_names_the_mla_architecture_and_refuses_moe_per_engine(tmp_path):
    folder = write_drafter(tmp_path / "v3", mla_config(architectures=["DeepseekV3ForCausalLMEagle3"]), seed=7)
    with open_checkpoint(folder) as ck:
        inv = ck.inventory
    r = check_drafter(inv, inv.config, (None, None), engine="vllm")
    arch = r.by_check("architecture")
    assert arch[0].severity == "error" and 'Set architectures to ["Eagle3DeepseekV2ForCausalLM"]' in arch[0].fix
    folder = write_drafter(tmp_path / "moe", mla_config(moe=True, draft_vocab=VOCAB), seed=7)
    with open_checkpoint(folder) as ck:
        inv = ck.inventory
    r = check_drafter(inv, inv.config, (None, None), engine="sglang")
    arch = r.by_check("architecture")
    assert arch[0].severity == "error" and "MoE MLP" in arch[0].message and "dense MLP only" in arch[0].message
    assert [f.severity for f in r.by_check("vocab map")] == ["ok"]  # full vocabulary: no map needed
