"""Chains only where the text is the target's own: greedy-consistent spans of a training sample.

Training text is often dataset text, or was regenerated at temperature > 0, so it is not what the
target would have generated greedily. Serving-time acceptance is about the target's own tokens, so a
cycle is evaluated only where the text follows them:

* token ``x_t`` (``t >= 1``) is *greedy-consistent* when it equals the target's argmax after position
  ``t - 1`` (from the dump's final hidden state), and it is an *assistant* token when the loss mask
  says so (serving drafts only while generating; ``all_positions`` counts every token);
* a span ``[a, b]`` is a maximal run of consistent assistant tokens. Its cycles start at bases
  ``a - 1, ...`` and step ``j`` from base ``t`` is compared with the target's token after ``t + j`` while
  ``t + j <= b - 1`` (exactly :func:`~eaglekit.analysis.acceptance.measure.sample_stats` on the sequence
  cut after ``x_b`` with prompt length ``a``). Text before the span stays in the drafter's attention
  prefix, as it would in serving.

Spans are not requests: each assistant turn of a sample is one (:func:`requests`), and the accept length is
``--target``'s cycle simulation over it, the drafts no span can show completed with the measured per-step
conditional acceptances (:mod:`~eaglekit.analysis.acceptance.span_estimate`). A span's flags say how it meets
the text around it: ``open_end``, it stops where the text departs from the target's choice inside the turn (a
departure at the turn's last token, a closing token the template appended, ends the request instead);
``open_start``, it starts right after such a departure, so its first cycle drafts from a context the target
would not have written and is not taken as seen.

Coverage = consistent assistant tokens / assistant tokens: the share of the assistant text the figure
speaks for.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from eaglekit.analysis.acceptance.measure import SampleStats, count_drafts


def greedy_spans(input_ids: torch.Tensor, target_ids: torch.Tensor, assistant: torch.Tensor
                 ) -> tuple[list[tuple[int, int]], int, int]:
    """Spans ``[a, b]`` (inclusive) of greedy-consistent assistant tokens, the assistant tokens counted
    (``x_1..x_{T-1}``) and the consistent ones among them."""
    T = int(input_ids.shape[0])
    ok = np.zeros(T, bool)
    if T < 2:
        return [], 0, 0
    asst = assistant[1:].numpy().astype(bool)
    ok[1:] = (input_ids[1:] == target_ids[:-1]).numpy() & asst
    spans, a = [], None
    for t in range(T + 1):
        if t < T and ok[t]:
            a = t if a is None else a
        elif a is not None:
            spans.append((a, t - 1))
            a = None
    return spans, int(asst.sum()), int(ok.sum())


@torch.no_grad()
def span_stats(model, aux: torch.Tensor, input_ids: torch.Tensor, target_ids: torch.Tensor,
               spans: list[tuple[int, int]], *, steps: int, temperature: float = 0.0,
               target_probs: torch.Tensor | None = None, assistant: torch.Tensor | None = None) -> list[SampleStats]:
    """One :class:`SampleStats` per span with at least one generated token; the drafter drafts every
    base once (one pass per chain step from the first span's base on).

    aux (n_aux, T, H) in the drafter's order; target_probs (T, N) at temperature > 0: the target's
    probabilities on the draft vocabulary's target ids; ``assistant`` (T,) bool: a span followed by an
    assistant token that departs from the target's choice is ``open_end`` (without it: any span that
    stops before the sample's end)."""
    spans = [(a, b) for a, b in spans if b - a >= 1]
    if not spans:
        return []
    T = int(input_ids.shape[0])
    start = spans[0][0] - 1
    h = model.project(aux)                                                  # (T, H)
    out = model.draft(h[:T - 1], input_ids[1:], steps, start=start, return_logits=temperature > 0)
    tokens = out.tokens.cpu()                                               # (K, T - 1 - start)
    result = []
    for a, b in spans:
        bases = torch.arange(a - 1, b - 1)                                  # (G,)
        # a departure right before the span / right after it (an assistant token the target would not have
        # written); the sample's own edges (its assistant text's start and end) stay a request's edges
        open_start = a >= 2 and (assistant is None or bool(assistant[a - 1]))
        # a departure at the turn's last token (SpecForge's loss mask holds the closing <|im_end|>, which the
        # target did not choose) ends the request there, as --target's generation limit does: not a cut
        open_end = b + 2 < T and (assistant is None or (bool(assistant[b + 1]) and bool(assistant[b + 2])))
        result.append(replace(count_drafts(tokens[:, bases - start], bases, target_ids, b - 1, steps, temperature=temperature,
                                   target_probs=lambda positions: target_probs[positions],
                                   draft_logits=lambda s, sel, bases=bases: out.logits[s][bases[sel] - start]),
                              open_end=open_end, open_start=open_start, base=a - 1))
    return result


def requests(input_ids: torch.Tensor, target_ids: torch.Tensor, assistant: torch.Tensor) -> list[tuple[int, int]]:
    """Each assistant turn as a request ``(start, end)``: ``start`` its first token (the prefill token), ``end``
    its last generated one. A turn whose last token departs from the target's choice (a closing ``<|im_end|>``
    the template appended: SpecForge's loss mask holds it) ends before it, where the generation ended."""
    T = int(input_ids.shape[0])
    asst = assistant.numpy().astype(bool)
    out, start = [], None
    for t in range(T + 1):
        if t < T and asst[t]:
            start = t if start is None else start
        elif start is not None:
            end = t - 1
            if end > start and end >= 1 and int(input_ids[end]) != int(target_ids[end - 1]):
                end -= 1
            out.append((start, end))
            start = None
    return out
