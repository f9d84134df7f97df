"""Deliberately broken demo drafters, one fault each, for ``eaglekit check`` to find.

Each is the K2 drafter with one thing wrong, the faults users meet before serving:

- ``no-lm-head``: lm_head.weight left out (an engine serves a random head: accept length 1.00);
- ``zero-d2t``: d2t all zeros with a reduced draft vocabulary (draft ids read as target ids);
- ``fc-4-layers``: fc.weight sized for four aux layers while the config names three;
- ``foreign-embed``: embed_tokens.weight saved from another model, not the target's embedding;
- ``ids-out-of-range``: aux ids [2, 30, 61] for a 61-layer target;
- ``eagle1-architecture``: an EAGLE-3 checkpoint whose config names the EAGLE(-1/2) architecture, so an
  engine would run the EAGLE method on it.

They live in ``broken/<name>`` of the workspace, beside (not among) the healthy drafters.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eaglekit.demo.spec import LAYERS, H, specforge_config

#: name -> what is wrong (the manifest's description).
BROKEN = {
    "no-lm-head": "k2 without lm_head.weight",
    "zero-d2t": "k2 with an all-zero d2t (2000 draft tokens of 10240)",
    "fc-4-layers": "k2 with fc.weight for four aux layers on a three-id config",
    "foreign-embed": "k2 with an embed_tokens.weight that is not the target's",
    "ids-out-of-range": f"k2 with aux ids [2, 30, {LAYERS}] for a {LAYERS}-layer target",
    "eagle1-architecture": "k2 whose config names the EAGLE(-1/2) architecture LlamaForCausalLMEagle",
}


def build_broken(root: Path, gen, k2: dict[str, Any], d2t, t2d, write: Callable[..., None]) -> dict[str, str]:
    """Write every broken drafter under ``root``; ``write(folder, tensors, config, d2t, t2d)`` is the
    world's writer. Returns :data:`BROKEN`."""
    import torch

    cfg = specforge_config()

    def variant(name: str, tensors=None, config=None, d2t_=None) -> None:
        write(root / name, tensors if tensors is not None else k2, config or cfg,
              d2t if d2t_ is None else d2t_, t2d)

    variant("no-lm-head", {k: v for k, v in k2.items() if k != "lm_head.weight"})
    variant("zero-d2t", d2t_=d2t * 0)
    variant("fc-4-layers", {**k2, "fc.weight": torch.randn(H, 4 * H, generator=gen) * 0.02})  # (H, 4*Ht)
    variant("foreign-embed", {**k2, "embed_tokens.weight": torch.randn(cfg["vocab_size"], H, generator=gen) * 0.02})
    variant("ids-out-of-range", config={**cfg, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, LAYERS],
                                                                "use_aux_hidden_state": True}})
    variant("eagle1-architecture", config={**cfg, "architectures": ["LlamaForCausalLMEagle"]})
    return dict(BROKEN)
