"""The target's :class:`~eaglekit.core.serving.costmodel.ModelShape`: its config, and its checkpoint header read by
range (bytes per expert from the dtypes and quantisation tensors actually stored), wherever it lives."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from eaglekit.core.configs.config import normalize_config
from eaglekit.core.serving.costmodel import ModelShape, drafter_shape, shape_from_config
from eaglekit.core.errors import InputError, NotFoundError
from eaglekit.core.serving.published import PUBLISHED, published
from eaglekit.core.redact import location_label
from eaglekit.io.reader import load_config, open_checkpoint

__all__ = ["drafter_step_shape", "target_config", "target_shape"]


def target_shape(target: Any, *, endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None) -> ModelShape:
    """``target`` as a shape: a :class:`ModelShape`, a parsed config (config only), a config.json path (config
    only), a checkpoint location (config + header, read by range: no weights are downloaded) or the short name
    of a published config (``kimi-k25-int4``, ``kimi-k2-fp8``, ``llama-3.1-8b``)."""
    if isinstance(target, ModelShape):
        return target
    if isinstance(target, Mapping):
        return shape_from_config(target, name=str(target.get("model_type", "target")))
    if not isinstance(target, (str, os.PathLike)):
        raise InputError("the target must be a config.json path, a checkpoint location or a parsed config")
    text = os.fspath(target)
    if text in PUBLISHED and not os.path.exists(text):
        label, raw = published(text)
        return shape_from_config(raw, name=label)
    label = location_label(text)
    if text.endswith(".json"):
        raw = load_config(text, kind="target", endpoint=endpoint, timeout=timeout, token=token)
        return shape_from_config(raw, name=label)
    try:
        with open_checkpoint(text, endpoint=endpoint, timeout=timeout, token=token, progress=False) as ckpt:
            inv = ckpt.inventory
    except NotFoundError:
        raw = load_config(text, kind="target", endpoint=endpoint, timeout=timeout, token=token, label=label)
        shape = shape_from_config(raw, name=label)
        return ModelShape(**{**shape.__dict__, "notes": (*shape.notes, "no checkpoint header found: bytes from the "
                                                                       "config's quantization_config")})
    if inv.config is None:
        raise InputError(f"{label} has weights but no config.json: the cost model needs the target's config")
    return shape_from_config(inv.config, tensors=((t.name, t.nbytes) for t in inv.tensors), name=label)


def drafter_step_shape(drafter: str | os.PathLike[str], *, endpoint: str | None = None, timeout: float | None = None,
                       token: str | bool | None = None) -> ModelShape:
    """A drafter checkpoint's draft step as a shape (its config and header, read by range)."""
    label = location_label(os.fspath(drafter))
    with open_checkpoint(os.fspath(drafter), endpoint=endpoint, timeout=timeout, token=token, progress=False) as ckpt:
        inv = ckpt.inventory
    if inv.config is None:
        raise InputError(f"{label} has no config.json: the draft-step estimate needs the drafter's attention shape")
    raw = inv.config
    if raw.get("num_nextn_predict_layers") and len(inv.tensors) and not any(
            "midlayer" in t.name or "fc." in t.name for t in inv.tensors):
        # a NextN / MTP checkpoint (DeepSeek-V3-NextN): its config is the target's; the layer is one MoE layer
        heads = int(raw.get("num_attention_heads") or 1)
        return drafter_shape(heads, heads, int(raw.get("v_head_dim") or 128), 1,
                             ((t.name, t.dtype, t.parameters, t.nbytes) for t in inv.tensors), name=label, config=raw)
    cfg = normalize_config(raw, source=f"{label}/config.json")
    return drafter_shape(cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                         max(1, int(raw.get("num_hidden_layers", 1) or 1)),
                         ((t.name, t.dtype, t.parameters, t.nbytes) for t in inv.tensors), name=label, config=raw)


def target_config(target: Any, *, endpoint: str | None = None, timeout: float | None = None,
                  token: str | bool | None = None) -> Mapping[str, Any]:
    """``target``'s config.json as a mapping: a parsed config, a published name, a config.json path or a checkpoint
    location."""
    if isinstance(target, Mapping):
        return target
    text = os.fspath(target)
    if text in PUBLISHED and not os.path.exists(text):
        return published(text)[1]
    return load_config(text, kind="target", endpoint=endpoint, timeout=timeout, token=token,
                       label=location_label(text))
