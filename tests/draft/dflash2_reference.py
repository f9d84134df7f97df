"""A slow reference of the authors' DFlash2 drafter, written apart from eaglekit's batched pass.

Read from z-lab/dflash ``dflash/model.py`` at commit 10129599: the DFlash reference draft
(tests/draft/dflash_reference.py, its KV cache and the ``dflash_generate`` loop) with

* ``GroupedDynamicCausalConv``: ``prepare`` / ``finish`` around each layer's attention and MLP, written here slot
  by slot and channel group by channel group (the authors pad and add; this loops);
* the sliding-window / causal mask of ``_attention_mask`` over key indices (the cache holds every position, so a key's
  index is its position);
* ``CandidateSelector.select`` at temperature 0 over ``compute_logits`` (output multiplier, then softcap), one
  block of batch 1 at a time.
"""

from __future__ import annotations

import torch
from dflash_reference import ReferenceDraft


class ReferenceDFlash2Draft(ReferenceDraft):
    """The authors' ``DFlash2DraftModel`` (GQA), batch 1."""

    def __init__(self, folder) -> None:
        super().__init__(folder)
        c, nested = self.cfg, self.cfg["dflash_config"]
        self.kernel, self.group = nested["conv_kernel_size"], nested["conv_group_size"]
        self.top_k = nested["selector_top_k"]
        self.multiplier = float(nested.get("output_multiplier", 1.0))
        self.softcap = nested.get("final_logit_softcapping")
        types = c.get("layer_types") or ["full_attention"] * self.n_layers
        is_causal = c.get("is_causal", nested.get("is_causal"))
        self.attention = [(t == "sliding_attention" if is_causal is None else bool(is_causal),
                           c.get("sliding_window") if t == "sliding_attention" else None) for t in types]
        for book in ("predecessor_codebook", "successor_codebook"):
            name = f"candidate_selector.{book}"
            if name + ".weight" in self.w:
                self.w[name] = self.w.pop(name + ".weight")

    def _conv(self, x: torch.Tensor, dynamic: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        """x (1, Q, H), dynamic (1, Q, kernel, G), base (kernel, H): out[t] = sum_o (base[o] + dyn[t, o]) x[t-o]."""
        Q, H = x.shape[1], x.shape[2]
        out = torch.zeros_like(x)
        for t in range(Q):
            for o in range(self.kernel):
                if t - o < 0:
                    continue
                per_channel = base[o] + dynamic[0, t, o].repeat_interleave(self.group)             # (H,)
                out[0, t] += per_channel * x[0, t - o]
        return out

    def prepare(self, i, conv, x):
        w = self.w[f"layers.{i}.{conv}.kernel_projection.weight"]
        G = x.shape[-1] // self.group
        dynamic = (x @ w.T).view(1, x.shape[1], 2, self.kernel, G)
        base = self.w[f"layers.{i}.{conv}.base_kernel"]
        return self._conv(x, dynamic[:, :, 0], base[0]), dynamic[:, :, 1]

    def finish(self, i, conv, x, kernel):
        return self._conv(x, kernel, self.w[f"layers.{i}.{conv}.base_kernel"][1])

    def mask(self, i, q_len, k_len):
        causal, window = self.attention[i]
        if not causal and window is None:
            return None
        query = k_len - q_len + torch.arange(q_len)[:, None]
        key = torch.arange(k_len)[None, :]
        ok = torch.ones(q_len, k_len, dtype=torch.bool)
        if causal:
            ok &= key <= query
        if window is not None:
            ok &= query - key < window
            if not causal:
                ok &= key - query < window
        return ok[None, None]

    def propose(self, hidden, anchor, head):
        logits = (hidden @ head.T) * self.multiplier                                               # (1, S, V)
        if self.softcap is not None and float(self.softcap) > 0:
            logits = torch.tanh(logits / float(self.softcap)) * float(self.softcap)
        unary, candidates = torch.topk(logits, self.top_k, dim=-1, sorted=False)                  # (1, S, k)
        proj = hidden @ self.w["candidate_selector.hidden_projection.weight"].T                   # (1, S, r)
        pred_book = self.w["candidate_selector.predecessor_codebook"]
        succ_book = self.w["candidate_selector.successor_codebook"]
        pred = int(anchor[0])
        path = []
        for p in range(hidden.shape[1]):
            scores = unary[0, p] + succ_book[candidates[0, p]] @ (pred_book[pred] * proj[0, p])      # (k,)
            pred = int(candidates[0, p, int(torch.argmax(scores))])                                 # the first max
            path.append(pred)
        return torch.tensor([path])
