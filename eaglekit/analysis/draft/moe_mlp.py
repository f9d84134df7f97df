"""DeepSeek's mixture-of-experts MLP: a router, routed experts and shared experts (Kimi's MoE drafters).

Checked against transformers ``models/deepseek_v3/modeling_deepseek_v3.py`` (``DeepseekV3TopkRouter``,
``DeepseekV3MoE``) and vLLM ``model_executor/layers/fused_moe`` ``grouped_topk`` (docs/acceptance.md):

* router logits ``gate.weight @ x`` in float32; scores ``sigmoid`` (``scoring_func`` sigmoid: DeepSeek-V3,
  Kimi) or ``softmax``;
* experts are CHOSEN by the scores plus ``gate.e_score_correction_bias`` when the checkpoint has it
  (``topk_method`` noaux_tc), WEIGHTED by the scores without it;
* grouped top-k where ``n_group`` > 1: a group's score is the sum of its ``min(2, experts per group)`` best
  choice scores (noaux_tc; TorchSpec ``torchspec/models/draft/moe.py`` ``DeepseekV3MoEBlock._route``: ``group_topk
  = min(2, experts_per_group)``, so groups of one expert score that expert) or its best one
  (group_limited_greedy); only the ``topk_group`` best groups' experts compete (the others are masked to -inf,
  as vLLM's grouped_topk);
* ``num_experts_per_tok`` experts per token; weights divided by their sum when ``norm_topk_prob``, then
  times ``routed_scaling_factor``;
* output ``sum_e w_e expert_e(x) + shared_experts(x)`` (every expert a SiLU-gated MLP of
  ``moe_intermediate_size``; the shared experts one gated MLP of ``n_shared_experts x`` that size).

Experts are applied one at a time to the rows routed to them; a checkpoint too large to keep
(:mod:`.weights`) has each expert read by range when a pass needs it, so memory holds one expert.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from eaglekit.analysis.draft.dense_mlp import load_gated
from eaglekit.analysis.draft.ops import gated
from eaglekit.analysis.draft.weights import Weights
from eaglekit.core.configs.config import DrafterConfig
from eaglekit.core.errors import ConfigError

#: the keys a MoE drafter's config gives (transformers DeepseekV3Config names)
MOE_KEYS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "scoring_func",
            "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group", "topk_method")


def moe_settings(config: DrafterConfig) -> dict[str, Any] | None:
    """The MoE keys of a drafter config (None: a dense MLP). A config is MoE when it says ``use_moe`` or
    names ``n_routed_experts`` without ``use_moe: false``."""
    raw = config.raw
    given = getattr(config, "moe", None)
    if isinstance(given, Mapping) and given:
        s = dict(given)
    else:
        if raw.get("use_moe") is False or ("n_routed_experts" not in raw and not raw.get("use_moe")):
            return None
        s = {k: raw.get(k) for k in MOE_KEYS}
    if s.get("use_moe") is False:
        return None
    return s


def _int(s: Mapping[str, Any], key: str, src: str, default: int | None = None) -> int:
    v = s.get(key, default)
    if v is None:
        v = default
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ConfigError(f"{src}: the MoE config's {key} must be a whole number, got {v!r}.")
    return v


class RoutingPrecision:
    """Rows routed in float32 whose top-k expert set differs when the same row is routed in bfloat16
    (TorchSpec's ``_run_experts_grouped_mm`` computes experts in bfloat16 and trains the whole drafter in it): at
    those rows eaglekit's float32 figure follows other experts than bf16 training and serving would."""

    def __init__(self) -> None:
        self.rows = self.differ = 0

    def reset(self) -> None:
        self.rows = self.differ = 0

    def count(self, fp32: torch.Tensor, bf16: torch.Tensor) -> None:
        self.rows += int(fp32.shape[0])
        self.differ += int((fp32.sort(-1).values != bf16.sort(-1).values).any(-1).sum())

    def note(self) -> str | None:
        if not self.differ:
            return None
        return (f"MoE routing precision: at {self.differ:,} of {self.rows:,} routed rows the float32 top-k experts "
                "differ from the bfloat16 ones (TorchSpec computes experts in bfloat16): the figure is not exact "
                "for a bf16 drafter there; measure with --dtype bfloat16 to route as it was trained.")


class MoEMLP:
    family = "moe"

    @staticmethod
    def tensors(config: DrafterConfig, prefix: str) -> tuple[str, ...]:
        s = moe_settings(config) or {}
        n = s.get("n_routed_experts") if isinstance(s.get("n_routed_experts"), int) else 0
        names = [prefix + "mlp.gate.weight"]
        names += [f"{prefix}mlp.experts.{e}.{w}_proj.weight" for e in range(n) for w in ("gate", "up", "down")]
        names += [prefix + "mlp.experts.gate_up_proj", prefix + "mlp.experts.down_proj"]  # or fused (TorchSpec)
        if s.get("n_shared_experts"):
            names += [f"{prefix}mlp.shared_experts.{w}_proj.weight" for w in ("gate", "up", "down")]
        return tuple(names)

    def __init__(self, config: DrafterConfig, weights: Weights, prefix: str) -> None:
        src, p = weights.source, prefix + "mlp."
        s = moe_settings(config)
        if s is None:
            raise ConfigError(f"{src}: {p}gate.weight is a MoE router but the config names no n_routed_experts.")
        self.n = _int(s, "n_routed_experts", src)
        self.k = _int(s, "num_experts_per_tok", src)
        if not 0 < self.k <= self.n:
            raise ConfigError(f"{src}: num_experts_per_tok is {self.k} but n_routed_experts is {self.n}: a token "
                              "cannot be routed to more experts than there are.")
        self.n_group = max(1, _int(s, "n_group", src, 1))
        self.topk_group = _int(s, "topk_group", src, self.n_group) or self.n_group
        if self.n % self.n_group or self.topk_group > self.n_group:
            raise ConfigError(f"{src}: n_routed_experts {self.n} in n_group {self.n_group} groups with topk_group "
                              f"{self.topk_group}: the groups must split the experts evenly and topk_group be at "
                              "most n_group.")
        scoring = s.get("scoring_func") or "softmax"
        if scoring not in ("sigmoid", "softmax"):
            raise ConfigError(f"{src}: scoring_func {scoring!r} is neither sigmoid nor softmax.")
        self.scoring = scoring
        self.norm_topk = bool(s.get("norm_topk_prob", False))
        factor = s.get("routed_scaling_factor", 1.0)
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not factor > 0:
            raise ConfigError(f"{src}: routed_scaling_factor must be a positive number, got {factor!r}.")
        self.scaling = float(factor)
        self.method = s.get("topk_method") or ("noaux_tc" if p + "gate.e_score_correction_bias" in weights else "greedy")
        self.gate = weights.get(p + "gate.weight").float()                   # (E, H)
        if tuple(self.gate.shape) != (self.n, config.hidden_size):
            raise ConfigError(f"{src}: {p}gate.weight is {list(self.gate.shape)}, but n_routed_experts and hidden_size "
                              f"make the router [{self.n}x{config.hidden_size}].")
        bias = p + "gate.e_score_correction_bias"
        self.bias = weights.get(bias).float() if bias in weights else None
        if self.bias is not None and tuple(self.bias.shape) != (self.n,):
            raise ConfigError(f"{src}: {bias} is {list(self.bias.shape)}, not one value per expert "
                              f"(n_routed_experts {self.n}).")
        inter = _int(s, "moe_intermediate_size", src, 0)
        self.weights, self.prefix, self.hidden = weights, p, config.hidden_size
        self.fused = f"{p}experts.gate_up_proj" in weights
        if self.fused:  # TorchSpec's layout: gate_up [E, H, 2I] and down [E, I, H], stored (in, out)
            self._check_fused(inter)
            self._kept = {}
        else:
            missing = [f"{p}experts.{e}.{w}_proj.weight" for e in range(self.n) for w in ("gate", "up", "down")
                       if f"{p}experts.{e}.{w}_proj.weight" not in weights]
            if missing:
                raise ConfigError(f"{src} lacks {missing[0]}" + (f" and {len(missing) - 1} more expert tensors"
                                  if len(missing) > 1 else "") + f" (the config names n_routed_experts {self.n}).")
            shape = weights.shape(f"{p}experts.0.gate_proj.weight")
            if inter and shape[0] != inter:
                raise ConfigError(f"{src}: {p}experts.0.gate_proj.weight is {list(shape)}, but moe_intermediate_size "
                                  f"is {inter}.")
            self._check_experts(shape[0])
            self._kept = {e: load_gated(weights, f"{p}experts.{e}.", self.hidden) for e in range(self.n)
                          if weights.kept(f"{p}experts.{e}.gate_proj.weight")}
        n_shared = _int(s, "n_shared_experts", src, 0)
        has_shared = f"{p}shared_experts.gate_proj.weight" in weights
        if n_shared and not has_shared:
            raise ConfigError(f"{src} lacks {p}shared_experts.gate_proj.weight (the config names n_shared_experts "
                              f"{n_shared}).")
        self.shared = load_gated(weights, p + "shared_experts.", self.hidden) if has_shared else None
        self.precision = RoutingPrecision()

    def _check_fused(self, inter: int) -> None:
        """The fused stacks' declared shapes, before any forward: gate_up [E, H, 2I] (an even last width: gate
        then up) and down [E, I, H] with the same I (and moe_intermediate_size when the config gives it)."""
        src, p, n, h = self.weights.source, self.prefix, self.n, self.hidden
        up_name, down_name = f"{p}experts.gate_up_proj", f"{p}experts.down_proj"
        got = self.weights.shape(up_name)
        width = got[2] if len(got) == 3 else None
        i = inter or (width // 2 if width else None)
        if len(got) != 3 or tuple(got[:2]) != (n, h) or width % 2 or (inter and width != 2 * inter):
            want = f"[{n}, {h}, {2 * i if i else '2 x moe_intermediate_size'}]"
            raise ConfigError(f"{src}: {up_name} is {list(got)}, expected {want} (n_routed_experts, hidden_size, "
                              "gate and up side by side: an even width): the checkpoint and config.json disagree.")
        down = self.weights.shape(down_name) if down_name in self.weights else None
        if down is None or tuple(down) != (n, width // 2, h):
            raise ConfigError(f"{src}: {down_name} is {list(down) if down else 'missing'}, expected "
                              f"[{n}, {width // 2}, {h}] (n_routed_experts, the experts' width {width // 2} from "
                              f"{up_name}, hidden_size): the checkpoint and config.json disagree.")

    def _check_experts(self, inner: int) -> None:
        """Every per-expert tensor's declared shape (gate and up [I, H], down [H, I]), before any is read."""
        for e in range(self.n):
            for w, want in (("gate", (inner, self.hidden)), ("up", (inner, self.hidden)), ("down", (self.hidden, inner))):
                name = f"{self.prefix}experts.{e}.{w}_proj.weight"
                if tuple(self.weights.shape(name)) != want:
                    raise ConfigError(f"{self.weights.source}: {name} is {list(self.weights.shape(name))}, expected "
                                      f"{list(want)} (expert 0's width {inner}, hidden_size {self.hidden}).")

    def _choose(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(expert ids (T, k), scores (T, E)) for rows x (T, H): the choice alone."""
        logits = x.float() @ self.gate.T                                      # (T, E)
        scores = logits.sigmoid() if self.scoring == "sigmoid" else logits.softmax(-1)
        choice = scores + self.bias if self.bias is not None else scores
        if self.n_group > 1 and self.method != "greedy":
            grouped = choice.view(x.shape[0], self.n_group, -1)               # (T, G, E/G)
            best = min(2, grouped.shape[-1])                                  # groups of one expert: that one
            gscore = grouped.topk(best, -1).values.sum(-1) if self.method == "noaux_tc" else grouped.max(-1).values
            keep = torch.zeros_like(gscore, dtype=torch.bool)
            keep.scatter_(1, gscore.topk(self.topk_group, -1).indices, True)  # (T, G)
            choice = grouped.masked_fill(~keep[..., None], float("-inf")).reshape(x.shape[0], -1)
        return choice.topk(self.k, -1).indices, scores                        # (T, k)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(expert ids (T, k), weights (T, k)) for rows x (T, H). In float32 the rows are also routed as bfloat16
        rows (TorchSpec's training dtype) and the rows whose expert set differs are counted (:attr:`precision`)."""
        idx, scores = self._choose(x)
        if x.dtype == torch.float32:
            self.precision.count(idx, self._choose(x.bfloat16())[0])
        w = scores.gather(1, idx)
        if self.norm_topk:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * self.scaling

    def expert(self, e: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(gate and up stacked (2I, H), down (H, I)) of expert ``e``: kept, or read by range."""
        if e in self._kept:
            return self._kept[e]
        if self.fused:
            idx = torch.tensor([e])
            gate_up = self.weights.rows(f"{self.prefix}experts.gate_up_proj", idx)[0]    # (H, 2I), (in, out)
            down = self.weights.rows(f"{self.prefix}experts.down_proj", idx)[0]          # (I, H)
            return gate_up.T, down.T
        return load_gated(self.weights, f"{self.prefix}experts.{e}.", self.hidden)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        idx, w = self.route(x)
        out = torch.zeros_like(x)
        for e in torch.unique(idx).tolist():
            rows, slot = (idx == e).nonzero(as_tuple=True)
            gate_up, down = self.expert(e)
            y = gated(x[rows], gate_up, down)                                 # (n_e, H)
            out = out.index_add(0, rows, y * w[rows, slot, None].to(x.dtype))
        if self.shared is not None:
            out = out + gated(x, *self.shared)
        return out
