"""The draft vocabulary on your traffic: coverage of the target's output tokens and a recommended map.

Traffic is the target's own output: its greedy continuations of your prompts (a target transformers
runs, prompts optionally rendered with a chat template in the bounded sandbox), or the continuations
held in a hidden-state dump: eaglekit's own (``input_ids`` after ``prompt_len``), or a training pipeline's
(SpecForge's assistant tokens by its loss masks; every token of speculators' and Model-Optimizer's samples,
which keep no mask beside them). SpecForge builds the draft vocabulary
from the assistant tokens of its training data (``loss_mask == 1``): the continuation is the same part of
a sequence. The maths is :mod:`eaglekit.core.tokens.coverage`; :func:`write_vocab_map` saves a map that
``eaglekit export --vocab-map`` reads (safetensors) or SpecForge's ``--vocab-mapping-path`` loads (``.pt``,
``{"d2t", "t2d"}`` as ``generate_vocab_mapping_file`` saves it).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from eaglekit.analysis.acceptance.target import TargetModel, load_target_model, read_prompts
from eaglekit.analysis.acceptance.templates import as_template, render_prompts
from eaglekit.core.configs.config import normalize_config
from eaglekit.core.tokens.coverage import FULL_VOCABULARY, Coverage, check_steps, coverage, reduced_vocabulary
from eaglekit.core.errors import ConfigError, InputError, VocabMapError
from eaglekit.core.tokens.vocab import check_vocab_map, unreadable_d2t
from eaglekit.io.drafter import read_map
from eaglekit.io.dumps.detect import open_training_dump
from eaglekit.io.dumps.native import open_dump
from eaglekit.io.reader import open_checkpoint
from eaglekit.io.write import write_atomic


def drafter_map(drafter, *, endpoint: str | None = None, timeout: float | None = None) -> tuple[np.ndarray, int, str, tuple[str, ...]]:
    """(d2t as an engine reads it, target vocabulary size, label, notes) of a drafter location. A missing
    d2t is read as engines read it: draft id i = target id i; for a full-vocabulary drafter
    (draft_vocab_size = vocab_size, no d2t/t2d, e.g. the Kimi MLA drafters) that is every target token, and
    the notes say so."""
    with open_checkpoint(drafter, endpoint=endpoint, timeout=timeout) as ck:
        if ck.inventory.config is None:
            raise ConfigError(f"{ck.location.raw} has no config.json: the draft vocabulary size is in it.")
        cfg = normalize_config(ck.inventory.config, source=f"{ck.location.raw}/config.json")
        d2t = read_map(ck, "d2t")
        label = ck.location.raw
    notes: list[str] = []
    if d2t is None:
        d2t = np.zeros(cfg.draft_vocab_size, np.int64)
        if cfg.full_vocabulary:
            notes.append(FULL_VOCABULARY)
        if cfg.draft_vocab_size < cfg.vocab_size:
            notes.append(f"the drafter has no d2t: engines read draft id i as target id i (ids 0.."
                         f"{cfg.draft_vocab_size - 1}); coverage counted for that reading")
    else:
        notes.append(reduced_vocabulary(len(d2t), cfg.vocab_size))
        bad = unreadable_d2t(d2t, vocab_size=cfg.vocab_size)
        if bad:
            raise VocabMapError(f"{label}: {bad}; coverage needs a d2t an engine could read.")
        c = check_vocab_map(d2t, None, vocab_size=cfg.vocab_size)
        if c.identity and cfg.draft_vocab_size < cfg.vocab_size:
            notes.append(f"the drafter's d2t is all zeros: engines read draft id i as target id i (ids 0.."
                         f"{cfg.draft_vocab_size - 1}); coverage counted for that reading")
    return np.asarray(d2t, np.int64), int(cfg.vocab_size), label, tuple(notes)


def traffic_tokens(*, target=None, prompts=None, hidden_states=None, chat_template=None, max_new_tokens: int = 64,
                   device: str = "cpu", dtype: str = "float32", progress: bool | None = None,
                   trust_remote_code: bool = False) -> list[np.ndarray]:
    """The target's output tokens, one array per prompt: greedy continuations of ``prompts`` by ``target``
    (rendered with ``chat_template`` when given: a path or ``"raw"``), or the continuations in the dump
    ``hidden_states``."""
    from tqdm.auto import tqdm  # progress bars load with the work that shows them

    if (target is None) == (hidden_states is None):
        raise InputError("give exactly one of target (with prompts) or hidden_states (a dump folder).")
    if hidden_states is not None:
        if chat_template is not None:
            raise InputError("a dump already holds rendered prompts; --chat-template goes with --target.")
        if not os.path.lexists(os.path.join(os.path.expanduser(str(hidden_states)), "manifest.json")):
            return _training_dump_tokens(hidden_states, progress=progress)
        dump = open_dump(hidden_states)
        return [np.asarray(s.input_ids, np.int64)[int(s.prompt_len):] for s in dump]
    if prompts is None:
        raise InputError("traffic from a target needs prompts (a JSONL file).")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise InputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}.")
    tmodel = target if isinstance(target, TargetModel) else load_target_model(target, device=device, dtype=dtype,
                                                                              trust_remote_code=trust_remote_code)
    plist, psource = read_prompts(prompts) if isinstance(prompts, (str, os.PathLike)) else (tuple(prompts), "prompts")
    if chat_template is not None:
        if tmodel.tokenizer is None:
            raise InputError(f"{tmodel.name} has no tokenizer: a chat template renders text, which needs one.")
        rendered, _ = render_prompts(as_template(chat_template), plist, tmodel.tokenizer, vocab_size=tmodel.vocab_size)
        ids_list = [list(p.value) for p in rendered]
    else:
        ids_list = tmodel.tokenize_all(plist, source=psource, max_new_tokens=max_new_tokens)
    out = []
    for p, ids in tqdm(list(zip(plist, ids_list)), desc="traffic", unit="prompt", disable=None if progress is None else not progress,
                       leave=False):
        s = tmodel.run(ids, max_new_tokens=max_new_tokens, layers=[0], where=f"{psource} line {p.line}")
        out.append(s.input_ids[len(ids):].numpy().astype(np.int64))
    return out


def _training_dump_tokens(path, *, progress: bool | None = None) -> list[np.ndarray]:
    """A training pipeline's dump (SpecForge, speculators, Model-Optimizer) as traffic: each sample's assistant
    tokens where the format stores a loss mask (SpecForge), else every token of the sample (the others keep
    their masks elsewhere, or none)."""
    from tqdm.auto import tqdm  # progress bars load with the work that shows them

    dump = open_training_dump(path)
    out = []
    for i in tqdm(range(len(dump)), desc="dump traffic", unit="sample", disable=None if progress is None else not progress, leave=False):
        r = dump.read(i)
        ids = r.input_ids.numpy().astype(np.int64)
        out.append(ids[r.loss_mask.numpy().astype(bool)] if r.loss_mask is not None else ids)
    return out


def vocab_coverage(drafter, *, target=None, prompts=None, hidden_states=None, chat_template=None,
                   max_new_tokens: int = 64, steps: int = 5, device: str = "cpu", dtype: str = "float32",
                   endpoint: str | None = None, timeout: float | None = None, progress: bool | None = None,
                   trust_remote_code: bool = False) -> Coverage:
    """The drafter's draft vocabulary against the target's output tokens on your traffic, and the map
    SpecForge's rule would build from that traffic (:class:`~eaglekit.core.tokens.coverage.Coverage`)."""
    check_steps(steps)  # before any work
    d2t, vocab, label, notes = drafter_map(drafter, endpoint=endpoint, timeout=timeout)
    seqs = traffic_tokens(target=target, prompts=prompts, hidden_states=hidden_states, chat_template=chat_template,
                          max_new_tokens=max_new_tokens, device=device, dtype=dtype, progress=progress,
                          trust_remote_code=trust_remote_code)
    where = _dump_label(hidden_states) if hidden_states is not None else \
        f"{getattr(target, 'name', target)} on {prompts if isinstance(prompts, (str, os.PathLike)) else 'prompts'}" \
        + (f" rendered with {chat_template}" if chat_template is not None else "")
    return coverage(d2t, seqs, vocab_size=vocab, drafter=label, traffic=str(where), steps=steps, notes=notes)


def _dump_label(path) -> str:
    if os.path.lexists(os.path.join(os.path.expanduser(str(path)), "manifest.json")):
        return f"dump {path}"
    dump = open_training_dump(path)
    return f"{dump.format} dump {path} (" + ("assistant tokens by its loss masks" if dump.has_loss_mask
                                            else "every token: the format keeps no loss mask") + ")"


def check_map_path(path: str | os.PathLike[str]) -> Path:
    """Refuse, before any work, a map path :func:`write_vocab_map` would refuse."""
    out = Path(path).expanduser()
    if out.suffix not in (".safetensors", ".pt"):
        raise InputError(f"{out}: a vocabulary map is written as .safetensors (eaglekit export --vocab-map) or .pt "
                         "(SpecForge --vocab-mapping-path).")
    if out.exists() or out.is_symlink():
        raise InputError(f"{out} exists; eaglekit writes a vocabulary map only to a new file.")
    if not out.parent.is_dir():
        raise InputError(f"{out.parent} does not exist: create it, or write the map elsewhere.")
    if any((out.parent / n).exists() for n in ("config.json", "model.safetensors", "model.safetensors.index.json")):
        raise InputError(f"{out.parent} is a model folder; eaglekit never writes into one: write the map elsewhere.")
    return out


def write_vocab_map(path: str | os.PathLike[str], d2t, t2d) -> Path:
    """Save ``(d2t, t2d)``: ``*.safetensors`` (what ``eaglekit export --vocab-map`` reads) or ``*.pt``
    (SpecForge's ``{"d2t", "t2d"}``). A new file only, never inside a model folder, never through a link:
    written whole to a fresh temporary file, then renamed into place (:func:`~eaglekit.io.write.write_atomic`)."""
    out = check_map_path(path)
    d2t = np.ascontiguousarray(np.asarray(d2t, np.int64))
    t2d = np.ascontiguousarray(np.asarray(t2d, np.bool_))
    if out.suffix == ".safetensors":
        from safetensors.numpy import save  # serialisation loads only where a map is written

        data = save({"d2t": d2t, "t2d": t2d}, metadata={"format": "pt", "written_by": "eaglekit"})
        return write_atomic(out, data, exist_ok=False, what="a vocabulary map")
    import torch  # SpecForge's format is a torch pickle of two tensors

    return write_atomic(out, lambda f: torch.save({"d2t": torch.from_numpy(d2t), "t2d": torch.from_numpy(t2d)}, f),
                        exist_ok=False, what="a vocabulary map")


__all__ = ["check_map_path", "drafter_map", "traffic_tokens", "vocab_coverage", "write_vocab_map"]
