"""Similarity across attention and MLP families: what both drafters have is compared, what is built
differently is named (Llama q/k/v vs MLA q_a/kv_a, MoE vs dense, fused vs per-expert experts), and lm_head rows
of full-vocabulary drafters (no d2t/t2d) pair by token."""

from __future__ import annotations

import json

import pytest
from mlafixtures import DRAFT, VOCAB, llama_config, mla_config, write_drafter

from eaglekit.analysis.similarity.measure import similarity


def test_llama_vs_mla_compares_what_both_have_and_names_the_attention(tmp_path):
    a = write_drafter(tmp_path / "llama", llama_config(), seed=1)
    b = write_drafter(tmp_path / "mla", mla_config(), seed=1)  # same seed: the same fc, MLP, norms, lm_head
    r = similarity(a, b, grid=(4, 4), progress=False)
    compared = {t.tensor for t in r}
    assert {"fc.weight", "midlayer.mlp.gate_proj.weight", "norm.weight", "lm_head.weight"} <= compared
    assert not any(".self_attn." in t for t in compared)  # o_proj too: its columns mean other things
    assert r["fc.weight[low: aux layer 1]"].cosine == pytest.approx(1.0)
    assert r["midlayer.mlp.down_proj.weight"].cosine == pytest.approx(1.0)
    (attn,) = r.incomparable
    assert attn.family == "attention" and attn.reason.startswith("attention not comparable: llama vs mla")
    assert "midlayer.self_attn.q_proj.weight" in attn.a and "midlayer.self_attn.kv_b_proj.weight" in attn.b
    assert not any(".self_attn." in x for x in (*r.only_a, *r.only_b))  # said once, as a family
    assert "attention not comparable: llama vs mla" in str(r) and "attention not comparable" in r._repr_html_()
    assert json.loads(json.dumps(r.to_json()))["incomparable"][0]["family"] == "attention"


def test_moe_vs_dense_and_fused_vs_per_expert(tmp_path):
    dense = write_drafter(tmp_path / "dense", mla_config(), seed=2)
    moe = write_drafter(tmp_path / "moe", mla_config(moe=True), seed=2)
    r = similarity(dense, moe, grid=(2, 2), progress=False)
    assert [x.family for x in r.incomparable] == ["mlp"]
    assert r.incomparable[0].reason.startswith("mlp not comparable: dense vs moe")
    assert r["midlayer.self_attn.kv_b_proj.weight"].cosine == pytest.approx(1.0)  # MLA on both sides: compared
    split = write_drafter(tmp_path / "split", mla_config(moe=True), seed=2, fused_experts=False)
    r = similarity(moe, split, grid=(2, 2), progress=False)
    (experts,) = r.incomparable
    assert experts.family == "experts" and "stored fused in A, per-expert in B" in experts.reason
    assert r["midlayer.mlp.shared_experts.up_proj.weight"].cosine == pytest.approx(1.0)
    assert r["midlayer.mlp.gate.weight"].cosine == pytest.approx(1.0)


def test_full_vocabulary_lm_heads_pair_by_token(tmp_path):
    full = write_drafter(tmp_path / "full", mla_config(draft_vocab=VOCAB), seed=3)
    reduced = write_drafter(tmp_path / "reduced", mla_config(), seed=3)
    r = similarity(full, reduced, grid=(2, 2), progress=False)
    al = r.lm_head_alignment
    assert al.shared_rows == DRAFT and al.full_a and not al.full_b and al.method == "target token"
    assert "A: full vocabulary, no d2t/t2d (row i drafts token i); B: d2t/t2d map" in str(r)
    both = similarity(full, full, grid=(2, 2), progress=False)
    assert both.lm_head_alignment.full_a and both.lm_head_alignment.full_b
    assert both["lm_head.weight"].cosine == pytest.approx(1.0)
    assert r.to_json()["lm_head_alignment"]["full_vocabulary_a"] is True


def test_mla_first_projections_split_into_embedding_and_hidden_halves(tmp_path):
    a = write_drafter(tmp_path / "a", mla_config(), seed=4)
    b = write_drafter(tmp_path / "b", mla_config(), seed=4)
    r = similarity(a, b, grid=(2, 2), progress=False)
    names = set(r.names)
    for proj in ("q_a_proj", "kv_a_proj_with_mqa"):
        assert {f"midlayer.self_attn.{proj}.weight[embed]", f"midlayer.self_attn.{proj}.weight[hidden]"} <= names
    assert "midlayer.self_attn.kv_b_proj.weight" in names  # reads the latent, not the EAGLE-3 input: whole
    assert not r.incomparable
