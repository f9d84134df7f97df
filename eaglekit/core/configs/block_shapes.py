"""The tensors a block drafter's config says it holds, and how a checkpoint's header agrees with them.

Read from the authors' module trees and the engines' loaders (docs/block-drafters.md has the table):

* every family: ``fc.weight`` [H, n_aux x target hidden] (no bias), ``hidden_norm.weight`` and ``norm.weight``
  [H], and per decoder layer Qwen3's ``input_layernorm`` / ``post_attention_layernorm`` [H],
  ``self_attn.{q,k,v,o}_proj`` (bias iff ``attention_bias``), ``self_attn.{q,k}_norm`` [head_dim] and the gated
  MLP ``mlp.{gate,up,down}_proj``. No ``embed_tokens`` and no ``lm_head``: the block is embedded with the
  target's embedding and drafted through the target's lm_head (SGLang's ``models/dflash.py``: "This model
  intentionally does not include token embeddings or an LM head").
* DFlash2 adds ``candidate_selector.hidden_projection.weight`` [selector_rank, H], the two codebooks
  ``candidate_selector.{predecessor,successor}_codebook`` [vocab, selector_rank] (``.weight`` when saved as an
  ``nn.Embedding``) and per layer ``{attention,mlp}_conv.base_kernel`` [2, conv_kernel_size, H] and
  ``{attention,mlp}_conv.kernel_projection.weight`` [2 x conv_kernel_size x H / conv_group_size, H]. It may carry
  ``embed_tokens.weight`` (vLLM skips it).
* DSpark adds ``markov_head.markov_w1.weight`` / ``markov_w2.weight`` [vocab, markov_rank] (and
  ``gate_proj`` [rank, H + rank] for the gated head, ``joint_proj`` [3 rank, 2 rank + H] for the rnn one) and
  ``confidence_head.proj`` [1, H (+ rank with the Markov state)]. DeepSpec's own checkpoints also keep frozen
  copies of the target's ``embed_tokens`` and ``lm_head``.

An MLA-attention DFlash2 (``attention_mode: mla``) has other attention tensors; they are not checked here.

Pure: a :class:`~eaglekit.core.configs.block.BlockDrafterConfig` and a name -> shape mapping in, a
:class:`BlockShapes` out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from eaglekit.core.configs.block import BlockDrafterConfig

Shape = tuple[int, ...]
#: tensors a block drafter may carry that are copies of the target's (never part of its own body)
TARGET_COPIES = ("embed_tokens.weight", "lm_head.weight")
_LAYER = re.compile(r"^layers\.(\d+)\.")


def block_tensor_name(name: str) -> str:
    """A header name in the authors' spelling: no ``model.`` prefix (the engines' loaders accept one), an
    Embedding-saved codebook without its ``.weight``."""
    name = name.removeprefix("model.")
    for book in ("predecessor_codebook", "successor_codebook"):
        if name == f"candidate_selector.{book}.weight":
            return f"candidate_selector.{book}"
    return name


def expected_tensors(cfg: BlockDrafterConfig) -> dict[str, tuple[Shape, str]]:
    """Every tensor ``cfg`` needs: name -> (shape, why, in the config's terms)."""
    h, th, n = cfg.hidden_size, cfg.target_hidden_size, cfg.n_aux
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    inter = cfg.intermediate_size
    out: dict[str, tuple[Shape, str]] = {
        "fc.weight": ((h, n * th), f"hidden_size {h} x ({n} target_layer_ids x target hidden {th})"),
        "hidden_norm.weight": ((h,), f"hidden_size {h}"),
        "norm.weight": ((h,), f"hidden_size {h}"),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        out[p + "input_layernorm.weight"] = ((h,), f"hidden_size {h}")
        out[p + "post_attention_layernorm.weight"] = ((h,), f"hidden_size {h}")
        if cfg.attention_mode != "mla":
            heads = f"num_attention_heads {cfg.num_attention_heads} x head_dim {cfg.head_dim}"
            kvs = f"num_key_value_heads {cfg.num_key_value_heads} x head_dim {cfg.head_dim}"
            out[p + "self_attn.q_proj.weight"] = ((q, h), f"{heads}, hidden_size {h}")
            out[p + "self_attn.k_proj.weight"] = ((kv, h), f"{kvs}, hidden_size {h}")
            out[p + "self_attn.v_proj.weight"] = ((kv, h), f"{kvs}, hidden_size {h}")
            out[p + "self_attn.o_proj.weight"] = ((h, q), f"hidden_size {h}, {heads}")
            out[p + "self_attn.q_norm.weight"] = ((cfg.head_dim,), f"head_dim {cfg.head_dim}")
            out[p + "self_attn.k_norm.weight"] = ((cfg.head_dim,), f"head_dim {cfg.head_dim}")
            if cfg.attention_bias:
                for proj, width in (("q", q), ("k", kv), ("v", kv), ("o", h)):
                    out[p + f"self_attn.{proj}_proj.bias"] = ((width,), "attention_bias true")
        out[p + "mlp.gate_proj.weight"] = ((inter, h), f"intermediate_size {inter}, hidden_size {h}")
        out[p + "mlp.up_proj.weight"] = ((inter, h), f"intermediate_size {inter}, hidden_size {h}")
        out[p + "mlp.down_proj.weight"] = ((h, inter), f"hidden_size {h}, intermediate_size {inter}")
        if cfg.family == "dflash2" and cfg.conv_kernel_size and cfg.conv_group_size:
            ks, g = cfg.conv_kernel_size, cfg.conv_group_size
            why = f"2 x conv_kernel_size {ks} x (hidden_size {h} / conv_group_size {g})"
            for conv in ("attention_conv", "mlp_conv"):
                out[p + f"{conv}.base_kernel"] = ((2, ks, h), f"2 x conv_kernel_size {ks} x hidden_size {h}")
                out[p + f"{conv}.kernel_projection.weight"] = ((2 * ks * (h // g), h), why)
    if cfg.family == "dflash2" and cfg.selector_rank:
        r, v = cfg.selector_rank, cfg.vocab_size
        out["candidate_selector.hidden_projection.weight"] = ((r, h), f"selector_rank {r}, hidden_size {h}")
        if v is not None:
            for book in ("predecessor_codebook", "successor_codebook"):
                out[f"candidate_selector.{book}"] = ((v, r), f"vocab_size {v} x selector_rank {r}")
    if cfg.family == "dspark" and cfg.markov_rank:
        r, v = cfg.markov_rank, cfg.vocab_size
        if v is not None:
            out["markov_head.markov_w1.weight"] = ((v, r), f"vocab_size {v} x markov_rank {r}")
            out["markov_head.markov_w2.weight"] = ((v, r), f"vocab_size {v} x markov_rank {r}")
        if cfg.markov_head_type == "gated":
            out["markov_head.gate_proj.weight"] = ((r, h + r), f"markov_rank {r}, hidden_size {h} + markov_rank")
            out["markov_head.gate_proj.bias"] = ((r,), f"markov_rank {r}")
        elif cfg.markov_head_type == "rnn":
            out["markov_head.joint_proj.weight"] = ((3 * r, 2 * r + h), f"3 x markov_rank {r}, 2 x markov_rank + "
                                                                        f"hidden_size {h}")
            out["markov_head.joint_proj.bias"] = ((3 * r,), f"3 x markov_rank {r}")
    if cfg.family == "dspark" and cfg.enable_confidence_head:
        markov = cfg.confidence_head_with_markov and bool(cfg.markov_rank)
        width = h + (cfg.markov_rank or 0) * markov
        out["confidence_head.proj.weight"] = ((1, width), f"1, hidden_size {h}" + (" + markov_rank" if markov else ""))
        out["confidence_head.proj.bias"] = ((1,), "one confidence per slot")
    return out


@dataclass(frozen=True)
class Mismatch:
    """A tensor whose header shape is not the one the config implies."""

    name: str
    shape: Shape
    expected: Shape
    why: str

    def message(self, source: str) -> str:
        return (f"{source}: {self.name} is {list(self.shape)}, but its config.json needs {list(self.expected)} "
                f"({self.why})")


@dataclass(frozen=True)
class BlockShapes:
    """How a checkpoint's tensors agree with its block config. ``copies``: target tensors it carries
    (``embed_tokens.weight``, ``lm_head.weight``); ``unknown``: names no block drafter has (noted, not faults)."""

    expected: int
    matching: int
    missing: tuple[tuple[str, str], ...]  # (name, why it is expected)
    mismatched: tuple[Mismatch, ...]
    extra_layers: tuple[str, ...]  # tensors of layers past num_hidden_layers
    copies: tuple[tuple[str, Shape], ...]
    unknown: tuple[str, ...]

    @property
    def consistent(self) -> bool:
        return not (self.missing or self.mismatched or self.extra_layers)

    def first_problem(self, source: str, cfg: BlockDrafterConfig) -> str | None:
        """One sentence naming the first tensor that contradicts the config, and what to do; None when none."""
        fix = "the weights and config.json do not belong together: use the config.json the trainer saved with them."
        if self.mismatched:
            return f"{self.mismatched[0].message(source)}; {fix}"
        if self.missing:
            name, why = self.missing[0]
            more = f" (and {len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
            return f"{source}: {name} is missing{more}, but its config.json needs it ({why}); {fix}"
        if self.extra_layers:
            return (f"{source}: {self.extra_layers[0]} belongs to a layer past num_hidden_layers "
                    f"{cfg.num_hidden_layers}; {fix}")
        return None

    def summary(self) -> str:
        if self.consistent:
            return f"all {self.expected} tensors the config implies are present with its shapes"
        parts = []
        if self.mismatched:
            parts.append(f"{len(self.mismatched)} of another shape ({self.mismatched[0].name} "
                         f"{list(self.mismatched[0].shape)} != {list(self.mismatched[0].expected)})")
        if self.missing:
            parts.append(f"{len(self.missing)} missing ({self.missing[0][0]})")
        if self.extra_layers:
            parts.append(f"{len(self.extra_layers)} in layers past num_hidden_layers ({self.extra_layers[0]})")
        return f"{self.matching} of {self.expected} tensors as the config implies; " + "; ".join(parts)

    def to_json(self) -> dict:
        return {"expected": self.expected, "matching": self.matching, "consistent": self.consistent,
                "missing": [n for n, _ in self.missing],
                "mismatched": [{"name": m.name, "shape": list(m.shape), "expected": list(m.expected), "why": m.why}
                               for m in self.mismatched],
                "extra_layers": list(self.extra_layers), "copies": [n for n, _ in self.copies],
                "unknown": list(self.unknown)}


def block_shapes(cfg: BlockDrafterConfig, shapes: Mapping[str, Shape]) -> BlockShapes:
    """Compare a header's ``shapes`` (tensor name -> shape, any ``model.`` prefix) with what ``cfg`` implies."""
    have = {block_tensor_name(n): tuple(s) for n, s in shapes.items()}
    want = expected_tensors(cfg)
    missing = tuple((n, why) for n, (_, why) in want.items() if n not in have)
    mismatched = tuple(Mismatch(n, have[n], shape, why) for n, (shape, why) in want.items()
                       if n in have and have[n] != shape)
    copies, extra, unknown = [], [], []
    for n in sorted(have):
        if n in want:
            continue
        if n in TARGET_COPIES:
            copies.append((n, have[n]))
        elif (m := _LAYER.match(n)) and int(m.group(1)) >= cfg.num_hidden_layers:
            extra.append(n)
        elif cfg.attention_mode == "mla" and ".self_attn." in n:
            continue  # MLA attention: not checked (module doc)
        else:
            unknown.append(n)
    return BlockShapes(len(want), len(want) - len(missing) - len(mismatched), missing, mismatched, tuple(extra),
                       tuple(copies), tuple(unknown))


__all__ = ["BlockShapes", "Mismatch", "TARGET_COPIES", "block_shapes", "block_tensor_name", "expected_tensors"]
