"""The cost of one forward of the target: milliseconds as a function of tokens per request n and batch size B.

A decode step is ``n = 1``; a verify of k drafted tokens is ``n = k + 1``. One forward at batch B moves,
per GPU (tensor-parallel degree ``tp``):

- the weights every token uses (attention, dense MLPs, shared experts, router, norms, lm_head);
- the routed experts any of the ``B x n`` token rows routes to: under uniform routing
  ``E (1 - (1 - k/E)**(B n))`` distinct experts per MoE layer (``E`` routed experts, ``k`` per token;
  Kimi-K2: 8 of 384, so 23.5 for 3 tokens, 38 for 5);
- the KV cache of ``B`` requests at the context length (MLA's latent cache is replicated across TP
  ranks; a GQA cache is split over the key-value heads);

and computes ``2 x active parameters`` FLOPs per token row plus attention over the context. Uniform
routing overestimates distinct experts (real routers favour some experts), so the expert term is an
upper bound at a given B n; at B = 1 it is close.

:class:`ModelShape` holds those quantities from a target's config, with bytes per expert from the
checkpoint header's dtypes and quantisation when the header is given (:func:`shape_from_config`).
:class:`CostModel` turns them into time: from a GPU table alone it is the roofline
``max(bytes / bandwidth, FLOPs / FLOP rate)``, an estimate and a lower bound; measured points calibrate it
(:func:`calibrate`): one point sets a fixed cost per forward, two or more fit ``fixed + a x memory + b x compute`` by
non-negative least squares. A dense target is the special case with no experts.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from eaglekit.core.configs.config import TEXT_CONFIG_KEYS
from eaglekit.core.errors import InputError
from eaglekit.core.serving.saferegex import UnsafePattern, safe_match

__all__ = ["GPUS", "SPLIT_NAMES", "CostModel", "Gpu", "ModelShape", "Point", "calibrate", "check_parallel",
           "distinct_experts", "drafter_shape", "fitted_split", "mtp_drafter", "parse_split", "split_name", "split_verify",
           "estimate_model", "fit_model", "gpu", "shape_from_config"]


#: Bounds on what a config, a measurement or a flag may say: past them a figure is nonsense and the arithmetic
#: overflows (a 400-digit batch size, 1e308 ms, a config declaring 2e9 layers).
MAX_LAYERS = 1 << 16  # decoder layers (the largest models have about 100)
MAX_CONFIG_INT = 1 << 31  # any other size in a config (hidden size, vocabulary, experts, block and group sizes)
MAX_BATCH = 1 << 24  # batch size, and tokens per request, of one forward
MIN_MS, MAX_MS = 1e-3, 1e7  # one forward or draft step: 1 microsecond to 2.8 hours
MAX_TP = 4096
MAX_CONTEXT = 1 << 24
MAX_TB_S, MAX_TFLOPS = 1e3, 1e6  # a custom GPU's figures (H200: 4.8 TB/s, 989 bf16 TFLOP/s); at least 0.01 each


def distinct_experts(tokens: float, *, experts: int, per_token: int) -> float:
    """Expected distinct routed experts ``tokens`` token rows touch in one MoE layer under uniform routing.

    Each row picks ``per_token`` of ``experts`` without replacement, so a given expert is missed by one row
    with probability ``1 - per_token / experts``: ``experts x (1 - (1 - per_token/experts)**tokens)``.
    Kimi-K2 (8 of 384): 8 for one token, 23.5 for 3, 38.4 for 5, 45.6 for 6.
    """
    if experts <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)


# -- GPUs -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One GPU's HBM bandwidth (TB/s) and dense tensor-core rates (TFLOP/s, no sparsity)."""

    name: str
    hbm_tb_s: float
    bf16_tflops: float
    fp8_tflops: float | None  # None: no FP8 tensor cores (A100): FP8 weights run at the bf16 rate
    source: str = "custom"
    memory_gb: float | None = None  # HBM capacity per GPU (GB); None: unknown, capacity is not checked

    def tflops(self, compute: str) -> float:
        return self.fp8_tflops if compute == "fp8" and self.fp8_tflops else self.bf16_tflops


_DS = "NVIDIA datasheet (dense: half the with-sparsity figure)"
#: The common GPUs. Bandwidth and dense rates from each product's NVIDIA datasheet.
GPUS: dict[str, Gpu] = {g.name: g for g in (
    Gpu("H100-SXM", 3.35, 989.0, 1979.0, _DS, 80.0),
    Gpu("H100-PCIe", 2.0, 756.0, 1513.0, _DS, 80.0),
    Gpu("H100-NVL", 3.9, 835.0, 1671.0, _DS, 94.0),
    Gpu("H200", 4.8, 989.0, 1979.0, _DS, 141.0),
    Gpu("H20", 4.0, 148.0, 296.0, _DS, 96.0),
    Gpu("B200", 8.0, 2250.0, 4500.0, _DS, 180.0),
    Gpu("A100-SXM", 2.039, 312.0, None, _DS + "; 80 GB", 80.0),
    Gpu("A100-PCIe", 1.935, 312.0, None, _DS + "; 80 GB", 80.0),
    Gpu("L40S", 0.864, 362.0, 733.0, _DS, 48.0),
    Gpu("L20", 0.864, 119.5, 239.0, _DS, 48.0),
)}


def gpu(name: str | Gpu) -> Gpu:
    """A GPU from :data:`GPUS` by name (case-insensitive), or ``custom:TBPS,BF16[,FP8[,MEM_GB]]`` for your own
    figures (``custom:3.35,989,1979,80``: 3.35 TB/s, 989 bf16 and 1979 fp8 dense TFLOP/s, 80 GB of memory; give
    FP8 0 for a GPU without FP8 tensor cores)."""
    if isinstance(name, Gpu):
        return name
    text = str(name).strip()
    if text.lower().startswith("custom:"):
        parts = text.split(":", 1)[1].split(",")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        ok = len(values) in (2, 3, 4) and all(math.isfinite(v) and v > 0 for i, v in enumerate(values) if i != 2)
        if ok and len(values) > 2:
            ok = math.isfinite(values[2]) and values[2] >= 0
        if ok and len(values) == 4:
            ok = 1.0 <= values[3] <= 1e5
        if ok and not (0.01 <= values[0] <= MAX_TB_S and 0.01 <= values[1] <= MAX_TFLOPS
                       and (len(values) < 3 or values[2] == 0 or 0.01 <= values[2] <= MAX_TFLOPS)):
            ok = False
        if not ok:
            raise InputError(f"custom GPU {text[:60]!r}: give custom:TBPS,BF16_TFLOPS[,FP8_TFLOPS[,MEMORY_GB]], positive "
                             "numbers (e.g. custom:3.35,989,1979,80; FP8 0 where there are no FP8 tensor cores)")
        fp8 = values[2] if len(values) > 2 and values[2] > 0 else None
        return Gpu("custom", values[0], values[1], fp8, "custom", values[3] if len(values) == 4 else None)
    for key, g in GPUS.items():
        if key.lower() == text.lower():
            return g
    raise InputError(f"unknown GPU {text!r}: choose one of {', '.join(GPUS)}, or give your own figures as "
                     "custom:TBPS,BF16_TFLOPS[,FP8_TFLOPS]")


# -- the target's shape ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    """What one forward of a model reads and computes, whole model (divide by TP for one GPU)."""

    name: str
    layers: int
    moe_layers: int
    experts: int  # routed experts per MoE layer; 0 for a dense model
    experts_per_token: int
    expert_bytes: float  # one routed expert's weights (bytes)
    expert_params: float
    always_bytes: float  # read by every forward: attention, dense MLPs, shared experts, router, norms, lm_head
    active_params: float  # parameters one token row multiplies (always + experts_per_token routed experts)
    kv_bytes_per_token: float  # KV cache per context token, all layers
    kv_heads: int | None  # None: MLA latent cache, replicated across TP ranks
    attn_flops_per_context_token: float  # FLOPs per (query row x context token), all layers
    compute: Literal["bf16", "fp8"] = "bf16"
    bytes_from: Literal["config", "header"] = "config"
    notes: tuple[str, ...] = ()
    hidden_size: int = 0  # 0: unknown (a shape built by hand)
    intermediate_size: int = 0
    attention_heads: int = 0
    resident_extra_bytes: float = 0.0  # held in memory but not read whole per forward: the input embedding

    def resident_bytes(self) -> float:
        """Every weight the model holds (all routed experts, the embedding): what capacity counts."""
        return (self.always_bytes + self.moe_layers * self.experts * self.expert_bytes
                + self.resident_extra_bytes)

    @property
    def dense(self) -> bool:
        return self.experts == 0

    def distinct_experts(self, rows: float) -> float:
        return distinct_experts(rows, experts=self.experts, per_token=self.experts_per_token)

    def weight_bytes(self, rows: float) -> float:
        """Weights one forward over ``rows`` token rows reads (every expert touched once)."""
        return self.always_bytes + self.moe_layers * self.distinct_experts(rows) * self.expert_bytes

    def kv_bytes(self, batch: int, context: int) -> float:
        return batch * context * self.kv_bytes_per_token

    def flops(self, rows: float, context: int) -> float:
        return rows * (2.0 * self.active_params + context * self.attn_flops_per_context_token)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "layers": self.layers, "moe_layers": self.moe_layers, "experts": self.experts,
                "experts_per_token": self.experts_per_token, "expert_bytes": self.expert_bytes,
                "always_bytes": self.always_bytes, "active_params": self.active_params,
                "kv_bytes_per_token": self.kv_bytes_per_token, "compute": self.compute,
                "bytes_from": self.bytes_from, "notes": list(self.notes)}


def _body(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in TEXT_CONFIG_KEYS:
        sub = raw.get(key)
        if isinstance(sub, Mapping) and ("hidden_size" in sub or "num_hidden_layers" in sub):
            return sub
    return raw


def _int(body: Mapping[str, Any], *keys: str, default: int | None = None, what: str = "",
         most: int = MAX_CONFIG_INT) -> int:
    for key in keys:
        v = body.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            if v > most:
                raise InputError(f"the target config's {key} is {str(v)[:40]}{'...' if len(str(v)) > 40 else ''}, "
                                 f"more than any model has (at most {most:,}); give the target's own config.json")
            return v
    if default is None:
        raise InputError(f"the target config has no {what or keys[0]} ({' / '.join(keys)}): the cost model needs it; "
                         "give the target's own config.json")
    return default


def _quant(raw: Mapping[str, Any], body: Mapping[str, Any]) -> Mapping[str, Any]:
    q = raw.get("quantization_config") or body.get("quantization_config")
    return q if isinstance(q, Mapping) else {}


def _ignored(module: str, ignore: Sequence[Any]) -> bool:
    for item in ignore:
        if not isinstance(item, str):
            continue
        if item.startswith("re:"):
            try:  # linear time whatever the pattern: a config's regex never backtracks (saferegex)
                if safe_match(item[3:], module):
                    return True
            except UnsafePattern as e:
                raise InputError(f"quantization_config ignore entry {item[:80]!r}: {e}") from None
        elif module == item or module.endswith("." + item) or item == module.split(".")[-1]:
            return True
    return False


def _whole(value: Any) -> bool:
    return type(value) is int and 0 < value <= MAX_CONFIG_INT


def _bytes_per_param(quant: Mapping[str, Any], module: str) -> tuple[float, str]:
    """Bytes per weight of ``module`` under the config's quantisation, and the compute dtype it implies."""
    method = str(quant.get("quant_method", "")).lower()
    if module == "lm_head" or module.endswith(".mlp.gate"):
        return 2.0, "bf16"
    if method == "fp8":
        block = quant.get("weight_block_size") or [128, 128]
        if not (isinstance(block, list) and len(block) == 2 and all(_whole(c) for c in block)):
            raise InputError(f"quantization_config.weight_block_size must be two positive integers, got {block!r}.")
        cells = block[0] * block[1]
        if _ignored(module, quant.get("modules_to_not_convert") or quant.get("ignored_layers") or []):
            return 2.0, "bf16"
        return 1.0 + 4.0 / cells, "fp8"  # e4m3 weights + one fp32 weight_scale_inv per block
    if method == "compressed-tensors":
        if _ignored(module, quant.get("ignore") or []):
            return 2.0, "bf16"
        groups = quant.get("config_groups") or {}
        for group in groups.values() if isinstance(groups, Mapping) else ():
            w = group.get("weights") if isinstance(group, Mapping) else None
            if isinstance(w, Mapping) and _whole(w.get("num_bits")):
                size = w.get("group_size")
                if size in (None, -1):  # per channel: one scale per row, negligible beside the weights
                    return w["num_bits"] / 8.0, "bf16"
                if not _whole(size):
                    raise InputError(f"quantization_config group_size must be a positive integer or -1, got {size!r}.")
                return w["num_bits"] / 8.0 + 2.0 / size, "bf16"  # packed weights + one bf16 scale per group (W4A16)
    return 2.0, "bf16"


#: Tensors a language-model forward does not read in full: the embedding (B n rows), vision towers, MTP heads.
_SKIP = re.compile(r"(embed_tokens|vision|visual|mm_projector|multi_modal|audio)")
_EXPERT = re.compile(r"layers\.(\d+)\.(?:mlp|block_sparse_moe|feed_forward)\.experts\.(\d+)\.")
_FUSED_EXPERTS = re.compile(r"layers\.(\d+)\.(?:mlp|block_sparse_moe|feed_forward)\.experts\.[a-z_]+")
_LAYER = re.compile(r"layers\.(\d+)\.")


def shape_from_config(raw: Mapping[str, Any], *, tensors: Iterable[tuple[str, int]] | None = None,
                      name: str = "target") -> ModelShape:
    """A target's :class:`ModelShape` from its config.json (a text_config wrapper is looked inside), with
    bytes from the checkpoint header when ``tensors`` ((name, nbytes) pairs) is given.

    Parameter counts and FLOPs come from the config (DeepSeek-V3/Kimi MLA and GQA attention; routed and
    shared experts; ``first_k_dense_replace`` dense layers). Bytes come from the header's dtypes and
    quantisation tensors (FP8 ``weight_scale_inv``, INT4 ``weight_packed`` + ``weight_scale``) when given;
    otherwise from ``quantization_config`` (fp8 blocks; compressed-tensors groups and their ignore list).
    """
    if not isinstance(raw, Mapping):
        raise InputError("the target config must be a JSON object (config.json)")
    body = _body(raw)
    L = _int(body, "num_hidden_layers", what="layer count", most=MAX_LAYERS)
    H = _int(body, "hidden_size", what="hidden size")
    V = _int(body, "vocab_size", what="vocabulary size")
    heads = _int(body, "num_attention_heads", what="attention head count")
    E = _int(body, "n_routed_experts", "num_experts", "num_local_experts", default=0)
    k_e = _int(body, "num_experts_per_tok", "num_experts_per_token", default=0) if E else 0
    if E and not k_e:
        raise InputError("the target config names routed experts but not num_experts_per_tok: the cost model needs "
                         "both")
    if k_e > E:
        raise InputError(f"the target config routes each token to {k_e} experts (num_experts_per_tok) of {E} routed "
                         "experts: a token cannot use more experts than there are; give the target's own config.json")
    inter = _int(body, "intermediate_size", default=0)
    moe_inter = _int(body, "moe_intermediate_size", default=inter) if E else 0
    if E and not moe_inter:
        raise InputError("the target config names routed experts but not their size (moe_intermediate_size)")
    dense_layers = min(_int(body, "first_k_dense_replace", default=0), L) if E else L
    moe_layers = L - dense_layers if E else 0
    shared_inter = _int(body, "n_shared_experts", default=0) * moe_inter
    shared_inter += _int(body, "shared_expert_intermediate_size", default=0)
    quant = _quant(raw, body)
    notes: list[str] = []
    # attention (per layer) and its KV cache
    if body.get("kv_lora_rank"):
        kv_lora = _int(body, "kv_lora_rank")
        rope = _int(body, "qk_rope_head_dim", default=64)
        nope = _int(body, "qk_nope_head_dim", default=128)
        v_dim = _int(body, "v_head_dim", default=nope)
        q_lora = _int(body, "q_lora_rank", default=0)
        q = H * q_lora + q_lora * heads * (nope + rope) if q_lora else H * heads * (nope + rope)
        attn = q + H * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * H
        kv_per_token = (kv_lora + rope) * 2.0  # bf16 latent + rope key per layer
        kv_heads: int | None = None
        attn_ctx = 2.0 * heads * (2 * kv_lora + rope)  # absorbed MLA: scores over kv_lora+rope, values over kv_lora
    else:
        hd = _int(body, "head_dim", default=H // max(heads, 1))
        kv_heads = _int(body, "num_key_value_heads", default=heads)
        attn = H * heads * hd + 2 * H * kv_heads * hd + heads * hd * H
        kv_per_token = 2.0 * kv_heads * hd * 2.0
        attn_ctx = 4.0 * heads * hd
    mlp_dense = 3 * H * inter  # gated MLP: gate, up, down
    expert = 3 * H * moe_inter
    shared = 3 * H * shared_inter
    router = H * E
    always_params = L * attn + dense_layers * mlp_dense + (L - dense_layers) * (shared + router) + V * H  # + lm_head
    active = always_params + moe_layers * k_e * expert
    # bytes from the config's quantisation
    b_attn, c_attn = _bytes_per_param(quant, "model.layers.1.self_attn.o_proj")
    b_dense, _ = _bytes_per_param(quant, "model.layers.0.mlp.down_proj")
    b_shared, _ = _bytes_per_param(quant, "model.layers.1.mlp.shared_experts.down_proj")
    b_expert, c_expert = _bytes_per_param(quant, "model.layers.1.mlp.experts.0.down_proj")
    always_bytes = (L * attn * b_attn + dense_layers * mlp_dense * b_dense + moe_layers * shared * b_shared
                    + moe_layers * router * 2.0 + V * H * 2.0)
    expert_bytes = expert * b_expert
    compute = "fp8" if (c_expert if E else c_attn) == "fp8" else "bf16"
    bytes_from: Literal["config", "header"] = "config"
    if tensors is not None:
        header = _bytes_from_header(tensors, layers=L, experts=E)
        if header is not None:
            always_bytes, expert_bytes, skipped = header
            bytes_from = "header"
            if skipped:
                notes.append(f"not read per forward, left out: {skipped}")
    kv_dtype = body.get("kv_cache_dtype")
    if kv_dtype:
        notes.append(f"config kv_cache_dtype {kv_dtype!r} ignored: KV cache counted in bf16")
    return ModelShape(name, L, moe_layers, E, k_e, float(expert_bytes), float(expert), float(always_bytes),
                      float(active), float(L * kv_per_token), kv_heads, float(L * attn_ctx), compute, bytes_from,
                      tuple(notes), H, inter or 4 * H, heads, float(V * H * 2.0))


def _bytes_from_header(tensors: Iterable[tuple[str, int]], *, layers: int,
                       experts: int) -> tuple[float, float, str] | None:
    """(always bytes, mean bytes per routed expert, what was left out) from header entries, or None when the
    header holds no decoder layers (a config-only location)."""
    always = 0.0
    per_expert: dict[tuple[int, int], float] = {}
    fused = 0.0
    fused_layers: set[int] = set()
    skipped: dict[str, int] = {}
    seen_layers = False
    for tname, nbytes in tensors:
        if _SKIP.search(tname):
            key = _SKIP.search(tname).group(1)
            skipped[key] = skipped.get(key, 0) + 1
            continue
        layer = _LAYER.search(tname)
        if layer is not None:
            if int(layer.group(1)) >= layers:  # a multi-token-prediction layer past the decoder
                skipped["layers past num_hidden_layers (MTP)"] = skipped.get("layers past num_hidden_layers (MTP)",
                                                                             0) + 1
                continue
            seen_layers = True
        m = _EXPERT.search(tname)
        if m is not None and experts:
            key2 = (int(m.group(1)), int(m.group(2)))
            per_expert[key2] = per_expert.get(key2, 0.0) + nbytes
            continue
        f = _FUSED_EXPERTS.search(tname)
        if f is not None and experts and "shared" not in tname:
            fused += nbytes
            fused_layers.add(int(f.group(1)))
            continue
        always += nbytes
    if not seen_layers:
        return None
    if per_expert:
        expert_bytes = sum(per_expert.values()) / len(per_expert)
    elif fused_layers:
        expert_bytes = fused / (len(fused_layers) * experts)
    else:
        expert_bytes = 0.0
    what = ", ".join(f"{k} ({n} tensors)" for k, n in sorted(skipped.items()))
    return always, expert_bytes, what


_ANY_EXPERT = re.compile(r"experts\.(\d+)\.")


def drafter_shape(heads: int, kv_heads: int, head_dim: int, layers: int,
                  tensors: Iterable[tuple[str, str, int, int]], *, name: str = "drafter",
                  config: Mapping[str, Any] | None = None) -> ModelShape:
    """A drafter's draft step as a :class:`ModelShape` from its header ((name, dtype, parameters, nbytes) per
    tensor): every weight read once per step but the embedding (the target's, B rows read) and the integer
    vocabulary maps (d2t, t2d: looked up, not multiplied); one token row per request per step; its own KV cache
    over the context.

    Sized from the drafter's own layer (``config``, its config.json): an MLA layer (``kv_lora_rank``) caches its
    latent and rope key (``kv_lora_rank + qk_rope_head_dim`` per token per layer, replicated across TP ranks) and
    attends over them; a MoE MLP's routed experts (tensors ``...experts.<i>.``; ``n_routed_experts``,
    ``num_experts_per_tok``) are read only where a row routes to them, so a step reads its
    ``num_experts_per_tok`` experts (and the shared ones, always), not all of them. Without them: a Llama layer of
    ``kv_heads`` x ``head_dim``."""
    read, params = 0.0, 0.0
    per_expert: dict[tuple[str, int], tuple[float, float]] = {}
    for tname, dtype, n_params, nbytes in tensors:
        if "embed_tokens" in tname or dtype.upper() in ("I64", "I32", "BOOL", "U8"):
            continue
        m = _ANY_EXPERT.search(tname)
        if m is not None and "shared" not in tname:
            key = (tname[:m.start()], int(m.group(1)))
            b0, p0 = per_expert.get(key, (0.0, 0.0))
            per_expert[key] = (b0 + nbytes, p0 + n_params)
            continue
        read += nbytes
        params += n_params
    if read == 0 and not per_expert:
        raise InputError(f"{name}: the header holds no weights to price a draft step with")
    cfg = config or {}
    experts, k_e, moe_layers, e_bytes, e_params = 0, 0, 0, 0.0, 0.0
    notes: list[str] = []
    if per_expert:
        moe_layers = len({prefix for prefix, _ in per_expert})
        experts = max(1, len(per_expert) // moe_layers)
        n_cfg = cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts")
        experts = n_cfg if isinstance(n_cfg, int) and n_cfg >= experts else experts
        k_cfg = cfg.get("num_experts_per_tok")
        k_e = k_cfg if isinstance(k_cfg, int) and 0 < k_cfg <= experts else min(8, experts)
        e_bytes = sum(b for b, _ in per_expert.values()) / len(per_expert)
        e_params = sum(q for _, q in per_expert.values()) / len(per_expert)
        notes.append(f"MoE MLP: {experts} routed experts, {k_e} per row (a step reads the experts its rows route "
                     "to, not all)")
    kv_lora = cfg.get("kv_lora_rank")
    if isinstance(kv_lora, int) and kv_lora > 0:
        rope = cfg.get("qk_rope_head_dim") if isinstance(cfg.get("qk_rope_head_dim"), int) else 64
        kv_per_token = layers * (kv_lora + rope) * 2.0
        attn_ctx = layers * 2.0 * heads * (2 * kv_lora + rope)
        kv_h: int | None = None
        notes.append(f"MLA attention: a {kv_lora + rope}-wide latent cache per token, replicated across TP ranks")
    else:
        kv_per_token = layers * 2.0 * kv_heads * head_dim * 2.0
        attn_ctx = layers * 4.0 * heads * head_dim
        kv_h = kv_heads
    return ModelShape(name, layers, moe_layers, experts, k_e, e_bytes, e_params, read, params + moe_layers * k_e * e_params,
                      kv_per_token, kv_h, attn_ctx, "bf16", "header", tuple(notes))


def mtp_drafter(raw: Mapping[str, Any], *, name: str = "MTP layer") -> ModelShape:
    """A target's own multi-token-prediction layer as its drafter (DeepSeek-V3 / Kimi NextN, GLM, Qwen3-Next MTP):
    one decoder layer of the target (its attention and, past ``first_k_dense_replace``, its MoE MLP: the experts a
    row routes to and the shared ones), the ``eh_proj`` that joins the embedding and the hidden state (2H x H),
    its norms and the shared lm_head; bytes from the target's quantisation."""
    if not isinstance(raw, Mapping):
        raise InputError("the target config must be a JSON object (config.json)")
    body = _body(raw)
    one = {**body, "num_hidden_layers": 1, "first_k_dense_replace": 0}
    if "quantization_config" in raw and "quantization_config" not in one:
        one["quantization_config"] = raw["quantization_config"]
    layer = shape_from_config(one, name=name)
    H = layer.hidden_size
    eh = 2 * H * H
    notes = ["one decoder layer of the target (MoE where the target's layers are), eh_proj and the shared lm_head"]
    if not any(isinstance(body.get(k), int) and body.get(k) > 0 for k in ("num_nextn_predict_layers",
                                                                          "mtp_num_hidden_layers")):
        notes.append("the config names no MTP layer (num_nextn_predict_layers): priced as one of its decoder layers")
    return replace(layer, always_bytes=layer.always_bytes + eh * 2.0, active_params=layer.active_params + eh,
                   notes=tuple(notes))


# -- time -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One measured forward of the target: ``tokens`` per request at batch ``batch`` took ``ms``."""

    batch: int
    tokens: int
    ms: float

    def __post_init__(self) -> None:
        check_point(self.batch, self.tokens, self.ms)


def check_point(batch: object, tokens: object, ms: object, *, where: str = "a measurement") -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InputError(f"{where}: batch size must be a whole number from 1 to {MAX_BATCH:,}, got {_short(batch)}")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_BATCH:
        raise InputError(f"{where}: tokens per request must be a whole number from 1 to {MAX_BATCH:,} (1 = a decode "
                         f"step, k + 1 = a verify of k drafts), got {_short(tokens)}")
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
        raise InputError(f"{where}: time must be a positive number of milliseconds, got {_short(ms)}")
    if not MIN_MS <= ms <= MAX_MS:
        raise InputError(f"{where}: {ms:g} ms is outside {MIN_MS:g} to {MAX_MS:g} ms, what one forward can take; "
                         "check the unit (milliseconds)")


def _short(value: object) -> str:
    """``value`` for a message, cut to 40 characters (a 400-digit number stays one short line)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


Kind = Literal["estimate", "calibrated", "fitted"]
_UNIT = Gpu("unit", 1.0, 1000.0, 1000.0, "no GPU given: features in GB and TFLOP per GPU")


@dataclass(frozen=True)
class CostModel:
    """Milliseconds for one forward of ``shape`` at batch B with n tokens per request.

    ``combine="max"``: ``fixed + max(mem x memory ms, compute x compute ms)`` (the roofline; with fixed 0 and
    both factors 1, a lower bound). ``combine="sum"``: ``fixed + mem x memory ms + compute x compute ms`` (a
    fit, where the overlap of memory and compute is unknown). Memory ms = bytes per GPU / bandwidth,
    compute ms = FLOPs per GPU / FLOP rate. Without a shape (a measurement table alone) memory ms is 0 and
    compute ms is the token-row count, so the model is ``fixed + per-token x B n``.
    """

    shape: ModelShape | None
    gpu: Gpu | None
    tp: int = 1
    context: int = 4096
    fixed_ms: float = 0.0
    mem: float = 1.0
    compute: float = 1.0
    combine: Literal["max", "sum"] = "max"
    kind: Kind = "estimate"
    points: tuple[Point, ...] = ()
    label: str = field(default="", compare=False)
    per_token_ms: float = 0.0  # beyond bytes and FLOPs: ms per token per request past the first, whatever B is
    per_request_ms: float = 0.0  # beyond bytes and FLOPs: ms per request, whatever n is (scheduling, sampling)
    #: (batch, ms) where a measured decode step sits off the fitted terms: a cost per forward the terms have no
    #: place for, carried whole to every forward at that batch size (a verify beside a measured decode is that
    #: decode plus what the terms add for its extra tokens); interpolated linearly in log batch size between
    #: anchors, held past them (:func:`anchor_decodes`)
    misfit: tuple[tuple[int, float], ...] = ()
    #: beyond bytes and FLOPs: ms per verify forward (any forward of more than one token per request), whatever
    #: its tokens and batch: the per-forward reading of a measured verify's excess (:func:`split_verify`)
    per_verify_ms: float = 0.0
    #: carry the per-token excess line past the verifies measured (the account's per-token reading, a hypothesis it
    #: names and prices as such); False (the plan): a verify past them costs at most a decode of B x n requests
    #: plus the excess measured (:meth:`ms`)
    carry_excess: bool = False
    #: the most tokens per request of a measured verify where :attr:`points` are not kept (the serving widget's
    #: twin of a plan's model); None: read from the points
    verify_top: int | None = None

    def excess_ms(self, tokens: int) -> float:
        """What a forward of ``tokens`` per request holds beyond bytes and FLOPs: the per-token and per-verify
        costs (0 for a decode step)."""
        return 0.0 if tokens <= 1 else self.per_token_ms * (tokens - 1) + self.per_verify_ms

    def offset_ms(self, batch: int) -> float:
        """The measured decodes' offset from the terms at ``batch`` (:attr:`misfit`)."""
        a = self.misfit
        if not a:
            return 0.0
        if batch <= a[0][0]:
            return a[0][1]
        if batch > a[-1][0]:
            return a[-1][1]
        i = bisect.bisect_left(a, batch, key=lambda anchor: anchor[0])  # log time: thousands of anchors stay fast
        (b0, r0), (b1, r1) = a[i - 1], a[i]
        return r0 + math.log(batch / b0) / math.log(b1 / b0) * (r1 - r0)

    def features(self, batch: int, tokens: int) -> tuple[float, float]:
        """(memory ms, compute ms) at efficiency 1 for one forward per GPU."""
        rows = batch * tokens
        if self.shape is None:
            return 0.0, float(rows)
        s, g = self.shape, self.gpu or _UNIT
        kv = s.kv_bytes(batch, self.context)
        kv_per_gpu = kv if s.kv_heads is None else kv / min(self.tp, max(s.kv_heads, 1))
        gb = (s.weight_bytes(rows) / self.tp + kv_per_gpu) / 1e9
        tflop = s.flops(rows, self.context) / self.tp / 1e12
        return gb / g.hbm_tb_s, tflop * 1000.0 / g.tflops(s.compute)

    def terms_ms(self, batch: int, tokens: int) -> float:
        """The forward from the fitted terms alone (no :attr:`misfit`)."""
        m, c = self.features(batch, tokens)
        extra = self.excess_ms(tokens) + self.per_request_ms * batch
        if self.combine == "max":
            return self.fixed_ms + max(self.mem * m, self.compute * c) + extra
        return self.fixed_ms + self.mem * m + self.compute * c + extra

    @property
    def verify_tokens_measured(self) -> int | None:
        """The most tokens per request of a measured verify (None: no verify among the points): the per-token
        excess is a straight line through the measured verifies, and :meth:`ms` carries it no further (unless
        :attr:`carry_excess`)."""
        if self.verify_top is not None:
            return self.verify_top or None
        top = self.__dict__.get("_verify_top", 0)
        if top == 0:   # computed once: the grid asks for every batch size x tokens, and points may number thousands
            top = max((p.tokens for p in self.points if p.tokens > 1), default=None)
            object.__setattr__(self, "_verify_top", top)
        return top

    def extrapolated_excess(self, tokens: int) -> bool:
        """True where the per-token excess line is carried past the verifies measured (``tokens`` beyond them)."""
        top = self.verify_tokens_measured
        return self.per_token_ms > 0 and top is not None and tokens > top

    def ms(self, batch: int, tokens: int) -> float:
        """One forward. A verify (``tokens`` > 1) costs no more than a decode step of ``batch x tokens`` requests
        plus the excess the measured verifies show (:meth:`excess_ms` at ``tokens``, or at the most tokens a verify
        was measured at where ``tokens`` is past them): n tokens of one request do the same expert and GEMM work
        as n requests' decode with less KV cache to read and fewer requests to schedule, and a straight line
        through two short verifies says nothing of a 60-token one."""
        base = self.terms_ms(batch, tokens)
        core = max(base + self.offset_ms(batch), 0.5 * base) if self.misfit else base
        if tokens <= 1:
            return core
        top = None if self.carry_excess else self.verify_tokens_measured
        seen = self.excess_ms(tokens if top is None else min(tokens, top))
        return min(core, self.ms(min(batch * tokens, MAX_BATCH), 1) + seen)

    def verify_ratio(self, steps: int, *, batch: int = 1) -> float:
        """Verify of ``steps`` drafts (``steps + 1`` tokens) over a decode step, at ``batch``."""
        return self.ms(batch, steps + 1) / self.ms(batch, 1)

    def describe(self) -> str:
        anchored = ("; anchored to the decode measured at batch " + ", ".join(f"{b} ({r:+.2f} ms)" for b, r in
                                                                             self.misfit)) if self.misfit else ""
        if self.shape is None:
            per_token = f" + {self.per_token_ms:.3g} ms per verified token past the first" if self.per_token_ms else ""
            per_token += f" + {self.per_verify_ms:.3g} ms per verify forward" if self.per_verify_ms else ""
            return (f"fitted to {len(self.points)} measurements without a target config: {self.fixed_ms:.3g} ms "
                    f"+ {self.compute:.3g} ms per token row{per_token}{anchored}")
        where = f"{self.gpu.name} x {self.tp}" if self.gpu else f"TP {self.tp}, no GPU table"
        base = f"{self.shape.name} on {where}, context {self.context} tokens"
        if self.kind == "estimate":
            return f"{base}: estimate from config and GPU table (roofline, a lower bound on time)"
        if self.combine == "max":
            return (f"{base}: roofline + {self.fixed_ms:.3g} ms fixed per forward, scaled by {self.mem:.3g}, "
                    f"calibrated to {len(self.points)} measurement")
        extra = (f" + {self.per_token_ms:.3g} ms per verified token past the first (what bytes and FLOPs leave "
                 "out of the measured verify; independent of batch size)" if self.per_token_ms else "")
        if self.per_verify_ms:
            extra += (f" + {self.per_verify_ms:.3g} ms per verify forward (what the measured verify holds beyond "
                      "bytes and FLOPs, read as a cost per forward: launches without graphs, all-reduces)")
        if self.per_request_ms:
            extra += (f" + {self.per_request_ms:.3g} ms per request (what the batch's growth holds beyond the "
                      f"roofline at {COMPUTE_PRIOR:g} x compute time; it does not grow with verified tokens)")
        return (f"{base}: {self.kind} to {len(self.points)} measurements: {self.fixed_ms:.3g} ms fixed + "
                f"{self.mem:.3g} x memory time + {self.compute:.3g} x compute time{extra}{anchored}")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "combine": self.combine, "fixed_ms": self.fixed_ms, "memory_factor": self.mem,
                "compute_factor": self.compute, "per_token_ms": self.per_token_ms,
                "per_request_ms": self.per_request_ms, "per_verify_ms": self.per_verify_ms, "tp": self.tp, "context": self.context,
                "gpu": None if self.gpu is None else {"name": self.gpu.name, "hbm_tb_s": self.gpu.hbm_tb_s,
                                                      "bf16_tflops": self.gpu.bf16_tflops,
                                                      "fp8_tflops": self.gpu.fp8_tflops},
                "shape": None if self.shape is None else self.shape.to_json(),
                "points": [[p.batch, p.tokens, p.ms] for p in self.points],
                "decode_offsets": [[b, r] for b, r in self.misfit], "description": self.describe()}


def extrapolation_note(model: CostModel, tokens: Sequence[int]) -> str:
    """The plan's warning where verifies of ``tokens`` per request are priced past the verifies measured
    (:meth:`CostModel.extrapolated_excess`): the fitted excess line is not carried there, and what would price them."""
    top = model.verify_tokens_measured
    shown = ", ".join(map(str, tokens[:6])) + (f" ... {tokens[-1]}" if len(tokens) > 6 else "")
    how = ("the line is carried there (the per-token reading's hypothesis)" if model.carry_excess else
           f"the line is not carried there: each costs at most a decode step of B x n requests plus the excess "
           f"measured at {top} tokens ({model.excess_ms(top or 1):.3g} ms)")
    return (f"verify extrapolated: the verify's excess over bytes and FLOPs ({model.per_token_ms:.3g} ms per verified "
            f"token past the first) is a straight line through verifies measured at up to {top} tokens per request; "
            f"verifies of {shown} tokens are priced past them, and {how}. Measure a verify at {tokens[-1]} tokens "
            f"(--costs B,{tokens[-1]},MS or a verify_ms column) to price it")


#: Offsets smaller than this (ms) are the fit's rounding, not a misfit.
MISFIT_FLOOR_MS = 1e-6


#: The two ends of the verify split: what a measured verify holds beyond bytes and FLOPs is a cost per verified
#: token (0.0) or a cost per verify forward (1.0); a fraction between puts that share on the forward.
SPLIT_NAMES = {"per-token": 0.0, "per-forward": 1.0}


def parse_split(value: object) -> float:
    """``per-token``, ``per-forward`` or a fraction from 0 to 1 (the share of the excess paid per forward)."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in SPLIT_NAMES:
            return SPLIT_NAMES[text]
        try:
            value = float(text)
        except ValueError:
            value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise InputError(f"verify split {_short(value)}: give per-token, per-forward or the fraction of the verify's "
                         "excess paid per forward (0 = per-token, 1 = per-forward)")
    return float(value)


def split_name(fraction: float) -> str:
    """``per-token``, ``per-forward`` or ``60% per forward``."""
    for name, f in SPLIT_NAMES.items():
        if abs(fraction - f) < 1e-12:
            return name
    return f"{fraction:.0%} per forward"


def split_verify(model: CostModel, fraction: float) -> CostModel:
    """``model`` with ``fraction`` of its per-token excess read as a cost per verify forward instead, the measured
    verify kept exact: at its ``n`` tokens, ``per_token x (n - 1)`` becomes ``(1 - f) per_token x (n - 1) + f x
    per_token x (n - 1)`` per forward. One decode and one verify point cannot tell the readings apart (both go
    through both points); a verify at another k, or the same verify with CUDA graphs on, does. A model without a
    per-token excess is returned as it is."""
    f = parse_split(fraction)
    if model.per_token_ms <= 0 and model.per_verify_ms <= 0:
        return model
    ref = reference_verify_tokens(model)
    total = model.per_token_ms * (ref - 1) + model.per_verify_ms
    return replace(model, per_token_ms=(1.0 - f) * total / (ref - 1), per_verify_ms=f * total)


def reference_verify_tokens(model: CostModel) -> int:
    """The tokens of the verify the model was calibrated through (the smallest measured above 1; 3 without one)."""
    return min((p.tokens for p in model.points if p.tokens > 1), default=3)


def fitted_split(model: CostModel) -> float | None:
    """The split the measured verifies themselves set, where they were measured at two or more token counts at one
    batch size (least squares over f in [0, 1]); None where they cannot tell."""
    if model.per_token_ms <= 0 and model.per_verify_ms <= 0:
        return None
    by_batch: dict[int, dict[int, float]] = {}
    for p in model.points:
        if p.tokens > 1:
            by_batch.setdefault(p.batch, {})[p.tokens] = p.ms
    if not any(len(v) > 1 for v in by_batch.values()):
        return None
    best = None
    for i in range(101):
        m = split_verify(model, i / 100)
        sse = sum((m.ms(b, n) - ms) ** 2 for b, v in by_batch.items() for n, ms in v.items())
        if best is None or sse < best[0] - 1e-12:
            best = (sse, i / 100)
    return None if best is None else best[1]


def anchor_decodes(model: CostModel, decodes: Mapping[int, float]) -> CostModel:
    """``model`` anchored to measured decode steps ({batch: ms}): where one sits off the fitted terms the offset
    is carried to every forward at that batch size (:attr:`CostModel.misfit`); none off: ``model`` unchanged."""
    anchors = tuple(sorted((int(b), float(ms) - model.terms_ms(int(b), 1)) for b, ms in decodes.items()))
    if all(abs(r) < MISFIT_FLOOR_MS for _, r in anchors):
        return replace(model, misfit=())
    return replace(model, misfit=anchors)


def check_parallel(tp: object, context: object) -> None:
    """Tensor-parallel degree >= 1 and a context length >= 0, as whole numbers."""
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_TP:
        raise InputError(f"tensor-parallel degree must be a whole number from 1 to {MAX_TP}, got {_short(tp)}")
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= MAX_CONTEXT:
        raise InputError(f"context length must be a whole number of tokens from 0 to {MAX_CONTEXT:,}, got "
                         f"{_short(context)}")


def estimate_model(shape: ModelShape, gpu_: Gpu | str, *, tp: int = 1, context: int = 4096) -> CostModel:
    """The roofline estimate from the config and a GPU table: a lower bound on time, uncalibrated."""
    check_parallel(tp, context)
    return CostModel(shape, gpu(gpu_), tp, context)


def _lstsq(cols: Sequence[Sequence[float]], y: Sequence[float]) -> list[float] | None:
    """Least squares for a handful of columns via the normal equations (Gauss-Jordan); None when singular."""
    n = len(cols)
    a = [[sum(ci * cj for ci, cj in zip(cols[i], cols[j])) for j in range(n)] for i in range(n)]
    b = [sum(ci * yi for ci, yi in zip(cols[i], y)) for i in range(n)]
    for i in range(n):
        piv = max(range(i, n), key=lambda r: abs(a[r][i]))
        if abs(a[piv][i]) < 1e-12 * max(1.0, max(abs(x) for row in a for x in row)):
            return None
        a[i], a[piv], b[i], b[piv] = a[piv], a[i], b[piv], b[i]
        for r in range(n):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * z for x, z in zip(a[r], a[i])]
                b[r] -= f * b[i]
    return [b[i] / a[i][i] for i in range(n)]


#: The most a fit may scale the roofline's compute time: 20 x is 5% of the dense peak, below what any serving
#: GEMM runs at. A two-point fit that wants more (the seed's verify: "585 x compute") is refused, and the excess
#: goes to a per-token cost that does not grow with batch size.
COMPUTE_MAX = 20.0
#: Compute time at half the dense peak: where a fit whose points cannot tell compute per token row from cost per
#: request (decode steps only: both grow as B) puts compute, the rest going to a cost per request.
COMPUTE_PRIOR = 2.0

#: Which coefficients a fit frees, in order of preference among equally good fits: memory and compute
#: first (what the shape predicts), a fixed cost only when the points ask for it; last, with memory and compute
#: at the roofline (factor 1), a per-token cost for what a verify measured beyond its bytes and FLOPs.
_SUBSETS: tuple[tuple[tuple[str, ...], dict[str, float]], ...] = (
    (("fixed", "mem", "per_request"), {"compute": COMPUTE_PRIOR}),
    (("fixed", "per_request"), {"mem": 1.0, "compute": COMPUTE_PRIOR}),
    (("fixed", "mem", "compute"), {}), (("mem", "compute"), {}), (("fixed", "mem"), {}), (("fixed", "compute"), {}),
    (("mem",), {}), (("compute",), {}), (("fixed",), {}),
    (("fixed", "mem", "per_token"), {}), (("fixed", "compute", "per_token"), {}),
    (("fixed", "per_token"), {"mem": 1.0, "compute": 1.0}),
    (("mem", "per_token"), {}), (("per_token",), {"mem": 1.0, "compute": 1.0}))


def fit_model(base: CostModel, points: Sequence[Point], *, kind: Kind = "fitted",
              per_request: bool = True) -> CostModel:
    """``fixed + a x memory + b x compute (+ v x (tokens - 1))`` with every coefficient ``>= 0`` and ``b <=``
    :data:`COMPUTE_MAX` fitted to ``points`` (least squares over the coefficient subsets a point set can
    determine; the best feasible one, ties to the earlier in :data:`_SUBSETS`). ``per_request=False`` leaves the
    cost per request out (every growth with batch size per token row: the other reading of decode-only rows)."""
    pts = tuple(points)
    distinct = {(p.batch, p.tokens) for p in pts}
    if len(distinct) < 2:
        raise InputError(f"a fit needs measurements at two or more (batch, tokens) pairs, got {len(distinct)}: add a "
                         "decode step (tokens 1) and a verify (tokens k + 1), or use one point to calibrate")
    feats = [base.features(p.batch, p.tokens) for p in pts]
    columns = {"fixed": [1.0] * len(pts), "mem": [f[0] for f in feats], "compute": [f[1] for f in feats],
               "per_token": [float(p.tokens - 1) for p in pts], "per_request": [float(p.batch) for p in pts]}
    y = [p.ms for p in pts]
    scale = sum(v * v for v in y)
    best: tuple[float, int, dict[str, float]] | None = None
    for rank, (subset, pinned) in enumerate(_SUBSETS):
        if len(subset) > len(distinct) or any(not any(columns[c]) for c in subset):
            continue
        if any(not any(columns[c]) for c in pinned) or ("per_request" in subset and (base.shape is None
                                                                                     or not per_request)):
            continue
        target = [yi - sum(v * columns[c][i] for c, v in pinned.items()) for i, yi in enumerate(y)]
        sol = _lstsq([columns[c] for c in subset], target)
        if sol is None or any(v < -1e-12 for v in sol):
            continue
        coef = {**pinned, **dict(zip(subset, (max(v, 0.0) for v in sol)))}
        if base.shape is not None and coef.get("compute", 0.0) > COMPUTE_MAX:
            continue
        pred = [sum(coef.get(c, 0.0) * columns[c][i] for c in columns) for i in range(len(pts))]
        sse = sum((a - b) ** 2 for a, b in zip(pred, y))
        key = (round(sse / scale, 9), rank)
        if best is None or key < best[:2]:
            best = (key[0], rank, coef)
    if best is None:
        raise InputError("no non-negative fixed + memory + compute model fits these measurements: check that times "
                         "grow with batch size and tokens")
    c = best[2]
    return replace(base, fixed_ms=c.get("fixed", 0.0), mem=c.get("mem", 0.0), compute=c.get("compute", 0.0),
                   per_token_ms=c.get("per_token", 0.0), per_request_ms=c.get("per_request", 0.0), combine="sum",
                   kind=kind, points=pts)


def calibrate(base: CostModel, points: Sequence[Point]) -> CostModel:
    """Calibrate an estimate to measured points. One point: what it takes beyond the roofline is a fixed cost
    per forward (kernel launches, tensor-parallel collectives, scheduling: what bytes and FLOPs leave out);
    a point faster than the roofline scales it down instead. Two or more points fit
    ``fixed + a x memory + b x compute`` (:func:`fit_model`)."""
    pts = tuple(points)
    if not pts:
        return base
    if len({(p.batch, p.tokens) for p in pts}) == 1:
        p = pts[0]
        ms = sum(q.ms for q in pts) / len(pts)
        roof = max(base.features(p.batch, p.tokens))
        if ms >= roof:
            return replace(base, fixed_ms=ms - roof, mem=1.0, compute=1.0, combine="max", kind="calibrated",
                           points=pts)
        return replace(base, fixed_ms=0.0, mem=ms / roof, compute=ms / roof, combine="max", kind="calibrated",
                       points=pts)
    return fit_model(base, pts, kind="calibrated")
