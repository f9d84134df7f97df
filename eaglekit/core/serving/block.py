"""Block drafters (DFlash) in the serving plan: what one block cycle costs, and the measured accept lengths it earns.

A block drafter proposes K drafts in ONE forward over a block of K + 1 tokens per request, ``[anchor, MASK x K]``
(engines run a block of K + 1 when asked for K drafts: vLLM ``num_query_per_req = 1 + num_speculative_steps``,
SGLang ``block_size = speculative_num_draft_tokens``, TensorRT-LLM ``max_draft_len + 1``). Each of its L decoder
layers projects the block's K + 1 rows (q, k, v, o and the MLP) and the new context rows' target features (the
``fc`` over the concatenated target layers, then k and v of every layer), and its K + 1 queries attend to every
context position and the whole block; the drafts come from the TARGET's lm_head over the K mask slots. So the
drafter's weights are read once per cycle, not once per draft step as in an EAGLE-3 chain, and the cycle is

    cycle(B, K) = target(B, K + 1) + per_cycle + per_request x B + per_row x B x (K + 1)

- ``per_cycle``: the forward's kernel launches (about 14 per layer, 8 around them), its all-reduces under TP, the
  drafter's weights and the target's lm_head read once, and the cycle's sampling and bookkeeping;
- ``per_request``: the drafter's KV cache over the context, the projection of the new context rows (fc, k, v) and
  the engine's work per request;
- ``per_row``: each block row's FLOPs (the layers' matmuls, attention over the context, the head; the head's FLOPs
  are counted on all K + 1 rows though the anchor's logits are dropped, a small overcount).

The three terms get a Gaussian prior sized from the drafter's config on the GPU table (:func:`block_prior`) and
are fitted like an EAGLE-3 cycle's (:class:`BlockFit` is :class:`~eaglekit.core.serving.cyclefit.CycleFit` with
these features). Accept lengths come from a measurement at every K (``eaglekit acceptance --json`` of a block
drafter: ``family``, ``block_size``, ``accept_length_by_steps`` and its ``_low`` / ``_high``), and their interval
widens the cell's throughput interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglekit.core.configs.block import BlockDrafterConfig
from eaglekit.core.errors import InputError
from eaglekit.core.serving.costmodel import Gpu, ModelShape
from eaglekit.core.serving.cyclefit import (
    ALLREDUCE_US,
    CYCLE_BOOKKEEPING_MS,
    ENGINE_ROW_MS,
    KERNEL_US,
    SMALL_READ_EFFICIENCY,
    Z,
    CycleFit,
    DraftPrior,
)
from eaglekit.core.uncertainty import Interval

__all__ = ["BLOCK_FAMILIES", "BLOCK_TERMS", "BlockCandidate", "BlockFit", "BlockSize", "block_candidate",
           "block_flags", "block_prior", "block_scenario", "block_size"]

#: the block families a measurement may name, and the one the plan prices: DFlash's forward. DFlash2 adds
#: convolutional layers and a candidate selector (and MLA attention) the cost model does not hold; DSpark's confidence
#: head chooses how much of the block to verify, so its verify is not K + 1 tokens.
BLOCK_FAMILIES = ("dflash", "dflash2", "dspark")
PRICED_FAMILIES = ("dflash",)
_UNPRICED = {"dflash2": "its convolutional layers and candidate selector are not in the cost model",
             "dspark": "its confidence head chooses how much of the block to verify, so the verify is not K + 1 tokens"}
FAMILY_NAMES = {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}
BLOCK_TERMS = ("block_ms_per_cycle", "block_ms_per_request", "block_ms_per_row")
#: kernels one block forward launches per decoder layer (input norm, fused qkv, q and k norms, rotary, the context
#: rows' k and v, attention, o_proj, residual, norm, gate_up, activation, down, residual: z-lab/dflash model.py) and
#: around the layers (embedding of the block, fc, hidden_norm, final norm, the target's lm_head, argmax, bookkeeping)
BLOCK_LAYER_KERNELS, BLOCK_EXTRA_KERNELS = 14, 8


@dataclass(frozen=True)
class BlockSize:
    """What one block forward reads and computes (whole model; divide by TP for one GPU)."""

    name: str
    layers: int
    hidden_size: int
    layer_params: float  # one decoder layer: q, k, v, o, gate, up, down
    context_params: float  # per new context row: fc (n_aux x target hidden -> hidden) and every layer's k and v
    head_params: float  # the target's lm_head (vocab x target hidden), read by the drafter's forward
    kv_bytes_per_token: float  # the drafter's own KV cache per context token, all layers (bf16)
    kv_heads: int
    attn_flops_per_context_token: float  # per block row x context token, all layers

    @property
    def weight_bytes(self) -> float:
        """bf16 weights one forward reads: the layers, the fc and the target's head."""
        return 2.0 * (self.layers * self.layer_params + self.context_params + self.head_params)

    @property
    def row_params(self) -> float:
        return self.layers * self.layer_params + self.head_params

    def as_shape(self) -> ModelShape:
        """The drafter as a dense :class:`ModelShape` (its weights, fc and the head it reads): what an EAGLE-style
        step of the same size would read (:func:`~eaglekit.core.serving.cyclefit.draft_prior`), and capacity."""
        params = self.layers * self.layer_params + self.context_params + self.head_params
        return ModelShape(self.name, self.layers, 0, 0, 0, 0.0, 0.0, self.weight_bytes, params,
                          self.kv_bytes_per_token, self.kv_heads, self.attn_flops_per_context_token, "bf16", "config",
                          (), self.hidden_size, 0, 0)


def block_size(cfg: BlockDrafterConfig, *, vocab: int | None = None, target_hidden: int | None = None,
               name: str | None = None) -> BlockSize:
    """A block drafter's :class:`BlockSize` from its config; the head is the target's (``vocab`` x ``target_hidden``;
    the drafter config's own ``vocab_size`` and ``target_hidden_size`` where not given)."""
    H, heads, kv, D, inter, L = (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                                 cfg.intermediate_size, cfg.num_hidden_layers)
    V = vocab or cfg.vocab_size
    Ht = target_hidden or cfg.target_hidden_size or H
    if not V:
        raise InputError(f"{cfg.source}: no vocab_size, and no target given: the block drafter's drafts come from the "
                         "target's lm_head, whose size the plan needs; give the target (--target)")
    layer = H * heads * D + 2 * H * kv * D + heads * D * H + 3 * H * inter
    context = cfg.n_aux * Ht * H + L * 2 * H * kv * D
    return BlockSize(name or f"{cfg.family_name} drafter ({L} layers, hidden {H})", L, H, float(layer), float(context),
                     float(V * Ht), float(L * 2 * kv * D * 2), kv, float(L * 4 * heads * D))


def block_prior(size: BlockSize, gpu: Gpu, *, tp: int = 1, context: int = 4096,
                new_tokens: float = 4.0) -> DraftPrior:
    """The prior on (:data:`BLOCK_TERMS`): per cycle, per request, per block row, each with its mean as its standard
    deviation ("about this size"), sized from the drafter on ``gpu`` x ``tp`` at ``context`` tokens, ``new_tokens``
    context rows projected per cycle (the accept length)."""
    launch = ((BLOCK_LAYER_KERNELS * size.layers + BLOCK_EXTRA_KERNELS) * KERNEL_US / 1000.0
              + (2 * size.layers * ALLREDUCE_US / 1000.0 if tp > 1 else 0.0))
    read = size.weight_bytes / tp / 1e9 / (gpu.hbm_tb_s * SMALL_READ_EFFICIENCY)
    per_cycle = launch + read + CYCLE_BOOKKEEPING_MS
    rate = gpu.bf16_tflops * 0.5 * 1e12
    kv_ms = context * size.kv_bytes_per_token / max(1, min(tp, size.kv_heads)) / 1e9 / gpu.hbm_tb_s
    project_ms = new_tokens * 2.0 * size.context_params / tp / rate * 1000.0
    per_request = kv_ms + project_ms + ENGINE_ROW_MS
    per_row = (2.0 * size.row_params + context * size.attn_flops_per_context_token) / tp / rate * 1000.0
    mean = (per_cycle, per_request, per_row)
    return DraftPrior(mean, mean,
                      f"prior from {size.name} on {gpu.name} x {tp}: {per_cycle:.2f} ms per block forward "
                      f"({launch:.2f} launch floor + {read:.2f} reading {size.weight_bytes / 1e9:.2f} GB / {tp} once, "
                      f"+ {CYCLE_BOOKKEEPING_MS:g} bookkeeping), {per_request * 1000:.2f} us per request, "
                      f"{per_row * 1000:.2f} us per block row; sd = mean")


class BlockFit(CycleFit):
    """A block cycle's fitted terms (:data:`BLOCK_TERMS`): :class:`CycleFit`'s fit and covariance, with features
    (1, B, B x (K + 1)) for a cycle of K drafts at batch B."""

    @staticmethod
    def features(batch: int, steps: int, topk: int = 1) -> tuple[float, float, float]:
        if not steps:
            return (0.0, 0.0, 0.0)
        return (1.0, float(batch), float(batch * (steps + 1)))

    def block_ms(self, batch: int, steps: int) -> float:
        """The block forward and the cycle's bookkeeping at ``steps`` drafts (``extra_ms``)."""
        return self.extra_ms(batch, steps)

    def off_prior(self) -> list[str]:
        return [w.replace("the draft step", "the block forward").replace("the cost per drafted row",
                                                                           "the cost per request")
                .replace("the per-cycle overhead", "the cost per block row") for w in super().off_prior()]

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        for t, name in zip(out["terms"], BLOCK_TERMS):
            t["term"] = name
        out["prior"]["mean"] = dict(zip(BLOCK_TERMS, self.prior.mean))
        out["prior"]["sd"] = dict(zip(BLOCK_TERMS, self.prior.sd))
        return out


@dataclass(frozen=True)
class BlockCandidate:
    """A block drafter's measured accept lengths at K = 1..``steps`` drafts (each with a block of K + 1)."""

    family: str
    block_size: int
    lengths: tuple[Interval, ...]  # K = 1..steps
    drafter: str = "<drafter>"
    source: str = "acceptance result"

    @property
    def steps(self) -> int:
        return len(self.lengths)

    @property
    def name(self) -> str:
        return FAMILY_NAMES.get(self.family, self.family)

    def at(self, k: int) -> Interval:
        return self.lengths[k - 1]

    def label(self, k: int) -> str:
        return f"{self.name} K={k} (block {k + 1})"

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "block_size": self.block_size, "steps": self.steps, "drafter": self.drafter,
                "source": self.source, "accept_length_by_steps": [i.value for i in self.lengths],
                "accept_length_by_steps_low": [i.low for i in self.lengths],
                "accept_length_by_steps_high": [i.high for i in self.lengths]}


def _length(value: Any, k: int, what: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{what}: {name}[{k - 1}] (K = {k}) is {value!r}, not an accept length: give a number from 1 "
                         f"to {k + 1} (tokens per cycle, bonus included)")
    return float(value)


def block_candidate(data: Mapping[str, Any], *, what: str = "acceptance result") -> BlockCandidate:
    """A block drafter's measurement from an ``eaglekit acceptance --json`` object (``family``, ``block_size``,
    ``steps``, ``accept_length_by_steps`` with optional ``_low`` / ``_high`` lists): every K checked against the
    block (K <= block_size - 1) and its accept length against 1..K + 1."""
    family = data.get("family")
    if family not in BLOCK_FAMILIES:
        raise InputError(f"{what}: family {family!r} is not a block drafter's (one of {', '.join(BLOCK_FAMILIES)})")
    if family not in PRICED_FAMILIES:
        raise InputError(f"{what}: the plan cannot price a {FAMILY_NAMES[family]} cycle ({_UNPRICED[family]}); it "
                         "prices DFlash blocks: plan this drafter from measured runs of the engine instead")
    block = data.get("block_size")
    if isinstance(block, bool) or not isinstance(block, int) or not 2 <= block <= 256:
        raise InputError(f"{what}: block_size is {block!r}: a {FAMILY_NAMES[family]} measurement needs the drafter's "
                         "trained block size (a whole number from 2 to 256); measure with `eaglekit acceptance --json` "
                         "of this version, or add it from the drafter's config")
    by = data.get("accept_length_by_steps")
    if not isinstance(by, list) or not by:
        raise InputError(f"{what}: no accept_length_by_steps: the plan needs the accept length at each K")
    steps = data.get("steps", len(by))
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InputError(f"{what}: steps is {steps!r}, not a whole number of drafts per block")
    if max(steps, len(by)) > block - 1:
        raise InputError(f"{what}: K = {max(steps, len(by))} drafts per block, but a block of {block} holds at most "
                         f"{block - 1} (the anchor takes one slot); measure K <= {block - 1}")
    lows, highs = data.get("accept_length_by_steps_low"), data.get("accept_length_by_steps_high")
    out = []
    for k, v in enumerate(by, 1):
        L = _length(v, k, what, "accept_length_by_steps")
        if not 1 <= L <= k + 1:
            raise InputError(f"{what}: accept length {L:g} at K = {k} is outside 1..{k + 1} (tokens per cycle, bonus "
                             "included)")
        lo = hi = None
        if isinstance(lows, list) and isinstance(highs, list) and k <= min(len(lows), len(highs)):
            if lows[k - 1] is not None and highs[k - 1] is not None:
                lo = _length(lows[k - 1], k, what, "accept_length_by_steps_low")
                hi = _length(highs[k - 1], k, what, "accept_length_by_steps_high")
                if not 0 < lo <= L <= hi:
                    raise InputError(f"{what}: the interval at K = {k} ({lo:g}-{hi:g}) does not hold its accept "
                                     f"length {L:g}")
        out.append(Interval(L, lo, hi, "bootstrap over requests, 95%" if lo is not None else "no interval"))
    drafter = data.get("drafter")
    return BlockCandidate(family, block, tuple(out), drafter if isinstance(drafter, str) and drafter else "<drafter>",
                          what)


def accept_sd_log(interval: Interval) -> float:
    """The standard deviation of log accept length a 95% interval implies (0 without one)."""
    if not interval.has_interval or interval.low <= 0:  # type: ignore[operator]
        return 0.0
    return (math.log(interval.high) - math.log(interval.low)) / (2 * Z)  # type: ignore[arg-type]


def block_flags(family: str, steps: int, drafter: str) -> dict[str, Any]:
    """The engines' flags for a block drafter at K = ``steps`` drafts: SGLang's num_draft_tokens INCLUDES the anchor
    (K + 1); vLLM's num_speculative_tokens is K."""
    if family not in PRICED_FAMILIES:
        raise InputError(f"no engine flags for a {FAMILY_NAMES.get(family, family)} drafter: the plan prices DFlash")
    return {"sglang": f"--speculative-algorithm DFLASH --speculative-num-draft-tokens {steps + 1} "
                      f"--speculative-draft-model-path {drafter}",
            "vllm": {"method": "dflash", "model": drafter, "num_speculative_tokens": steps}}


def block_scenario(scenario, forward_ms: float | None = None):
    """The serving cycle of ``scenario`` (a :class:`~eaglekit.core.speedup.specmath.Scenario`) run by a block
    drafter: the same verify of K + 1 tokens (growing with K as the scenario's does) and ONE draft forward of
    ``forward_ms`` per cycle, whatever K (default: one of the scenario's draft steps, as long as a chain step takes:
    the forward reads the drafter's weights once, as one chain step does; its K + 1 rows add FLOPs that a small batch
    does not feel). A chain of K steps pays ``K x draft_ms``; the block cycle pays ``forward_ms`` once, so its
    break-even is lower at every K above 1."""
    from dataclasses import replace

    ms = scenario.draft_ms if forward_ms is None else forward_ms
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
        raise InputError(f"a block forward's time must be a non-negative number of ms, got {forward_ms!r}")
    return replace(scenario, draft_ms=0.0, overhead_ms=scenario.overhead_ms + float(ms))
