"""What :func:`~eaglekit.analysis.acceptance.curve.acceptance_curve` reads besides the measurement: the samples
each checkpoint has seen (SpecForge's ``training_state.pt``, or a step in the folder name), a serving plan's
break-even, and whether the checkpoints of one curve share their shapes and vocabulary map."""

from __future__ import annotations

import argparse
import math
import os
import pickle
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eaglekit.analysis.acceptance.curve_result import PlanLine
from eaglekit.core import safejson
from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.redact import shown
from eaglekit.io.drafter import read_maps
from eaglekit.io.reader import open_checkpoint
from eaglekit.io.sources.local import PIPE_WAIT_S, read_local_file

__all__ = ["MAX_ACCEPT_LENGTH", "MAX_SAMPLES", "TRAINING_STATE", "check_series",
           "checkpoint_samples", "read_plan_break_even", "read_training_step"]

#: SpecForge's saved training state, beside each checkpoint (scripts/train_eagle3.py, save_checkpoints)
TRAINING_STATE = "training_state.pt"
_STEP = re.compile(r"(?:^|[_-])step[_-]?(\d+)$|^checkpoint-(\d+)$")


# -- samples per checkpoint -----------------------------------------------------------------------------
def checkpoint_samples(path: str | os.PathLike[str], *, batch_size: int | None) -> tuple[float, str]:
    """Samples a checkpoint has seen, and where that came from: SpecForge's ``training_state.pt``
    (``global_step``) beside the weights, else a step in the folder name; times ``batch_size``."""
    p = Path(os.path.expanduser(os.fspath(path)))
    step: int | None = None
    state = p / TRAINING_STATE
    if p.is_dir() and state.is_file():
        step, where = read_training_step(state), f"{TRAINING_STATE} global_step"
    else:
        m = _STEP.search(p.name)
        if m:
            step, where = int(m.group(1) or m.group(2)), f"folder name {p.name!r}"
    if step is None:
        raise InputError(f"{shown(str(path))}: no {TRAINING_STATE} and no step in the folder name (step_N, "
                         "epoch_E_step_N, checkpoint-N): give --samples N,N,... (samples seen by each checkpoint).")
    if batch_size is None:
        raise InputError(f"{shown(str(path))}: {where} says step {_short(step)}; give --batch-size (samples per step, "
                         "summed over data-parallel ranks) to turn steps into samples, or --samples N,N,...")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InputError(f"batch size must be a whole number from 1 to {MAX_BATCH_SIZE:,}, got {_short(batch_size)}.")
    if step > MAX_TRAINING_STEP:
        raise InputError(f"{shown(str(path))}: {where} says step {_short(step)}, more than any training run takes "
                         f"(at most {MAX_TRAINING_STEP:,}); give --samples N,N,...")
    if step * batch_size > MAX_SAMPLES:
        raise InputError(f"{shown(str(path))}: {where} says step {step} x batch {batch_size}, more samples than any "
                         f"training run sees (at most {MAX_SAMPLES:g}); give --samples N,N,...")
    return float(step * batch_size), f"{where} = {step} x batch {batch_size}"


#: The largest step count read from a training state or a folder name, and the largest samples per step: past
#: them a count is not a training run's (and 10^400 would overflow a float).
MAX_TRAINING_STEP = 10 ** 12
MAX_BATCH_SIZE = 1 << 24
#: The most samples a checkpoint, a prediction or a reach is taken at (10^15: past any training run), and the
#: largest accept length asked about (65: 64 draft steps and the bonus token).
MAX_SAMPLES = 1e15
MAX_ACCEPT_LENGTH = 65.0


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 40:
        return f"about 10^{int(abs(value).bit_length() * 0.30103)}"   # str() of 4,300+ digits would raise
    return str(value)[:80]


def read_training_step(path: str | os.PathLike[str]) -> int:
    """``global_step`` of a SpecForge training state, loaded with ``torch.load(weights_only=True)``
    (memory-mapped: optimizer tensors stay on disk). Only tensors, numbers, strings, containers and
    ``argparse.Namespace`` (SpecForge saves its arguments as one) are accepted; anything else is refused
    before it runs."""
    import torch  # heavy: only when a training state is read

    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            try:
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:   # not a zip file (legacy format): mmap is unavailable
                if "mmap" not in str(e):
                    raise
                state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        what = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(e))
        raise InputError(f"{shown(str(path))} is not a plain tensor/number pickle"
                         + (f" (it names {what.group(1)})" if what else "")
                         + ": refused without running it. Give --samples N,N,... or name the folders step_N with "
                           "--batch-size.") from e
    except (OSError, RuntimeError, EOFError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"{shown(str(path))} cannot be read as a training state ({first[:160]}).") from e
    step = state.get("global_step") if isinstance(state, dict) else None
    if isinstance(step, torch.Tensor) and step.numel() == 1:
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InputError(f"{shown(str(path))} holds no whole global_step (SpecForge's key): give --samples N,N,...")
    return int(step)


# -- the serving plan --------------------------------------------------------------------------------------
#: The largest plan file read (an `eaglekit plan --json` output is a few hundred KiB).
PLAN_LIMIT = 16 * 2 ** 20


def read_plan_break_even(plan: str | os.PathLike[str] | Mapping[str, Any], *, steps: int,
                         pipe_wait: float = PIPE_WAIT_S) -> tuple[PlanLine, ...]:
    """Break-even accept lengths at K = ``steps`` from an ``eaglekit plan --json`` object (a path or the dict),
    read defensively. Keys read, per entry of ``batches``: ``batch``; ``break_even_accept_length`` or
    ``break_even`` (a number, or a mapping by k) when the plan states it, else from ``steps[k].cycle_ms``:
    break-even at k = cycle at k / decode step (k = 0), the accept length at which a cycle emits as fast as
    plain decoding; ``best_steps`` and ``tokens_per_s`` (the plan's best configuration) for reference."""
    if not isinstance(plan, Mapping):
        p = Path(os.path.expanduser(os.fspath(plan)))
        # the guarded reader of every small input: a regular file under the size cap, or a pipe read within its
        # time limit; /dev/zero, a link to /dev/urandom, a FIFO nobody writes and a 3 GiB sparse file are refused
        data = read_local_file(p, limit=PLAN_LIMIT, what="--plan", pipe_wait=pipe_wait)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"--plan {shown(str(plan))} is not UTF-8 text ({e.reason} at byte {e.start}).") from e
        plan = safejson.loads(text, what=f"plan {p.name}", error=InputError)
    batches = plan.get("batches") if isinstance(plan, Mapping) else None
    if not isinstance(batches, list) or not batches:
        raise InputError("--plan: expected `eaglekit plan --json` output, an object with a non-empty \"batches\" list.")
    out = []
    for k, b in enumerate(batches):
        if not isinstance(b, Mapping):
            raise InputError(f"--plan: batches[{k}] is not an object.")
        by_k = {o.get("steps"): o for o in b.get("steps", []) if isinstance(o, Mapping)} if isinstance(b.get("steps"), list) else {}
        cyc = by_k.get(steps, {}).get("cycle_ms")
        base = by_k.get(0, {}).get("cycle_ms")
        be = _stated_break_even(b, by_k.get(steps, {}), steps)
        source = "the plan's break-even"
        if be is None and _pos(cyc) and _pos(base):
            o = by_k.get(steps, {})
            parts = [(o.get("verify_ms"), "verify"), (o.get("draft_ms"), f"{steps} x drafting"),
                     (o.get("overhead_ms"), "overhead per cycle")]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v, _ in parts):
                model = (f" ({parts[0][0]:.1f} ms verify + {steps} x {parts[1][0]:.2f} ms drafting + "
                         f"{parts[2][0]:.2f} ms per cycle: the plan's fitted cycle, not the account's, which puts "
                         "all the measured drafting into its steps)")
            else:
                model = ""
            be, source = cyc / base, f"the plan's cycle at K / its decode step{model}"
        if be is None:
            raise InputError(f"--plan: batches[{k}] states no break-even and no cycle_ms at k = 0 and k = {steps} "
                             f"(the curve's K); plan with --max-steps >= {steps}, or give --break-even AL.")
        batch = b.get("batch")
        out.append(PlanLine(batch if isinstance(batch, int) and not isinstance(batch, bool) else None, steps,
                            float(be), float(cyc) if _pos(cyc) else None,
                            b.get("best_steps") if isinstance(b.get("best_steps"), int) else None,
                            float(b["tokens_per_s"]) if _pos(b.get("tokens_per_s")) else None, source))
    return tuple(out)


def _pos(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _stated_break_even(batch: Mapping[str, Any], option: Mapping[str, Any], steps: int) -> float | None:
    for where in (option, batch):
        for key in ("break_even_accept_length", "break_even"):
            v = where.get(key)
            if isinstance(v, Mapping):   # {"value": x} (an interval's JSON), or a mapping by k
                v = v["value"] if "value" in v else v.get(str(steps), v.get(steps))  # type: ignore[call-overload]
            if _pos(v):
                return float(v)
    return None


# -- consistency of a series ------------------------------------------------------------------------------
def check_series(paths: Sequence[str], *, endpoint: str | None = None, timeout: float | None = None) -> None:
    """Every checkpoint of one curve has the same tensors, shapes and vocabulary map as the first: a curve
    through different drafters would measure something else."""
    first = None
    seen: dict[str, tuple[int, str]] = {}
    for i, path in enumerate(paths, start=1):
        with open_checkpoint(path, endpoint=endpoint, timeout=timeout) as ckpt:
            shapes = {t.name: tuple(t.shape) for t in ckpt.inventory.tensors}
            maps = read_maps(ckpt)
            mark = weights_fingerprint(ckpt)
        if mark in seen:
            j, other = seen[mark]
            raise InputError(f"checkpoint {i} ({shown(str(path))}) holds the same weights as checkpoint {j} "
                             f"({shown(str(other))}): every tensor's name, shape and sampled bytes agree (a copy, a link "
                             "or the same folder twice); a curve needs each checkpoint of the run once.")
        seen[mark] = (i, str(path))
        if first is None:
            first = (path, shapes, maps)
            continue
        p0, s0, m0 = first
        for name in sorted(set(s0) | set(shapes)):
            if s0.get(name) != shapes.get(name):
                a = "absent" if name not in s0 else list(s0[name])
                b = "absent" if name not in shapes else list(shapes[name])
                raise InputError(f"checkpoints of different shapes: {shown(name)} is {b} in checkpoint {i} "
                                 f"({shown(str(path))}), {a} in checkpoint 1 ({shown(str(p0))}); a curve follows one "
                                 "drafter through its training.")
        for key, a, b in (("d2t", m0[0], maps[0]), ("t2d", m0[1], maps[1])):
            if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
                diff = "" if a is None or b is None or a.shape != b.shape else f" ({int((a != b).sum())} entries differ)"
                raise VocabMapError(f"checkpoints with different vocabulary maps: {key} of checkpoint {i} "
                                    f"({shown(str(path))}) differs from checkpoint 1's ({shown(str(p0))}){diff}; a "
                                    "curve's checkpoints must share one draft vocabulary.")


#: Bytes read from each tensor for :func:`weights_fingerprint`: this many windows of this many bytes, spread
#: evenly from the first byte to the last (a training step moves nearly every weight, so two checkpoints of one
#: run differ in every window; a copy agrees in all).
FINGERPRINT_WINDOWS = 4
FINGERPRINT_BYTES = 4096


def weights_fingerprint(ckpt: Any) -> str:
    """A SHA-256 over every tensor's name, dtype and shape and :data:`FINGERPRINT_WINDOWS` windows of its bytes
    (read by range: a few KiB per tensor however large the checkpoint, local or remote). The same weights give
    the same fingerprint whatever path or link they are reached by."""
    import hashlib

    h = hashlib.sha256()
    for t in sorted(ckpt.inventory.tensors, key=lambda t: t.name):
        h.update(f"{t.name}\0{t.dtype}\0{list(t.shape)}\0{t.nbytes}\0".encode())
        size = min(FINGERPRINT_BYTES, t.nbytes)
        if size == 0:
            continue
        last = t.nbytes - size
        starts = sorted({last * k // max(FINGERPRINT_WINDOWS - 1, 1) for k in range(FINGERPRINT_WINDOWS)})
        for start in starts:
            h.update(ckpt.read_bytes(t.name, start, size))
    return h.hexdigest()
