"""What the accept-length measurements of notebook 06 say, written from the numbers.

Pure: :class:`~eaglekit.analysis.acceptance.measure.AcceptanceResult` records and a serving scenario in,
sentences out (the same :class:`~eaglekit.core.render.Conclusion` record notebook 00 renders).
"""

from __future__ import annotations

from collections.abc import Mapping

from eaglekit.analysis.acceptance.measure import AcceptanceResult
from eaglekit.core.serving.block import block_scenario
from eaglekit.core.render import Conclusion
from eaglekit.core.errors import InputError
from eaglekit.core.configs.layers import other_convention
from eaglekit.core.speedup.specmath import Scenario
from eaglekit.core.uncertainty import Interval, digits_for, verdict


def conclude_acceptance(*, own: AcceptanceResult, new_target: AcceptanceResult, scratch: AcceptanceResult,
                        warm: AcceptanceResult, baseline_tps: float | None = None, verify_ms: float | None = None,
                        draft_ms: float = 0.0, scenario: Scenario | None = None, steps: int | None = None,
                        public: AcceptanceResult | None = None, public_name: str = "public MLA drafter",
                        blocks: Mapping[str, AcceptanceResult] | None = None,
                        block_cycle: Scenario | None = None) -> Conclusion:
    """Sentences: the old drafter on its own and on the new target, scratch vs warm start, the aux
    convention's weight, and GO / NO-GO / TOO CLOSE TO CALL for each against the break-even accept length (each
    accept length with its interval, :func:`eaglekit.core.uncertainty.verdict`), at ``steps`` (default: the
    measurements' K) and at each drafter's best K. The conclusion's verdict is ``"go"`` when the scratch or the
    warm-started drafter is GO at its best K, ``"too close to call"`` when neither is but one straddles.

    ``scenario``: the serving cycle (a verify that grows with K on a mixture-of-experts target, see
    :attr:`eaglekit.core.serving.account.Account.growing_scenario`); else ``baseline_tps``, a constant ``verify_ms``
    and ``draft_ms`` per step. ``public``: a third candidate for the new target, a published drafter of another
    family (Kimi's MLA EAGLE-3 drafters), judged beside the team's two.

    ``blocks``: block drafters (DFlash) by name, each judged on the BLOCK cycle, not the chain's: ``block_cycle``
    (default :func:`~eaglekit.core.serving.block.block_scenario` of ``scenario``: the same verify of K + 1 tokens and
    one draft forward of one chain step's time, whatever K), at every K it measured, and at its best K."""
    results = {"old drafter, own target": own, "old drafter, new target": new_target, "scratch": scratch,
               "warm start": warm}
    if public is not None:
        results[public_name] = public
    k = steps if steps is not None else warm.steps
    short = [name for name, r in {**results, **(blocks or {})}.items() if r.steps < k]
    if short or not isinstance(k, int) or k < 1:
        raise InputError(f"conclude at K = {k!r} needs every measurement drafted to at least K steps"
                         + (f" ({', '.join(short)} drafted fewer)." if short else "."))
    if scenario is None:
        if baseline_tps is None or verify_ms is None:
            raise InputError("conclude_acceptance needs a serving scenario, or baseline_tps and verify_ms.")
        scenario = Scenario(baseline_tps=baseline_tps, verify_ms=verify_ms, draft_ms=draft_ms, steps=k)

    def at(r: AcceptanceResult) -> Interval:
        return r.interval_at(k)

    cycle = scenario.at_steps(k)
    be = cycle.break_even_accept_length
    s = [f"On its own target the old drafter reaches accept length {at(own).text()} at K = {k} "
         f"(per-step acceptance {_steps(own, k)}); on the new target version it falls to "
         f"{at(new_target).text()}: the new version continues text differently and its hidden states moved, which "
         "no shape or config check can show."]
    w, sc = at(warm), at(scratch)
    if w.has_interval and sc.has_interval and w.low > sc.high:  # type: ignore[operator]
        told = "initialising from the old drafter pays."
    elif w.has_interval and sc.has_interval and sc.low > w.high:  # type: ignore[operator]
        told = "here the warm start does not help; train from scratch or with more data."
    elif w.has_interval and sc.has_interval:
        told = ("their intervals overlap, so these prompts cannot tell the two apart; measure on more prompts "
                "before choosing.")
    else:
        told = ("initialising from the old drafter pays." if w.value >= sc.value
                else "here the warm start does not help; train from scratch or with more data.")
    s.append(f"With the same few samples, the warm-started drafter reaches {w.text()} and the one trained from "
             f"scratch {sc.text()}: " + told)
    if public is not None:
        pb, best_own = at(public), max((w, sc), key=lambda iv: iv.value)
        if pb.has_interval and best_own.has_interval and pb.low > best_own.high:  # type: ignore[operator]
            word = "above both of the team's drafters: serving it beats training one on these samples"
        elif pb.has_interval and best_own.has_interval and best_own.low > pb.high:  # type: ignore[operator]
            word = "below the team's best: the team's own drafter serves this traffic better"
        else:
            word = "within the interval of the team's best: these prompts cannot tell them apart"
        s.append(f"The {public_name} reaches {pb.text()}, {word}.")
    shifts = []
    for name, r in results.items():
        kk = min(k, r.steps)  # every reading compared at the K the verdicts judge
        alt = r.by_convention_at(kk).get(other_convention(r.aux_convention))
        if alt is not None:
            shifts.append(f"{alt - r.accept_length_by_steps[kk - 1]:+.2f} ({name}"
                          + (f", K = {kk})" if kk != k else ")"))
    if shifts:
        s.append(f"Reading the aux layer ids the other engine's way ({other_convention(own.aux_convention)} instead of "
                 f"{own.aux_convention}, as trained) changes the accept length by " + ", ".join(shifts)
                 + ": check which convention the serving engine applies.")
    grows = f", the verify growing {cycle.verify_growth_ms:.2f} ms per drafted token" if cycle.verify_growth_ms else ""
    judged = (("old drafter on the new target", new_target), ("scratch", scratch), ("warm start", warm),
              *(((public_name, public),) if public is not None else ()))
    lines = [f"{name} {at(r).text(digits_for(at(r), be))} ({verdict(at(r), be)})" for name, r in judged]
    s.append(f"At {scenario.baseline_tps:g} tok/s baseline and {cycle.cycle_ms:.1f} ms per cycle (K = {k}: verify "
             f"{cycle.verify_ms:.1f} ms + {k} x {cycle.draft_ms:.2f} ms drafting{grows}) the break-even accept length "
             f"is {be:.2f}: " + "; ".join(lines) + f". Intervals: {own.interval.method}; a verdict is TOO CLOSE TO "
             "CALL when the interval straddles break-even.")
    best = {name: best_k(r, scenario=scenario, up_to=k) for name, r in judged}
    calls = {name: verdict(r.interval_at(j), b) for (name, r), (j, _a, b) in zip(judged, best.values())}
    if k > 1:
        s.append(f"Each at its best K of 1 to {k} (break-even rises with K: each draft step lengthens the cycle"
                 + (" and the verify" if cycle.verify_growth_ms else "") + "): "
                 + "; ".join(_against(name, r.interval_at(j), j, b, calls[name])
                             for (name, r), (j, _a, b) in zip(judged, best.values())) + ".")
    for name, r in (blocks or {}).items():
        sentence, call = _block_sentences(name, r, block_cycle or block_scenario(scenario), k, judged)
        s.append(sentence)
        calls[name] = call
    ours = [calls[name] for name in ("scratch", "warm start", public_name, *(blocks or {})) if name in calls]
    verdict_word = "go" if "GO" in ours else "too close to call" if "TOO CLOSE TO CALL" in ours else "no-go"
    return Conclusion(verdict_word, tuple(s))


def _block_sentences(name: str, r: AcceptanceResult, cycle: Scenario, k: int, chains) -> tuple[str, str]:
    """A block drafter on its own cycle: every K it measured against that K's block break-even, its best K, and
    where it stands against the chain drafters at ``k``; (sentence, the verdict at its best K)."""
    if r.family == "eagle3":
        raise InputError(f"{name} is an EAGLE-3 measurement: judge it as a chain drafter, not as a block drafter.")
    at_k = []
    for j in range(1, r.steps + 1):
        iv, be = r.interval_at(j), cycle.at_steps(j).break_even_accept_length
        at_k.append(_against(f"K = {j}", iv, j, be, verdict(iv, be)).replace(f" at K = {j} against", " against"))
    j, _a, be = best_k(r, scenario=cycle)
    call = verdict(r.interval_at(j), be)
    c = cycle.at_steps(k)
    grows = f", growing {c.verify_growth_ms:.2f} ms per drafted token" if c.verify_growth_ms else ""
    top_name, top = max(((n, x) for n, x in chains if n != "old drafter on the new target"),
                        key=lambda item: item[1].interval_at(k).value)
    mine, theirs = r.interval_at(k), top.interval_at(k)
    if mine.has_interval and theirs.has_interval and mine.low > theirs.high:  # type: ignore[operator]
        rank = "above"
    elif mine.has_interval and theirs.has_interval and theirs.low > mine.high:  # type: ignore[operator]
        rank = "below"
    else:
        rank = "within the interval of"
    fam = "DFlash" if r.family == "dflash" else str(r.family)
    what = f"block {r.block_size}" if fam in name else f"{fam}, block {r.block_size}"
    return (f"The {name} drafter ({what}) drafts K tokens in ONE forward, so it is judged on the "
            f"block cycle, not the chain's: the same verify of K + 1 tokens (at K = {k}: {c.verify_ms:.1f} ms{grows}) "
            f"plus one draft forward of {c.overhead_ms:.2f} ms whatever K, {c.cycle_ms:.1f} ms at K = {k} (break-even "
            f"{c.break_even_accept_length:.2f}). By K: " + "; ".join(at_k)
            + f". At its best K of 1 to {r.steps}: " + _against(name, r.interval_at(j), j, be, call)
            + f". At K = {k} its {mine.text()} is {rank} the best EAGLE-3 candidate's ({top_name}, {theirs.text()})."
            , call)


def _against(name: str, iv, k: int, threshold: float, call: str) -> str:
    """``warm start 1.97 (1.96-1.99) at K = 1 against 1.88 (GO)``, with as many decimals as the verdict needs."""
    d = digits_for(iv, threshold)
    return f"{name} {iv.text(d)} at K = {k} against {threshold:.{d}f} ({call})"


def best_k(r: AcceptanceResult, *, scenario: Scenario, up_to: int | None = None) -> tuple[int, float, float]:
    """(K, accept length at K, break-even at K) for the K of 1..``up_to`` (default ``r.steps``) where the accept
    length clears its break-even by the most, on ``scenario``'s cycle at each K."""
    top = min(up_to or r.steps, r.steps)
    rows = [(k, r.accept_length_by_steps[k - 1], scenario.at_steps(k).break_even_accept_length)
            for k in range(1, top + 1)]
    return max(rows, key=lambda row: row[1] - row[2])


def _steps(r: AcceptanceResult, k: int | None = None) -> str:
    """Per-step acceptances to two decimals, or three where two would print a rate below 1 as 1.00."""
    return ", ".join("-" if c is None else f"{c:.3f}" if c < 1 and round(c, 2) == 1 else f"{c:.2f}"
                     for c in r.per_step_acceptance[:k])


def compare_readings(trained: AcceptanceResult, other: AcceptanceResult, *, chain_steps: int | None = None) -> str:
    """Why reading the aux ids the other way changes the accept length, from two measurements of one drafter
    on one target that differ only in ``aux_convention``: the accept length at every K, the steps where
    each reading accepts more, the per-prompt spread of the difference and, with ``chain_steps`` (how many
    chain steps the drafter was trained for), whether the gain sits beyond them."""
    import numpy as np

    if (trained.drafter, trained.target, trained.steps) != (other.drafter, other.target, other.steps):
        raise InputError("compare_readings needs two measurements of one drafter on one target with the same K.")
    k, t, o = trained.steps, trained.aux_convention, other.aux_convention
    by_k = "; ".join(f"K = {j}: {a:.3f} vs {b:.3f}" for j, (a, b) in
                     enumerate(zip(trained.accept_length_by_steps, other.accept_length_by_steps), start=1))
    pairs = [(j, a, b) for j, (a, b) in enumerate(zip(trained.per_step_acceptance, other.per_step_acceptance), start=1)
             if a is not None and b is not None]
    diffs = np.array([b - a for a, b in zip(trained.per_prompt_accept_length, other.per_prompt_accept_length)
                      if a is not None and b is not None])
    changed = int((np.abs(diffs) > 1e-12).sum())
    se = float(diffs.std(ddof=1) / np.sqrt(len(diffs))) if len(diffs) > 1 else float("nan")
    # the headline at the depth the drafter was trained to (the one every verdict uses), else at the measured K
    at = chain_steps if chain_steps is not None and 1 <= chain_steps <= k else k
    a_at, o_at = trained.accept_length_by_steps[at - 1], other.accept_length_by_steps[at - 1]
    out = [f"Reading the aux ids as {o} (hidden_states {list(other.aux_indices)}) instead of {t} as trained "
           f"({list(trained.aux_indices)}): accept length {o_at:.3f} against {a_at:.3f} "
           f"at K = {at}" + (", the depth the drafter was trained to" if at != k else "")
           + f" ({o_at - a_at:+.3f}); by K ({t} vs {o}): {by_k}."]
    out.append(f"Per-step acceptance ({t} vs {o}): " + "; ".join(f"step {j}: {a:.3f} vs {b:.3f}" for j, a, b in pairs)
               + ".")
    if chain_steps is not None and pairs and chain_steps <= k:
        j, a, b = max(pairs, key=lambda p: p[2] - p[1])
        at, ot = trained.accept_length_by_steps[chain_steps - 1], other.accept_length_by_steps[chain_steps - 1]
        if b > a and j > chain_steps:
            out.append(f"The {o} reading accepts most over the {t} one at step {j}, beyond the {chain_steps} chain "
                       "steps the drafter was trained for, where neither reading drafts what it learned; at K = "
                       f"{chain_steps}, the depth it was trained to, the {t} reading gives {at:.3f} and the {o} "
                       f"reading {ot:.3f}.")
    out.append(f"At K = {k}, {changed} of {len(diffs)} prompts change; the mean per-prompt difference is {diffs.mean():+.3f} "
               f"(standard error {se:.3f})" + (", so the difference is within prompt-to-prompt noise."
                                               if abs(diffs.mean()) < 2 * se else "."))
    return " ".join(out)

