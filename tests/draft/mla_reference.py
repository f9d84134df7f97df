"""MLA and MoE EAGLE-3 drafters built in tests, and a slow reference written from the definitions (not from
eaglekit's code): entry by entry with a real KV cache that holds, as serving engines' MLA does, the normed
latent and the rotated shared key per position (keys and values re-expanded per head at every attention);
RoPE turned pair by pair (vLLM's ``is_neox_style=False``), YaRN's frequencies from DeepSeek's own formulas, the
router token by token in Python."""

from __future__ import annotations

import math

import numpy as np
import torch

H, HT, HEADS, V, N_DRAFT = 32, 24, 4, 60, 40


def make_mla_drafter(*, q_lora=16, rank=12, nope=8, rope=4, vdim=6, yarn=False, d2t=True, moe=None,
                     layout="midlayer", seed=0, nope_flag=False):
    """(config, tensors) of a one-layer MLA drafter. ``moe``: None (dense), "experts" (per-expert tensors)
    or "fused" (TorchSpec's gate_up/down stacks); ``d2t`` False: a full-vocabulary head."""
    g = torch.Generator().manual_seed(seed)

    def w(*shape, s=0.3):
        return torch.randn(*shape, generator=g) * s

    p = "midlayer." if layout == "midlayer" else "layers.0."
    a = p + "self_attn."
    qk = nope + rope
    n = N_DRAFT if d2t else V
    t = {"fc.weight": w(H, 3 * HT, s=0.2),
         a + "kv_a_proj_with_mqa.weight": w(rank + rope, 2 * H), a + "kv_a_layernorm.weight": 1 + w(rank, s=0.1),
         a + "kv_b_proj.weight": w(HEADS * (nope + vdim), rank), a + "o_proj.weight": w(H, HEADS * vdim),
         p + "hidden_norm.weight": 1 + w(H, s=0.1), p + "input_layernorm.weight": 1 + w(H, s=0.1),
         p + "post_attention_layernorm.weight": 1 + w(H, s=0.1), "norm.weight": 1 + w(H, s=0.1),
         "lm_head.weight": w(n, H, s=1.0), "embed_tokens.weight": w(V, H, s=1.0)}
    if q_lora:
        t.update({a + "q_a_proj.weight": w(q_lora, 2 * H), a + "q_a_layernorm.weight": 1 + w(q_lora, s=0.1),
                  a + "q_b_proj.weight": w(HEADS * qk, q_lora)})
    else:
        t[a + "q_proj.weight"] = w(HEADS * qk, 2 * H)
    cfg = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": H,
           "intermediate_size": 20, "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "vocab_size": V,
           "draft_vocab_size": n, "num_hidden_layers": 1, "target_hidden_size": HT, "rms_norm_eps": 1e-6,
           "q_lora_rank": q_lora or None, "kv_lora_rank": rank, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
           "v_head_dim": vdim, "rope_theta": 10000.0, "max_position_embeddings": 4096,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}
    if nope_flag:
        cfg["mla_use_nope"] = True
    if yarn:
        cfg["rope_scaling"] = {"type": "yarn", "factor": 16.0, "original_max_position_embeddings": 64,
                               "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
    if moe is None:
        t.update({p + "mlp.gate_proj.weight": w(20, H), p + "mlp.up_proj.weight": w(20, H),
                  p + "mlp.down_proj.weight": w(H, 20)})
    else:
        E, inter = 8, 10
        cfg.update({"use_moe": True, "n_routed_experts": E, "num_experts_per_tok": 3, "moe_intermediate_size": inter,
                    "n_shared_experts": 1, "scoring_func": "sigmoid", "norm_topk_prob": True,
                    "routed_scaling_factor": 2.5, "n_group": 2, "topk_group": 1, "topk_method": "noaux_tc"})
        t[p + "mlp.gate.weight"] = w(E, H, s=0.5)
        t[p + "mlp.gate.e_score_correction_bias"] = w(E, s=0.05)
        for name in ("gate", "up", "down"):
            t[f"{p}mlp.shared_experts.{name}_proj.weight"] = w(H, inter) if name == "down" else w(inter, H)
        experts = [(w(inter, H), w(inter, H), w(H, inter)) for _ in range(E)]
        if moe == "fused":
            t[p + "mlp.experts.gate_up_proj"] = torch.stack([torch.cat([ge, up]).T for ge, up, _ in experts])
            t[p + "mlp.experts.down_proj"] = torch.stack([d.T for _, _, d in experts])
        else:
            for e, (ge, up, d) in enumerate(experts):
                t[f"{p}mlp.experts.{e}.gate_proj.weight"] = ge
                t[f"{p}mlp.experts.{e}.up_proj.weight"] = up
                t[f"{p}mlp.experts.{e}.down_proj.weight"] = d
    if d2t:
        keep = np.sort(np.random.default_rng(seed).permutation(V)[:n])
        t["d2t"] = torch.from_numpy(keep - np.arange(n)).to(torch.int64)
        t2d = np.zeros(V, bool)
        t2d[keep] = True
        t["t2d"] = torch.from_numpy(t2d)
    return cfg, t


# -- the reference ---------------------------------------------------------------------------------------
def _rms(x, w, eps=1e-6):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def _inv_freq(cfg):
    """DeepSeek's YaRN (``DeepseekV3YarnRotaryEmbedding`` of the original model code), else plain RoPE."""
    dim, base = cfg["qk_rope_head_dim"], cfg["rope_theta"]
    extra = 1.0 / base ** (torch.arange(0, dim, 2).double() / dim)
    rs = cfg.get("rope_scaling")
    if not rs:
        return extra, 1.0
    f, orig = rs["factor"], rs["original_max_position_embeddings"]

    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(corr(rs["beta_fast"])), 0), min(math.ceil(corr(rs["beta_slow"])), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2).double() - low) / (high - low)).clamp(0, 1)
    mask = 1 - ramp
    inv = extra / f * (1 - mask) + extra * mask
    return inv, _mscale(f, rs["mscale"]) / _mscale(f, rs["mscale_all_dim"])


def _rope_pairs(x, pos, inv, m):
    """Turn pairs (2i, 2i+1) by pos * inv[i] (vLLM's gptj-style rotation), magnitude m."""
    ang = pos * inv.float()
    c, s = torch.cos(ang) * m, torch.sin(ang) * m
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], -1).flatten(-2)


class Reference:
    """The drafter entry by entry: a latent KV cache, per-head attention, the router token by token."""

    def __init__(self, cfg, t):
        self.cfg, self.t = cfg, t
        self.p = "midlayer." if "midlayer.hidden_norm.weight" in t else "layers.0."
        self.nope, self.rope, self.v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.inv, self.m = _inv_freq(cfg)
        if cfg.get("mla_use_nope"):
            self.rope_on = False
        else:
            self.rope_on = True
        qk = self.nope + self.rope
        rs = cfg.get("rope_scaling")
        self.scale = qk ** -0.5 * ((_mscale(rs["factor"], rs["mscale_all_dim"]) ** 2) if rs and self.rope_on else 1.0)
        n = t["lm_head.weight"].shape[0]
        self.targets = torch.arange(n) + (t["d2t"] if "d2t" in t else 0)

    def entry(self, h, tok, pos):
        """(query per head (nh, qk), cache item (normed latent, rotated shared key)) of one entry."""
        t, a = self.t, self.p + "self_attn."
        x = torch.cat([_rms(t["embed_tokens.weight"][tok], t[self.p + "input_layernorm.weight"]),
                       _rms(h, t[self.p + "hidden_norm.weight"])])
        if a + "q_a_proj.weight" in t:
            q = t[a + "q_b_proj.weight"] @ _rms(t[a + "q_a_proj.weight"] @ x, t[a + "q_a_layernorm.weight"])
        else:
            q = t[a + "q_proj.weight"] @ x
        q = q.view(HEADS, self.nope + self.rope)
        ckv = t[a + "kv_a_proj_with_mqa.weight"] @ x
        rank = t[a + "kv_a_layernorm.weight"].shape[0]
        latent, k_pe = _rms(ckv[:rank], t[a + "kv_a_layernorm.weight"]), ckv[rank:]
        if self.rope and self.rope_on:
            q = torch.cat([q[:, :self.nope], _rope_pairs(q[:, self.nope:], pos, self.inv, self.m)], -1)
            k_pe = _rope_pairs(k_pe, pos, self.inv, self.m)
        return q, (latent, k_pe)

    def attend(self, q, cache):
        kvb = self.t[self.p + "self_attn.kv_b_proj.weight"].view(HEADS, self.nope + self.v, -1)
        out = []
        for hd in range(HEADS):
            scores, vals = [], []
            for latent, k_pe in cache:
                kv = kvb[hd] @ latent
                key = torch.cat([kv[:self.nope], k_pe])
                scores.append((q[hd] * key).sum() * self.scale)
                vals.append(kv[self.nope:])
            p = torch.softmax(torch.stack(scores), 0)
            out.append((p[:, None] * torch.stack(vals)).sum(0))
        return self.t[self.p + "self_attn.o_proj.weight"] @ torch.cat(out)

    def mlp(self, z):
        t, p, c = self.t, self.p + "mlp.", self.cfg
        silu = torch.nn.functional.silu
        if p + "gate.weight" not in t:
            return t[p + "down_proj.weight"] @ (silu(t[p + "gate_proj.weight"] @ z) * (t[p + "up_proj.weight"] @ z))
        E, k = c["n_routed_experts"], c["num_experts_per_tok"]
        scores = torch.sigmoid(t[p + "gate.weight"] @ z)
        choice = scores + t[p + "gate.e_score_correction_bias"]
        size = E // c["n_group"]
        group = [sorted(choice[g * size:(g + 1) * size].tolist())[-2:] for g in range(c["n_group"])]
        best = sorted(range(c["n_group"]), key=lambda g: -sum(group[g]))[:c["topk_group"]]
        allowed = [e for e in range(E) if e // size in best]
        chosen = sorted(allowed, key=lambda e: -float(choice[e]))[:k]
        wts = torch.stack([scores[e] for e in chosen])
        wts = wts / wts.sum() * c["routed_scaling_factor"]
        out = torch.zeros_like(z)
        for wt, e in zip(wts, chosen):
            if p + "experts.gate_up_proj" in t:
                gu, d = t[p + "experts.gate_up_proj"][e].T, t[p + "experts.down_proj"][e].T
                ge, up = gu.chunk(2)
            else:
                ge, up, d = (t[f"{p}experts.{e}.{n}_proj.weight"] for n in ("gate", "up", "down"))
            out = out + wt * (d @ (silu(ge @ z) * (up @ z)))
        s = p + "shared_experts."
        return out + t[s + "down_proj.weight"] @ (silu(t[s + "gate_proj.weight"] @ z) * (t[s + "up_proj.weight"] @ z))

    def finish(self, h, attn):
        y = h + attn
        g = y + self.mlp(_rms(y, self.t[self.p + "post_attention_layernorm.weight"]))
        return g, self.t["lm_head.weight"] @ _rms(g, self.t["norm.weight"])

    def project(self, aux):
        return torch.cat(list(aux), -1) @ self.t["fc.weight"].T

    def draft(self, aux, next_ids, steps, bases):
        """Chain drafts (target ids) and logits (steps, len(bases)) from each base, a cache per chain."""
        h = self.project(aux)
        cache_all = [self.entry(h[i], next_ids[i], i) for i in range(int(max(bases)) + 1)]
        tokens = torch.empty(steps, len(bases), dtype=torch.int64)
        logits = torch.empty(steps, len(bases), self.t["lm_head.weight"].shape[0])
        for col, b in enumerate(bases):
            cache = [c for _, c in cache_all[:b + 1]]
            q, hh = cache_all[b][0], h[b]
            for j in range(1, steps + 1):
                if j > 1:
                    q, item = self.entry(hh, tok, b + j - 1)
                    cache.append(item)
                hh, lg = self.finish(hh, self.attend(q, cache))
                tok = self.targets[lg.argmax()]
                tokens[j - 1, col], logits[j - 1, col] = tok, lg
        return tokens, logits
