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
    assert "vLLM 0.18.0 or newer" in r.engines["dense"]["vllm"]


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


def _check(folder):
    with open_checkpoint(folder) as ck:
        inv = ck.inventory
    return check_drafter(inv, inv.config, (None, None))


def test_check_accepts_matching_mla_layers_in_every_shape(tmp_path):
    for name, cfg, kw in (("lora", mla_config(draft_vocab=VOCAB), {}),
                          ("nolora", mla_config(q_lora=None, draft_vocab=VOCAB), {}),
                          ("moe", mla_config(moe=True, draft_vocab=VOCAB), {}),
                          ("split", mla_config(moe=True, draft_vocab=VOCAB), {"fused_experts": False}),
                          ("vllm", mla_config(draft_vocab=VOCAB), {"layout": "layers.0"})):
        r = _check(write_drafter(tmp_path / name, cfg, seed=8, **kw))
        layer = r.by_check("mla layer")
        assert [f.severity for f in layer] == ["ok"], (name, [f.message for f in layer])


def test_check_names_the_tensor_and_the_config_key(tmp_path):
    def errors(name, claimed, written=None, **kw):
        """Errors for a checkpoint written from ``written`` (default: the base config) read with ``claimed``."""
        folder = write_drafter(tmp_path / name, written or mla_config(draft_vocab=VOCAB), seed=9, **kw)
        (folder / "config.json").write_text(json.dumps(claimed))
        return [f.message for f in _check(folder).by_check("mla layer") if f.severity == "error"]

    # kv_b_proj written for kv_lora_rank 8, read with a config that says 6.
    wrong = errors("kv", {**mla_config(draft_vocab=VOCAB), "kv_lora_rank": 6})
    assert any(m.startswith("midlayer.self_attn.kv_b_proj.weight is [32, 8], but the config gives [32, 6] "
                            "(num_attention_heads x (qk_nope_head_dim + v_head_dim), kv_lora_rank)") for m in wrong), wrong
    # q_lora_rank null on a checkpoint with q_a_proj, and the reverse.
    folder = write_drafter(tmp_path / "lora", mla_config(draft_vocab=VOCAB), seed=9)
    (folder / "config.json").write_text(json.dumps(mla_config(q_lora=None, draft_vocab=VOCAB)))
    msgs = [f.message for f in _check(folder).by_check("mla layer")]
    assert any("q_a_proj.weight is in the checkpoint but q_lora_rank is null" in m for m in msgs)
    assert any("midlayer.self_attn.q_proj.weight is missing" in m for m in msgs)
    folder = write_drafter(tmp_path / "nolora", mla_config(q_lora=None, draft_vocab=VOCAB), seed=9)
    (folder / "config.json").write_text(json.dumps(mla_config(draft_vocab=VOCAB)))
    msgs = [f.message for f in _check(folder).by_check("mla layer")]
    assert any("q_proj.weight is in the checkpoint but q_lora_rank is 16" in m for m in msgs)
    # A router of the wrong width, and a missing shared expert.
    moe = mla_config(moe=True, draft_vocab=VOCAB)
    msgs = errors("router", {**moe, "n_routed_experts": 2, "num_experts_per_tok": 2}, moe)
    assert any(m.startswith("midlayer.mlp.gate.weight is [4, 32], but the config gives [2, 32] (n_routed_experts")
               for m in msgs), msgs
    msgs = errors("noshared", {**moe, "n_shared_experts": 2}, moe)
    assert any("shared_experts.gate_proj.weight is [12, 32], but the config gives [24, 32]" in m for m in msgs)
    # Experts on a config without use_moe.
    msgs = errors("dense", {k: v for k, v in moe.items() if k != "use_moe"}, moe)
    assert any("mlp.gate.weight is in the checkpoint but the config builds a dense MLP" in m for m in msgs), msgs


def test_check_a_missing_per_expert_tensor(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = write_drafter(tmp_path / "split", mla_config(moe=True, draft_vocab=VOCAB), seed=10, fused_experts=False)
    tensors = load_file(str(folder / "model.safetensors"))
    del tensors["midlayer.mlp.experts.3.down_proj.weight"]
    save_file(tensors, str(folder / "model.safetensors"))
    msgs = [f.message for f in _check(folder).by_check("mla layer")]
    assert msgs == ["midlayer.mlp.experts.3.down_proj.weight is missing: the config (hidden_size, "
                    "moe_intermediate_size) says the layer has it."]


def test_yarn_positions_count_against_the_targets_context(tmp_path):
    from mlafixtures import H

    target = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 8, "hidden_size": H,
              "vocab_size": VOCAB, "max_position_embeddings": 262144}
    yarn = {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096, "mscale": 1.0,
            "mscale_all_dim": 1.0, "beta_fast": 1.0, "beta_slow": 1.0}
    cfg = {k: v for k, v in mla_config(draft_vocab=VOCAB, rope_scaling=yarn).items() if k != "max_position_embeddings"}
    with open_checkpoint(write_drafter(tmp_path / "yarn", cfg, seed=11)) as ck:
        inv = ck.inventory
    r = check_drafter(inv, inv.config, (None, None), target=target)
    assert not any("positions" in f.message for f in r.by_check("rope")), [f.message for f in r.by_check("rope")]
    plain = {k: v for k, v in cfg.items() if k != "rope_scaling"}  # DeepseekV3Config's 4096 positions, no YaRN
    r = check_drafter(inv, plain, (None, None), target=target)
    assert any("the drafter covers 4,096 positions, the target 262,144" in f.message for f in r.by_check("rope"))
    short = {**cfg, "rope_scaling": {**yarn, "factor": 32.0}}
    r = check_drafter(inv, short, (None, None), target=target)
    assert any("131,072 positions (YaRN: 4,096 x 32)" in f.message for f in r.by_check("rope"))
