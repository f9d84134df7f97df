"""A slow reference of the authors' DFlash decoding, written apart from eaglekit's batched pass.

It decodes one prompt exactly as z-lab/dflash ``dflash_generate`` (the newer loop) does at temperature 0: the
target (transformers, its own DynamicCache, cropped to ``start`` after each verify) prefills the prompt, then each
cycle drafts one block with a draft KV cache (context K/V appended once, RoPE'd at their positions, the block's
K/V cropped away after the draft), verifies the block with the target, accepts the leading matches plus the
bonus, clips the count by the budget and the first stop token, and feeds the target's hidden states of the
committed slots as the next context. Only default RoPE (``rope_theta``) and full attention are implemented: what
the test checkpoints use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class ReferenceDraft:
    """The authors' ``DFlashDraftModel.forward`` with a list-of-tensors KV cache, batch 1."""

    def __init__(self, folder: Path) -> None:
        from safetensors.torch import load_file

        self.cfg = json.loads((Path(folder) / "config.json").read_text())
        raw = load_file(str(Path(folder) / "model.safetensors"))
        self.w = {(n[len("model."):] if n.startswith("model.") else n): t.float() for n, t in raw.items()}
        c = self.cfg
        nested = c.get("dflash_config", {})
        self.layer_ids = nested.get("target_layer_ids", c.get("target_layer_ids"))   # DeepSpec: top level
        self.mask_id = nested.get("mask_token_id", c.get("mask_token_id"))
        self.block_size = nested.get("block_size", c.get("block_size", 16))
        self.n_layers, self.nH, self.nKV, self.D = (c["num_hidden_layers"], c["num_attention_heads"],
                                                    c["num_key_value_heads"], c["head_dim"])
        self.eps = c["rms_norm_eps"]
        self.inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, self.D, 2).float() / self.D))
        self.cache: list[tuple[torch.Tensor, torch.Tensor]] = []   # per layer (1, nKV, P, D)
        #: the newer loop's ``_raw_input_embeddings`` scale
        self.embed_scale = float(nested.get("input_embedding_scale", c.get("input_embedding_scale", 1.0)))

    def prepare(self, i: int, conv: str, x: torch.Tensor):
        """DFlash layers have no convolutions (the authors' ``attention_conv`` / ``mlp_conv`` are None)."""
        return x, None

    def finish(self, i: int, conv: str, x: torch.Tensor, kernel) -> torch.Tensor:
        return x

    def mask(self, i: int, q_len: int, k_len: int) -> torch.Tensor | None:
        """No mask: the block attends to every cached key and to itself both ways."""
        return None

    def propose(self, hidden: torch.Tensor, anchor: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """DFlash's greedy drafts: argmax of the target's lm_head, (1, S, H) -> (1, S)."""
        return (hidden @ head.T).argmax(-1)

    def cache_length(self) -> int:
        return 0 if not self.cache else int(self.cache[0][0].shape[2])

    def crop(self, length: int) -> None:
        self.cache = [(k[:, :, :length], v[:, :, :length]) for k, v in self.cache]

    def _cos_sin(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[0].float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None], emb.sin()[None, None]             # (1, 1, C+Q, D)

    def forward(self, target_hidden: torch.Tensor, noise_embedding: torch.Tensor,
                position_ids: torch.Tensor) -> torch.Tensor:
        w = self.w
        C, Q = target_hidden.shape[1], noise_embedding.shape[1]
        ctx = _rms(target_hidden @ w["fc.weight"].T, w["hidden_norm.weight"], self.eps)          # (1, C, H)
        cos, sin = self._cos_sin(position_ids)
        h = noise_embedding
        new_cache = []
        for i in range(self.n_layers):
            p = f"layers.{i}."
            res = h
            x, kernel = self.prepare(i, "attention_conv", _rms(h, w[p + "input_layernorm.weight"], self.eps))
            q = (x @ w[p + "self_attn.q_proj.weight"].T).view(1, Q, self.nH, self.D)
            q = _rms(q, w[p + "self_attn.q_norm.weight"], self.eps).transpose(1, 2)              # (1, nH, Q, D)
            k = torch.cat([ctx @ w[p + "self_attn.k_proj.weight"].T, x @ w[p + "self_attn.k_proj.weight"].T], 1)
            v = torch.cat([ctx @ w[p + "self_attn.v_proj.weight"].T, x @ w[p + "self_attn.v_proj.weight"].T], 1)
            k = _rms(k.view(1, C + Q, self.nKV, self.D), w[p + "self_attn.k_norm.weight"], self.eps).transpose(1, 2)
            v = v.view(1, C + Q, self.nKV, self.D).transpose(1, 2)
            q = q * cos[..., -Q:, :] + _rotate_half(q) * sin[..., -Q:, :]
            k = k * cos + _rotate_half(k) * sin
            if self.cache:
                k = torch.cat([self.cache[i][0], k], 2)
                v = torch.cat([self.cache[i][1], v], 2)
            new_cache.append((k, v))
            g = self.nH // self.nKV
            o = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                               attn_mask=self.mask(i, Q, k.shape[2]), is_causal=False,
                                               scale=self.D ** -0.5)                              # (1, nH, Q, D)
            o = o.transpose(1, 2).reshape(1, Q, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = res + self.finish(i, "attention_conv", o, kernel)
            y, kernel = self.prepare(i, "mlp_conv", _rms(h, w[p + "post_attention_layernorm.weight"], self.eps))
            gate, up = y @ w[p + "mlp.gate_proj.weight"].T, y @ w[p + "mlp.up_proj.weight"].T
            h = h + self.finish(i, "mlp_conv", (F.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T, kernel)
        self.cache = new_cache
        return _rms(h, w["norm.weight"], self.eps)


def _crop_to(cache, length: int) -> None:
    """The authors' ``_crop_to``: keep the first ``length`` positions (this transformers crops by a count)."""
    remove = cache.get_seq_length() - length
    if remove > 0:
        cache.crop(-remove)


@dataclass
class ReferenceRun:
    output_ids: list[int]            # prompt + committed tokens
    acceptance_lengths: list[int]    # what the authors' loop records per cycle


@torch.no_grad()
def reference_generate(target, draft: ReferenceDraft, input_ids: list[int], *, max_new_tokens: int,
                       block_size: int, stop_token_ids: list[int] | None) -> ReferenceRun:
    """The authors' newer greedy ``dflash_generate``, one cycle at a time (a DFlash2 reference draft brings its
    own forward and ``propose``: tests/draft/dflash2_reference.py)."""
    from transformers import DynamicCache

    draft.cache = []
    x = torch.tensor([input_ids])
    n_in = x.shape[1]
    max_length = n_in + max_new_tokens
    output_ids = torch.full((1, max_length + 1), draft.mask_id, dtype=torch.long)
    position_ids = torch.arange(output_ids.shape[1])[None]
    pkv = DynamicCache()
    out = target(x, position_ids=position_ids[:, :n_in], past_key_values=pkv, use_cache=True,
                 output_hidden_states=True)
    output_ids[:, :n_in] = x
    output_ids[:, n_in] = out.logits[0, -1].argmax()
    target_hidden = torch.cat([out.hidden_states[i + 1] for i in draft.layer_ids], -1)
    embed = target.get_input_embeddings().weight
    head = target.get_output_embeddings().weight
    lengths: list[int] = []
    start = n_in
    stops = torch.tensor(stop_token_ids) if stop_token_ids else None
    stopped = stops is not None and bool(torch.isin(output_ids[:, start], stops).any())
    while start + 1 < max_length and not stopped:
        verify = min(block_size, max_length - start)
        block = output_ids[:, start:start + verify].clone()
        if verify > 1:
            hidden = draft.forward(target_hidden, F.embedding(block, embed) * draft.embed_scale,
                                   position_ids[:, start - target_hidden.shape[1]:start + verify])[:, 1 - verify:]
            draft.crop(start)
            block[:, 1:] = draft.propose(hidden, block[:, 0], head)
        out = target(block, position_ids=position_ids[:, start:start + verify], past_key_values=pkv,
                     use_cache=True, output_hidden_states=True)
        posterior = out.logits.argmax(-1)                                                        # (1, verify)
        acc = int((block[:, 1:] == posterior[:, :-1]).cumprod(1).sum(1)[0])
        output_ids[:, start:start + acc + 1] = block[:, :acc + 1]
        output_ids[:, start + acc + 1] = posterior[:, acc]
        produced = min(acc + 1, max_length - start - 1)
        if stops is not None:
            hit = torch.isin(output_ids[0, start + 1:start + produced + 1], stops).nonzero()
            if hit.numel():
                produced, stopped = int(hit[0, 0]) + 1, True
        start += produced
        _crop_to(pkv, start)
        lengths.append(produced)
        if verify > 1:
            target_hidden = torch.cat([out.hidden_states[i + 1] for i in draft.layer_ids], -1)[:, :produced]
    return ReferenceRun(output_ids[0, :min(start + 1, max_length)].tolist(), lengths)
