"""The draft forward against a slow, obviously-correct reference that recomputes the whole context for
every chain step (plain causal attention over prefix + chain, transformers' own RoPE)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from eaglekit.analysis.draft import DraftModel, hidden_state_indices
from eaglekit.analysis.acceptance.measure import match_lengths
from eaglekit.core.errors import ConfigError, InputError

H, HT, HEADS, KV, HD, I, V, N = 32, 24, 4, 2, 8, 48, 50, 30


def make_drafter(*, layout="specforge", n_aux=3, fc_norm=False, input_norm=False, final_norm=True,
                 norm_before_residual=False, seed=0):
    g = torch.Generator().manual_seed(seed)

    def w(*shape, s=0.3):
        return torch.randn(*shape, generator=g) * s

    p = "midlayer." if layout == "specforge" else "layers.0."
    t = {"fc.weight": w(H, n_aux * HT, s=0.2),
         p + "self_attn.q_proj.weight": w(HEADS * HD, 2 * H), p + "self_attn.k_proj.weight": w(KV * HD, 2 * H),
         p + "self_attn.v_proj.weight": w(KV * HD, 2 * H), p + "self_attn.o_proj.weight": w(H, HEADS * HD),
         p + "mlp.gate_proj.weight": w(I, H), p + "mlp.up_proj.weight": w(I, H), p + "mlp.down_proj.weight": w(H, I),
         p + "hidden_norm.weight": 1 + w(H, s=0.1), p + "input_layernorm.weight": 1 + w(H, s=0.1),
         p + "post_attention_layernorm.weight": 1 + w(H, s=0.1),
         "lm_head.weight": w(N, H, s=1.0), "embed_tokens.weight": w(V, H, s=1.0)}
    if final_norm:
        t["norm.weight"] = 1 + w(H, s=0.1)
    if fc_norm:
        t.update({f"fc_norm.{i}.weight": 1 + w(HT, s=0.1) for i in range(n_aux)})
    if input_norm:
        t["input_norm.weight"] = 1 + w(n_aux * HT, s=0.1)
    keep = np.sort(np.random.default_rng(seed).permutation(V)[:N])
    t["d2t"] = torch.from_numpy(keep - np.arange(N)).to(torch.int64)
    t2d = np.zeros(V, bool)
    t2d[keep] = True
    t["t2d"] = torch.from_numpy(t2d)
    layer = {"hidden_size": H, "intermediate_size": I, "num_attention_heads": HEADS, "num_key_value_heads": KV,
             "head_dim": HD, "vocab_size": V, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "num_hidden_layers": 1,
             "max_position_embeddings": 512, "hidden_act": "silu"}
    ids = [1, 2, 3, 4][:n_aux]
    if layout == "specforge":
        cfg = {"architectures": ["LlamaForCausalLMEagle3"], **layer, "draft_vocab_size": N, "target_hidden_size": HT,
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}
    else:
        cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "draft_vocab_size": N,
               "target_hidden_size": HT, "eagle_aux_hidden_state_layer_ids": ids,
               "norm_before_residual": norm_before_residual, "norm_before_fc": input_norm, "fc_norm": fc_norm,
               "transformer_layer_config": {"model_type": "llama", **layer}}
    return cfg, t


# -- the reference: everything recomputed, written independently -------------------------------------
def _rms(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def _layer_ref(t, p, hs, es, positions, *, norm_before_residual=False):
    """One decoder layer over a list of entries with plain causal attention."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    x = torch.cat([_rms(es, t[p + "input_layernorm.weight"]), _rms(hs, t[p + "hidden_norm.weight"])], -1)
    n = x.shape[0]
    q = (x @ t[p + "self_attn.q_proj.weight"].T).view(n, HEADS, HD).transpose(0, 1)[None]
    k = (x @ t[p + "self_attn.k_proj.weight"].T).view(n, KV, HD).transpose(0, 1)[None]
    v = (x @ t[p + "self_attn.v_proj.weight"].T).view(n, KV, HD).transpose(0, 1)[None]
    rope = LlamaRotaryEmbedding(LlamaConfig(hidden_size=H, num_attention_heads=HEADS, head_dim=HD, rope_theta=10000.0))
    cos, sin = rope(x[None], torch.tensor(positions)[None])
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    k, v = k.repeat_interleave(HEADS // KV, 1), v.repeat_interleave(HEADS // KV, 1)
    att = torch.softmax((q @ k.transpose(-1, -2)) / HD ** 0.5 + torch.full((n, n), float("-inf")).triu(1), -1) @ v
    res = _rms(hs, t[p + "hidden_norm.weight"]) if norm_before_residual else hs
    y = res + att[0].transpose(0, 1).reshape(n, -1) @ t[p + "self_attn.o_proj.weight"].T
    z = _rms(y, t[p + "post_attention_layernorm.weight"])
    g = y + (torch.nn.functional.silu(z @ t[p + "mlp.gate_proj.weight"].T) * (z @ t[p + "mlp.up_proj.weight"].T)) \
        @ t[p + "mlp.down_proj.weight"].T
    out = _rms(g, t["norm.weight"]) if "norm.weight" in t else g
    return g, out @ t["lm_head.weight"].T


def reference_draft(t, aux, next_ids, steps, *, layout="specforge", norm_before_residual=False):
    """For every base t and step j: rebuild prefix 0..t and the chain, run the layer on all of it."""
    p = "midlayer." if layout == "specforge" else "layers.0."
    n_aux, T, _ = aux.shape
    if "fc_norm.0.weight" in t:
        aux = torch.stack([_rms(aux[i], t[f"fc_norm.{i}.weight"]) for i in range(n_aux)])
    f = torch.cat(list(aux), -1)
    if "input_norm.weight" in t:
        f = _rms(f, t["input_norm.weight"])
    h = f @ t["fc.weight"].T
    targets = torch.arange(N) + t["d2t"]
    out = torch.empty(steps, T, dtype=torch.int64)
    logits_out = torch.empty(steps, T, N)
    for base in range(T):
        hs, toks, pos = list(h[:base + 1]), list(next_ids[:base + 1]), list(range(base + 1))
        for j in range(1, steps + 1):
            g, logits = _layer_ref(t, p, torch.stack(hs), t["embed_tokens.weight"][torch.stack(toks)], pos,
                                   norm_before_residual=norm_before_residual)
            d = targets[logits[-1].argmax()]
            out[j - 1, base], logits_out[j - 1, base] = d, logits[-1]
            hs.append(g[-1])
            toks.append(d)
            pos.append(base + j)
    return out, logits_out


CASES = [
    dict(layout="specforge"),
    dict(layout="speculators"),
    dict(layout="specforge", n_aux=4, fc_norm=True),
    dict(layout="speculators", n_aux=4, input_norm=True, norm_before_residual=True),
    dict(layout="speculators", fc_norm=True, input_norm=True, final_norm=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_fast_pass_equals_reference(case):
    cfg, t = make_drafter(**case)
    model = DraftModel.from_tensors(cfg, t)
    T, K = 14, 4
    g = torch.Generator().manual_seed(1)
    aux = torch.randn(model.n_aux, T, HT, generator=g)
    ids = torch.randint(0, V, (T,), generator=g)
    fast = model.draft(model.project(aux), ids, K, return_logits=True)
    ref, ref_logits = reference_draft(t, aux, ids, K, layout=case["layout"],
                                      norm_before_residual=case.get("norm_before_residual", False))
    torch.testing.assert_close(torch.stack(fast.logits), ref_logits, rtol=1e-4, atol=1e-4)
    assert torch.equal(fast.tokens, ref)
    assert torch.equal(model.draft_loop(model.project(aux), ids, K), ref)
    # drafting from the continuation only (a prompt's positions stay prefix) gives the same chains
    assert torch.equal(model.draft(model.project(aux), ids, K, start=5).tokens, ref[:, 5:])
    # accept lengths agree: matches against a target sequence that follows the reference's chains in part
    expected = ref.clone()
    expected[1, ::3] = (expected[1, ::3] + 1) % V
    expected[2, ::2] = (expected[2, ::2] + 1) % V
    m = match_lengths(fast.tokens, expected)
    assert torch.equal(m, match_lengths(ref, expected)) and set(m.tolist()) >= {1, 2}


def test_load_from_checkpoint_both_layouts(tmp_path):
    for layout in ("specforge", "speculators"):
        cfg, t = make_drafter(layout=layout, seed=3)
        folder = tmp_path / layout
        folder.mkdir()
        embed = t.pop("embed_tokens.weight")
        save_file({k: v.contiguous() for k, v in t.items()}, str(folder / "model.safetensors"))
        (folder / "config.json").write_text(json.dumps(cfg))
        with pytest.raises(InputError, match="embed_tokens"):
            DraftModel.load(folder)
        model = DraftModel.load(folder, embed=embed)
        assert model.layout == layout and model.n_aux == 3
        ref = DraftModel.from_tensors(cfg, {**t, "embed_tokens.weight": embed})
        aux = torch.randn(3, 9, HT)
        ids = torch.randint(0, V, (9,))
        assert torch.equal(model.draft(model.project(aux), ids, 3).tokens, ref.draft(ref.project(aux), ids, 3).tokens)


def test_bfloat16_runs_and_mostly_agrees():
    cfg, t = make_drafter()
    a, b = DraftModel.from_tensors(cfg, t), DraftModel.from_tensors(cfg, t, dtype="bfloat16")
    aux, ids = torch.randn(3, 20, HT), torch.randint(0, V, (20,))
    ta, tb = a.draft(a.project(aux), ids, 2).tokens, b.draft(b.project(aux), ids, 2).tokens
    assert (ta[0] == tb[0]).float().mean() > 0.8


def test_refusals(tmp_path):
    cfg, t = make_drafter()
    no_head = {k: v for k, v in t.items() if k != "lm_head.weight"}
    with pytest.raises(ConfigError, match="no lm_head.weight"):
        DraftModel.from_tensors(cfg, no_head)
    mla = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "hidden_size": H, "intermediate_size": I,
           "num_attention_heads": HEADS, "vocab_size": V, "draft_vocab_size": N, "kv_lora_rank": 16,
           "qk_nope_head_dim": 8, "qk_rope_head_dim": 8}
    with pytest.raises(ConfigError, match=r"lacks midlayer\.self_attn\.kv_a_proj_with_mqa\.weight.*mla attention"):
        DraftModel.from_tensors(mla, t)  # an MLA config over Llama tensors: the MLA tensors it lacks are named
    model = DraftModel.from_tensors(cfg, t)
    with pytest.raises(InputError, match="hidden-size mismatch"):
        model.project(torch.randn(3, 5, HT + 1))


def test_hidden_state_indices_conventions():
    assert hidden_state_indices([2, 30, 58], "outputs") == (3, 31, 59)
    assert hidden_state_indices([2, 30, 58], "inputs") == (2, 30, 58)


@pytest.mark.parametrize("shift, says", [(V, "outside"), (-V, "negative")])
def test_a_d2t_pointing_outside_the_vocabulary_without_t2d_is_refused(tmp_path, shift, says):
    """No t2d to check it against: the d2t must still point at target ids an engine can read (else the draft
    forward would index past the embedding: a raw IndexError, or a silent wrap for negative ids)."""
    from eaglekit.core.errors import VocabMapError

    cfg, t = make_drafter(seed=4)
    embed = t.pop("embed_tokens.weight")
    t.pop("t2d")
    t["d2t"] = t["d2t"].clone()
    t["d2t"][-1] += shift
    save_file({k: v.contiguous() for k, v in t.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(VocabMapError, match="an engine could not map its draft ids") as e:
        DraftModel.load(tmp_path, embed=embed)
    assert says in str(e.value).lower() or "range" in str(e.value).lower()
