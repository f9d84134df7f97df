"""Which attention and which MLP a drafter has: chosen here, once, from its config and its tensors.

A new family is one file with a class answering ``tensors(config, prefix)`` (what it reads), a constructor
``(config, weights, prefix)`` that checks shapes against the config, and the forward itself (attention:
``entries(x, pos) -> q, k, v`` per head, ``output(attn)``, ``scale``; MLP: ``__call__(x)``), plus one line
below.
"""

from __future__ import annotations

from eaglekit.analysis.draft.dense_mlp import DenseMLP
from eaglekit.analysis.draft.llama_attention import LlamaAttention
from eaglekit.analysis.draft.mla_attention import MLAAttention
from eaglekit.analysis.draft.moe_mlp import MoEMLP, moe_settings
from eaglekit.core.configs.config import DrafterConfig
from eaglekit.core.errors import ConfigError

ATTENTIONS = {"llama": LlamaAttention, "mla": MLAAttention}
MLPS = {"dense": DenseMLP, "moe": MoEMLP}


def attention_family(config: DrafterConfig, names: set[str], prefix: str) -> type:
    """MLA for an MLA config (or a checkpoint with MLA projections), else Llama attention."""
    mla = config.format == "mla" or f"{prefix}self_attn.kv_a_proj_with_mqa.weight" in names
    if mla and f"{prefix}self_attn.g_proj.weight" in names:
        raise ConfigError(f"{prefix}self_attn.g_proj.weight: an MLA attention with an output gate "
                          "(Kimi-K3's mla_use_output_gate) is not one eaglekit's draft forward implements yet.")
    return ATTENTIONS["mla" if mla else "llama"]


def mlp_family(config: DrafterConfig, names: set[str], prefix: str) -> type:
    """A MoE MLP when the checkpoint has a router (or the config says MoE and no dense MLP is there)."""
    router = f"{prefix}mlp.gate.weight" in names
    dense = f"{prefix}mlp.gate_proj.weight" in names
    if router:
        return MLPS["moe"]
    if moe_settings(config) is not None and not dense:
        raise ConfigError(f"the config names a MoE MLP (n_routed_experts) but the checkpoint lacks its router "
                          f"{prefix}mlp.gate.weight.")
    return MLPS["dense"]
