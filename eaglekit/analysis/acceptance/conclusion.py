"""What the accept-length measurements of notebook 06 say, written from the numbers.

Pure: :class:`~eaglekit.analysis.acceptance.measure.AcceptanceResult` records and a serving scenario in,
sentences out (the same :class:`~eaglekit.core.render.Conclusion` record notebook 00 renders).
"""

from __future__ import annotations

from eaglekit.analysis.acceptance.measure import AcceptanceResult
from eaglekit.core.render import Conclusion
from eaglekit.core.layers import other_convention


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
    s.append(f"At {baseline_tps:g} tok/s baseline and {e.cycle_ms:g} ms per cycle (K = {warm.steps}) the break-even "
             f"accept length is {be:.2f}: " + "; ".join(lines) + ".")
    verdict = "go" if max(warm.accept_length, scratch.accept_length) > be else "no-go"
    return Conclusion(verdict, tuple(s))


def _steps(r: AcceptanceResult) -> str:
    return ", ".join("-" if c is None else f"{c:.2f}" for c in r.per_step_acceptance)
