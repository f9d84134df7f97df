"""Accept length under two chat templates: the same prompts rendered both ways, and where the gap comes from.

A drafter learns the token stream its trainer rendered. Served under another template (a new assistant
prefix, a thinking block the old one lacked, or raw completion against chat), it meets contexts and
outputs it never saw: a public report measured 3.93 on raw completion and 1.94 with the chat template on
the same drafter, localised to a 14-token assistant/thinking suffix (tokenspeed #1305); Qwen3's thinking
and non-thinking templates do the same (SpecForge #296).

:func:`compare_templates` renders every prompt (``messages``, or ``text`` as one user message) with
template A and with template B, in the bounded sandbox of :mod:`eaglekit.io.tokens.templates`, tokenizes the
text as ``apply_chat_template`` does (no special tokens added), and measures the accept length of each
(:func:`~eaglekit.analysis.acceptance.measure.measure_acceptance`, vLLM's convention). ``raw`` means no
template: the messages' contents joined by newlines, tokenized like a completion request (special tokens
added). Where: the text each template adds around the content, the drafts matched per position inside and
outside thinking blocks, and the output positions where the two differ most.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from eaglekit.analysis.draft import DraftModel
from eaglekit.analysis.acceptance.measure import measure_acceptance
from eaglekit.analysis.acceptance.target import TargetModel, load_target_model, read_prompts, template_variables
from eaglekit.core.errors import InputError
from eaglekit.core.acceptance.prompts import Prompt
from eaglekit.core.redact import visible
from eaglekit.core.tokens.textdiff import added_text
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.io.tokens.templates import read_template, render_bounded

RAW = "raw"
#: Output positions listed where the templates differ most.
SHOWN_POSITIONS = 8


@dataclass(frozen=True)
class Template:
    """A chat template by name (a file path, or ``raw`` for none) and its text (None for raw)."""

    name: str
    text: str | None

    @property
    def sha256(self) -> str | None:
        return hashlib.sha256(self.text.encode()).hexdigest() if self.text is not None else None


def as_template(spec: str | os.PathLike[str] | Template) -> Template:
    """``raw``, a template file (read with its size checked), or a :class:`Template`."""
    if isinstance(spec, Template):
        return spec
    if str(spec) == RAW:
        return Template(RAW, None)
    return Template(str(spec), read_template(spec))


def conversations(prompts) -> list[list[dict[str, str]]]:
    """Each prompt as a chat: messages as they are, text as one user message; token ids cannot be templated."""
    out = []
    for p in prompts:
        if p.kind == "messages":
            out.append([dict(m) for m in p.value])
        elif p.kind == "text":
            out.append([{"role": "user", "content": p.value}])
        else:
            raise InputError(f"prompts line {p.line} gives input_ids: a chat template renders text or messages, "
                             "give those instead.")
    return out


def render_prompts(template: Template, prompts, tokenizer, *, vocab_size: int) -> tuple[list, list[str]]:
    """(input_ids Prompt records, rendered texts) for ``prompts`` under ``template``."""
    convs = conversations(prompts)
    if template.text is None:
        texts = ["\n".join(m.get("content", "") for m in c) for c in convs]
        special = True
    else:
        texts = render_bounded(template.text, convs, add_generation_prompt=True, variables=template_variables(tokenizer),
                               what=f"the chat template {visible(template.name, newlines=False)}")
        special = False
    out = []
    for p, text in zip(prompts, texts):
        ids = list(tokenizer(text, add_special_tokens=special)["input_ids"])
        if not ids:
            raise InputError(f"prompts line {p.line} renders to no tokens under {template.name}.")
        bad = [i for i in ids if not 0 <= i < vocab_size]
        if bad:
            raise InputError(f"prompts line {p.line} under {template.name}: token id {bad[0]} is outside the target's "
                             f"vocabulary (0..{vocab_size - 1}).")
        out.append(Prompt("input_ids", tuple(ids), p.line))
    return out, texts


@dataclass(frozen=True)
class TemplateComparison:
    """Accept length of one drafter on one target under templates A and B (``gap`` = B - A)."""

    a: Template
    b: Template
    result_a: Any
    result_b: Any
    added_a: tuple[str, ...]
    added_b: tuple[str, ...]
    prompt_tokens: tuple[float, float]
    segments: dict[str, tuple[float | None, float | None, int, int]]
    by_position: tuple[tuple[float | None, float | None], ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gap(self) -> float:
        return self.result_b.accept_length - self.result_a.accept_length

    @property
    def summary(self) -> str:
        return (f"accept length {self.result_a.accept_length:.2f} under {self.a.name}, "
                f"{self.result_b.accept_length:.2f} under {self.b.name} (gap {self.gap:+.2f})")

    @property
    def where(self) -> tuple[int, ...]:
        """Output positions ordered by how much the matched drafts differ between A and B (largest first)."""
        diffs = [(abs(a - b), i) for i, (a, b) in enumerate(self.by_position) if a is not None and b is not None]
        return tuple(i for _, i in sorted(diffs, key=lambda d: (-d[0], d[1]))[:SHOWN_POSITIONS])

    def to_json(self) -> dict[str, Any]:
        return {"a": {"template": self.a.name, "sha256": self.a.sha256, "acceptance": self.result_a.to_json()},
                "b": {"template": self.b.name, "sha256": self.b.sha256, "acceptance": self.result_b.to_json()},
                "gap": self.gap, "added_by_a": list(self.added_a), "added_by_b": list(self.added_b),
                "mean_prompt_tokens": list(self.prompt_tokens),
                "segments": {k: {"a": x, "b": y, "positions_a": n, "positions_b": m}
                             for k, (x, y, n, m) in self.segments.items()},
                "matched_by_position": [{"a": x, "b": y} for x, y in self.by_position],
                "largest_differences_at": list(self.where), "notes": list(self.notes)}

    def _pairs(self) -> list[tuple[str, Any]]:
        f = lambda x: "-" if x is None else f"{x:.2f}"
        ra, rb = self.result_a, self.result_b
        pairs: list[tuple[str, Any]] = [
            ("drafter", ra.drafter), ("target", ra.target),
            (f"A: {self.a.name}", f"accept length {ra.accept_length:.3f} ({ra.prompts} prompts, {ra.generated_tokens} "
                                  f"tokens, mean prompt {self.prompt_tokens[0]:.1f} tokens)"),
            (f"B: {self.b.name}", f"accept length {rb.accept_length:.3f} ({rb.prompts} prompts, {rb.generated_tokens} "
                                  f"tokens, mean prompt {self.prompt_tokens[1]:.1f} tokens)"),
            ("gap (B - A)", f"{self.gap:+.3f}"),
            ("text only A adds", " | ".join(visible(repr(t), newlines=False) for t in self.added_a) or "-"),
            ("text only B adds", " | ".join(visible(repr(t), newlines=False) for t in self.added_b) or "-"),
        ]
        for seg, (x, y, n, m) in self.segments.items():
            pairs.append((f"drafts matched per position, {seg}", f"A {f(x)} ({n} positions), B {f(y)} ({m} positions)"))
        pairs.append(("largest differences at output positions", ", ".join(map(str, self.where)) or "-"))
        pairs += [("note", n) for n in self.notes]
        return pairs

    def _rows(self) -> list[list[str]]:
        f = lambda x: "-" if x is None else f"{x:.2f}"
        return [[str(i), f(self.by_position[i][0]), f(self.by_position[i][1])] for i in self.where]

    def __str__(self) -> str:
        return (kv_text(self._pairs(), title=self.summary) + "\n\n"
                + text_table(["output position", "A drafts matched", "B drafts matched"], self._rows(),
                             align=["right"] * 3))

    def _repr_html_(self) -> str:
        return ("<div>" + kv_html(self._pairs(), caption=self.summary)
                + html_table(["output position", "A drafts matched", "B drafts matched"], self._rows(),
                             align=["right"] * 3) + "</div>")


def _added_text(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Text only ``a`` has and text only ``b`` has, from one prompt rendered both ways (bounded:
    :func:`~eaglekit.core.tokens.textdiff.added_text`)."""
    return added_text(a, b)


def _think_ids(tokenizer) -> tuple[set[int], set[int]]:
    """Ids of tokens that open and close a thinking block (``<think>``, ``</think>``, ``◁think▷`` ...)."""
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    opens = {i for t, i in vocab.items() if "think" in t.lower() and "/" not in t and len(t) <= 16}
    closes = {i for t, i in vocab.items() if "think" in t.lower() and "/" in t and len(t) <= 16}
    return opens, closes


def _segments(samples, prompt_ids, steps: int, opens: set[int], closes: set[int]):
    """Per output position: drafts matched (capped at K) and whether the drafted token is inside thinking."""
    per_pos: dict[int, list[float]] = {}
    seg: dict[str, list[float]] = {"thinking": [], "answer": []}
    for (cont, matches), ids in zip(samples, prompt_ids):
        inside = False
        for t in ids:
            inside = True if t in opens else False if t in closes else inside
        states = []
        for t in cont:
            inside = True if t in opens else False if t in closes else inside
            states.append(inside)
        for i, m in enumerate(matches):
            v = float(min(int(m), steps))
            per_pos.setdefault(i, []).append(v)
            if i + 1 < len(states):
                seg["thinking" if states[i + 1] else "answer"].append(v)
    return per_pos, seg


def compare_templates(drafter, *, target, prompts, a, b, max_new_tokens: int = 64, steps: int = 5,
                      device: str = "cpu", dtype: str = "float32", endpoint: str | None = None, timeout: float | None = None,
                      progress: bool | None = None, trust_remote_code: bool = False) -> TemplateComparison:
    """Measure ``drafter`` on ``target`` with ``prompts`` rendered by template ``a`` and by ``b`` (paths,
    ``"raw"`` or :class:`Template`); see the module docstring."""
    ta, tb = as_template(a), as_template(b)
    tmodel = target if isinstance(target, TargetModel) else load_target_model(target, device=device, dtype=dtype,
                                                                              trust_remote_code=trust_remote_code)
    if tmodel.tokenizer is None:
        raise InputError(f"{tmodel.name} has no tokenizer: templates render text, which needs one.")
    plist, _ = read_prompts(prompts) if isinstance(prompts, (str, os.PathLike)) else (tuple(prompts), "prompts")
    model = drafter if isinstance(drafter, DraftModel) else DraftModel.load(
        drafter, embed=tmodel.embedding().float().cpu(), device=device, dtype=dtype, endpoint=endpoint, timeout=timeout)
    results, texts, ids = [], [], []
    for t in (ta, tb):
        rendered, text = render_prompts(t, plist, tmodel.tokenizer, vocab_size=tmodel.vocab_size)
        texts.append(text)
        ids.append([list(p.value) for p in rendered])
        results.append(_stamped(measure_acceptance(model, target=tmodel, prompts=rendered,
                                                   max_new_tokens=max_new_tokens, steps=steps, device=device,
                                                   dtype=dtype, progress=progress, keep_samples=True), t))
    opens, closes = _think_ids(tmodel.tokenizer)
    pa, sa = _segments(results[0].samples, ids[0], steps, opens, closes)
    pb, sb = _segments(results[1].samples, ids[1], steps, opens, closes)
    mean = lambda xs: float(np.mean(xs)) if xs else None
    segments = {k: (mean(sa[k]), mean(sb[k]), len(sa[k]), len(sb[k])) for k in ("answer", "thinking")
                if sa[k] or sb[k]}
    longest = max([*pa, *pb], default=-1) + 1
    by_pos = tuple((mean(pa.get(i, [])), mean(pb.get(i, []))) for i in range(longest))
    added_a, added_b = _added_text(texts[0][0], texts[1][0]) if plist else ((), ())
    notes = []
    if not opens:
        notes.append("the tokenizer has no thinking tokens: every position counts as answer")
    return TemplateComparison(a=ta, b=tb, result_a=results[0], result_b=results[1], added_a=added_a, added_b=added_b,
                              prompt_tokens=(float(np.mean([len(x) for x in ids[0]])), float(np.mean([len(x) for x in ids[1]]))),
                              segments=segments, by_position=by_pos, notes=tuple(notes))


def measure_with_template(drafter, *, target, prompts, template, trust_remote_code: bool = False, **kwargs):
    """:func:`~eaglekit.analysis.acceptance.measure.measure_acceptance` with every prompt rendered by
    ``template`` (a path, ``"raw"`` or :class:`Template`) in the bounded sandbox."""
    t = as_template(template)
    device, dtype = kwargs.get("device", "cpu"), kwargs.get("dtype", "float32")
    tmodel = target if isinstance(target, TargetModel) else load_target_model(target, device=device, dtype=dtype,
                                                                              trust_remote_code=trust_remote_code)
    if tmodel.tokenizer is None:
        raise InputError(f"{tmodel.name} has no tokenizer: a chat template renders text, which needs one.")
    plist, _ = read_prompts(prompts) if isinstance(prompts, (str, os.PathLike, Path)) else (tuple(prompts), "prompts")
    rendered, _ = render_prompts(t, plist, tmodel.tokenizer, vocab_size=tmodel.vocab_size)
    return _stamped(measure_acceptance(drafter, target=tmodel, prompts=rendered, **kwargs), t)


def _stamped(result, template: Template):
    """The result with the template it was measured under recorded."""
    what = "no template (raw completion)" if template.text is None else f"the chat template {template.name}"
    return replace(result, chat_template_sha256=template.sha256,
                   notes=(*result.notes, f"prompts rendered with {what} in the bounded sandbox"))
