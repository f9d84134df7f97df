"""The tensors an MLA drafter's layer must hold, and their shapes, from its config (pure: names in, shapes out).

Names and shapes as the exporters write them (vLLM ``deepseek_eagle3.py``, SGLang ``deepseek_eagle3.py`` /
``kimi_k25_eagle3.py``, TorchSpec ``deepseek_eagle.py`` and ``moe.py``, Model-Optimizer's Kimi-K2 export), in
``nn.Linear`` layout [out, in], with the EAGLE-3 input of ``2 x hidden_size`` (embedding and hidden state side by
side) into the first projections only:

* ``q_a_proj`` [q_lora_rank, 2H] -> ``q_a_layernorm`` [q_lora_rank] -> ``q_b_proj`` [heads x (nope + rope),
  q_lora_rank]; a plain ``q_proj`` [heads x (nope + rope), 2H] when ``q_lora_rank`` is null;
* ``kv_a_proj_with_mqa`` [kv_lora_rank + rope, 2H], ``kv_a_layernorm`` [kv_lora_rank], ``kv_b_proj``
  [heads x (nope + v), kv_lora_rank], ``o_proj`` [H, heads x v];
* a dense MLP ``gate_proj`` / ``up_proj`` [I, H], ``down_proj`` [H, I]; or TorchSpec's MoE: router
  ``mlp.gate.weight`` [E, H] and, for ``noaux_tc`` selection, ``mlp.gate.e_score_correction_bias`` [E] (SpecForge's
  MoE router may also carry ``mlp.gate.bias`` [E], its folded input centering), routed experts fused
  (``mlp.experts.gate_up_proj`` [E, H, 2 x moe_I], ``mlp.experts.down_proj`` [E, moe_I, H], stored input-major)
  or per expert (``mlp.experts.{i}.{gate,up}_proj.weight`` [moe_I, H], ``down_proj`` [H, moe_I]), and shared
  experts ``mlp.shared_experts.{gate,up}_proj.weight`` [moe_I x n_shared, H], ``down_proj`` [H, moe_I x n_shared].
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from eaglekit.core.configs.config import DrafterConfig

A, M = "midlayer.self_attn.", "midlayer.mlp."
_PER_EXPERT = re.compile(r"^midlayer\.mlp\.experts\.\d+\.")


def mla_layer_shapes(cfg: DrafterConfig, names: Iterable[str] = ()) -> dict[str, tuple[tuple[int, ...], str]]:
    """Normalised tensor name -> (expected shape, the config keys that set it) for an MLA drafter's attention
    and MLP (empty for a Llama drafter). ``names``: the checkpoint's normalised tensor names (``midlayer.``),
    which decide whether a MoE drafter's experts are expected fused or per expert (fused when there are none)."""
    if cfg.attention != "mla":
        return {}
    m, h, heads = cfg.mla, cfg.hidden_size, cfg.num_attention_heads
    nope, rope, v, kv = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"], m["kv_lora_rank"]
    q = heads * (nope + rope)
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    if m["q_lora_rank"] is None:
        out[A + "q_proj.weight"] = ((q, 2 * h), "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim), "
                                                "2 x hidden_size; q_lora_rank null")
    else:
        r = m["q_lora_rank"]
        out[A + "q_a_proj.weight"] = ((r, 2 * h), "q_lora_rank, 2 x hidden_size")
        out[A + "q_a_layernorm.weight"] = ((r,), "q_lora_rank")
        out[A + "q_b_proj.weight"] = ((q, r), "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim), q_lora_rank")
    out[A + "kv_a_proj_with_mqa.weight"] = ((kv + rope, 2 * h), "kv_lora_rank + qk_rope_head_dim, 2 x hidden_size")
    out[A + "kv_a_layernorm.weight"] = ((kv,), "kv_lora_rank")
    out[A + "kv_b_proj.weight"] = ((heads * (nope + v), kv), "num_attention_heads x (qk_nope_head_dim + v_head_dim), "
                                                             "kv_lora_rank")
    out[A + "o_proj.weight"] = ((h, heads * v), "hidden_size, num_attention_heads x v_head_dim")
    if not cfg.moe:
        i = cfg.intermediate_size
        out[M + "gate_proj.weight"] = ((i, h), "intermediate_size, hidden_size")
        out[M + "up_proj.weight"] = ((i, h), "intermediate_size, hidden_size")
        out[M + "down_proj.weight"] = ((h, i), "hidden_size, intermediate_size")
        return out
    e, mi, shared = cfg.moe["n_routed_experts"], cfg.moe["moe_intermediate_size"], cfg.moe["n_shared_experts"]
    out[M + "gate.weight"] = ((e, h), "n_routed_experts, hidden_size")
    if cfg.moe["topk_method"] == "noaux_tc":  # the bias only noaux_tc selection adds to the scores
        out[M + "gate.e_score_correction_bias"] = ((e,), "n_routed_experts; topk_method noaux_tc")
    if any(_PER_EXPERT.match(n) for n in names):
        for k in range(e):
            out[M + f"experts.{k}.gate_proj.weight"] = ((mi, h), "moe_intermediate_size, hidden_size")
            out[M + f"experts.{k}.up_proj.weight"] = ((mi, h), "moe_intermediate_size, hidden_size")
            out[M + f"experts.{k}.down_proj.weight"] = ((h, mi), "hidden_size, moe_intermediate_size")
    else:
        out[M + "experts.gate_up_proj"] = ((e, h, 2 * mi), "n_routed_experts, hidden_size, 2 x moe_intermediate_size")
        out[M + "experts.down_proj"] = ((e, mi, h), "n_routed_experts, moe_intermediate_size, hidden_size")
    if shared:
        w = mi * shared
        out[M + "shared_experts.gate_proj.weight"] = ((w, h), "moe_intermediate_size x n_shared_experts, hidden_size")
        out[M + "shared_experts.up_proj.weight"] = ((w, h), "moe_intermediate_size x n_shared_experts, hidden_size")
        out[M + "shared_experts.down_proj.weight"] = ((h, w), "hidden_size, moe_intermediate_size x n_shared_experts")
    return out


def mla_layer_problems(cfg: DrafterConfig, shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Each way the checkpoint's layer (normalised name -> shape) disagrees with ``cfg``, one sentence naming
    the tensor and the config keys: a wrong shape, a missing tensor, or one the config rules out (q_a_proj with
    a null q_lora_rank, q_proj beside q_a_proj, experts without use_moe, a dense MLP with use_moe)."""
    want = mla_layer_shapes(cfg, shapes)
    out = []
    for name, (shape, keys) in want.items():
        got = shapes.get(name)
        if got is None:
            out.append(f"{name} is missing: the config ({keys}) says the layer has it")
        elif tuple(got) != shape:
            out.append(f"{name} is {list(got)}, but the config gives {list(shape)} ({keys})")
    optional = {M + "gate.bias": (cfg.moe.get("n_routed_experts"),)} if cfg.moe else {}  # SpecForge's folded centering
    extra = sorted(n for n in shapes if n.startswith((A, M)) and n not in want
                   and not (n in optional and tuple(shapes[n]) == optional[n]))
    for name in extra:
        part = name.split(".")[2]
        if name in optional:
            out.append(f"{name} is {list(shapes[name])}, but the config gives {list(optional[name])} (n_routed_experts)")
            continue
        if part.startswith("q_a_") or part == "q_b_proj":
            why = "q_lora_rank is null, which means a plain q_proj"
        elif part == "q_proj":
            why = f"q_lora_rank is {cfg.mla['q_lora_rank']}, which means q_a_proj -> q_a_layernorm -> q_b_proj"
        elif name.startswith(M) and not cfg.moe:
            why = "the config builds a dense MLP (no use_moe: true)"
        elif name.startswith(M):
            why = "use_moe is true: the MLP is a router, routed experts and shared experts"
        else:
            why = "no MLA layer has it"
        out.append(f"{name} is in the checkpoint but {why}")
    return out

