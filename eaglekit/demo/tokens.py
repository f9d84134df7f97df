"""The token-level demo: a second target version whose tokenizer and chat template changed.

Built beside the trained demo world (:mod:`eaglekit.demo.trained`), from its ``k25`` target, into
``<trained root>/tokens``:

* ``targets/k25-think``: k25 continued on chats rendered with a new template: after the user's turn comes
  ``<|im_end|>``, then the generation prompt ``<|assistant|> <think>`` opens a thinking block written in a
  register of its own (tokens the old draft vocabulary mostly lacks), closed by ``</think>`` and followed by
  the answer in the k25 language. Its tokenizer renames four rarely used ids to ``<|im_end|>``,
  ``<|assistant|>``, ``<think>`` and ``</think>`` (special, added tokens) and sets eos and pad;
* ``templates/k25.jinja`` (the old template, the one the drafters were trained under) and
  ``templates/k25-think.jinja`` (the new one);
* ``prompts-chat-k25.jsonl``: held-out chats in the k25 language.

The drafters of the trained world were trained on the old token stream. Deterministic, a few seconds of
training on 2 cores, cached by :data:`TOKENS_VERSION` (and rebuilt when the trained world's version changes).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eaglekit.analysis.acceptance.target import quiet_loading
from eaglekit.demo.build import built_once
from eaglekit.demo.trained import (
    COMMON,
    LABEL,
    NOISE,
    SEQ,
    TRAINED_VERSION,
    VOCAB,
    TrainedWorld,
    _grammar,
    _target_model,
    _train_target,
    sample_language,
)

TOKENS_VERSION = 4  # bump whenever this build changes: the cache is keyed on it
MARKERS = ("<|im_end|>", "<|assistant|>", "<think>", "</think>")
OLD_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
NEW_TEMPLATE = ("{% for m in messages %}{{ m['content'] }} <|im_end|> {% endfor %}"
                "{% if add_generation_prompt %}<|assistant|> <think> {% endif %}")
THINK_TOKENS, THINK_END = 24, 0.04
THINK_STEPS = 250  # training steps of k25-think on the new chats


@dataclass(frozen=True)
class TokenWorld:
    """Where the token-level demo lives; paths by name."""

    root: Path
    trained: TrainedWorld
    manifest: dict[str, Any]

    def target(self, name: str) -> Path:
        """``k25-think`` (this world) or a trained-world target (``k2``, ``k25``)."""
        local = self.root / "targets" / name
        return local if local.exists() else self.trained.target(name)

    def template(self, name: str) -> Path:
        return self.root / "templates" / f"{name}.jinja"

    def prompts(self, name: str = "chat-k25") -> Path:
        local = self.root / f"prompts-{name}.jsonl"
        return local if local.exists() else self.trained.prompts(name)

    def drafter(self, name: str) -> Path:
        return self.trained.drafter(name)

    def __str__(self) -> str:
        return f"token-level demo at {self.root}\n" + "\n".join(f"  {k}: {v}" for k, v in self.manifest["what"].items())

    def _repr_html_(self) -> str:
        from eaglekit.core.render import html_table

        return html_table(["path", "what"], list(self.manifest["what"].items()), caption=f"token-level demo: {self.root}")


def markers(common: np.ndarray) -> np.ndarray:
    """The four ids renamed to markers: the highest ids outside the common (draft) vocabulary."""
    return np.setdiff1d(np.arange(VOCAB), common)[-len(MARKERS):]


def _think_grammar(rng, common: np.ndarray, mark: np.ndarray) -> dict[str, np.ndarray]:
    pool = np.setdiff1d(np.setdiff1d(np.arange(VOCAB), common), mark)
    think = np.sort(rng.choice(pool, THINK_TOKENS, replace=False))
    rule = np.stack([rng.choice(think, VOCAB), rng.choice(think, VOCAB)])       # (2, V)
    rule[rng.random((2, VOCAB)) < THINK_END] = mark[3]                          # some contexts close the block
    return {"think": think, "rule": rule}


def _chat_sequences(rng, perm, common, think, mark, n: int) -> np.ndarray:
    """user turn (k25 language) <|im_end|> <|assistant|> <think> thinking </think> answer, SEQ tokens each."""
    out = np.empty((n, SEQ), np.int64)
    for r in range(n):
        user = sample_language(rng, perm, common, 1, int(rng.integers(4, 31)))[0]
        seq = [*user.tolist(), int(mark[0]), int(mark[1]), int(mark[2])]
        inside, steps = True, 0
        while len(seq) < SEQ:
            a, b = seq[-2], seq[-1]
            if inside:
                nxt = int(think["rule"][a % 2, b]) if rng.random() >= NOISE else int(rng.choice(think["think"]))
                steps += 1
                if steps >= 20:
                    nxt = int(mark[3])
                inside = nxt != mark[3]
            else:
                nxt = int(perm[a % 2, b]) if rng.random() >= NOISE else int(rng.integers(0, VOCAB))
            seq.append(nxt)
        out[r] = seq[:SEQ]
    return out


def _save_tokenizer(folder: Path, mark: np.ndarray) -> None:
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    names = {int(i): m for i, m in zip(mark, MARKERS)}
    vocab = {names.get(i, f"t{i}"): i for i in range(VOCAB)}
    tok = Tokenizer(WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = WhitespaceSplit()
    tok.add_special_tokens([AddedToken(m, special=True, normalized=False) for m in MARKERS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", eos_token="<|im_end|>", pad_token="<|im_end|>")
    fast.chat_template = NEW_TEMPLATE
    fast.save_pretrained(str(folder))


def build_token_demo(trained: TrainedWorld, *, path: str | os.PathLike[str] | None = None, force: bool = False,
                     progress: bool | None = None) -> TokenWorld:
    """Train (or reuse) the token-level demo beside ``trained`` (default: ``<trained root>/tokens``); safe when
    several processes ask at once (:func:`~eaglekit.demo.build.built_once`)."""
    root = Path(path) if path is not None else trained.root / "tokens"
    version = {"tokens": TOKENS_VERSION, "trained": trained.manifest.get("version", TRAINED_VERSION),
               "trained_build": trained.manifest.get("build")}
    built_once(root, version, lambda folder: _build(folder, trained, progress=progress),
               ours=lambda folder: _manifest(folder) is not None, force=force, what="token demo")
    return TokenWorld(root, trained, _manifest(root) or {})


def _build(root: Path, trained: TrainedWorld, *, progress: bool | None) -> None:
    import torch
    from tqdm.auto import tqdm
    from transformers import DeepseekV3ForCausalLM

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    bar = tqdm(total=2, desc="token-level demo", disable=progress is False, leave=False)
    try:
        gram = _grammar(np.random.default_rng(20261130))   # the trained world's first draw: the same grammar
        common = gram["common25"]                           # the k25 language's common (draft) tokens
        mark = markers(np.union1d(gram["common"], common))  # ids neither language produces by rule
        rng = np.random.default_rng(2026120)
        think = _think_grammar(rng, np.union1d(gram["common"], common), mark)
        torch.manual_seed(2026120)
        chats = _chat_sequences(rng, gram["k25"], common, think, mark, 320)
        plain = sample_language(rng, gram["k25"], common, 192, SEQ)
        model = _target_model()
        with quiet_loading():
            k25 = DeepseekV3ForCausalLM.from_pretrained(str(trained.target("k25")), trust_remote_code=False)
        model.load_state_dict(k25.state_dict())
        _train_target(model, np.concatenate([chats, plain]), steps=THINK_STEPS, lr=2e-3, seed=6)
        bar.update()
        folder = root / "targets" / "k25-think"
        with quiet_loading():
            model.save_pretrained(str(folder))
        _save_tokenizer(folder, mark)
        (root / "templates").mkdir(exist_ok=True)
        (root / "templates" / "k25.jinja").write_text(OLD_TEMPLATE + "\n")
        (root / "templates" / "k25-think.jinja").write_text(NEW_TEMPLATE + "\n")
        held = sample_language(np.random.default_rng(11), gram["k25"], common, 6, 8)
        (root / "prompts-chat-k25.jsonl").write_text("".join(
            json.dumps({"messages": [{"role": "user", "content": " ".join(f"t{i}" for i in p)}]}) + "\n" for p in held))
        bar.update()
    finally:
        torch.set_num_threads(threads)
        bar.close()
    manifest = {"version": TOKENS_VERSION, "trained_version": trained.manifest.get("version", TRAINED_VERSION), "label": LABEL, "markers": {m: int(i) for m, i in zip(MARKERS, mark)},
                "think_tokens": [int(i) for i in think["think"]], "draft_vocab": COMMON,
                "what": {"targets/k25-think": "k25 continued on chats with a thinking block (new template, renamed "
                                              "special tokens)",
                         "templates/k25.jinja": "the old chat template (the drafters' training stream)",
                         "templates/k25-think.jinja": "the new template: <|im_end|>, then <|assistant|> <think>",
                         "prompts-chat-k25.jsonl": "6 held-out chats in the k25 language"}}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _manifest(root: Path) -> dict[str, Any] | None:
    try:
        m = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and m.get("label") == LABEL and "markers" in m else None
