"""MLA and MoE drafters: eaglekit's all-positions pass against the slow reference of mla_reference.py (entry by
entry, a latent KV cache, pair-wise RoPE, DeepSeek's YaRN, the router token by token), for several sizes,
q_lora_rank set and null, YaRN and plain rotary, NoPE, with and without d2t, dense, per-expert and fused MoE,
both checkpoint layouts; and the same attention and MoE blocks against transformers' DeepseekV3 modules."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from eaglekit.analysis.acceptance.measure import match_lengths
from eaglekit.analysis.acceptance.tree import TreeConfig, first_pass, grow_trees
from eaglekit.analysis.draft import DraftModel
from eaglekit.analysis.draft import load as loading
from mla_reference import HEADS, HT, V, Reference, make_mla_drafter

CASES = [
    dict(),
    dict(q_lora=None),
    dict(yarn=True),
    dict(yarn=True, q_lora=None, d2t=False),
    dict(rank=20, nope=6, rope=8, vdim=10, yarn=True),
    dict(rope=0),
    dict(nope_flag=True, yarn=True),
    dict(moe="experts"),
    dict(moe="fused", yarn=True, d2t=False),
    dict(moe="experts", layout="layers.0", q_lora=None),
]


def _inputs(seed=3, T=10):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, T, HT, generator=g), torch.randint(0, V, (T,), generator=g)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "base")
def test_fast_pass_equals_the_reference(case):
    cfg, t = make_mla_drafter(**case)
    model = DraftModel.from_tensors(cfg, t)
    aux, ids = _inputs()
    T, K = aux.shape[1], 4
    ref_tokens, ref_logits = Reference(cfg, t).draft(aux, ids, K, list(range(T)))
    out = model.draft(model.project(aux), ids, K, return_logits=True)
    assert out.tokens.tolist() == ref_tokens.tolist()
    torch.testing.assert_close(torch.stack(out.logits), ref_logits, rtol=2e-4, atol=2e-4)
    assert model.draft_loop(model.project(aux), ids, K).tolist() == ref_tokens.tolist()   # the serving loop too
    # accepted lengths and the accept length for every K: target tokens that follow the drafts now and then
    target = torch.randint(0, V, (T + K + 1,), generator=torch.Generator().manual_seed(5))
    for b in range(0, T, 2):
        target[b + 1:b + 1 + (b % 4) + 1] = ref_tokens[:(b % 4) + 1, b]
    expected = torch.stack([target[torch.arange(T) + j] for j in range(1, K + 1)])
    fast, slow = match_lengths(out.tokens, expected), match_lengths(ref_tokens, expected)
    assert fast.tolist() == slow.tolist() and int(fast.max()) >= 2
    for k in range(1, K + 1):
        assert float((1 + fast.clamp(max=k)).float().mean()) == float((1 + slow.clamp(max=k)).float().mean())
    assert model.families == ("mla", "moe" if case.get("moe") else "dense")
    assert model.full_vocabulary is (not case.get("d2t", True))


@pytest.mark.parametrize("case", [dict(), dict(moe="fused", yarn=True, d2t=False)], ids=["dense", "moe"])
def test_trees_from_the_batched_pass_equal_trees_from_the_reference(case):
    cfg, t = make_mla_drafter(**case)
    model = DraftModel.from_tensors(cfg, t)
    ref = Reference(cfg, t)
    aux, ids = _inputs(T=8)
    h = model.project(aux)
    pool = grow_trees(model, first_pass(model, h, ids, start=4), topk=2, steps=3, attention="ancestors")
    hr = ref.project(aux)
    for col, base in enumerate(range(4, 8)):
        cache0 = [ref.entry(hr[i], ids[i], i) for i in range(base + 1)]
        g, lg = ref.finish(hr[base], ref.attend(cache0[base][0], [c for _, c in cache0]))
        lp = torch.log_softmax(lg, -1)
        top = torch.topk(lp, 2)
        level1 = [int(ref.targets[i]) for i in top.indices]
        assert pool.tokens[col, :2].tolist() == level1
        # level 2: each level-1 node's children, its entry attending to the prefix and itself (its ancestors)
        kids = []
        for node in top.indices:
            q, item = ref.entry(g, ref.targets[node], base + 1)
            _, lg2 = ref.finish(g, ref.attend(q, [c for _, c in cache0] + [item]))
            kids += [int(ref.targets[i]) for i in torch.topk(lg2, 2).indices]
        assert pool.tokens[col, 2:6].tolist() == kids


def test_attention_and_moe_blocks_equal_transformers_deepseek_v3():
    """The MLA attention (its input 2H wide, o_proj back to H) and the MoE MLP against transformers' own
    DeepseekV3Attention and DeepseekV3MoE with the same weights (YaRN, interleaved RoPE, grouped routing)."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds

    cfg, t = make_mla_drafter(moe="experts", yarn=True)
    model = DraftModel.from_tensors(cfg, t)
    H = cfg["hidden_size"]
    common = dict(num_attention_heads=HEADS, num_key_value_heads=HEADS, q_lora_rank=cfg["q_lora_rank"],
                  kv_lora_rank=cfg["kv_lora_rank"], qk_nope_head_dim=cfg["qk_nope_head_dim"],
                  qk_rope_head_dim=cfg["qk_rope_head_dim"], v_head_dim=cfg["v_head_dim"], rms_norm_eps=1e-6,
                  rope_theta=cfg["rope_theta"], max_position_embeddings=4096, attention_bias=False,
                  rope_scaling=dict(cfg["rope_scaling"], rope_type="yarn"), n_routed_experts=8,
                  num_experts_per_tok=3, moe_intermediate_size=10, n_shared_experts=1, norm_topk_prob=True,
                  routed_scaling_factor=2.5, n_group=2, topk_group=1, vocab_size=V, num_hidden_layers=1)
    hf = DeepseekV3Config(hidden_size=2 * H, **common)
    hf._attn_implementation = "eager"
    attn = ds.DeepseekV3Attention(hf, layer_idx=0).eval()
    attn.o_proj = torch.nn.Linear(HEADS * cfg["v_head_dim"], H, bias=False)
    p = "midlayer.self_attn."
    with torch.no_grad():
        for name, mod in attn.named_modules():
            key = p + name + ".weight"
            if key in t:
                mod.weight.copy_(t[key])
    rotary = ds.DeepseekV3RotaryEmbedding(hf)
    T = 9
    x = torch.randn(1, T, 2 * H, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(T)[None]
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        want, _ = attn(x, position_embeddings=rotary(x, pos), attention_mask=mask)
        q, k, v = model.attention.entries(x[0], pos[0])
        s = (q @ k.transpose(1, 2)) * model.attention.scale + mask[0]
        got = model.attention.output(torch.softmax(s, -1) @ v)
    torch.testing.assert_close(got, want[0], rtol=1e-4, atol=1e-4)

    moe_cfg = DeepseekV3Config(hidden_size=H, **common)
    moe = ds.DeepseekV3MoE(moe_cfg).eval()
    with torch.no_grad():
        moe.gate.weight.copy_(t["midlayer.mlp.gate.weight"])
        moe.gate.e_score_correction_bias.copy_(t["midlayer.mlp.gate.e_score_correction_bias"])
        experts = moe.experts
        if hasattr(experts, "gate_up_proj"):        # transformers 5: fused expert parameters
            for e in range(8):
                gate_up = torch.cat([t[f"midlayer.mlp.experts.{e}.gate_proj.weight"],
                                     t[f"midlayer.mlp.experts.{e}.up_proj.weight"]])
                experts.gate_up_proj[e].copy_(gate_up if experts.gate_up_proj.shape[1] == gate_up.shape[0]
                                              else gate_up.T)
                down = t[f"midlayer.mlp.experts.{e}.down_proj.weight"]
                experts.down_proj[e].copy_(down if experts.down_proj.shape[1] == down.shape[0] else down.T)
        else:
            for e in range(8):
                for n in ("gate", "up", "down"):
                    getattr(experts[e], f"{n}_proj").weight.copy_(t[f"midlayer.mlp.experts.{e}.{n}_proj.weight"])
        for n in ("gate", "up", "down"):
            getattr(moe.shared_experts, f"{n}_proj").weight.copy_(t[f"midlayer.mlp.shared_experts.{n}_proj.weight"])
        z = torch.randn(1, 7, H, generator=torch.Generator().manual_seed(2))
        torch.testing.assert_close(model.mlp(z[0]), moe(z)[0], rtol=1e-4, atol=1e-4)


def _save(folder, cfg, t, *, layout="midlayer"):
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in t.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("layout", ["midlayer", "layers.0"])
def test_loaded_and_read_by_range_equal_in_memory(tmp_path, monkeypatch, layout):
    """From a checkpoint, with experts, head and embedding read by range when used (budgets set to zero), the
    drafts are the in-memory model's."""
    cfg, t = make_mla_drafter(moe="fused", yarn=True, d2t=False, layout=layout)
    folder = _save(tmp_path / "d", cfg, t)
    aux, ids = _inputs()
    mem = DraftModel.from_tensors(cfg, t)
    want = mem.draft(mem.project(aux), ids, 3).tokens
    for budget in (1 << 30, 0):
        monkeypatch.setattr(loading, "KEEP_EXPERTS", budget)
        monkeypatch.setattr(loading, "KEEP_MATRIX", budget)
        with DraftModel.load(folder) as model:
            assert model.layout == ("specforge" if layout == "midlayer" else "speculators")
            assert model.draft(model.project(aux), ids, 3).tokens.tolist() == want.tolist()
            tree = grow_trees(model, first_pass(model, model.project(aux), ids, start=5), topk=3, steps=2)
            mtree = grow_trees(mem, first_pass(mem, mem.project(aux), ids, start=5), topk=3, steps=2)
            assert tree.tokens.tolist() == mtree.tokens.tolist()
            torch.testing.assert_close(tree.scores, mtree.scores, rtol=1e-4, atol=1e-4)
            assert model.head.weight is (None if budget == 0 else model.head.weight)


def test_the_kimi_export_conventions():
    """TorchSpec's --vllm export of a kimi_k2 drafter (layers.0.*) counts layer inputs; midlayer.* outputs."""
    cfg, t = make_mla_drafter(layout="layers.0")
    cfg["model_type"] = "kimi_k2"
    assert loading.trained_convention(DraftModel.from_tensors(cfg, t).config, "speculators") == "inputs"
    assert loading.trained_convention(DraftModel.from_tensors(cfg, t).config, "specforge") == "outputs"
    cfg["model_type"] = "deepseek_v3"
    assert loading.trained_convention(DraftModel.from_tensors(cfg, t).config, "speculators") == "outputs"
