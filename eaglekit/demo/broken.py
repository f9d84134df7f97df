"""Deliberately broken demo drafters, one fault each, for ``eaglekit check`` to find.

Each is a K2 drafter with one thing wrong, the faults users meet before serving (the demo world's trained
K2 drafter in ``trained/broken/``, the real-shape random one in ``broken/``):

- ``no-lm-head``: lm_head.weight left out (an engine serves a random head: accept length 1.00);
- ``zero-d2t``: d2t all zeros with a reduced draft vocabulary (draft ids read as target ids);
- ``fc-4-layers``: fc.weight sized for four aux layers while the config names three;
- ``foreign-embed``: embed_tokens.weight saved from another model, not the target's embedding;
- ``ids-out-of-range``: the last aux id one past the target's last layer (61 of a 61-layer target);
- ``eagle1-architecture``: an EAGLE-3 checkpoint whose config names the EAGLE(-1/2) architecture, so an
  engine would run the EAGLE method on it.

They live in ``broken/<name>``, beside (not among) the healthy drafters.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eaglekit.demo.spec import LAYERS, specforge_config

#: name -> what is wrong (the manifest's description), for a drafter whose config is ``config``.
def descriptions(config: dict[str, Any], layers: int) -> dict[str, str]:
    ids = list(config["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
    return {
        "no-lm-head": "k2 without lm_head.weight",
        "zero-d2t": f"k2 with an all-zero d2t ({config['draft_vocab_size']} draft tokens of {config['vocab_size']})",
        "fc-4-layers": "k2 with fc.weight for four aux layers on a three-id config",
        "foreign-embed": "k2 with an embed_tokens.weight that is not the target's",
        "ids-out-of-range": f"k2 with aux ids {ids[:-1] + [layers]} for a {layers}-layer target",
        "eagle1-architecture": "k2 whose config names the EAGLE(-1/2) architecture LlamaForCausalLMEagle",
    }


BROKEN = descriptions(specforge_config(), LAYERS)


def build_broken(root: Path, gen, k2: dict[str, Any], d2t, t2d, write: Callable[..., None], *,
                 config: dict[str, Any] | None = None, layers: int = LAYERS) -> dict[str, str]:
    """Write every broken drafter under ``root``; ``write(folder, tensors, config, d2t, t2d)`` is the
    world's writer, ``config`` the healthy drafter's config (default: the real-shape demo's), ``layers`` its
    target's layer count. Returns what each one is (:func:`descriptions`)."""
    import torch

    cfg = config or specforge_config()
    hidden = int(cfg["hidden_size"])

    def variant(name: str, tensors=None, config=None, d2t_=None) -> None:
        write(root / name, tensors if tensors is not None else k2, config or cfg,
              d2t if d2t_ is None else d2t_, t2d)

    ids = list(cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
    variant("no-lm-head", {k: v for k, v in k2.items() if k != "lm_head.weight"})
    variant("zero-d2t", d2t_=d2t * 0)
    variant("fc-4-layers", {**k2, "fc.weight": torch.randn(hidden, 4 * hidden, generator=gen) * 0.02})  # (H, 4*Ht)
    variant("foreign-embed", {**k2, "embed_tokens.weight": torch.randn(cfg["vocab_size"], hidden, generator=gen) * 0.02})
    variant("ids-out-of-range", config={**cfg, "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids[:-1] + [layers],
                                                                "use_aux_hidden_state": True}})
    variant("eagle1-architecture", config={**cfg, "architectures": ["LlamaForCausalLMEagle"]})
    return descriptions(cfg, layers)
