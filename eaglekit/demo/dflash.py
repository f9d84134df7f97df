"""The demo world's DFlash block drafter for K2.5 (``drafters/k25-dflash``), trained as the authors train one.

A K2.5 team's fourth candidate: a block drafter (z-lab/dflash ``DFlashDraftModel``) that drafts K tokens in ONE
forward over ``[anchor, MASK x K]``. It is trained on the SAME few K2.5 samples and the SAME target features as the
world's K2.5 EAGLE-3 drafters (hidden states 1..3 of the K2.5 target = the outputs of layers 0-2), with the
authors' objective (z-lab/dflash, SpecForge ``specforge/algorithms/common/dflash_family_model.py``):

* random anchor positions in each sample (SpecForge ``_sample_anchor_positions``: an anchor whose token and next
  token exist), :data:`ANCHORS` per sample and step;
* the block ``[token at anchor, MASK x (BLOCK - 1)]`` at positions ``anchor .. anchor + BLOCK - 1``, embedded with the
  target's frozen embedding, attending to the context features of the positions BEFORE the anchor and to the whole
  block (bidirectional);
* cross-entropy of the target's frozen ``lm_head`` on the mask slots (slot k) against the sample's token at
  ``anchor + k`` (the anchor slot is not scored; slots past the sample's end are dropped); uniform weights over the
  slots (SpecForge's default ``loss_decay_gamma = None``).

The forward it trains is :class:`~eaglekit.analysis.draft.dflash.DFlashDrafter`'s own (the one every measurement
runs): it is differentiable, so no second forward exists to drift from it. Saved as the authors' checkpoints are:
``config.json`` (a Qwen3 config with ``block_size`` and ``dflash_config``) and ``model.safetensors`` in bf16, with no
embedding and no ``lm_head`` (a DFlash drafter uses its target's).

Demo choices, each stated in the config (``eaglekit_demo``) and the manifest:

* ``block_size`` :data:`BLOCK` = 5, so K = 1..4 drafts per block match the pages' K;
* ``target_layer_ids`` [0, 1, 2]: the authors' ``build_target_layer_ids`` spreads the ids from layer 1 to
  ``num_target_layers - 3``, which for a 4-layer target is layer 1 alone; the demo spreads them instead over every
  layer before the last (whose HF hidden state is after the final norm), evenly, which are also the layers the
  world's EAGLE-3 drafters read: both families see the same features;
* ``mask_token_id`` (:func:`mask_token_id`): the demo's token language has no reserved token (its 10% noise draws
  from all 96 ids), so the mask is the highest id outside both languages' common tokens: a token neither grammar
  produces, which appears only as noise (about 0.1% of tokens). Real DFlash drafters use a reserved special token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: tokens per block (anchor + 4 masks): K = 1..4 drafts, as the pages judge
BLOCK = 5
#: the drafter's decoder layers (the real Kimi-K2.5 DFlash drafter has 6); on the world's 6 samples a second layer
#: overfits (accept length 1.68 at K = 4 against 2.0 with one)
DRAFT_LAYERS = 1
HEADS, KV_HEADS, HEAD_DIM, DRAFT_INTER = 4, 2, 16, 192
#: the target layers whose outputs the drafter reads (hidden_states[id + 1]): the EAGLE-3 drafters' aux layers
TARGET_LAYER_IDS = (0, 1, 2)
#: anchors drawn per sample and step (SpecForge draws up to num_anchors per sequence)
ANCHORS = 24
SAMPLES_PER_STEP = 4
STEPS = 300
LR = 3e-3
SEED = 11


def mask_token_id(common_k2, common_k25, vocab: int) -> int:
    """The highest token id neither language's grammar produces (outside both common sets)."""
    unused = sorted(set(range(vocab)) - {int(t) for t in common_k2} - {int(t) for t in common_k25})
    return unused[-1]


def dflash_config(*, mask: int, vocab: int, hidden: int, target_layers: int, label: str,
                  max_positions: int) -> dict[str, Any]:
    """The drafter's config as z-lab's checkpoints write it (a Qwen3 config plus ``block_size`` and
    ``dflash_config``)."""
    return {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": BLOCK,
            "dflash_config": {"mask_token_id": mask, "target_layer_ids": list(TARGET_LAYER_IDS)},
            "num_target_layers": target_layers, "num_hidden_layers": DRAFT_LAYERS, "hidden_size": hidden,
            "intermediate_size": DRAFT_INTER, "head_dim": HEAD_DIM, "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "attention_bias": False, "attention_dropout": 0.0,
            "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None,
            "max_position_embeddings": max_positions, "layer_types": ["full_attention"] * DRAFT_LAYERS,
            "sliding_window": None, "use_sliding_window": False, "tie_word_embeddings": False, "vocab_size": vocab,
            "torch_dtype": "bfloat16", "eaglekit_demo": label}


def _init(config, seed: int) -> dict[str, Any]:
    """Every tensor the config implies, in float32: projections ~ N(0, 1/fan_in), norms at one."""
    import torch

    from eaglekit.analysis.draft.block import backbone_shapes

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, (shape, _) in sorted(backbone_shapes(config).items()):
        t = torch.ones(shape) if "norm" in name else torch.randn(*shape, generator=g) / shape[-1] ** 0.5
        out[name] = t.requires_grad_()
    return out


def train_dflash(target, data: np.ndarray, config: dict[str, Any], *, steps: int | None = None,
                 lr: float | None = None, seed: int | None = None) -> dict[str, Any]:
    """Train the drafter of ``config`` on ``data`` (samples, token ids (n, T)) against ``target`` (the trained
    transformers model: its features, embedding and lm_head, all frozen); returns the float32 tensors."""
    import torch
    import torch.nn.functional as F

    from eaglekit.analysis.draft.dflash import DFlashDrafter
    from eaglekit.core.configs.block import read_block_config

    steps, lr, seed = steps or STEPS, lr or LR, seed or SEED
    cfg = read_block_config(config, source="k25-dflash/config.json")
    x = torch.from_numpy(data)
    with torch.no_grad():
        out = target(x, output_hidden_states=True)
    # (n, T, n_aux * H) in target_layer_ids order: the same hidden states the EAGLE-3 drafters are trained on
    features = torch.cat([out.hidden_states[i + 1] for i in cfg.target_layer_ids], -1).detach()
    embed = target.get_input_embeddings().weight.detach()
    head = target.get_output_embeddings().weight.detach()
    params = _init(cfg, seed)
    drafter = DFlashDrafter(cfg, params, source="k25-dflash (training)")
    drafter.w = params                       # the forward reads these very tensors: gradients reach them
    opt = torch.optim.AdamW(list(params.values()), lr=lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    n, T = x.shape
    Q = cfg.block_size
    slots = torch.arange(1, Q)
    for _ in range(steps):
        losses = []
        for i in torch.randint(0, n, (SAMPLES_PER_STEP,), generator=g).tolist():
            # anchors 1..T-2: a context before it, and at least its next token to score
            valid = torch.arange(1, T - 1)
            anchors = valid[torch.randperm(len(valid), generator=g)[:ANCHORS]].sort().values      # (B,)
            block = torch.full((len(anchors), Q), cfg.mask_token_id, dtype=torch.int64)
            block[:, 0] = x[i, anchors]
            hidden = drafter.forward(drafter.context(features[i]), embed[block], anchors)[:, 1:]  # (B, Q-1, H)
            logits = hidden @ head.T                                                            # (B, Q-1, V)
            idx = anchors[:, None] + slots[None, :]                                             # (B, Q-1)
            labels = torch.where(idx < T, x[i, idx.clamp(max=T - 1)], torch.full_like(idx, -100))
            losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                          ignore_index=-100))
        loss = torch.stack(losses).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in params.items()}


def save_dflash(folder: Path, tensors: dict[str, Any], config: dict[str, Any], *, label: str) -> None:
    """bf16 weights (trained in float32) and the config; no embedding, no lm_head."""
    import json

    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().to(torch.bfloat16).contiguous() for k, v in sorted(tensors.items())},
              str(folder / "model.safetensors"), metadata={"format": "pt", "eaglekit_demo": label})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
