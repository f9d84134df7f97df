"""Reading a drafter checkpoint into a :class:`~eaglekit.analysis.draft.frame.DraftModel`: its layout, the
tensors each family reads, the vocabulary map, the input embedding, and what stays in the checkpoint.

Layouts: SpecForge and TorchSpec write the decoder layer as ``midlayer.*``; speculators, vLLM-bound exports
(TorchSpec ``convert_to_hf.py --vllm``) and Model-Optimizer as ``layers.0.*``. vLLM and SGLang load either.
What the aux ids meant in training can differ between the two exports of one MLA drafter: TorchSpec's
``--vllm`` export of a ``kimi_k2`` drafter adds one to every id ("vLLM uses 1-indexed layer IDs for
kimi_k2"), so its ``layers.0.*`` copy counts layer inputs where the ``midlayer.*`` copy counts outputs
(:func:`trained_convention`; docs/acceptance.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from eaglekit.analysis.draft.checks import check_declared, check_finite
from eaglekit.analysis.draft.families import attention_family, mlp_family
from eaglekit.analysis.draft.layout import FRAME_TENSORS, LAYER_PREFIX, Embedding, Layout
from eaglekit.analysis.draft.weights import Weights
from eaglekit.core.configs.config import DrafterConfig, normalize_config
from eaglekit.core.configs.layers import AuxConvention
from eaglekit.core.errors import ConfigError, InputError, VocabMapError
from eaglekit.core.tokens.vocab import check_vocab_map, require_valid, unreadable_d2t
from eaglekit.io.drafter import read_maps
from eaglekit.io.reader import Checkpoint, open_checkpoint

#: where a target checkpoint keeps its input embedding (Llama, DeepseekV3, multimodal wrappers)
EMBED_NAMES = ("model.embed_tokens.weight", "embed_tokens.weight", "model.language_model.embed_tokens.weight",
               "language_model.model.embed_tokens.weight", "transformer.wte.weight")
#: bytes (in the compute dtype) of routed experts, and of a head or embedding, kept in memory; past them
#: they are read by range when used
KEEP_EXPERTS = 1 << 30
KEEP_MATRIX = 1 << 30


def trained_convention(config: DrafterConfig, layout: Layout | None = None) -> AuxConvention:
    """What the drafter's aux ids meant when it was trained: SpecForge, TorchSpec and Model-Optimizer capture
    the OUTPUTS of the configured layers (specforge/algorithms/model_providers.py); speculators' data come
    from vLLM, which captures the INPUTS of the listed layers. An MLA drafter exported for vLLM by TorchSpec
    (``layers.0.*``, model_type ``kimi_k2``) has its ids shifted to vLLM's count: inputs (the layout rule,
    :meth:`~eaglekit.core.configs.config.DrafterConfig.for_layout`, which ``check`` and ``compat`` apply too)."""
    if config.format == "mla":
        return config.for_layout(layout).aux_convention
    return "outputs" if config.format == "specforge" else "inputs"


def hidden_state_indices(aux_ids, convention: AuxConvention) -> tuple[int, ...]:
    """Hugging Face ``output_hidden_states`` indices for aux ids: output of layer i = index i + 1;
    input of layer i = index i."""
    if convention not in ("inputs", "outputs"):
        raise InputError(f"aux convention must be 'inputs' or 'outputs', got {convention!r}.")
    return tuple(int(i) + (1 if convention == "outputs" else 0) for i in aux_ids)


def engine_reading(d2t, t2d, *, vocab_size: int, draft_vocab_size: int, where: str) -> tuple[str, ...]:
    """Check a drafter's map before drafting with it. A map that is broken beyond what an engine would
    serve is refused (:class:`VocabMapError`); a MISSING d2t, or an ALL-ZERO one, is what engines serve as
    the identity (SGLang ``d2t + arange``, vLLM's offsets: draft id i read as target id i, ids 0..N-1 only;
    NeMo Automodel #2447): it is measured that way, with a note saying so. A full-vocabulary drafter
    (``draft_vocab_size == vocab_size``, Kimi's MLA drafters) needs no map."""
    d2t_np = None if d2t is None else d2t.numpy() if hasattr(d2t, "numpy") else d2t
    if d2t_np is None and draft_vocab_size < vocab_size:
        return (f"{where} has no d2t: engines read draft id i as target id i, so it can propose only target ids "
                f"0..{draft_vocab_size - 1}; measured as the engine would serve it (fix: eaglekit export --vocab-map).",)
    if d2t_np is None:
        return ()
    if t2d is None:  # nothing to check it against: it must at least point at target ids an engine can read
        bad = unreadable_d2t(d2t_np, vocab_size=vocab_size)
        if bad:
            raise VocabMapError(f"{where}: {bad}; an engine could not map its draft ids to target ids.")
        return ()
    c = check_vocab_map(d2t_np, t2d, vocab_size=vocab_size, draft_vocab_size=draft_vocab_size, name=f"of {where}")
    if c.identity and set(c.rules) <= {"identity-needs-full-vocab", "t2d-matches-d2t", "t2d-count"}:
        if draft_vocab_size == vocab_size:
            return ()
        return (f"{where}'s d2t is all zeros: engines read draft id i as target id i, so it can propose only target "
                f"ids 0..{draft_vocab_size - 1}; measured as the engine would serve it (fix: eaglekit export "
                "--vocab-map).",)
    require_valid(c)
    return ()


def check_layout(config: DrafterConfig, names: set[str], *, where: str) -> Layout:
    """Refuse what the draft forward cannot run faithfully; return the checkpoint's layout."""
    if "lm_head.weight" not in names:
        raise ConfigError(f"{where} has no lm_head.weight: serving engines would leave the head random (accept "
                          "length about 1). Ask the publisher for the head, or take it from the drafter it was "
                          "trained from.")
    if "fc.weight" not in names:
        raise ConfigError(f"{where} has no fc.weight: not an EAGLE-3 drafter checkpoint.")
    layouts = [lay for lay, p in LAYER_PREFIX.items() if any(n.startswith(p + "self_attn.") for n in names)]
    if not layouts:
        raise ConfigError(f"{where} has neither midlayer.* (SpecForge, TorchSpec) nor layers.0.* (speculators, "
                          "vLLM exports) decoder tensors; the draft forward reads those two layouts.")
    if any(n.startswith(("layers.1.", "midlayer.1")) for n in names) or config.num_hidden_layers > 1:
        raise ConfigError(f"{where} has more than one decoder layer; eaglekit drafts with single-layer "
                          "EAGLE-3 drafters only.")
    layout = layouts[0]
    p = LAYER_PREFIX[layout]
    attention = attention_family(config, names, p)
    mlp = mlp_family(config, names, p)
    # the MLA query projections are the attention's own check: which of q_a/q_b or q_proj depends on q_lora_rank
    needed = [p + n for n in FRAME_TENSORS] + [n for n in attention.tensors(config, p)
                                               if attention.family != "mla" or ".q_" not in n]
    if mlp.family == "dense":
        needed += list(mlp.tensors(config, p))
    missing = [n for n in needed if n not in names]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)} (a {attention.family} attention, {mlp.family} MLP "
                          "EAGLE-3 layer).")
    return layout


def torch_dtype_of(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in table:
        raise InputError(f"dtype must be float32 or bfloat16, got {dtype!r}.")
    return table[dtype]


def _kept_names(ckpt: Checkpoint, wanted: list[str], layout: Layout, itemsize: int) -> list[str]:
    """The tensors read into memory now; routed experts past KEEP_EXPERTS bytes and a head past KEEP_MATRIX
    stay in the checkpoint and are read when a pass uses them."""
    p = LAYER_PREFIX[layout] + "mlp.experts."
    inv = ckpt.inventory
    size = {n: inv[n].parameters * itemsize for n in wanted}
    experts = [n for n in wanted if n.startswith(p)]
    keep_experts = sum(size[n] for n in experts) <= KEEP_EXPERTS
    return [n for n in wanted if (keep_experts or not n.startswith(p))
            and (n != "lm_head.weight" or size[n] <= KEEP_MATRIX)]


@dataclass
class DrafterParts:
    """What :func:`read_drafter` read: the frame builds the model from it."""

    config: DrafterConfig
    tensors: dict[str, Any]
    layout: Layout
    embed: torch.Tensor | Embedding
    dtype: torch.dtype
    source: str
    checkpoint: Checkpoint | None      # held open when tensors are read from it later
    notes: tuple[str, ...]

    def close(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.close()


def read_drafter(location: str | os.PathLike[str] | Checkpoint, *, embed: torch.Tensor | None = None,
                 embeddings: str | os.PathLike[str] | None = None, dtype: str | torch.dtype = "float32",
                 endpoint: str | None = None, timeout: float | None = None) -> DrafterParts:
    """Read what a drafter's forward needs. Routed experts past KEEP_EXPERTS bytes and a head or embedding
    past KEEP_MATRIX stay in the checkpoint (kept open in the result) and are read by range when used."""
    torch_dtype = torch_dtype_of(dtype)
    itemsize = torch.tensor([], dtype=torch_dtype).element_size()
    ckpt = location if isinstance(location, Checkpoint) else open_checkpoint(location, endpoint=endpoint, timeout=timeout)
    lazy = False
    try:
        where = ckpt.inventory.source
        if ckpt.inventory.config is None:
            raise ConfigError(f"{where} has no config.json: the draft forward needs the drafter's config.")
        config = normalize_config(ckpt.inventory.config, source=f"{where}/config.json")
        names = set(ckpt.inventory.names)
        layout = check_layout(config, names, where=where)
        top = {"fc.weight", "input_norm.weight", "norm.weight", "lm_head.weight"}
        # only what the forward uses (a speculators checkpoint may also carry the verifier's head)
        wanted = sorted(n for n in names if n in top or n.startswith(("fc_norm.", LAYER_PREFIX[layout])))
        kept = _kept_names(ckpt, wanted, layout, itemsize)
        lazy = len(kept) < len(wanted)
        tensors: dict[str, Any] = {n: ckpt.read_tensor(n) for n in kept}
        own = next((n for n in ("embed_tokens.weight", "model.embed_tokens.weight") if n in names), None)
        if own is not None:
            embed = _embedding(ckpt, own, itemsize)
            lazy = lazy or not isinstance(embed, torch.Tensor)
        d2t, t2d = read_maps(ckpt)  # bounded by the vocabulary the config declares
        if d2t is not None:
            tensors["d2t"] = torch.from_numpy(np.array(d2t, dtype=np.int64))  # a writable copy (a few KiB)
        draft_rows = int(ckpt.inventory["lm_head.weight"].shape[0])
        notes = engine_reading(d2t, t2d, vocab_size=config.vocab_size, draft_vocab_size=draft_rows, where=where)
        if embed is None and embeddings is not None:
            embed = read_embeddings(embeddings, endpoint=endpoint, timeout=timeout,
                                    expect=(config.vocab_size, config.hidden_size), rows_past=KEEP_MATRIX // itemsize)
        if embed is None:
            raise InputError(f"{where} has no embed_tokens.weight (drafters take the target's frozen embedding): "
                             "give the target (--target) or a checkpoint that holds its embedding (--embeddings).")
        shape = tuple(embed.shape)
        if len(shape) != 2 or shape[1] != config.hidden_size:
            raise InputError(f"the embedding is {list(shape)} but the drafter's hidden size is "
                             f"{config.hidden_size}: it is not this drafter's target.")
        if shape[0] != config.vocab_size:
            raise VocabMapError(f"vocabulary mismatch: the embedding has {shape[0]} rows but {where}'s config "
                                f"says the target vocabulary has {config.vocab_size} tokens.")
    except BaseException:
        if not isinstance(location, Checkpoint):
            ckpt.close()
        raise
    held = ckpt if lazy else None
    if not lazy and not isinstance(location, Checkpoint):
        ckpt.close()
    return DrafterParts(config, tensors, layout, embed, torch_dtype, where, held, notes)


def _embedding(ckpt: Checkpoint, name: str, itemsize: int) -> torch.Tensor | Embedding:
    info = ckpt.inventory[name]
    if info.parameters * itemsize <= KEEP_MATRIX:
        return ckpt.read_tensor(name)
    return Embedding(Weights({}, device=torch.device("cpu"), dtype=torch.float32, checkpoint=ckpt,
                             source=ckpt.inventory.source), name)


def read_embeddings(location: str | os.PathLike[str], *, endpoint: str | None = None, timeout: float | None = None,
                    expect: tuple[int | None, int | None] = (None, None),
                    rows_past: int | None = None) -> torch.Tensor | Embedding:
    """A target checkpoint's input embedding, read by range (only that tensor's bytes); its declared shape
    is compared with ``expect`` (vocabulary, width) before it is read, and NaN or Inf in it is refused.
    ``rows_past``: an embedding of more elements than this stays in the checkpoint, read by rows when used."""
    ckpt = open_checkpoint(location, endpoint=endpoint, timeout=timeout)
    try:
        name = next((n for n in EMBED_NAMES if n in ckpt.inventory), None)
        if name is None:
            name = next((n for n in ckpt.inventory.names if n.endswith("embed_tokens.weight")), None)
        if name is None:
            raise InputError(f"{ckpt.inventory.source} holds no embed_tokens.weight; give the target model's "
                             "checkpoint for --embeddings.")
        check_declared(ckpt, name, expect, "the embedding of")
        if rows_past is not None and ckpt.inventory[name].parameters > rows_past:
            return Embedding(Weights({}, device=torch.device("cpu"), dtype=torch.float32, checkpoint=ckpt,
                                     source=ckpt.inventory.source), name)
        embed = ckpt.read_tensor(name)
        check_finite(embed, name, ckpt.inventory.source)
    except BaseException:
        ckpt.close()
        raise
    ckpt.close()
    return embed
