"""The EAGLE-3 drafter forward: one frame, one file per attention family and per MLP family.

==================  ===================================================================================
``frame.py``        :class:`DraftModel`: fc, the decoder step, chains, the all-positions attention, the
                    serving loop with its KV cache; shared by every family
``families.py``     which attention and which MLP a checkpoint has (chosen here, once)
``llama_attention`` grouped-query attention with RoPE (SpecForge, speculators, EAGLE drafters)
``mla_attention``   DeepSeek Multi-head Latent Attention (Kimi's drafters), YaRN, NoPE
``dense_mlp``       the SiLU-gated MLP
``moe_mlp``         DeepSeek's routed and shared experts, read by range when too large to keep
``head.py``         final norm, lm_head (streamed for a full 163,840-row vocabulary), d2t
``rope.py``         rotary tables from transformers' initialisers, the halves and pairs layouts
``weights.py``      tensors kept in memory or read from the checkpoint by range when used
``load.py``         reading a checkpoint: layout, the vocabulary map, the embedding
``checks.py``       declared shapes and finite values of a weight
==================  ===================================================================================

This room sits below the analysis rooms that draft (acceptance): it may import io and core, never another
analysis room. A new family is one file and one line in ``families.py``.
"""

from eaglekit.analysis.draft.frame import DraftModel, DraftOutput
from eaglekit.analysis.draft.load import (engine_reading, hidden_state_indices, read_embeddings,
                                          trained_convention)

__all__ = ["DraftModel", "DraftOutput", "engine_reading", "hidden_state_indices", "read_embeddings",
           "trained_convention"]
