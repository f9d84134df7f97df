"""The trained demo world's hidden states, written the way the training pipelines write theirs.

Writers of our own with the real writers' file names, keys and shapes (docs/acceptance.md,
"Hidden-state dumps"), so that every reader of :mod:`eaglekit.io.dumps` runs on real files:

* ``specforge/rows_0-2000/data_{i}.ckpt``: torch.save {input_ids [T], loss_mask [T], hidden_state
  [1, T, H] (after the final norm), aux_hidden_state [1, T, 3H]};
* ``speculators/hidden_states/hs_{i}.safetensors``: hidden_states [T, 4, H] (the three aux layers, then
  the last layer's output before the final norm), token_ids [T];
* ``modelopt/{conversation_id}.pt``: torch.save {input_ids [T], hidden_states [T, H] (after the norm),
  aux_hidden_states [T, 3H], conversation_id};

plus ``<format>-loss-masks.jsonl`` beside each (for ``--loss-masks``: speculators keeps its masks in
its preprocessed dataset, Model-Optimizer stores none; SpecForge's file holds its own, listed too). The aux layers are the
ones the demo drafter reads (output_hidden_states 1, 2, 3); Model-Optimizer's own rule would pick
[1, 2] on a 4-layer target. Tensors are float32 (the pipelines store bf16), so the figures from the
dumps equal those from ``--target`` exactly.

The text is the target's greedy continuation of each prompt (``texts=None``: coverage 100%) or given
token sequences (dataset text: the target departs from it here and there).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from eaglekit.analysis.acceptance.target import load_target_model
from eaglekit.core.errors import InputError
from eaglekit.demo.build import MARKER, built_once
from eaglekit.demo.prompts import MAX_NEW_TOKENS, PROMPT_LENGTH, measurement_prompts
from eaglekit.demo.trained import SEQ, _grammar, sample_language

FORMATS = ("specforge", "speculators", "modelopt")
DUMPS_VERSION = 3   # bump whenever the writers change: cached dumps are keyed on it
AUX_INDICES = (1, 2, 3)    # output_hidden_states: outputs of layers 0, 1, 2 (the demo drafter's ids)


def _features(model, seq):
    """(aux [T, 3H], post-norm [T, H], pre-norm [T, H]) of one sequence."""
    import torch  # heavy: the target runs here

    captured = {}
    hook = model.model.norm.register_forward_pre_hook(lambda mod, args: captured.setdefault("pre", args[0]))
    try:
        with torch.no_grad():
            out = model(torch.as_tensor([list(seq)]), output_hidden_states=True, use_cache=False)
    finally:
        hook.remove()
    aux = torch.cat([out.hidden_states[i][0] for i in AUX_INDICES], -1)
    return aux.float(), out.hidden_states[-1][0].float(), captured["pre"][0].float()


def write_training_dumps(target: str | os.PathLike[str], out: str | os.PathLike[str], *,
                         prompts: Sequence[Sequence[int]], max_new_tokens: int = 32,
                         texts: Sequence[tuple[Sequence[int], int]] | None = None,
                         formats: Sequence[str] = FORMATS, closing: bool = False,
                         modelopt_loss_mask: bool = False) -> dict[str, Path]:
    """Write one dump per format under ``out`` (a new folder); returns their folders.

    ``prompts``: token ids, continued greedily by ``target``; or ``texts``: (token ids, assistant start)
    pairs written as they are. ``closing``: append to each greedy continuation a closing token the target did
    not choose, inside the loss mask (SpecForge's template appends ``<|im_end|>`` and masks it in).
    ``modelopt_loss_mask``: Model-Optimizer's 2026 layout (a ``loss_mask`` stored beside the hidden states)."""
    import torch  # heavy: the target runs here, and torch.save writes two of the formats
    from safetensors.torch import save_file

    root = Path(out)
    if root.is_dir() and any(p.name != MARKER for p in root.iterdir()):   # the marker: a build's own new folder
        raise InputError(f"{root} is not empty; give a new or empty folder for the dumps.")
    root.mkdir(parents=True, exist_ok=True)
    tmodel = load_target_model(target)
    model = tmodel.model
    samples = []
    if texts is None:
        for p in prompts:
            s = tmodel.run(list(p), max_new_tokens=max_new_tokens, layers=[0])
            ids = s.input_ids.tolist()
            if closing:  # a token the target would not write next
                with torch.no_grad():
                    chosen = int(model(torch.as_tensor([ids]), use_cache=False).logits[0, -1].argmax())
                ids.append((chosen + 1) % int(model.config.vocab_size))
            samples.append((ids, len(p)))
    else:
        samples = [(list(t), int(start)) for t, start in texts]
    dirs = {"specforge": root / "specforge" / "rows_0-2000", "speculators": root / "speculators" / "hidden_states",
            "modelopt": root / "modelopt"}
    for f in formats:
        dirs[f].mkdir(parents=True, exist_ok=True)
    masks: dict[str, list[str]] = {f: [] for f in formats}
    for i, (seq, start) in enumerate(samples):
        aux, post, pre = _features(model, seq)
        T, H = post.shape
        ids = torch.as_tensor(seq, dtype=torch.int64)
        mask = torch.zeros(T, dtype=torch.int64)
        mask[start:] = 1
        if "specforge" in formats:
            torch.save({"input_ids": ids, "loss_mask": mask, "hidden_state": post[None].clone(),
                        "aux_hidden_state": aux[None].clone()}, dirs["specforge"] / f"data_{i}.ckpt")
            masks["specforge"].append(json.dumps({"file": f"rows_0-2000/data_{i}.ckpt", "loss_mask": mask.tolist()}))
        if "speculators" in formats:
            hs = torch.stack([*aux.reshape(T, len(AUX_INDICES), H).unbind(1), pre], 1)      # (T, 4, H)
            save_file({"hidden_states": hs.contiguous(), "token_ids": ids}, str(dirs["speculators"] / f"hs_{i}.safetensors"))
            masks["speculators"].append(json.dumps({"file": f"hs_{i}.safetensors", "loss_mask": mask.tolist()}))
        if "modelopt" in formats:
            cid = f"conv-{i:04d}"
            saved = {"input_ids": ids, "hidden_states": post.clone(), "aux_hidden_states": aux.clone(),
                     "conversation_id": cid}
            if modelopt_loss_mask:
                saved = {**saved, "loss_mask": mask.clone()}
            torch.save(saved, dirs["modelopt"] / f"{cid}.pt")
            masks["modelopt"].append(json.dumps({"file": f"{cid}.pt", "loss_mask": mask.tolist()}))
    for f in formats:
        if masks.get(f):
            (root / f"{f}-loss-masks.jsonl").write_text("\n".join(masks[f]) + "\n")
    return {f: root / f for f in formats}


def loss_masks_of(folder: str | os.PathLike[str]) -> Path:
    """The ``--loss-masks`` file written beside a dump folder by :func:`write_training_dumps`."""
    folder = Path(folder)
    return folder.parent / f"{folder.name}-loss-masks.jsonl"


def trained_dumps(world, *, greedy: bool = True, force: bool = False) -> dict[str, Path]:
    """The trained world's k2 dumps under ``world.root/dumps-greedy-v<N>``: the target's greedy continuations of
    the measured pages' prompts (:func:`~eaglekit.demo.prompts.measurement_prompts`, as long as those pages
    generate), or ``dumps-dataset-v<N>``: as many held-out texts of the language, which depart from the target's
    greedy tokens; written on first use."""
    root = Path(world.root) / f"dumps-{'greedy' if greedy else 'dataset'}-v{DUMPS_VERSION}"

    def write(folder: Path) -> None:
        prompts = [json.loads(line)["input_ids"] for line in measurement_prompts(world, "k2").read_text().splitlines() if line.strip()]
        if greedy:
            write_training_dumps(world.target("k2"), folder, prompts=prompts, max_new_tokens=MAX_NEW_TOKENS)
        else:
            write_training_dumps(world.target("k2"), folder, prompts=[], texts=dataset_texts(len(prompts)))

    # whole or not at all, once, however many processes ask (a folder of an older eaglekit is replaced)
    built_once(root, {"dumps": DUMPS_VERSION}, write, force=force, what="dump folder",
               ours=lambda folder: any((folder / f).is_dir() for f in FORMATS))
    return {f: root / f for f in FORMATS}


def dataset_texts(n: int, *, seed: int = 11, assistant_start: int = PROMPT_LENGTH) -> list[tuple[list[int], int]]:
    """``n`` held-out sequences of the k2 language (10% noise): text the target did not generate, as long as the
    greedy continuations (a 10-token prompt and 37 more), so that their requests are as long: an accept length
    depends on the request length through its capped last cycle (36 generated tokens take 9 cycles of 4 at
    K = 3, 37 take 10), and the two figures then compare like for like."""
    gram = _grammar(np.random.default_rng(20261130))
    text = sample_language(np.random.default_rng(seed), gram["k2"], gram["common"], n, SEQ)
    return [(t[:PROMPT_LENGTH + MAX_NEW_TOKENS].tolist(), assistant_start) for t in text]
