"""Measure a drafter's accept length offline, against a target's greedy continuations.

The convention (vLLM's "mean acceptance length"; docs/acceptance.md):

* The target generates its greedy continuation of each prompt. The first generated token comes from
  prefill and opens no cycle. A cycle at base ``t`` (last known token ``x_{t+1}``) drafts ``K`` tokens
  (chain, top-1), accepts the ``m(t)`` leading ones equal to the target's next tokens, plus one bonus
  token; the next cycle starts at ``t + m(t) + 1``; the last cycle is capped at max_new_tokens.
* ``accept_length = generated tokens (prefill token excluded) / cycles = 1 + accepted / drafts``.
  SGLang's benchmark clients count the prefill token too (``accept_length_prefill_included``).
* ``per_step_acceptance[j-1]`` = P(step j accepted | steps 1..j-1 accepted), over every position of the
  continuation where step j has a target token to compare with; None where nothing conditions it.
* ``accept_length_by_steps[k-1]``: the same simulation with ``K = k``, from the same match counts.
* temperature > 0 adds ``expected_acceptance[j-1]``: the mean over positions whose steps 1..j-1 matched
  of ``sum_v min(p(v), q(v))`` (Leviathan et al. 2023, arXiv 2211.17192), p the target's and q the
  draft's softmax at that temperature, q mapped to target ids through d2t; and ``expected_accept_length``:
  the same cycles as the greedy figure, each step accepted with that probability at its position
  (:func:`expected_cycles`), so the two compare (at T -> 0 they are equal).

Drafting runs all positions of a sequence at once (one pass per chain step, the training-time-test
mask; :meth:`~eaglekit.analysis.draft.DraftModel.draft`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.configs.layers import AuxConvention, other_convention
from eaglekit.core.records import register
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.uncertainty import Interval, bootstrap_ratio, verdict
from eaglekit.core.speedup.specmath import Estimate, Scenario, estimate
from eaglekit.analysis.acceptance.positions import CycleLog
from eaglekit.analysis.acceptance.notes import (collapse_note, embeddings_note, generation_limit_note,
                                                rotary_base_note, unknown_tokens_note)
from eaglekit.core.configs.rotary import RotaryBase
from eaglekit.io.cache import Cached, cached_call
from eaglekit.analysis.acceptance.result import (CYCLE_SIMULATION, AcceptanceResult, Source, _local_target,  # noqa: F401
                                                _null_nan)
from eaglekit.core.acceptance.prompts import Prompt


def match_lengths(drafts, expected):
    """Leading draft tokens equal to the expected ones: drafts, expected (K, B) -> (B,) int64.

    ``expected`` holds -1 where no target token exists (never matches)."""
    import torch

    eq = (drafts == expected) & (expected >= 0)
    return torch.cumprod(eq.to(torch.int64), 0).sum(0)


def expected_cycles(accept: np.ndarray, generated: int, steps: int) -> float:
    """Expected cycles to emit ``generated`` tokens when the cycle at continuation offset ``i`` accepts its
    draft step ``j`` with probability ``accept[j-1, i]`` once steps 1..j-1 were accepted (then the bonus
    token): the sampling counterpart of :func:`simulate_cycles`, on the same cycle basis.

    ``accept`` (K, G) holds sum_v min(p(v), q(v)) along the target's greedy continuation (0 where the greedy
    draft left it); with one-hot p and q it is the greedy match indicator and the result is exactly
    ``simulate_cycles``. Solved backwards, without sampling: ``C[i] = 1 + sum_a P_i(a) C[i + a + 1]``,
    ``C[i >= G] = 0``."""
    return expected_counts(accept, generated, steps)[1]


def expected_counts(accept: np.ndarray, generated: int, steps: int, *, open_end: bool = False,
                    open_start: bool = False) -> tuple[float, float]:
    """(expected tokens, expected cycles) of :func:`counted_cycles` when each draft step is accepted with
    probability ``accept[j-1, i]`` (see :func:`expected_cycles`), solved backwards: ``C[i] = 1 + sum_a P_i(a)
    C[i + a + 1]``, ``N[i] = sum_a P_i(a) (emitted + N[i + a + 1])``. A continuation that runs to its end emits
    all ``generated`` tokens (its last cycle capped); an ``open_end`` one counts only the cycles that start where
    ``i + K <= G``; an ``open_start`` one leaves its first cycle out."""
    G = int(generated)
    if G == 0:
        return 0.0, 0.0
    a = np.clip(np.asarray(accept, dtype=np.float64)[:steps, :G], 0.0, 1.0)   # (K, G)
    reach = np.vstack([np.ones((1, G)), np.cumprod(a, axis=0)])              # (K + 1, G): steps 1..j accepted
    exactly = reach.copy()
    exactly[:-1] -= reach[1:]                                                # (K + 1, G): P(a = j), j = 0..K
    cycles, tokens = np.zeros(G + steps + 2), np.zeros(G + steps + 2)
    accepted = np.arange(steps + 1)
    last = G - steps if open_end else G - 1
    if last < 0:
        return 0.0, 0.0
    for i in range(last, -1, -1):
        p = exactly[:, i]
        emitted = accepted + 1 if open_end else np.minimum(accepted, G - i - 1) + 1
        cycles[i] = 1.0 + float(p @ cycles[i + 1:i + steps + 2])
        tokens[i] = float(p @ (emitted + tokens[i + 1:i + steps + 2]))
    if open_start:  # the first cycle left out: what follows it, in expectation over its outcome
        p = exactly[:, 0]
        return float(p @ tokens[1:steps + 2]), float(p @ cycles[1:steps + 2])
    return float(tokens[0]), float(cycles[0])


def counted_cycles(s: SampleStats, steps: int) -> list[int]:
    """Drafts accepted in each cycle of one continuation that the accept length counts (what vLLM counts per
    draft).

    A continuation that runs to its end (a prompt's greedy continuation, or a span of training text that ends
    where its sample or assistant turn ends) is simulated to its end, the last cycle capped
    (:func:`simulate_cycles`): every generated token counts. A span of training text that stops where the text departs from the target's
    choice (``open_end``: serving would have gone on) counts only the cycles whose K drafts all have a token
    to compare with (offset ``i + K <= G``), with all the tokens they emit: which cycles count is decided by
    where a cycle starts, before its outcome is seen, so the cut adds no bias (Wald's identity), where capping
    the span's last cycle would count a short cycle for every span. A span that starts right after such a
    departure (``open_start``) leaves its first cycle out: it drafts from a context the target would not have
    written, which serving never does."""
    return [a for _, a, _ in cycle_walk(s, steps)]


def cycle_walk(s: SampleStats, steps: int):
    """``(offset, accepted, drafted)`` of each cycle :func:`counted_cycles` counts: its continuation offset, the
    drafts it accepted, and the drafts that had a token to compare with (fewer than K near a full
    continuation's end)."""
    i, G, first = 0, s.generated, True
    while (i + steps <= G) if s.open_end else (i < G):
        room = steps if s.open_end else min(steps, G - i - 1)
        a = min(int(s.matches[i]), room)
        if not (first and s.open_start):
            yield i, a, room
        first = False
        i += a + 1


def cycle_log(stats: Sequence[SampleStats], keys: Sequence[Any], steps: int) -> CycleLog:
    """Every counted cycle of ``stats`` (one request per distinct key) with the position it starts at: the
    context length then, ``base + 2 + offset`` (the tokens up to the base's next one)."""
    ids = {k: n for n, k in enumerate(dict.fromkeys(keys))}
    return CycleLog.from_rows(((ids[k], s.base + 2 + i, a, d) for k, s in zip(keys, stats)
                               for i, a, d in cycle_walk(s, steps)), steps)


def cycle_counts(s: SampleStats, steps: int) -> tuple[int, int]:
    """(tokens, cycles) that the counted cycles of one continuation emit and take (:func:`counted_cycles`)."""
    if not s.open_end and not s.open_start:
        return s.generated, simulate_cycles(s.matches, s.generated, steps)
    accepted = counted_cycles(s, steps)
    return sum(accepted) + len(accepted), len(accepted)


def simulate_cycles(matches: np.ndarray, generated: int, steps: int) -> int:
    """Cycles to emit ``generated`` tokens (prefill token excluded) when a cycle at continuation offset
    ``i`` accepts ``min(matches[i], steps)`` drafts plus one bonus token; the last cycle is capped."""
    i = cycles = 0
    while i < generated:
        i += min(int(matches[i]), steps) + 1
        cycles += 1
    return cycles


@dataclass(frozen=True)
class SampleStats:
    """One prompt's counts: matches at each continuation offset, tokens generated after prefill,
    per-step [conditioned, accepted] counts, and the expected-acceptance sums at temperature > 0."""

    matches: np.ndarray         # (G,) leading matches from base P-1+i
    generated: int              # G
    conditioned: np.ndarray     # (K,) bases where step j was reached with a token to compare
    accepted: np.ndarray        # (K,)
    soft_sum: np.ndarray | None = None   # (K,) sum over conditioned bases of sum_v min(p, q)
    soft: np.ndarray | None = None       # (K, G) sum_v min(p, q) at each base (0 where not reached)
    #: a span of training text, not a whole continuation: it stops where the text departs from the target's
    #: choice (``open_end``) or starts right after such a departure (``open_start``): see :func:`counted_cycles`
    open_end: bool = False
    open_start: bool = False
    #: the base of its first cycle, a position of its sample (a prompt's last token: prompt length - 1; a span of
    #: training text: its first base): a cycle at offset i starts at context length ``base + 2 + i``
    base: int = 0


def count_drafts(drafts, bases, target_ids, last: int, steps: int, *, temperature: float = 0.0,
                 target_probs=None, draft_logits=None) -> SampleStats:
    """Count chain drafts against the target: ``drafts`` (K, G) drafted from ``bases`` (G,), step j from base
    t compared with ``target_ids[t + j]`` wherever ``t + j <= last``. At temperature > 0,
    ``target_probs(positions)`` gives the target's probabilities on the draft vocabulary's target ids (n, N) at
    those positions and ``draft_logits(s, sel)`` the drafter's step-s logits (n, N) from the bases ``sel``."""
    import torch

    G = int(bases.shape[0])
    j = torch.arange(1, steps + 1)[:, None]
    idx = bases[None, :] + j                                            # (K, G): t + j
    tgt = target_ids.cpu().to(torch.int64)
    avail = idx <= last                                                 # a target token to compare with
    expected = torch.where(avail, tgt[idx.clamp(max=len(tgt) - 1)], torch.full_like(idx, -1))
    m = match_lengths(drafts, expected)                                 # (G,)
    reached = (m[None, :] >= j - 1) & avail                             # steps 1..j-1 matched, j comparable
    conditioned = reached.sum(1).numpy()
    accepted = ((m[None, :] >= j) & avail).sum(1).numpy()
    soft = by_base = None
    if temperature > 0:
        by_base = np.zeros((steps, G))                                  # per base, 0 where not reached
        for s in range(steps):
            sel = reached[s].nonzero().flatten()
            if len(sel):
                p = target_probs(idx[s, sel])                           # (n, N)
                q = torch.softmax(draft_logits(s, sel).float().cpu() / temperature, -1)
                by_base[s, sel.numpy()] = torch.minimum(p, q).sum(-1).double().numpy()
        soft = by_base.sum(1)                                           # (K,)
    return SampleStats(m.numpy(), G, conditioned, accepted, soft, by_base)


def sample_stats(drafter, aux, input_ids, target_ids, prompt_len: int, *, steps: int, temperature: float = 0.0,
                 target_logits=None) -> SampleStats:
    """Draft every continuation position of one sequence and count matches (torch in, numpy out)."""
    import torch

    T = int(input_ids.shape[0])
    P = int(prompt_len)
    G = max(T - P - 1, 0)
    if G == 0:
        z = np.zeros(steps, np.int64)
        return SampleStats(np.zeros(0, np.int64), 0, z, z.copy(), np.zeros(steps) if temperature > 0 else None,
                           np.zeros((steps, 0)) if temperature > 0 else None)
    h = drafter.project(aux)                                            # (T, H)
    out = drafter.draft(h[:T - 1], input_ids[1:], steps, start=P - 1, return_logits=temperature > 0)
    tids = drafter.draft_to_target.cpu()

    def target_probs(positions):
        return torch.softmax(target_logits[positions].float() / temperature, -1)[:, tids]

    counts = count_drafts(out.tokens[:, :G].cpu(), torch.arange(P - 1, P - 1 + G), target_ids, T - 2, steps,
                          temperature=temperature, target_probs=target_probs,
                          draft_logits=lambda s, sel: out.logits[s][sel])
    return replace(counts, base=P - 1)


def accept_length_gain(before: AcceptanceResult, after: AcceptanceResult, *, seed: int = 0) -> Interval:
    """``after``'s accept length minus ``before``'s, measured on the same prompts at the same K (a re-mapped drafter
    against the original, a fine-tune against its start): a paired bootstrap over the prompts, so a gain reads
    against its own noise. :func:`~eaglekit.core.uncertainty.verdict` against 0 says whether it helps."""
    from eaglekit.core.uncertainty import bootstrap_difference

    for name, r in (("before", before), ("after", after)):
        if not r.prompt_counts:
            raise InputError(f"the {name} result holds no per-prompt counts (read from a file or another tool): "
                             "measure both with eaglekit acceptance to compare them prompt by prompt")
    if len(before.prompt_counts) != len(after.prompt_counts) or before.steps != after.steps:
        raise InputError(f"the two results were measured on {len(before.prompt_counts)} and "
                         f"{len(after.prompt_counts)} prompts at K = {before.steps} and {after.steps}: a paired "
                         "comparison needs the same prompts at the same K")
    return bootstrap_difference(before.prompt_counts, after.prompt_counts, seed=seed)




def summarise(stats: Sequence[SampleStats], *, steps: int, seed: int = 0, groups: Sequence[Any] | None = None,
              unit: str = "prompts") -> dict[str, Any]:
    """Pool per-continuation counts into the accept-length figures (cycles counted by :func:`cycle_counts`).

    ``groups``: the request each continuation belongs to (the spans of one training sample are one request);
    default: each is its own. Per-request figures and the interval (a bootstrap that resamples requests,
    pooled as the figure is) are by request."""
    keys = list(range(len(stats))) if groups is None else list(groups)
    if len(keys) != len(stats):
        raise InputError("summarise: one group per continuation.")

    def pooled(k: int) -> tuple[list[int], list[int]]:
        """Tokens and cycles per request at K = k."""
        tok: dict[Any, int] = {}
        cyc: dict[Any, int] = {}
        for key, st in zip(keys, stats):
            t, c = cycle_counts(st, k)
            tok[key] = tok.get(key, 0) + t
            cyc[key] = cyc.get(key, 0) + c
        return list(tok.values()), list(cyc.values())

    def ratio(tok, cyc) -> float:
        return sum(tok) / sum(cyc) if sum(cyc) else float("nan")

    def interval(tok, cyc) -> Interval | None:
        return bootstrap_ratio(tok, cyc, seed=seed, unit=unit) if sum(cyc) else None

    by_k = [pooled(k) for k in range(1, steps + 1)]
    tokens, cycles = by_k[-1]
    cond = np.sum([s.conditioned for s in stats], axis=0)
    acc = np.sum([s.accepted for s in stats], axis=0)
    per_step = tuple(float(a / c) if c else None for a, c in zip(acc, cond))
    per_prompt = tuple((t / c) if c else None for t, c in zip(tokens, cycles))
    expected = expected_length = None
    if stats and stats[0].soft_sum is not None:
        soft = np.sum([s.soft_sum for s in stats], axis=0)
        expected = tuple(float(x / c) if c else None for x, c in zip(soft, cond))
        e = [expected_counts(s.soft, s.generated, steps, open_end=s.open_end, open_start=s.open_start)
             for s in stats]
        e_cycles = sum(c for _, c in e)
        expected_length = sum(t for t, _ in e) / e_cycles if e_cycles else float("nan")
    return {"generated_tokens": sum(tokens), "cycles": sum(cycles), "expected_accept_length": expected_length,
            "accept_length": ratio(tokens, cycles),
            "per_step_acceptance": per_step, "accept_length_by_steps": tuple(ratio(*p) for p in by_k),
            "per_step_counts": tuple(int(c) for c in np.atleast_1d(cond)),
            "per_prompt_accept_length": per_prompt, "expected_acceptance": expected,
            "interval": interval(tokens, cycles), "interval_by_steps": tuple(interval(*p) for p in by_k),
            "requests": len(tokens), "prompt_counts": tuple(zip(tokens, cycles)), "positions": int(sum(s.generated for s in stats)),
            "cycle_log": cycle_log(stats, keys, steps),
            "cycle_logs": tuple(cycle_log(stats, keys, k) for k in range(1, steps + 1))}


# -- the measurement ----------------------------------------------------------------------------------
def measure_acceptance(drafter, *, target=None, hidden_states=None, prompts=None, max_new_tokens: int = 64,
                       steps: int | None = None, temperature: float = 0.0, aux_convention: AuxConvention | None = None,
                       device: str = "cpu", dtype: str = "float32", embeddings=None,
                       endpoint: str | None = None, timeout: float | None = None, progress: bool | None = None,
                       keep_samples: bool = False, trust_remote_code: bool = False,
                       on_sample=None, cache: bool | str = True, cache_dir=None,
                       confidence_threshold: float = 0.0,
                       rotary_base: RotaryBase = "config") -> AcceptanceResult:
    """Measure ``drafter`` (a location or a loaded :class:`~eaglekit.analysis.draft.DraftModel`)
    against ``target`` (a location transformers loads, or a loaded
    :class:`~eaglekit.analysis.acceptance.target.TargetModel`) on ``prompts`` (a JSONL path, or parsed
    prompts), or against a hidden-state dump folder ``hidden_states``; exactly one of the two.

    ``aux_convention`` (``"outputs"`` | ``"inputs"``): how the drafter's aux ids select target hidden
    states; default: what it was trained with. The other reading is measured too when the features allow.
    ``trust_remote_code``: let a target folder's own Python run (its ``auto_map``); never on by default.
    ``rotary_base``: the base the drafter's rotary table is built on: ``"config"`` (rope_theta, as vLLM, SGLang
    and transformers build it), ``"torchspec"`` (as TorchSpec trains it: base 10000 for an MLA drafter's YaRN,
    whatever rope_theta says; core/configs/rotary.py) or a number. Where the two differ the result's notes say
    so and name the other option.
    ``on_sample(model, aux, input_ids, target_ids, prompt_len, logits)``: called for every measured sample
    with the primary reading's features (tree drafts measure there: :mod:`~eaglekit.analysis.acceptance.trees`).

    ``cache``: the answer is kept in the result cache (:mod:`eaglekit.io.cache`, ``cache_dir`` or its default)
    keyed by the content of the drafter, target, prompts or dump and every option here, and read back on a repeat
    (``result.cached`` says when it was computed); ``False`` neither reads nor writes, ``"refresh"`` recomputes and
    writes. Loaded models, remote locations, ``keep_samples`` and ``on_sample`` are measured and not cached.

    ``confidence_threshold``: a DSpark drafter's proposals end before the first slot whose confidence head says
    less (DeepSpec's ``--confidence-threshold``; 0, the default, proposes the whole block); refused for others.
    """
    options = dict(target=target, hidden_states=hidden_states, prompts=prompts, max_new_tokens=max_new_tokens,
                   steps=steps, temperature=temperature, aux_convention=aux_convention, device=device, dtype=dtype,
                   embeddings=embeddings, endpoint=endpoint, timeout=timeout, progress=progress,
                   keep_samples=keep_samples, trust_remote_code=trust_remote_code, on_sample=on_sample,
                   confidence_threshold=confidence_threshold,
                   rotary_base=rotary_base)
    parts = None
    if not keep_samples and on_sample is None:
        def parts(store):
            return acceptance_key_parts(store, drafter, options)
    return cached_call("acceptance", ACCEPTANCE_CODE_VERSION, parts,
                       lambda: _measure_acceptance(drafter, **options), cache=cache, cache_dir=cache_dir,
                       stamp=with_cached)


def with_cached(value, cached: Cached):
    """``value`` (an :class:`AcceptanceResult`, or a record holding one as ``.result``: a dump's, a tree run's)
    marked as read from the result cache: its text, HTML and JSON then say so, and when it was computed."""
    if isinstance(value, AcceptanceResult):
        return replace(value, cached=cached)
    return replace(value, result=with_cached(value.result, cached))


#: the version of the accept-length code a cached answer was computed by: bump it with any change to what
#: :func:`measure_acceptance` (or the drafter forward it runs) computes
ACCEPTANCE_CODE_VERSION = 5   # 2: cycle positions (cycle_log); 3: DFlash2, DSpark, DFlash embedding scale;
                              # 4: lm_head rows checked, MoE groups of one, rotary base, routing-precision note
                              # 5: cycle positions at every K (cycle_logs)


def acceptance_key_parts(store, drafter, options: dict[str, Any]) -> dict[str, Any]:
    """The parts of a cache key that say what :func:`measure_acceptance` measures, by content (raises the store's
    not-keyable error for a loaded drafter, a remote location or prompts it cannot read)."""
    options = {**_MEASURE_DEFAULTS, **options}
    target = options["target"]
    loaded = f"{options['device']}:{options['dtype']}:{bool(options['trust_remote_code'])}"  # as load_target_model
    shown_name = None if target is None else str(target)  # what the answer names the target (a loaded one: its name)
    if target is not None and not isinstance(target, (str, os.PathLike)):
        from eaglekit.analysis.acceptance.target import TargetModel
    if target is not None and not isinstance(target, (str, os.PathLike)) and isinstance(target, TargetModel):
        if target.location is None:
            return store.location_digest(target)  # not keyable: raises
        target, loaded, shown_name = target.location, target.loaded_as, target.name
    prompts = options["prompts"]
    if prompts is not None and not isinstance(prompts, (str, os.PathLike)):
        prompts = [asdict(p) if isinstance(p, Prompt) else p for p in prompts]
    elif prompts is not None:
        prompts = store.location_digest(prompts)
    skip = {"target", "prompts", "endpoint", "timeout", "progress", "on_sample", "keep_samples", "hidden_states",
            "embeddings"} | ({"confidence_threshold"} if not options["confidence_threshold"] else set())
    return {
        # the names as given too: the answer shows them (its drafter and target lines, its notes)
        "names": [str(drafter), shown_name,
                  None if options["hidden_states"] is None else str(options["hidden_states"])],
        "drafter": store.location_digest(drafter),
        "target": None if target is None else store.location_digest(target),
        "hidden_states": None if options["hidden_states"] is None else store.location_digest(options["hidden_states"]),
        "embeddings": None if options["embeddings"] is None else store.location_digest(options["embeddings"]),
        "prompts": prompts, "target_loaded_as": loaded,
        **{k: v for k, v in options.items() if k not in skip},
    }


def _measure_defaults() -> dict[str, Any]:
    import inspect

    return {n: p.default for n, p in inspect.signature(_measure_acceptance).parameters.items() if n != "drafter"}


def _measure_acceptance(drafter, *, target=None, hidden_states=None, prompts=None, max_new_tokens: int = 64,
                        steps: int | None = None, temperature: float = 0.0, aux_convention: AuxConvention | None = None,
                        device: str = "cpu", dtype: str = "float32", embeddings=None,
                        endpoint: str | None = None, timeout: float | None = None, progress: bool | None = None,
                        keep_samples: bool = False, trust_remote_code: bool = False,
                        on_sample=None, confidence_threshold: float = 0.0,
                        rotary_base: RotaryBase = "config") -> AcceptanceResult:
    """The measurement itself (:func:`measure_acceptance`, uncached). ``steps`` None: 5, or a block drafter's
    block_size - 1."""
    if _is_block_drafter(drafter, endpoint=endpoint, timeout=timeout):  # DFlash and its kin draft whole blocks: their own measurement
        from eaglekit.analysis.acceptance.block import measure_block

        if rotary_base != "config":
            raise InputError("rotary_base applies to EAGLE-3 drafters; a block drafter is measured on its rope_theta.")

        return measure_block(drafter, target=target, hidden_states=hidden_states, prompts=prompts,
                             max_new_tokens=max_new_tokens, steps=steps, temperature=temperature,
                             aux_convention=aux_convention, device=device, dtype=dtype, embeddings=embeddings,
                             endpoint=endpoint, timeout=timeout, progress=progress, keep_samples=keep_samples,
                             trust_remote_code=trust_remote_code, on_sample=on_sample,
                             confidence_threshold=confidence_threshold)
    if confidence_threshold:
        raise InputError("confidence_threshold cuts a DSpark drafter's proposals; an EAGLE-3 drafter has no "
                         "confidence head.")
    steps = 5 if steps is None else steps
    # torch and the models load here, not at import: a cached answer is read without them
    from eaglekit.analysis.draft import DraftModel, trained_convention
    from eaglekit.analysis.acceptance.target import TargetModel, load_target_model, prompt_records
    from eaglekit.io.dumps.native import HiddenStateDump, open_dump
    import torch
    from tqdm.auto import tqdm


    if (target is None) == (hidden_states is None):
        raise InputError("give exactly one of target (a model transformers loads) or hidden_states (a dump folder).")
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= 64:
        raise InputError(f"steps must be an integer from 1 to 64, got {steps!r}.")
    if (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
            or not math.isfinite(temperature) or temperature < 0):
        raise InputError(f"temperature must be a finite number >= 0 (0 is greedy), got {temperature!r}.")
    if aux_convention not in (None, "inputs", "outputs"):
        raise InputError(f"aux convention must be 'outputs' or 'inputs', got {aux_convention!r}.")
    if isinstance(drafter, DraftModel) and rotary_base != "config":
        raise InputError("rotary_base applies when a drafter is loaded: pass its location, or load it with "
                         "DraftModel.load(..., rotary_base=...).")
    torch.manual_seed(0)

    if target is not None:

        if prompts is None:
            raise InputError("measuring against a target needs prompts (a JSONL file).")
        tmodel = target if isinstance(target, TargetModel) else load_target_model(
            target, device=device, dtype=dtype, trust_remote_code=trust_remote_code)
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}.")
        model = drafter if isinstance(drafter, DraftModel) else DraftModel.load(
            drafter, embed=tmodel.embedding().float().cpu(), device=device, dtype=dtype, endpoint=endpoint,
            timeout=timeout, rotary_base=rotary_base)
        num_layers, hidden, vocab, tname = tmodel.num_hidden_layers, tmodel.hidden_size, tmodel.vocab_size, tmodel.name
    else:

        dump = hidden_states if isinstance(hidden_states, HiddenStateDump) else open_dump(hidden_states)
        m = dump.manifest
        num_layers, hidden, vocab, tname = m.num_hidden_layers, m.hidden_size, m.vocab_size, m.target or str(dump.path)
        if temperature > 0:
            raise InputError("temperature > 0 needs the target's full next-token distribution, which dumps do not "
                             "hold; measure with --target, or at temperature 0.")
        if isinstance(drafter, DraftModel):
            model = drafter
        else:
            emb = embeddings
            if emb is None and m.target:
                emb = _local_target(m.target, Path(dump.path))
            model = DraftModel.load(drafter, embeddings=emb, device=device, dtype=dtype, endpoint=endpoint,
                                    timeout=timeout, rotary_base=rotary_base)
    _check_fit(model, hidden=hidden, vocab=vocab, target=tname)
    if hasattr(model.mlp, "precision"):
        model.mlp.precision.reset()   # counted from here: this measurement's routed rows only
    primary = aux_convention or trained_convention(model.config, model.layout)
    conventions = (primary, other_convention(primary))
    indices = {c: model.aux_indices(c, num_layers) for c in conventions}

    notes: list[str] = []
    skipped: list[int] = []
    if target is not None:

        plist, psource = prompt_records(prompts)
        layers = sorted(set(indices[conventions[0]]) | set(indices[conventions[1]]))
        ids_list = tmodel.tokenize_all(plist, source=psource, max_new_tokens=max_new_tokens)
        notes.extend(filter(None, [unknown_tokens_note(*tmodel.unknown_tokens(plist, ids_list), target=tname)]))

        def samples():
            for p, ids in zip(plist, ids_list):
                s = tmodel.run(ids, max_new_tokens=max_new_tokens, layers=layers, keep_logits=temperature > 0,
                               where=f"{psource} line {p.line}")
                yield s.input_ids, s.hidden_states, s.target_ids, s.prompt_len, s.logits
        total = len(plist)
        sha = tmodel.chat_template_sha256 if any(p.kind == "messages" for p in plist) else None
        available = {c: True for c in conventions}
    else:
        layers = list(dump.layers)
        missing = [k for k in indices[primary] if k not in layers]
        if missing:
            raise InputError(
                f"{dump.path} holds hidden states {layers} (output_hidden_states indices) but the drafter reads "
                f"{list(indices[primary])} ({primary} convention): the dump is from other layers. Re-dump with "
                f"`eaglekit dump-hidden ... --for-drafter DRAFTER`, or pick --aux-convention.")
        available = {c: all(k in layers for k in indices[c]) for c in conventions}
        if embeddings is not None and 0 not in layers:  # else compared with hidden_states[0] below
            notes.extend(filter(None, [embeddings_note(embeddings, m.target)]))
        if not available[conventions[1]]:
            notes.append(f"the dump lacks the hidden states the {conventions[1]} reading needs "
                         f"({list(indices[conventions[1]])}); that comparison is not available.")

        def samples():
            for s in dump:
                bad = ~np.isfinite(s.hidden_states).all(axis=(0, 2))   # NaN/Inf positions: skipped and counted
                if bad.any():
                    skipped.append(int(bad.sum()))
                    continue
                yield (torch.as_tensor(np.array(s.input_ids)), torch.as_tensor(np.array(s.hidden_states)),
                       torch.as_tensor(np.array(s.target_ids)), s.prompt_len, None)
        total, sha = len(dump), m.chat_template_sha256

    stats: dict[str, list[SampleStats]] = {c: [] for c in conventions if available[c]}
    kept: list[tuple[np.ndarray, np.ndarray]] = []
    pos = {k: i for i, k in enumerate(layers)}
    check_embeddings = target is None and embeddings is not None and 0 in pos
    for ids, hs, tgt, plen, logits in tqdm(samples(), total=total, desc="acceptance", unit="prompt",
                                            disable=None if progress is None else not progress, leave=False):
        if int(ids.max()) >= model.embed.shape[0]:
            raise VocabMapError(f"token id {int(ids.max())} is outside the drafter's vocabulary "
                                f"(0..{model.embed.shape[0] - 1}): vocabulary mismatch with {tname}.")
        if check_embeddings:  # the given embeddings of the dump's tokens against its hidden_states[0]
            e = model.embed(ids, device=torch.device("cpu"), dtype=torch.float32)   # (T, H)
            cos = float(torch.nn.functional.cosine_similarity(e, hs[pos[0]].float(), dim=-1).mean())
            notes.extend(filter(None, [embeddings_note(embeddings, m.target, cosine=cos)]))
            check_embeddings = False
        for c in stats:
            aux = hs[[pos[k] for k in indices[c]]]
            stats[c].append(sample_stats(model, aux, ids, tgt, plen, steps=steps,
                                         temperature=temperature if c == primary else 0.0, target_logits=logits))
        if on_sample is not None:
            on_sample(model, hs[[pos[k] for k in indices[primary]]], ids, tgt, plen, logits)
        if keep_samples:
            kept.append((np.asarray(ids[plen:].cpu()), stats[primary][-1].matches))
    if skipped:  # never a silent figure: SpecForge skips such samples too, and says so
        if not stats[primary]:
            raise InputError(f"every sample of {tname} holds NaN/Inf hidden states ({sum(skipped)} positions); "
                             "nothing to measure.")
        notes.append(f"{len(skipped)} of {total} samples skipped: {sum(skipped)} positions hold NaN/Inf hidden states.")
        total -= len(skipped)
    main = summarise(stats[primary], steps=steps)
    notes.extend(filter(None, [collapse_note(main["per_step_acceptance"], counts=main["per_step_counts"]),
                               generation_limit_note([st.generated for st in stats[primary]], steps),
                               rotary_base_note(getattr(model, "written_config", model.config), rotary_base),
                               getattr(getattr(model.mlp, "precision", None), "note", lambda: None)()]))
    summaries = {c: summarise(stats[c], steps=steps) for c in conventions if c in stats}
    by_conv = {c: (summaries[c]["accept_length"] if c in summaries else None) for c in conventions}
    by_conv_k = {c: (tuple(summaries[c]["accept_length_by_steps"]) if c in summaries else None) for c in conventions}
    return AcceptanceResult(
        drafter=model.source, target=tname, source="target" if target is not None else "hidden-states",
        steps=steps, temperature=float(temperature), prompts=total, generated_tokens=main["generated_tokens"],
        cycles=main["cycles"], accept_length=main["accept_length"],
        per_step_acceptance=main["per_step_acceptance"], accept_length_by_steps=main["accept_length_by_steps"],
        aux_convention=primary, aux_indices=tuple(indices[primary]), accept_length_by_convention=by_conv,
        per_prompt_accept_length=main["per_prompt_accept_length"], expected_acceptance=main["expected_acceptance"],
        expected_accept_length=main["expected_accept_length"], accept_length_interval=main["interval"],
        accept_length_by_steps_interval=main["interval_by_steps"], chat_template_sha256=sha, positions=main["positions"], notes=tuple(notes + list(getattr(model, "vocab_notes", ()))),
        prompt_counts=main["prompt_counts"], samples=tuple(kept), accept_length_by_convention_by_steps=by_conv_k,
        cycle_log=main["cycle_log"], cycle_logs=main["cycle_logs"])


_MEASURE_DEFAULTS = _measure_defaults()


def _is_block_drafter(drafter, *, endpoint: str | None = None, timeout: float | None = None) -> bool:
    """Whether ``drafter`` is a block drafter (DFlash, DFlash2, DSpark): a loaded one, or a location (a local folder,
    a Hub repo, HTTP, SSH) whose config.json declares one (:func:`~eaglekit.core.configs.block.block_family`)."""
    from eaglekit.core.configs.block import block_family
    from eaglekit.core.errors import ConfigError, EaglekitError
    from eaglekit.core.safejson import loads
    from eaglekit.io.reader import load_config

    if any(t.__name__ == "DFlashDrafter" for t in type(drafter).__mro__):  # DFlash2 and DSpark drafters inherit it
        return True
    if not isinstance(drafter, (str, os.PathLike)):
        return False
    local = Path(drafter).expanduser()
    try:
        if local.exists():
            config = local / "config.json"
            if not config.is_file() or config.stat().st_size > 16 << 20:
                return False
            return block_family(loads(config.read_bytes(), what=str(config), error=ConfigError)) is not None
        return block_family(load_config(drafter, kind="drafter", endpoint=endpoint, timeout=timeout)) is not None
    except (EaglekitError, OSError):
        return False  # the drafter's own loader says what is wrong with it


def _check_fit(model, *, hidden: int, vocab: int, target: str) -> None:
    if model.target_hidden_size != hidden:
        raise InputError(f"hidden-size mismatch: the drafter reads target hidden states of size "
                         f"{model.target_hidden_size}, {target} has {hidden}.")
    if model.config.vocab_size != vocab:
        raise VocabMapError(f"vocabulary mismatch: the drafter's config says the target vocabulary has "
                            f"{model.config.vocab_size} tokens, {target} has {vocab}.")
    if int(model.draft_to_target.max()) >= vocab:
        raise VocabMapError(f"vocabulary mismatch: the drafter's d2t maps to target id "
                            f"{int(model.draft_to_target.max())}, beyond {target}'s {vocab} tokens.")
