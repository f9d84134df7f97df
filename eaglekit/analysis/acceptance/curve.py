"""``acceptance_curve``: accept length across a training run's checkpoints, the curve through them, and what
more data (or a warm start) would buy.

Each checkpoint is measured exactly as ``eaglekit acceptance`` measures one drafter (against a target and
prompts, eaglekit's own hidden-state dump, or a training pipeline's dump with its target head, on a Dask
cluster with ``scheduler``); its accept length carries a bootstrap interval over prompts. With three or
more checkpoints a saturating curve in samples is fitted (:mod:`eaglekit.core.acceptance.curve`), with a
bootstrap over the checkpoints and the prompts, and it predicts accept lengths at other sample counts
(``predict``) and the samples needed for an accept length (``reach``), joined to a serving plan's
break-even (``break_even``, ``plan``).

Samples per checkpoint: given, or read from the checkpoint: SpecForge's ``training_state.pt``
(``global_step``; loaded with ``torch.load(weights_only=True)``, memory-mapped, so it runs no code from the
file) or a step count in the folder name (``step_1200``, ``epoch_3_step_400``, ``checkpoint-1200``), times
``batch_size`` (samples per step, summed over data-parallel ranks).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from eaglekit.analysis.acceptance.curve_inputs import (MAX_ACCEPT_LENGTH, MAX_SAMPLES, check_series, checkpoint_samples,
                                                       read_plan_break_even,
                                                       read_training_step)
from eaglekit.analysis.acceptance.curve_result import (MAX_WIDTH_TEXT, AcceptanceCurve, Curve, CurvePoint, PlanLine,
                                                       samples_text)
from eaglekit.core.acceptance.curve import (AVERAGED, CURVE_RESAMPLES, FAMILIES, MIN_POINTS, PointCounts,
                                            average_fits, bootstrap_fits, check_increasing, held_out_errors,
                                            perfect_accept_length)
from eaglekit.core.errors import InputError
from eaglekit.core.redact import shown
from eaglekit.core.uncertainty import Interval, bootstrap_ratio
from eaglekit.io.dumps.native import open_dump

__all__ = ["AcceptanceCurve", "Curve", "CurvePoint", "PlanLine", "acceptance_curve", "check_series",
           "checkpoint_samples", "fit_points", "read_plan_break_even", "read_training_step"]


# -- the measurement --------------------------------------------------------------------------------------
def _measure_one(path: str, how: dict[str, Any], shared: dict[str, Any]):
    """One checkpoint, as ``eaglekit acceptance`` measures it: an AcceptanceResult."""
    if how.get("target_head") is not None:
        from eaglekit.analysis.acceptance.dumps import measure_dump  # heavy (torch): when a checkpoint is measured

        opts = {k: v for k, v in how.items() if k not in ("target", "prompts", "max_new_tokens", "aux_convention",
                                                           "trust_remote_code")}
        opts["seed"] = opts.pop("sample_seed", 0)   # the dump's --sample seed (the curve's seed is its bootstrap's)
        return measure_dump(path, opts.pop("hidden_states"), **opts).result
    from eaglekit.analysis.acceptance.measure import measure_acceptance  # heavy (torch): when measured

    opts = {k: v for k, v in how.items() if k != "target_head"}
    if opts.get("target") is not None:
        if "target" not in shared:   # loaded once for every checkpoint
            shared["target"] = _load_target(opts)
        opts["target"] = shared["target"]
    else:
        opts.pop("target", None)
        opts.pop("prompts", None)
        opts.pop("trust_remote_code", None)
    return measure_acceptance(path, **opts)


def _load_target(opts: dict[str, Any]):
    from eaglekit.analysis.acceptance.target import TargetModel, load_target_model  # heavy (transformers)

    t = opts["target"]
    return t if isinstance(t, TargetModel) else load_target_model(
        t, device=opts.get("device", "cpu"), dtype=opts.get("dtype", "float32"),
        trust_remote_code=opts.get("trust_remote_code", False))


def _point(path: str, samples: float, where: str, r) -> CurvePoint:
    counts = tuple(r.prompt_counts)
    interval = r.accept_length_interval
    if interval is None and counts and sum(c for _, c in counts) > 0:
        interval = bootstrap_ratio([g for g, _ in counts], [c for _, c in counts], unit="prompts")
    interval = interval or Interval(r.accept_length, None, None, "no interval")
    return CurvePoint(str(path), samples, where, interval, tuple(r.per_step_acceptance),
                      tuple(r.accept_length_by_steps), counts)


def _as_numbers(values: Sequence[float] | None, what: str, most: float = MAX_SAMPLES) -> tuple[float, ...]:
    out = []
    for v in values or ():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"{what} must be positive numbers, got {v!r}.")
        if v > most:
            raise InputError(f"{what} must be at most {most:g} (more than any training run or drafter reaches), "
                             f"got {v:g}.")
        out.append(float(v))
    return tuple(out)


def acceptance_curve(checkpoints: Sequence[str | os.PathLike[str]] | Mapping[str, Sequence[str | os.PathLike[str]]], *,
                     samples: Sequence[float] | Mapping[str, Sequence[float]] | None = None,
                     batch_size: int | None = None, target=None, prompts=None, hidden_states=None,
                     target_head: str | None = None, steps: int = 5, max_new_tokens: int = 64,
                     predict: Sequence[float] = (), reach: Sequence[float] = (), break_even: float | None = None,
                     plan: str | os.PathLike[str] | Mapping[str, Any] | None = None, family: str = "average",
                     seed: int = 0, resamples: int | None = None, device: str = "cpu", dtype: str = "float32",
                     embeddings: str | None = None, endpoint: str | None = None, timeout: float | None = None,
                     progress: bool | None = None, trust_remote_code: bool = False,
                     **dump_options: Any) -> AcceptanceCurve:
    """Measure every checkpoint of one run (a list of locations, in training order) or several runs
    (``{label: [locations]}``), fit the accept-length curve of each, and predict.

    ``samples``: samples seen by each checkpoint (a list, or one list per label); default: read from each
    checkpoint (:func:`checkpoint_samples`) with ``batch_size``. Measurement: ``target`` + ``prompts``, or
    ``hidden_states`` (eaglekit's dump, or a training pipeline's with ``target_head``; further options of
    :func:`~eaglekit.analysis.acceptance.dumps.measure_dump`, e.g. ``scheduler``, in ``dump_options``; its ``seed``
    for ``sample`` is ``sample_seed`` here, ``seed`` being the bootstrap's).
    ``predict``: sample counts to predict at; ``reach``: accept lengths to find the samples for;
    ``break_even`` (an accept length) and ``plan`` (an ``eaglekit plan --json`` object or file) join the
    serving plan. ``family``: ``"average"`` (default: every form of
    :data:`~eaglekit.core.acceptance.curve.FAMILIES` fitted, weighted by fit, the interval the union of the
    plausible forms': :class:`~eaglekit.core.acceptance.curve.CurveAverage`), one form (``"loglogistic"``,
    ``"power"``, ``"exp"``, ``"loglinear"``, ``"sigmoid"``, ``"growth"``) or ``"auto"`` (the form with the lowest
    error predicting each next checkpoint). ``seed`` and ``resamples`` fix the bootstrap.
    """
    series = ({str(k): [str(p) for p in v] for k, v in checkpoints.items()} if isinstance(checkpoints, Mapping)
              else {"checkpoints": [str(p) for p in checkpoints]})
    if not series or any(not v for v in series.values()):
        raise InputError("give at least one checkpoint for every curve.")
    if family not in (*FAMILIES, "auto", "average"):
        raise InputError(f"curve family must be one of {', '.join(FAMILIES)}, auto or average, got {family!r}.")
    if (target is None) == (hidden_states is None):
        raise InputError("give exactly one of target (with prompts) or hidden_states (a dump folder).")
    predict = _as_numbers(predict, "--predict sample counts")
    reach = _as_numbers(reach, "--reach accept lengths", MAX_ACCEPT_LENGTH)
    if break_even is not None:
        _as_numbers([break_even], "--break-even", MAX_ACCEPT_LENGTH)
    given = _samples_by_label(samples, series)
    lines = list(read_plan_break_even(plan, steps=steps)) if plan is not None else []
    if break_even is not None:
        lines.insert(0, PlanLine(None, steps, float(break_even), source="given"))

    # every checkpoint's sample count and shapes before the first (long) measurement
    counted: dict[str, list[tuple[float, str]]] = {}
    for label, paths in series.items():
        if given.get(label) is not None:
            counted[label] = [(n, "given") for n in given[label]]
        else:
            counted[label] = [checkpoint_samples(p, batch_size=batch_size) for p in paths]
        check_increasing([n for n, _ in counted[label]], where=f"{label}: " if len(series) > 1 else "")
        check_series(paths, endpoint=endpoint, timeout=timeout)

    how: dict[str, Any] = {"steps": steps, "device": device, "dtype": dtype, "endpoint": endpoint, "timeout": timeout,
                           "progress": progress}
    if target is not None:
        how.update(target=target, prompts=prompts, max_new_tokens=max_new_tokens, trust_remote_code=trust_remote_code)
    else:
        how.update(hidden_states=hidden_states, embeddings=embeddings)
        if target_head is not None:
            how.update(target_head=target_head, **dump_options)
    if target is not None or target_head is None:
        unused = [k for k, v in dump_options.items() if v not in (None, False)]
        if unused:
            raise InputError(f"{unused[0]} applies to a training pipeline's dump (with a target head); drop it.")
    shared: dict[str, Any] = {}
    if hidden_states is not None and target_head is None:
        how["hidden_states"] = open_dump(hidden_states)   # opened once for every checkpoint
    curves = []
    for label, paths in series.items():
        points = tuple(_point(p, n, where, _measure_one(p, how, shared)) for p, (n, where) in zip(paths, counted[label]))
        curves.append(fit_points(label, points, steps=steps, predict=predict, reach=reach, plan=tuple(lines),
                                 family=family, seed=seed, resamples=resamples or CURVE_RESAMPLES))
    on = (f"target {shown(str(getattr(target, 'name', target)))} with prompts {shown(str(prompts))}" if target is not None
          else f"hidden states {shown(str(hidden_states))}" + (f" with target head {shown(target_head)}" if target_head else ""))
    return AcceptanceCurve(tuple(curves), on)


def _samples_by_label(samples, series: Mapping[str, Sequence[str]]) -> dict[str, tuple[float, ...] | None]:
    if samples is None:
        return {k: None for k in series}
    if isinstance(samples, Mapping):
        by = {str(k): v for k, v in samples.items()}
    elif len(series) == 1:
        by = {next(iter(series)): samples}
    else:
        raise InputError("several curves: give samples per label ({label: [n, ...]}), or read them from the checkpoints.")
    out: dict[str, tuple[float, ...] | None] = {}
    for label, paths in series.items():
        v = by.get(label)
        if v is None:
            out[label] = None
            continue
        nums = _as_numbers(v, "sample counts")
        if len(nums) != len(paths):
            raise InputError(f"{label}: {len(nums)} sample counts for {len(paths)} checkpoints; give one per checkpoint.")
        out[label] = nums
    return out


def fit_points(label: str, points: Sequence[CurvePoint], *, steps: int, predict: Sequence[float] = (),
               reach: Sequence[float] = (), plan: Sequence[PlanLine] = (), family: str = "average", seed: int = 0,
               resamples: int = 1000) -> Curve:
    """The curve through measured points (no fit with fewer than three: the points alone, and a note)."""
    points = tuple(points)
    check_increasing([p.samples for p in points], where=f"{label}: ")
    if len(points) < MIN_POINTS:
        note = (f"{len(points)} checkpoint{'s' * (len(points) != 1)}: a curve needs at least {MIN_POINTS}; the points "
                "are shown, nothing is fitted or predicted.")
        return Curve(label, steps, points, plan=tuple(plan), notes=(note,))
    counts = [PointCounts(p.samples, tuple(g for g, _ in p.prompt_counts) or (1,),
                          tuple(c for _, c in p.prompt_counts) or (1,)) for p in points]
    if any(not p.prompt_counts for p in points):   # measured elsewhere: the accept length alone
        counts = [PointCounts(p.samples, (p.accept_length.value,), (1.0,)) for p in points]  # type: ignore[arg-type]
    # the ceiling: what a drafter accepting every draft would measure on these prompts (at most K + 1)
    cap = min([perfect_accept_length([g for g, _ in p.prompt_counts], steps) for p in points if p.prompt_counts]
              or [steps + 1.0])
    held = held_out_errors([p.samples for p in points], [p.accept_length.value for p in points], cap=cap)
    chosen = family
    notes = []
    if family == "auto":
        scored = {k: v for k, v in held.items() if v is not None}
        chosen = min(scored, key=scored.__getitem__) if scored else "loglogistic"
        notes.append(f"family chosen by held-out error: {chosen}" if scored else
                     "family auto with 3 checkpoints: no held-out test possible; log-logistic used.")
    if chosen == "average":
        boot = average_fits(counts, cap=cap, families=AVERAGED, seed=seed, resamples=resamples)
    else:
        boot = bootstrap_fits(counts, cap=cap, family=chosen, seed=seed, resamples=resamples)  # type: ignore[arg-type,assignment]
    preds = tuple((float(n), boot.predict(n)) for n in predict)
    reached = tuple((float(al), boot.reach(al)) for al in reach)
    exact = len(points) == MIN_POINTS
    curve = Curve(label, steps, points, boot, held, preds, reached, tuple(plan), (), exact)
    if exact:
        notes.append(f"{MIN_POINTS} checkpoints for the curve's {MIN_POINTS} parameters: it passes through them and "
                     "nothing tests it; predictions past the largest checkpoint are not constrained.")
    unpinned = [n for n, _ in preds if curve.forms_disagree(n)]
    loose = [n for n, i in preds if not curve.constrained_at(n, i) and n not in unpinned]
    for n in unpinned:
        (fa, va), (fb, vb) = boot.spread(n)  # type: ignore[union-attr]
        notes.append(f"the points do not pin the curve down at {samples_text(n)} samples: the plausible forms predict "
                     f"{va:.2f} ({fa}) to {vb:.2f} ({fb}), one outside another's interval; the interval is their union. "
                     "Checkpoints nearer that sample count would settle it.")
    if loose:
        notes.append(f"the data do not constrain the prediction at {', '.join(samples_text(n) for n in loose)} samples: its "
                     f"interval is wider than {MAX_WIDTH_TEXT} accept length or unbounded"
                     + (", or the curve is exactly determined." if exact else "."))
    return Curve(label, steps, points, boot, held, preds, reached, tuple(plan), tuple(notes), exact)
