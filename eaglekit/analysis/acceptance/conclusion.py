"""What the accept-length measurements of notebook 06 say, written from the numbers.

Pure: :class:`~eaglekit.analysis.acceptance.measure.AcceptanceResult` records and a serving scenario in,
sentences out (the same :class:`~eaglekit.core.render.Conclusion` record notebook 00 renders).
"""

from __future__ import annotations

from eaglekit.analysis.acceptance.measure import AcceptanceResult
from eaglekit.core.render import Conclusion
from eaglekit.core.errors import InputError
from eaglekit.core.layers import other_convention
from eaglekit.core.specmath import Scenario


def conclude_acceptance(*, own: AcceptanceResult, new_target: AcceptanceResult, scratch: AcceptanceResult,
                        warm: AcceptanceResult, baseline_tps: float, verify_ms: float,
                        draft_ms: float = 0.0) -> Conclusion:
    """Sentences: the old drafter on its own and on the new target, scratch vs warm start, the aux
    convention's weight, and go/no-go for each against the break-even accept length."""
    e = warm.speedup(baseline_tps=baseline_tps, verify_ms=verify_ms, draft_ms=draft_ms)
    be = e.break_even_accept_length
    s = [f"On its own target the old drafter reaches accept length {own.accept_length:.2f} at K = {own.steps} "
         f"(per-step acceptance {_steps(own)}); on the new target version it falls to "
         f"{new_target.accept_length:.2f}: the new version continues text differently and its hidden states moved, which no shape or config check can show."]
    better, worse = (warm, scratch) if warm.accept_length >= scratch.accept_length else (scratch, warm)
    s.append(f"With the same few samples, the warm-started drafter reaches {warm.accept_length:.2f} and the one "
             f"trained from scratch {scratch.accept_length:.2f}: "
             + ("initialising from the old drafter pays." if better is warm
                else "here the warm start does not help; train from scratch or with more data."))
    shifts = []
    for name, r in (("old drafter, own target", own), ("old drafter, new target", new_target),
                    ("scratch", scratch), ("warm start", warm)):
        alt = r.accept_length_by_convention.get(other_convention(r.aux_convention))
        if alt is not None:
            shifts.append(f"{alt - r.accept_length:+.2f} ({name})")
    if shifts:
        s.append(f"Reading the aux layer ids the other engine's way ({other_convention(own.aux_convention)} instead of "
                 f"{own.aux_convention}, as trained) changes the accept length by " + ", ".join(shifts)
                 + ": check which convention the serving engine applies.")
    lines = []
    for name, r in (("old drafter on the new target", new_target), ("scratch", scratch), ("warm start", warm)):
        go = r.accept_length > be
        lines.append(f"{name} {r.accept_length:.2f} ({'GO' if go else 'NO-GO'})")
    s.append(f"At {baseline_tps:g} tok/s baseline and {e.cycle_ms:.1f} ms per cycle (K = {warm.steps}) the break-even "
             f"accept length is {be:.2f}: " + "; ".join(lines) + ".")
    best = {name: best_k(r, baseline_tps=baseline_tps, verify_ms=verify_ms, draft_ms=draft_ms)
            for name, r in (("old drafter on the new target", new_target), ("scratch", scratch), ("warm start", warm))}
    if warm.steps > 1:
        s.append("Each at its best K of 1 to " f"{warm.steps} (break-even rises with K, each draft step lengthens the "
                 "cycle): " + "; ".join(f"{name} {a:.2f} at K = {k} against {b:.2f} ({'GO' if a > b else 'NO-GO'})"
                                        for name, (k, a, b) in best.items()) + ".")
        verdict = "go" if any(a > b for name, (k, a, b) in best.items() if name != "old drafter on the new target") \
            else "no-go"
    else:
        verdict = "go" if max(warm.accept_length, scratch.accept_length) > be else "no-go"
    return Conclusion(verdict, tuple(s))


def best_k(r: AcceptanceResult, *, baseline_tps: float, verify_ms: float, draft_ms: float = 0.0) -> tuple[int, float, float]:
    """(K, accept length at K, break-even at K) for the K of 1..``r.steps`` where the accept length clears its
    break-even by the most (the deployment's verify and per-step draft cost, the cycle growing with K)."""
    scenario = Scenario(baseline_tps=baseline_tps, verify_ms=verify_ms, draft_ms=draft_ms, steps=1)
    rows = [(k, a, scenario.at_steps(k).break_even_accept_length)
            for k, a in enumerate(r.accept_length_by_steps, start=1)]
    return max(rows, key=lambda row: row[1] - row[2])


def _steps(r: AcceptanceResult) -> str:
    return ", ".join("-" if c is None else f"{c:.2f}" for c in r.per_step_acceptance)


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
    out = [f"Reading the aux ids as {o} (hidden_states {list(other.aux_indices)}) instead of {t} as trained "
           f"({list(trained.aux_indices)}): accept length {other.accept_length:.3f} against {trained.accept_length:.3f} "
           f"at K = {k} ({other.accept_length - trained.accept_length:+.3f}); by K ({t} vs {o}): {by_k}."]
    out.append(f"Per-step acceptance ({t} vs {o}): " + "; ".join(f"step {j}: {a:.3f} vs {b:.3f}" for j, a, b in pairs)
               + ".")
    if chain_steps is not None and pairs and chain_steps <= k:
        j, a, b = max(pairs, key=lambda p: p[2] - p[1])
        at, ot = trained.accept_length_by_steps[chain_steps - 1], other.accept_length_by_steps[chain_steps - 1]
        if b > a and j > chain_steps:
            out.append(f"The largest gain is at step {j}, beyond the {chain_steps} chain steps the drafter was trained "
                       "for, where neither reading drafts what it learned; at K = "
                       f"{chain_steps}, the depth it was trained to, the {t} reading gives {at:.3f} and the {o} "
                       f"reading {ot:.3f}.")
    out.append(f"{changed} of {len(diffs)} prompts change; the mean per-prompt difference is {diffs.mean():+.3f} "
               f"(standard error {se:.3f})" + (", so the difference is within prompt-to-prompt noise."
                                               if abs(diffs.mean()) < 2 * se else "."))
    return " ".join(out)

