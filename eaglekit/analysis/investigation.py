"""The investigation's conclusion, written from the results rather than in advance.

Pure: a :class:`~eaglekit.analysis.compat.pair.CompatReport`, optionally a
:class:`~eaglekit.analysis.similarity.report.SimilarityReport` and the payoff maths (the deployment's
:class:`~eaglekit.core.serving.account.Account`: measured cycle, steps, draft cost, targets) in;
sentences out. Renders as Markdown-like HTML in a notebook and as plain text in a terminal.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from eaglekit.analysis.acceptance.measure import AcceptanceResult
from eaglekit.analysis.compat.pair import CompatReport
from eaglekit.analysis.drift.hidden import HiddenDrift
from eaglekit.core.serving.account import Account
from eaglekit.core.render import Conclusion


def _verdict_sentence(r: CompatReport) -> str:
    a, b = r.a_name, r.b_name
    if r.verdict == "compatible":
        out = f"{a} is a drop-in initialisation for {b}: every trainable tensor matches and the vocabulary maps are equal."
        if r.aux_layers.get("drop_in_only_if"):
            out += (" Its aux layer ids may mean other layers than B's, though: fc's column blocks would then start "
                    "from features of other layers (the verdict says which readings agree).")
        return out
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


def _measured_sentence(label: str, r: AcceptanceResult, account: Account | None) -> str:
    head = (f"Measured offline (eaglekit acceptance, {r.prompts} prompts, K = {r.steps}): {label} reaches accept "
            f"length {r.interval.text()} ({r.interval.method})")
    if account is None:
        return head + "."
    # the one cycle model of the page: the deployment's verify growing with K where the account prices it so
    # (the same scenario the bottom line judges by), drafting at the measured draft cost
    line = r.go_no_go(scenario=account.growing_scenario)
    return f"{head}. In this deployment's cycle: {line}"


def _hidden_sentence(hidden: HiddenDrift) -> str:
    """What the two targets' hidden-state dumps say, layer by layer (the drafter's inputs)."""
    parts = [f"output of layer {d.index - 1}: " + (f"cosine {d.cosine:.3f}, " if d.cosine is not None else "")
             + f"CKA {d.cka:.3f}" for d in hidden.layers]
    worst = min(hidden.layers, key=lambda d: d.cka)
    return (f"Hidden states of the two targets on the same {hidden.samples} prompts ({hidden.positions} positions): "
            f"{'; '.join(parts)}. The layer that moved most is the output of layer {worst.index - 1} (CKA "
            f"{worst.cka:.3f}): weights alone cannot say how much acceptance that costs; the measured accept "
            "length on the new target does.")


def conclude(report: CompatReport, *, similarity=None, account: Account | None = None,
             measured: Mapping[str, AcceptanceResult] | None = None,
             hidden: HiddenDrift | None = None, payoff: bool = True) -> Conclusion:
    """Sentences from the results: verdict, vocabulary overlap, weight similarity, payoff.

    The payoff is the deployment's throughput :class:`~eaglekit.core.serving.account.Account`, told as everywhere
    else: the measured cycle with its steps and draft cost, the verify-only arithmetic and why it differs,
    each target at the deployment's steps (or what would reach it), and what an expected accept length gives.
    ``payoff=False`` leaves the account's sentences out where the page shows the account itself (notebook 00): the
    account still prices the measured accept lengths.
    """
    sentences = [_verdict_sentence(report)]
    sim = _similarity_sentence(similarity)
    if sim:
        sentences.append(sim)
    if report.verdict != "incompatible" and any(t.status == "expected-absent" for t in report.tensors):
        sentences.append("embed_tokens.weight is absent on one side, as expected: it is frozen and taken from the "
                         "target at load time.")
    if account is not None and payoff:
        sentences += account.sentences()
    for label, result in (measured or {}).items():
        sentences.append(_measured_sentence(label, result, account))
    if hidden is not None and hidden.layers:
        sentences.append(_hidden_sentence(hidden))
    elif report.verdict != "incompatible":
        sentences.append("Shapes cannot say whether the two targets' hidden states are similar enough for the "
                         "initialisation to help: measure accept length after a short fine-tune.")
    return Conclusion(report.verdict, tuple(sentences))
