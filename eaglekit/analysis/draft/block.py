"""What every block drafter (DFlash, and the DFlash2 and DSpark backbones) shares: its tensors read and checked
against the config, the config checked against a target, and the attention pattern inside a block. The target's
embedding and ``lm_head`` (a block drafter owns neither) are the caller's: the forward takes the block's
embeddings and returns final hidden states.

Checked against z-lab/dflash ``dflash/model.py`` (``DFlashDraftModel``, ``Qwen3DFlashAttention``,
``_attention_mask``) and SGLang's ``models/dflash.py`` loader ("The checkpoint provides: ``layers.*``,
``fc.weight``, ``hidden_norm.weight`` ... ``norm.weight``"; a ``model.`` prefix is tolerated, as there).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from eaglekit.analysis.draft.checks import check_finite
from eaglekit.analysis.draft.load import torch_dtype_of
from eaglekit.core.configs.block import BlockDrafterConfig, read_block_config
from eaglekit.core.configs.block_shapes import block_tensor_name
from eaglekit.core.errors import ConfigError, InputError, VocabMapError
from eaglekit.io.reader import Checkpoint, open_checkpoint

#: a tensor name -> the shape the config implies, and the config keys that imply it (for messages)
Shapes = dict[str, tuple[tuple[int, ...], str]]


def backbone_shapes(c: BlockDrafterConfig) -> Shapes:
    """Every tensor of a DFlash backbone with the shape its config implies (spec: the authors' module tree)."""
    H, D, I = c.hidden_size, c.head_dim, c.intermediate_size
    q, kv = c.num_attention_heads * D, c.num_key_value_heads * D
    out: Shapes = {
        "fc.weight": ((H, c.n_aux * c.target_hidden_size),
                      f"hidden_size={H}, len(target_layer_ids)={c.n_aux} x target hidden size {c.target_hidden_size}"),
        "hidden_norm.weight": ((H,), f"hidden_size={H}"),
        "norm.weight": ((H,), f"hidden_size={H}"),
    }
    for i in range(c.num_hidden_layers):
        p = f"layers.{i}."
        heads = f"num_attention_heads={c.num_attention_heads} x head_dim={D}, hidden_size={H}"
        kvs = f"num_key_value_heads={c.num_key_value_heads} x head_dim={D}, hidden_size={H}"
        out.update({
            p + "input_layernorm.weight": ((H,), f"hidden_size={H}"),
            p + "post_attention_layernorm.weight": ((H,), f"hidden_size={H}"),
            p + "self_attn.q_proj.weight": ((q, H), heads),
            p + "self_attn.k_proj.weight": ((kv, H), kvs),
            p + "self_attn.v_proj.weight": ((kv, H), kvs),
            p + "self_attn.o_proj.weight": ((H, q), heads),
            p + "self_attn.q_norm.weight": ((D,), f"head_dim={D}"),
            p + "self_attn.k_norm.weight": ((D,), f"head_dim={D}"),
            p + "mlp.gate_proj.weight": ((I, H), f"intermediate_size={I}, hidden_size={H}"),
            p + "mlp.up_proj.weight": ((I, H), f"intermediate_size={I}, hidden_size={H}"),
            p + "mlp.down_proj.weight": ((H, I), f"hidden_size={H}, intermediate_size={I}"),
        })
        if c.attention_bias:
            for name, n in (("q_proj", q), ("k_proj", kv), ("v_proj", kv), ("o_proj", H)):
                out[p + f"self_attn.{name}.bias"] = ((n,), f"attention_bias=true, {heads}")
    return out


@dataclass
class BlockCheckpoint:
    """A block drafter's config and its tensors (names without the ``model.`` prefix), checked against it.

    ``tensors`` holds what was read; ``stored`` names, for each tensor left in ``checkpoint`` (read by range when
    used: :func:`read_block_checkpoint`'s ``keep_bytes``), its name there. ``checkpoint`` is None when every
    tensor was read; else it is open, and closing it is the reader's (``owns_checkpoint``: it was opened here)."""

    config: BlockDrafterConfig
    tensors: dict[str, torch.Tensor]
    source: str
    stored: dict[str, str] = field(default_factory=dict)
    checkpoint: Checkpoint | None = None
    owns_checkpoint: bool = False


def left_in_checkpoint(sizes: dict[str, int], keep_bytes: int | None) -> set[str]:
    """Which tensors stay in the checkpoint: none when ``keep_bytes`` is None; else the largest, one by one,
    until what is kept fits ``keep_bytes`` (sizes in bytes of the compute dtype). A drafter that fits is
    held whole; a Kimi-sized one keeps its norms and small projections and reads its large matrices."""
    if keep_bytes is None:
        return set()
    left, kept = set(), sum(sizes.values())
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        if kept <= keep_bytes:
            break
        left.add(name)
        kept -= sizes[name]
    return left


def read_block_checkpoint(location: str | os.PathLike[str] | Checkpoint, *, expected=backbone_shapes,
                          optional=None, dtype: str | torch.dtype = "float32", endpoint: str | None = None,
                          timeout: float | None = None, keep_bytes: int | None = None) -> BlockCheckpoint:
    """Read a block drafter: its config (:func:`read_block_config`) and every tensor ``expected(config)`` names,
    each shape compared with the config before a byte is read (ConfigError naming the tensor and the keys).
    ``keep_bytes``: the drafter's tensors held in memory at most (in ``dtype``); past it the largest stay in
    the checkpoint (:func:`left_in_checkpoint`), which is then left open for them (None: all read).
    ``optional(config)``: tensors read (and shape-checked) only when the checkpoint has them, e.g. a DSpark
    drafter's own ``embed_tokens`` and ``lm_head``."""
    torch_dtype = torch_dtype_of(dtype)
    if keep_bytes is not None and (isinstance(keep_bytes, bool) or not isinstance(keep_bytes, int)
                                   or keep_bytes < 0):
        raise InputError(f"keep_bytes must be a whole number of bytes (0 or more), got {keep_bytes!r}.")
    owned = not isinstance(location, Checkpoint)
    ckpt = open_checkpoint(location, endpoint=endpoint, timeout=timeout) if owned else location
    keep_open = False
    try:
        where = ckpt.inventory.source
        if ckpt.inventory.config is None:
            raise ConfigError(f"{where} has no config.json: a block drafter's forward needs its config.")
        config = read_block_config(ckpt.inventory.config, source=f"{where}/config.json")
        names = {block_tensor_name(n): n for n in sorted(ckpt.inventory.names, key=len, reverse=True)}
        found: dict[str, str] = {}
        maybe = optional(config) if optional is not None else {}
        for name, (shape, keys) in {**expected(config), **maybe}.items():
            stored = names.get(name)
            if stored is None and name in maybe:
                continue
            if stored is None:
                raise ConfigError(f"{where} lacks {name}, which a {config.family_name} drafter with this config "
                                  f"has ({keys}); is the checkpoint complete?")
            got = tuple(int(d) for d in ckpt.inventory[stored].shape)
            if got != shape:
                raise ConfigError(f"{where}: {stored} is {list(got)} but config.json implies {list(shape)} "
                                  f"({keys}); the weights and the config do not belong together.")
            found[name] = stored
        itemsize = torch.empty((), dtype=torch_dtype).element_size()
        left = left_in_checkpoint({n: ckpt.inventory[s].parameters * itemsize for n, s in found.items()},
                                  keep_bytes)
        tensors: dict[str, torch.Tensor] = {}
        for name, stored in found.items():
            if name in left:
                continue  # checked for NaN / Inf when first read (DFlashDrafter)
            t = ckpt.read_tensor(stored)
            check_finite(t, stored, where)
            tensors[name] = t.to(torch_dtype)
        keep_open = bool(left)
    finally:
        if owned and not keep_open:
            ckpt.close()
    return BlockCheckpoint(config, tensors, where, {n: found[n] for n in left}, ckpt if left else None,
                           owned and bool(left))


def check_target_fit(config: BlockDrafterConfig, *, num_layers: int, hidden: int, vocab: int, target: str) -> None:
    """Refuse a drafter whose config cannot read this target: layer ids past its layers, another width, a mask
    id outside its vocabulary (each message names the config key)."""
    ids_key = config.where.get("target_layer_ids", "num_target_layers (default target_layer_ids)")
    if max(config.target_layer_ids) >= num_layers:
        raise ConfigError(f"{config.source}: {ids_key} names layer {max(config.target_layer_ids)}, but {target} has "
                          f"{num_layers} layers (ids 0..{num_layers - 1}): the drafter was made for another target.")
    if config.target_hidden_size != hidden:
        raise InputError(f"hidden-size mismatch: {config.source} reads target features of size "
                         f"{config.target_hidden_size} (target_hidden_size / hidden_size), {target} has {hidden}.")
    if config.vocab_size is not None and config.vocab_size != vocab:
        raise VocabMapError(f"vocabulary mismatch: {config.source} says vocab_size {config.vocab_size}, "
                            f"{target} has {vocab} tokens.")
    if config.mask_token_id is None:
        raise ConfigError(f"{config.source}: dflash_config.mask_token_id is missing; the block's mask slots cannot "
                          "be embedded without it.")
    if not 0 <= config.mask_token_id < vocab:
        key = config.where.get("mask_token_id", "dflash_config.mask_token_id")
        raise ConfigError(f"{config.source}: {key} is {config.mask_token_id}, outside {target}'s vocabulary "
                          f"(ids 0..{vocab - 1}).")


def visible(query_pos: torch.Tensor, key_pos: torch.Tensor, *, causal: bool, window: int | None) -> torch.Tensor:
    """Which keys each query sees inside a block drafter's attention (the authors' ``_attention_mask``):
    query_pos (..., Q, 1), key_pos (..., 1, S) absolute positions -> (..., Q, S) bool. Context keys always sit
    before the block; without ``causal`` and a window every key is visible (the bidirectional block)."""
    ok = torch.ones(torch.broadcast_shapes(query_pos.shape, key_pos.shape), dtype=torch.bool)
    if causal:
        ok &= key_pos <= query_pos
    if window is not None:
        ok &= query_pos - key_pos < window
        if not causal:
            ok &= key_pos - query_pos < window
    return ok
