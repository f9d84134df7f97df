"""More prompts for the trained demo world's accept-length measurements, so a verdict is not a coin toss.

The world ships 12 held-out prompts per language (``prompts-k2.jsonl``, ``prompts-k25.jsonl``); a bottom line
judged on 12 greedy continuations of 32 tokens has an interval of about +-0.1 around each accept length, as
wide as the gap to break-even it decides. :func:`measurement_prompts` writes, beside them and on first use,
those 12 followed by more held-out prompts of the same language and length (drawn with their own seed, so
the trained world is unchanged and nothing is retrained). :data:`MAX_NEW_TOKENS` keeps prompt and
continuation within the length the demo targets were trained on.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from eaglekit.demo.trained import SEQ, _grammar, sample_language
from eaglekit.io.write import write_atomic

#: prompts per language in the measured pages (the world's 12 first)
MEASURED_PROMPTS = 48
#: the world's prompts are 10 tokens long; the targets were trained on sequences of SEQ tokens
PROMPT_LENGTH = 10
#: 37 new tokens: 36 after the prefill token, 9 whole cycles at K = 3 (the depth the pages judge), so the
#: generation limit does not cut a cycle of a drafter that accepts everything; prompt and continuation stay
#: within the SEQ tokens the targets were trained on
MAX_NEW_TOKENS = SEQ - PROMPT_LENGTH - 1
#: the languages' grammar is drawn from this seed when the world is built (eaglekit.demo.trained)
_GRAMMAR_SEED = 20261130


def measurement_prompts(world, name: str, count: int = MEASURED_PROMPTS) -> Path:
    """``prompts-{name}-{count}.jsonl`` in the world's folder: the world's own prompts for ``name`` (``"k2"`` or
    ``"k25"``), then held-out prompts of that language up to ``count``; written once (whole or not at all)."""
    own = Path(world.prompts(name))
    path = own.with_name(f"prompts-{name}-{count}.jsonl")
    if path.exists():
        return path
    lines = [line for line in own.read_text().splitlines() if line.strip()]
    gram = _grammar(np.random.default_rng(_GRAMMAR_SEED))
    rule, vocab = {"k2": (gram["k2"], gram["common"]), "k25": (gram["k25"], gram["common25"])}[name]
    more = sample_language(np.random.default_rng(1000 + count + (name == "k25")), rule, vocab,
                           max(0, count - len(lines)), PROMPT_LENGTH)
    lines = lines[:count] + [json.dumps({"input_ids": p.tolist()}) for p in more]
    write_atomic(path, "\n".join(lines) + "\n")  # the same bytes from any writer: a twin replaces it whole
    return path
