"""The investigation's conclusion, written from the results rather than in advance.

Pure: a :class:`~eaglekit.compat.CompatReport`, optionally a
:class:`~eaglekit.similarity_report.SimilarityReport` and the payoff maths (a
:class:`~eaglekit.specmath.Fit` of the measured deployment plus an accept length to expect) in;
sentences out. Renders as Markdown-like HTML in a notebook and as plain text in a terminal.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from html import escape

from eaglekit.analysis.compat import CompatReport
from eaglekit.core.specmath import Fit, alpha_for_accept_length, needed_accept_length, throughput


@dataclass(frozen=True)
class Conclusion:
    verdict: str
    sentences: tuple[str, ...]

    def __str__(self) -> str:
        return "\n".join(f"- {s}" for s in self.sentences)

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{escape(s)}</li>" for s in self.sentences)
        return f"<div class='eaglekit-conclusion'><h3>Conclusion</h3><ul>{items}</ul></div>"


def _verdict_sentence(r: CompatReport) -> str:
    a, b = r.a_name, r.b_name
    if r.verdict == "compatible":
        return f"{a} is a drop-in initialisation for {b}: every trainable tensor matches and the vocabulary maps are equal."
    if r.verdict == "compatible-after-remap":
        v = r.vocab
        return (f"{a} can initialise {b} once lm_head rows are re-aligned by target token: the shapes match, but only "
                f"{v['overlap']:,} draft tokens are shared ({v['overlap_fraction']:.0%} of the smaller vocabulary) and "
                f"{v['rows_remapped']:,} lm_head rows point at different tokens if copied by position.")
    return f"{a} cannot initialise {b}: {r.reasons[0]}"


def _similarity_sentence(sim) -> str | None:
    if sim is None or not sim.tensors:
        return None
    matrices = [t for t in sim.tensors if len(t.shape_a) == 2]
    cosines = [t.cosine for t in (matrices or sim.tensors)]
    median = statistics.median(cosines)
    lowest = min(matrices or sim.tensors, key=lambda t: t.cosine)
    head = f"Weights: median cosine {median:.2f} over {len(cosines)} weight matrices"
    if median <= 0.1:
        return (f"{head}: they were trained independently and nothing their weights learned lines up, so "
                "initialising from A starts from A's knowledge, not from anything B already has.")
    kind = "one is a fine-tune of the other" if median >= 0.8 else "they are related but far apart"
    return f"{head}: {kind}; the part that moved most is {lowest.name} (cosine {lowest.cosine:.2f})."


def _payoff_sentences(fit: Fit, expected_accept_length: float | None, target_tps: float | None) -> list[str]:
    out = [f"Measured deployment: {fit.spec_tps:g} tok/s at accept length {fit.accept_length:g} against a "
           f"{fit.baseline_tps:g} tok/s baseline implies {fit.cycle_ms:.1f} ms per draft-verify cycle, so "
           f"speculation pays only above accept length {fit.break_even_accept_length:.2f}."]
    if expected_accept_length is not None:
        tps = throughput(expected_accept_length, cycle_ms=fit.cycle_ms)
        gain = tps / fit.baseline_tps
        word = "faster" if gain > 1 else "slower"
        out.append(f"At accept length {expected_accept_length:g} the same cycle gives {tps:.0f} tok/s, "
                   f"{abs(gain - 1):.0%} {word} than no speculation.")
    if target_tps is not None:
        need = needed_accept_length(target_tps, cycle_ms=fit.cycle_ms)
        alpha = alpha_for_accept_length(need)
        out.append(f"{target_tps:g} tok/s needs accept length {need:.2f} (per-token acceptance {alpha:.0%} "
                   f"on an unbounded chain).")
    return out


def conclude(report: CompatReport, *, similarity=None, fit: Fit | None = None,
             expected_accept_length: float | None = None, target_tps: float | None = None) -> Conclusion:
    """Sentences from the results: verdict, vocabulary overlap, weight similarity, payoff."""
    sentences = [_verdict_sentence(report)]
    sim = _similarity_sentence(similarity)
    if sim:
        sentences.append(sim)
    if report.verdict != "incompatible" and any(t.status == "expected-absent" for t in report.tensors):
        sentences.append("embed_tokens.weight is absent on one side, as expected: it is frozen and taken from the "
                         "target at load time.")
    if fit is not None:
        sentences += _payoff_sentences(fit, expected_accept_length, target_tps)
    if report.verdict != "incompatible":
        sentences.append("Shapes cannot say whether the two targets' hidden states are similar enough for the "
                         "initialisation to help: measure accept length after a short fine-tune.")
    return Conclusion(report.verdict, tuple(sentences))
