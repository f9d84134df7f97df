"""What every room reads about a drafter or its target, in one place.

The vocabulary map (d2t/t2d, read by byte range and bounded by the vocabulary the config declares), the
target's rows that a drafter shares (``embed_tokens``, ``lm_head``, under any wrapper prefix), and the
target opened as a checkpoint or a bare config. Used by compat, check, export, similarity, drift and the
accept-length measurement alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from eaglekit.core.configs.config import DrafterConfig, looks_like_target, normalize_config
from eaglekit.core.errors import ConfigError, EaglekitError, InputError, NotFoundError, VocabMapError
from eaglekit.core.checkpoint.names import find
from eaglekit.core.redact import shown
from eaglekit.core.checkpoint.tensors import to_torch
from eaglekit.io.reader import load_config, open_checkpoint

#: Entries a d2t or t2d may have when its config declares no vocabulary size (real vocabularies hold
#: at most a few hundred thousand tokens); with a declared size, twice that size.
MAX_MAP_ENTRIES = 1 << 22


def map_limit(config: Mapping | None, key: str) -> tuple[int, str]:
    """(most entries ``key`` may have, where that bound comes from): twice the vocabulary the config
    declares (d2t: draft_vocab_size, t2d: vocab_size), leaving room for a mis-sized map to be reported
    as such, else :data:`MAX_MAP_ENTRIES`."""
    declared = None
    if config is not None:
        try:
            cfg = normalize_config(config, source="config.json")
            declared = cfg.draft_vocab_size if key == "d2t" else cfg.vocab_size
        except EaglekitError:
            declared = None
    if isinstance(declared, int) and 0 < declared <= MAX_MAP_ENTRIES:
        field = "draft_vocab_size" if key == "d2t" else "vocab_size"
        return 2 * declared, f"twice the {field} {declared} its config declares"
    return MAX_MAP_ENTRIES, "the most any vocabulary needs"


def read_map(ckpt, key: str):
    """``key`` ("d2t" or "t2d") as a numpy array by byte range, None where absent. A map larger than
    :func:`map_limit` allows is refused unread (a hostile file could declare gigabytes)."""
    t = find(ckpt.inventory, key)
    if t is None:
        return None
    limit, why = map_limit(ckpt.inventory.config, key)
    if any(n > limit for n in t.shape) or (t.shape and t.parameters > limit):
        raise VocabMapError(f"{ckpt.inventory.source}: {shown(t.name)} has shape {list(t.shape)}, more than {limit:,} "
                            f"entries ({why}); refusing to read it. A vocabulary map is one-dimensional: d2t "
                            "[draft_vocab_size], t2d [vocab_size].")
    return ckpt.read_numpy(t.name)


def read_maps(ckpt) -> tuple[Any, Any]:
    """d2t and t2d by byte range (a few hundred KiB even remotely); None where absent."""
    return read_map(ckpt, "d2t"), read_map(ckpt, "t2d")


def embedding_of(inventory):
    """The embedding tensor of a drafter or target (``embed_tokens.weight`` under any prefix), or None."""
    hits = [t for t in inventory if t.name.endswith("embed_tokens.weight")]
    return min(hits, key=lambda t: len(t.name)) if hits else None


def lm_head_of(inventory):
    """The lm_head of a target (``lm_head.weight`` under any prefix), or None."""
    hits = [t for t in inventory if t.name.endswith("lm_head.weight")]
    return min(hits, key=lambda t: len(t.name)) if hits else None


def read_rows(ckpt, t, start: int, count: int, row_bytes: int):
    data = ckpt.read_bytes(t.name, start * row_bytes, count * row_bytes)
    x = to_torch(data, t.dtype, (count, t.shape[1]), name=t.name)  # (count, H)
    return x.float().numpy() if x.dtype.is_floating_point else np.asarray(x)


def open_target(target, *, endpoint: str | None = None, timeout: float | None = None, token: str | bool | None = None):
    """(checkpoint or None, config dict) for a target given as a config file, a folder or a location."""
    ckpt = None
    try:
        ckpt = open_checkpoint(target, endpoint=endpoint, timeout=timeout, token=token)
    except NotFoundError:
        pass  # a config without weights: the config checks still run
    config = ckpt.inventory.config if ckpt is not None else None
    if config is None:
        try:
            config = load_config(target, kind="target", endpoint=endpoint, timeout=timeout, token=token)
        except BaseException:
            if ckpt is not None:
                ckpt.close()
            raise
    else:
        if not looks_like_target(config):
            ckpt.close()
            raise ConfigError(f"{target}: its config.json is not a target model config (it looks like a drafter's); "
                              "give the target model's config or checkpoint.")
    return ckpt, config


def target_rows(tck, target, cfg: DrafterConfig, kind: str, *, need: str):
    """The target's ``kind`` tensor ("lm_head" or "embedding") that a drafter of ``cfg`` takes rows from,
    checked to be [vocab_size, hidden_size]; ``need`` says what for (it ends each refusal)."""
    what = {"lm_head": "lm_head", "embedding": "embed_tokens"}[kind]
    if tck is None:
        raise InputError(f"The target {target} is a config without weights: it holds no {what} {need}; give the "
                         "target's checkpoint (a folder or location with its safetensors).")
    t = (lm_head_of if kind == "lm_head" else embedding_of)(tck.inventory)
    if t is None:
        raise InputError(f"The target {target} has no {what} weights {need}: give a target location whose weights "
                         f"include {what}.weight.")
    if list(t.shape) != [cfg.vocab_size, cfg.hidden_size]:
        raise InputError(f"The target's {what} is {list(t.shape)}; {need} needs [{cfg.vocab_size}, "
                         f"{cfg.hidden_size}] (target vocabulary x the drafter's hidden size).")
    return t
