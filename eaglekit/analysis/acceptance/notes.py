"""Caveats an accept-length measurement states beside its figures, written from what it saw.

Each function returns one sentence or None. A sentence that starts with ``warning:`` says the figure may
measure something else than asked (another model's embeddings, prompts the tokenizer did not know);
``eaglekit acceptance`` also prints those on stderr. Pure: numbers and names in, words out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

#: Step j "collapses" when it accepts less than this share of step j-1's rate ...
COLLAPSE_RATIO = 0.5
#: ... and at least this much less in absolute terms (noise on a few positions is not a collapse).
COLLAPSE_DROP = 0.2
#: ... and only where both steps were compared at this many positions at least: a few cycles say nothing
#: (two positions at step 4 read as a collapse on a dump of dataset text whose greedy step 4 accepts 0.83).
COLLAPSE_MIN_POSITIONS = 30
#: Below this mean cosine, the given embeddings are not the ones the dump's hidden_states[0] came from.
SAME_EMBEDDING_COSINE = 0.999
#: Above this share of unknown tokens, the prompts are not in the target's language.
UNKNOWN_SHARE = 0.5


def collapse_step(per_step: Sequence[float | None], counts: Sequence[int] | None = None) -> int | None:
    """The first chain step j (1-based, j >= 2) whose conditional acceptance falls below half of step
    j-1's and by at least 0.2: where a drafter trained with training-time test for j-1 steps (SpecForge's
    ``--ttt-length``; EAGLE-3 trains a fixed number of chain steps) stops predicting. None: no such step.
    ``counts``: the positions each step was compared at; a step compared at fewer than
    :data:`COLLAPSE_MIN_POSITIONS` (or the step before it) is never called a collapse."""
    for j in range(1, len(per_step)):
        before, now = per_step[j - 1], per_step[j]
        if before is None or now is None:
            continue
        if counts is not None and min(counts[j - 1], counts[j]) < COLLAPSE_MIN_POSITIONS:
            continue
        if now < COLLAPSE_RATIO * before and before - now >= COLLAPSE_DROP:
            return j + 1
    return None


def collapse_note(per_step: Sequence[float | None], *, trained_steps: int | None = None,
                  counts: Sequence[int] | None = None) -> str | None:
    """A sentence when per-step acceptance collapses (:func:`collapse_step`); ``trained_steps``, when known
    (the demo records it), is named."""
    j = collapse_step(per_step, counts)
    if j is None:
        return None
    told = (f"it was trained for {trained_steps} chain steps" if trained_steps is not None
            else f"it seems trained for {j - 1} chain step{'s' * (j != 2)} (training-time test)")
    return (f"per-step acceptance collapses at step {j} ({per_step[j - 2]:.3f} at step {j - 1}, {per_step[j - 1]:.3f} "
            f"at step {j}): {told}; accept lengths at K >= {j} measure steps it was not trained for, so serve it "
            f"with K <= {j - 1} or train it for more steps.")


#: Say so when the generation limit holds the accept length this far below K + 1 even with every draft accepted.
LIMIT_SHORTFALL = 0.05


def generation_limit_note(generated: Sequence[int], steps: int) -> str | None:
    """A sentence when each prompt's last cycle, cut by the generation limit, holds the accept length well
    below what the per-step acceptances imply: with every draft accepted, ``generated`` tokens (per prompt,
    after the prefill token) take ceil(G / (K + 1)) cycles, so the pooled ceiling is sum G / sum ceil(...)."""
    total = sum(int(g) for g in generated)
    cycles = sum(-(-int(g) // (steps + 1)) for g in generated if g > 0)
    if not cycles:
        return None
    ceiling = total / cycles
    if ceiling >= steps + 1 - LIMIT_SHORTFALL:
        return None
    return (f"each prompt's last cycle is cut at the generation limit: {total} tokens in {len(generated)} prompts "
            f"allow at most {ceiling:.3f} per cycle at K = {steps} even with every draft accepted (not {steps + 1}), "
            "so the accept length sits below 1 + the sum of the per-step acceptances' running products; generate "
            "more tokens per prompt (--max-new-tokens) for a figure closer to long generations.")


def _same_location(a: str, b: str) -> bool:
    def norm(x: str) -> str:
        x = x.strip().removeprefix("hf://").rstrip("/")
        p = Path(x).expanduser()
        return str(p.resolve()) if p.exists() else x
    return norm(a) == norm(b)


def embeddings_note(embeddings: str | os.PathLike[str] | None, dump_target: str,
                    cosine: float | None = None) -> str | None:
    """A warning when the given embeddings of the dump's own tokens differ from its hidden_states[0] (mean
    ``cosine``, when the dump holds index 0: the content decides), else when ``embeddings``
    (``--embeddings``) is not the target the dump's manifest names."""
    if embeddings is None:
        return None
    given = os.fspath(embeddings)
    if cosine is not None:  # the content decides: a copy of the right model under another name is fine
        if cosine >= SAME_EMBEDDING_COSINE:
            return None
        return (f"warning: the embeddings from {given} do not match the dump's hidden_states[0] (mean cosine "
                f"{cosine:.4f} over the first sample's tokens): they are another model's, and the accept length "
                f"measures a drafter fed the wrong embeddings. Give --embeddings {dump_target or 'the dump target'}.")
    if dump_target and not _same_location(given, dump_target):
        return (f"warning: --embeddings {given} is not the dump's target ({dump_target}, its manifest): if it is "
                "another model (two versions of one model share every shape), the drafter reads the wrong "
                "embeddings and the accept length is wrong.")
    return None


def unknown_tokens_note(unknown: int, total: int, *, target: str) -> str | None:
    """A warning when more than half of the prompts' text tokens are the tokenizer's unknown token."""
    if total == 0 or unknown / total <= UNKNOWN_SHARE:
        return None
    return (f"warning: {unknown} of {total} prompt tokens ({unknown / total:.0%}) are {target}'s unknown token: "
            "the prompts are not in the language its tokenizer knows, so the accept length measures "
            "continuations of unknown tokens. Write prompts in its language, or give input_ids.")


def rotary_base_note(config, choice, measured_base: float | None = None) -> str | None:
    """Where engines (rope_theta) and TorchSpec build the drafter's rotary table on different bases
    (core/configs/rotary.py): which base this figure used, and the option that measures the other. ``config``:
    the drafter's config as its file says."""
    from eaglekit.core.configs.rotary import base_words, bases_differ, rotary_base

    scaling = config.rope_scaling or config.rope_parameters
    if not bases_differ(config.attention, config.rope_theta, scaling):
        return None
    used = rotary_base(choice, config.attention, config.rope_theta, scaling)
    other = "torchspec" if used == config.rope_theta else "config"
    return (f"rotary base: measured on base {used:g} (--rotary-base {choice}); {base_words(config.attention, config.rope_theta, scaling)}. "
            f"Measure with --rotary-base {other} too: the higher figure says which base it was trained on.")
