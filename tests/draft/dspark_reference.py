"""A slow reference of DeepSpec's DSpark decoding, written apart from eaglekit's batched pass.

Read from deepseek-ai/DeepSpec: ``deepspec/eval/base_evaluator.py`` (``generate_decoding_sample``,
``verify_draft_tokens``), ``deepspec/eval/dspark/draft_ops.py`` (``forward_dspark_draft_block``,
``build_dspark_proposal``, ``_confident_prefix_length``), ``deepspec/modeling/dspark/markov_head.py`` and
``qwen3/modeling.py`` (``compute_logits``, ``predict_confidence_step``), at temperature 0. The backbone is the DFlash
reference draft's (tests/draft/dflash_reference.py: KV cache cropped to ``start`` after each draft, no mask); the
block is ``[anchor, MASK x (block_size - 1)]`` embedded with the drafter's own ``embed_tokens`` (else the target's).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from dflash_reference import ReferenceDraft, _crop_to


class ReferenceDSparkDraft(ReferenceDraft):
    """DeepSpec's ``Qwen3DSparkModel`` (or SpecForge's ``DSparkDraftModel`` when its slots start at 1), batch 1."""

    def __init__(self, folder) -> None:
        super().__init__(folder)
        c = self.cfg
        nested = c.get("dflash_config", {})

        def key(name, default=None):
            return nested.get(name, c.get(name, default))

        self.rank = int(key("markov_rank", 0) or 0)
        self.kind = key("markov_head_type", "vanilla")
        self.confidence = bool(key("enable_confidence_head", False))
        self.with_markov = bool(key("confidence_head_with_markov", False))
        shift = key("shift_label")
        self.shift = (c["architectures"][0] != "DSparkDraftModel") if shift is None else bool(shift)

    def embed(self, ids: torch.Tensor, target) -> torch.Tensor:
        own = self.w.get("embed_tokens.weight")
        return (own if own is not None else target.get_input_embeddings().weight)[ids]

    def head(self, target) -> torch.Tensor:
        own = self.w.get("lm_head.weight")
        return own if own is not None else target.get_output_embeddings().weight

    def _markov_step(self, logits, prev: int, h, state):
        w = self.w
        e = w["markov_head.markov_w1.weight"][prev]                                                # (r,)
        if self.kind == "gated":
            gate = torch.sigmoid(w["markov_head.gate_proj.weight"] @ torch.cat([h, e])
                                 + w["markov_head.gate_proj.bias"])
            bias = w["markov_head.markov_w2.weight"] @ (gate * e)
        elif self.kind == "rnn":
            z = w["markov_head.joint_proj.weight"] @ torch.cat([state, e, h]) + w["markov_head.joint_proj.bias"]
            g, cand, out = z[:self.rank], z[self.rank:2 * self.rank], z[2 * self.rank:]
            g = torch.sigmoid(g)
            state = g * state + (1 - g) * torch.tanh(cand)
            bias = w["markov_head.markov_w2.weight"] @ torch.tanh(out)
        else:
            bias = w["markov_head.markov_w2.weight"] @ e
        return logits + bias, state

    def proposal(self, hidden: torch.Tensor, anchor: int, target, threshold: float) -> list[int]:
        """``build_dspark_proposal``: hidden (1, Q, H) of the whole block -> the proposed drafts."""
        h = hidden[0] if self.shift else hidden[0, 1:]                                              # (S, H)
        base = h @ self.head(target).T                                                             # (S, V)
        drafts, prev = [], anchor
        state = torch.zeros(self.rank)
        for j in range(h.shape[0]):
            logits = base[j]
            if self.rank:
                logits, state = self._markov_step(logits, prev, h[j], state)
            prev = int(torch.argmax(logits))
            drafts.append(prev)
        if not self.confidence or threshold <= 0:
            return drafts
        prevs = [anchor] + drafts[:-1]
        for j in range(len(drafts)):
            x = torch.cat([h[j], self.w["markov_head.markov_w1.weight"][prevs[j]]]) if self.with_markov else h[j]
            logit = self.w["confidence_head.proj.weight"][0] @ x + self.w["confidence_head.proj.bias"][0]
            if torch.sigmoid(logit) < threshold:
                return drafts[:j]
        return drafts


@dataclass
class DeepSpecRun:
    output_ids: list[int]
    acceptance_lengths: list[int]
    ended: str = "budget"            # or "prefill stop", "draft stop" (no bonus), "bonus stop"


@torch.no_grad()
def deepspec_generate(target, draft: ReferenceDSparkDraft, input_ids: list[int], *, max_new_tokens: int,
                      stop_token_ids: list[int], block_size: int | None = None,
                      confidence_threshold: float = 0.0) -> DeepSpecRun:
    """DeepSpec's ``generate_decoding_sample`` with the DSpark proposal, greedy, one cycle at a time."""
    from transformers import DynamicCache

    draft.cache = []
    Q = block_size or draft.block_size
    n_in = len(input_ids)
    max_length = n_in + max_new_tokens
    output_ids = torch.zeros((1, max_length + Q + 1), dtype=torch.long)
    position_ids = torch.arange(output_ids.shape[1])[None]
    pkv = DynamicCache()
    out = target(torch.tensor([input_ids]), position_ids=position_ids[:, :n_in], past_key_values=pkv,
                 use_cache=True, output_hidden_states=True)
    _crop_to(pkv, n_in)
    output_ids[0, :n_in] = torch.tensor(input_ids)
    output_ids[0, n_in] = out.logits[0, -1].argmax()
    lengths: list[int] = []
    start = n_in
    if int(output_ids[0, n_in]) in stop_token_ids:
        return DeepSpecRun(output_ids[0, :n_in + 1].tolist(), lengths, "prefill stop")
    target_hidden = torch.cat([out.hidden_states[i + 1] for i in draft.layer_ids], -1)
    ended = "budget"
    while start < max_length:
        block = torch.full((1, Q), draft.mask_id, dtype=torch.long)
        block[0, 0] = output_ids[0, start]
        hidden = draft.forward(target_hidden, draft.embed(block, target),
                               position_ids[:, draft.cache_length():start + Q])
        draft.crop(start)
        drafts = draft.proposal(hidden, int(block[0, 0]), target, confidence_threshold)
        verify = torch.tensor([[int(block[0, 0])] + drafts])
        out = target(verify, position_ids=position_ids[:, start:start + verify.shape[1]], past_key_values=pkv,
                     use_cache=True, output_hidden_states=True)
        posterior = out.logits[0].argmax(-1)                                                       # (n + 1,)
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == int(posterior[accepted]):
            accepted += 1
        hit = next((e for e in range(accepted) if drafts[e] in stop_token_ids), None)
        output_ids[0, start:start + accepted + 1] = verify[0, :accepted + 1]
        if hit is not None:
            lengths.append(hit + 1)
            start += hit + 1
            ended = "draft stop"
            break
        output_ids[0, start + accepted + 1] = posterior[accepted]
        lengths.append(accepted + 1)
        start += accepted + 1
        _crop_to(pkv, start)
        target_hidden = torch.cat([out.hidden_states[i + 1] for i in draft.layer_ids], -1)[:, :accepted + 1]
        if int(posterior[accepted]) in stop_token_ids:
            ended = "bonus stop"
            break
    kept = output_ids[0, :min(start + 1, max_length)].tolist()
    stops = [i for i, t in enumerate(kept[n_in:]) if t in stop_token_ids]
    return DeepSpecRun(kept[:n_in + stops[0] + 1] if stops else kept, lengths, ended)
