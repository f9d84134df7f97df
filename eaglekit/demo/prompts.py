"""More prompts for the trained demo world's accept-length measurements, so a verdict is not a coin toss.

The world ships 12 held-out prompts per language (``prompts-k2.jsonl``, ``prompts-k25.jsonl``); a bottom line
judged on 12 greedy continuations of 32 tokens has an interval of about +-0.1 around each accept length, as
wide as the gap to break-even it decides. :func:`measurement_prompts` writes, beside them and on first use,
those 12 followed by more held-out prompts of the same language and length (drawn with their own seed, so
the trained world is unchanged and nothing is retrained). :data:`MAX_NEW_TOKENS` keeps prompt and
continuation within the length the demo targets were trained on.

:func:`long_prompts` writes the world's long traces: prompts of the same language from the chat length up to
thousands of tokens (:data:`LONG_LENGTHS`), each continued for the same :data:`MAX_NEW_TOKENS`. Cycles start only
inside the continuations, so a trace of 4,096 tokens costs one prefill and 37 decode steps, not 4,096: the
positions are sampled at the lengths the prompts give (page 11, ``docs/long-context.md``).
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
#: the long traces' prompt lengths: traces far past the SEQ tokens the targets and drafters were trained on (they
#: claim CONTEXT = 8192 positions), each continued for MAX_NEW_TOKENS, after the measured pages' own chat-length
#: prompts
LONG_LENGTHS = (256, 512, 1024, 2048, 4096)
#: long prompts per length: a bucket's interval resamples its requests
LONG_PER_LENGTH = 8
#: the long traces' position buckets: the chat-length prompts' cycles, then one bucket per long prompt length (a
#: continuation of MAX_NEW_TOKENS tokens after a prompt of L tokens starts its cycles at positions L + 1 ..
#: L + MAX_NEW_TOKENS)
LONG_BUCKETS = (0, *LONG_LENGTHS, LONG_LENGTHS[-1] + 64)
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


def long_prompts(world, name: str = "k25", lengths=LONG_LENGTHS, per_length: int = LONG_PER_LENGTH) -> Path:
    """``prompts-{name}-long.jsonl`` in the world's folder: the measured pages' chat-length prompts
    (:func:`measurement_prompts`, so the first bucket's cycles are exactly theirs), then ``per_length`` held-out
    prompts of ``name``'s language at each of ``lengths`` tokens (:data:`LONG_LENGTHS`); written once (whole or not
    at all)."""
    lengths = tuple(int(x) for x in lengths)
    tag = "" if (lengths, per_length) == (LONG_LENGTHS, LONG_PER_LENGTH) else f"-{'_'.join(map(str, lengths))}x{per_length}"
    path = Path(world.prompts(name)).with_name(f"prompts-{name}-long{tag}.jsonl")
    if path.exists():
        return path
    lines = [line for line in measurement_prompts(world, name).read_text().splitlines() if line.strip()]
    gram = _grammar(np.random.default_rng(_GRAMMAR_SEED))
    rule, vocab = {"k2": (gram["k2"], gram["common"]), "k25": (gram["k25"], gram["common25"])}[name]
    for i, length in enumerate(lengths):
        seqs = sample_language(np.random.default_rng(5000 + 10 * i + (name == "k25")), rule, vocab, per_length, length)
        lines += [json.dumps({"input_ids": p.tolist()}) for p in seqs]
    write_atomic(path, "\n".join(lines) + "\n")  # the same bytes from any writer: a twin replaces it whole
    return path
