"""Measure a block drafter's accept length offline, cycle by cycle as the authors' decoding loop runs: DFlash and
DFlash2 here (their forwards: eaglekit/analysis/draft/dflash.py, dflash2.py), DSpark with DeepSpec's loop
(:mod:`.block_dspark`).

The loop simulated is the authors' latest greedy one (z-lab/dflash ``dflash/model.py`` ``dflash_generate``; the
older ``spec_generate`` differs only at the end of an output: docs/acceptance.md, "Block drafters"):

* the target's greedy continuation of the prompt is what gets committed (the first token from prefill, no cycle);
* a cycle at ``start`` (the last committed token, at position ``start``) runs the block ``[token at start,
  MASK x (Q - 1)]`` at positions ``start .. start + Q - 1``; the drafter sees the target features of every
  committed position before ``start``; ``Q = min(K + 1, max_length - start)`` (the last blocks shrink to fit
  ``max_new_tokens``);
* it accepts the leading drafts equal to the target's tokens, plus the bonus; what it records is that count
  clipped by the token budget and cut at the first stop token (the end of the target's greedy continuation);
* ``K < block_size - 1`` drafts run a block of ``K + 1``, as vLLM, SGLang and TensorRT-LLM do.

``accept_length`` = generated tokens / cycles pooled over prompts (vLLM's convention: bonus in, prefill token
out) with a bootstrap interval over prompts; ``accept_length_authors`` = the mean over prompts of each prompt's
mean per cycle (z-lab/dflash ``benchmark.py``). Every block of a sequence is drafted in one batched pass: the
context keys of a position do not depend on the cycle that first sees them, so the cycles need not run in turn.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from eaglekit.analysis.acceptance.block_target import (TargetParts, target_parts_from_checkpoint,
                                                       target_parts_from_model)
from eaglekit.analysis.acceptance.result import AcceptanceResult, _local_target
from eaglekit.analysis.acceptance.block_cycles import (SCORE_FLOATS, PromptCycles, block_sizes,  # noqa: F401
                                                       walk_cycles)
from eaglekit.analysis.acceptance.positions import CycleLog
from eaglekit.analysis.draft.block import check_target_fit
from eaglekit.analysis.draft.dflash import DFlashDrafter
from eaglekit.core.acceptance.prompts import Prompt
from eaglekit.core.configs.block import BlockDrafterConfig, read_block_config
from eaglekit.core.errors import ConfigError, InputError
from eaglekit.core.uncertainty import Interval, bootstrap_ratio
from eaglekit.io.reader import open_checkpoint

LOOP = ("the authors' latest greedy loop (z-lab/dflash dflash_generate): the last block shrinks to fit "
        "max_new_tokens, each cycle's count is clipped by the budget and the first stop token")
ESTIMATOR = "cycle simulation of the authors' DFlash loop along the target's greedy continuation"
#: a pass's widest activations (rows x intermediate size, floats): bounds the blocks drafted at once, each weight
#: fetched once a pass (a Kimi-sized drafter: about 900 block rows, 64 MB of float32 per activation)
PASS_FLOATS = 1 << 24


@torch.no_grad()
def prompt_cycles(drafter: DFlashDrafter, parts: TargetParts, tokens: torch.Tensor, features: torch.Tensor,
                  prompt_len: int, *, max_new_tokens: int, steps: int, ctx=None) -> PromptCycles:
    """Draft the block at every offset of one continuation and walk the authors' loop over it: tokens (T,) =
    prompt + greedy continuation, features (T, n_aux * H) in ``target_layer_ids`` order."""
    return sample_cycles(drafter, parts, tokens, features, prompt_len, max_new_tokens=max_new_tokens,
                         steps=(steps,), ctx=ctx)[0]


@torch.no_grad()
def sample_cycles(drafter: DFlashDrafter, parts: TargetParts, tokens: torch.Tensor, features: torch.Tensor,
                  prompt_len: int, *, max_new_tokens: int, steps: Sequence[int], ctx=None) -> list[PromptCycles]:
    """:func:`prompt_cycles` at each K of ``steps``, their blocks drafted together: groups of blocks of one size
    (at most :data:`SCORE_FLOATS` attention scores each) go through the drafter in passes of at most
    :data:`PASS_FLOATS` intermediate activations (:meth:`DFlashDrafter.forward_many`: each weight fetched once a
    pass, read by range when the drafter does not hold it) and the target's head once a pass."""
    T, N = int(tokens.shape[0]), int(prompt_len)
    G = max(T - N - 1, 0)                                    # generated tokens after the prefill token
    matches = {k: np.zeros(G, np.int64) for k in steps}
    conditioned = {k: np.zeros(k, np.int64) for k in steps}
    accepted = {k: np.zeros(k, np.int64) for k in steps}
    if G == 0:
        return [PromptCycles((), 0, matches[k], conditioned[k], accepted[k], N + 1) for k in steps]
    ctx = drafter.context(features) if ctx is None else ctx
    tokens = tokens.to(torch.int64).cpu()
    c = drafter.config
    groups = []                                              # (K, offsets) of B blocks of one size Q
    for k in steps:
        sizes = block_sizes(G, max_new_tokens, k)
        for Q in sorted(set(sizes.tolist())):
            offsets = np.nonzero(sizes == Q)[0]
            chunk = max(1, SCORE_FLOATS // max(1, c.num_attention_heads * Q * (T + Q)))
            groups += [(k, offsets[s:s + chunk]) for s in range(0, len(offsets), chunk)]
    rows_per_pass = max(1, PASS_FLOATS // max(1, c.intermediate_size, c.hidden_size))
    passes, rows = [[]], 0
    for k, off in groups:
        n = len(off) * (int(block_sizes(G, max_new_tokens, k)[off[0]]))
        if passes[-1] and rows + n > rows_per_pass:
            passes.append([])
            rows = 0
        passes[-1].append((k, off))
        rows += n
    for group in passes:
        batch = []
        for k, off in group:
            Q = int(block_sizes(G, max_new_tokens, k)[off[0]])
            off = torch.as_tensor(off)
            starts = N + off                                                                    # (B,)
            block = torch.full((len(off), Q), c.mask_token_id, dtype=torch.int64)
            block[:, 0] = tokens[starts]                                                         # (B, Q)
            batch.append((parts.rows(block, device=drafter.device, dtype=drafter.dtype), starts))  # (B, Q, H)
        hidden = [h[:, 1:] for h in drafter.forward_many(ctx, batch)]                            # (B, Q-1, H)
        for (k, _), (_, starts), h in zip(group, batch, hidden):
            B, Q = h.shape[0], h.shape[1] + 1
            drafts = drafter.propose(h, tokens[starts], parts.head)                              # (B, Q-1)
            idx = starts[:, None] + torch.arange(1, Q)[None, :]                                  # (B, Q-1)
            avail = idx <= T - 1
            expected = torch.where(avail, tokens[idx.clamp(max=T - 1)], torch.full_like(idx, -1))
            m = torch.cumprod((drafts == expected).to(torch.int64), 1).sum(1)                    # (B,)
            matches[k][(starts - N).numpy()] = m.numpy()
            j = torch.arange(1, Q)[None, :]
            conditioned[k][:Q - 1] += ((m[:, None] >= j - 1) & avail).sum(0).numpy()
            accepted[k][:Q - 1] += ((m[:, None] >= j) & avail).sum(0).numpy()
    return [PromptCycles(walk_cycles(matches[k], G), G, matches[k], conditioned[k], accepted[k], N + 1) for k in steps]


def load_block_drafter(location, *, device: str = "cpu", dtype: str = "float32", endpoint: str | None = None,
                       timeout: float | None = None, confidence_threshold: float = 0.0) -> DFlashDrafter:
    """A block drafter eaglekit can run (DFlash, GQA DFlash2, DSpark), or InputError saying why not.
    ``confidence_threshold``: DeepSpec's cut of a DSpark drafter's proposals (0: none)."""
    if isinstance(location, DFlashDrafter):
        if confidence_threshold and confidence_threshold != getattr(location, "confidence_threshold", None):
            raise InputError("a loaded drafter keeps the confidence_threshold it was loaded with: give it to "
                             "DSparkDrafter.load.")
        return location
    ckpt = open_checkpoint(location, endpoint=endpoint, timeout=timeout)
    try:
        if ckpt.inventory.config is None:
            raise ConfigError(f"{ckpt.inventory.source} has no config.json: a block drafter needs its config.")
        config = read_block_config(ckpt.inventory.config, source=f"{ckpt.inventory.source}/config.json")
        if confidence_threshold and config.family != "dspark":
            raise InputError(f"{config.source} is a {config.family_name} drafter: a confidence_threshold cuts DSpark "
                             "proposals only.")
        options = {"confidence_threshold": confidence_threshold} if config.family == "dspark" else {}
        model = drafter_class(config).load(ckpt, device=device, dtype=dtype, **options)
    except BaseException:
        ckpt.close()
        raise
    if model.streamed:
        model.owns_checkpoint = True   # its large matrices are read from it: closed with the drafter
    else:
        ckpt.close()
    return model


def drafter_class(config: BlockDrafterConfig) -> type[DFlashDrafter]:
    """The forward that runs ``config``'s family: DFlash's, DFlash2's (its convolutions and selector) or DSpark's
    (its Markov and confidence heads)."""
    from eaglekit.analysis.draft.dflash2 import DFlash2Drafter
    from eaglekit.analysis.draft.dspark import DSparkDrafter

    return {"dflash": DFlashDrafter, "dflash2": DFlash2Drafter, "dspark": DSparkDrafter}[config.family]


def _summary(counts: Sequence[tuple[int, int]]) -> tuple[float, Interval | None]:
    tokens, cycles = [t for t, _ in counts], [c for _, c in counts]
    if not sum(cycles):
        return float("nan"), None
    return sum(tokens) / sum(cycles), bootstrap_ratio(tokens, cycles, seed=0, unit="prompts")


def _samples_from_target(tmodel, plist, ids_list, psource, *, layers, max_new_tokens) -> Iterator[tuple]:
    for p, ids in zip(plist, ids_list):
        s = tmodel.run(ids, max_new_tokens=max_new_tokens, layers=layers, where=f"{psource} line {p.line}")
        yield s.input_ids, s.hidden_states, s.prompt_len


def measure_block(drafter, *, target=None, hidden_states=None, prompts=None, max_new_tokens: int = 64,
                  steps: int | None = None, temperature: float = 0.0, aux_convention=None, device: str = "cpu",
                  dtype: str = "float32", embeddings=None, endpoint: str | None = None,
                  timeout: float | None = None, progress: bool | None = None, keep_samples: bool = False,
                  trust_remote_code: bool = False, on_sample=None,
                  confidence_threshold: float = 0.0) -> AcceptanceResult:
    """A DFlash drafter's accept length against ``target`` on ``prompts``, or against a hidden-state dump
    (:func:`~eaglekit.analysis.acceptance.measure.measure_acceptance` sends block drafters here). ``steps``: drafts
    per block K (default ``block_size - 1``); every K = 1..steps is measured with its own block of K + 1. A
    drafter given as a location is loaded here (its large matrices read by range when it is past
    :data:`~eaglekit.analysis.draft.dflash.KEEP_BYTES`) and closed at the end."""
    if (target is None) == (hidden_states is None):
        raise InputError("give exactly one of target (a model transformers loads) or hidden_states (a dump folder).")
    if temperature:
        raise InputError("temperature > 0 is not measured for block drafters yet (the authors' newer loop samples "
                         "drafts and applies rejection sampling, which eaglekit does not simulate); measure at 0.")
    if aux_convention not in (None, "outputs"):
        raise InputError("DFlash reads target layer OUTPUTS (hidden_states[id + 1], the authors' "
                         "extract_context_feature); --aux-convention inputs does not apply.")
    if on_sample is not None:
        raise InputError("tree drafts and per-sample hooks are EAGLE-3 measurements; a block drafter drafts blocks.")
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
        raise InputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}.")
    model = load_block_drafter(drafter, device=device, dtype=dtype, endpoint=endpoint, timeout=timeout,
                               confidence_threshold=confidence_threshold)
    try:
        return _measure(model, target=target, hidden_states=hidden_states, prompts=prompts,
                        max_new_tokens=max_new_tokens, steps=steps, device=device, dtype=dtype, embeddings=embeddings,
                        endpoint=endpoint, timeout=timeout, progress=progress, keep_samples=keep_samples,
                        trust_remote_code=trust_remote_code)
    finally:
        if model is not drafter:
            model.close()   # a drafter loaded here: the checkpoint its large matrices are read from


def _measure(model: DFlashDrafter, *, target, hidden_states, prompts, max_new_tokens, steps, device, dtype, embeddings,
             endpoint, timeout, progress, keep_samples, trust_remote_code) -> AcceptanceResult:
    from tqdm.auto import tqdm

    from eaglekit.analysis.acceptance.target import TargetModel, load_target_model, prompt_records
    from eaglekit.io.dumps.native import HiddenStateDump, open_dump

    c = model.config
    most = c.drafts_per_block
    steps = most if steps is None else steps
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= most:
        raise InputError(f"steps (drafts per block) must be from 1 to "
                         f"{'block_size' if c.anchor_drafts else 'block_size - 1'} = {most} for {c.source}, "
                         f"got {steps!r}.")
    layers = list(c.hidden_state_indices())
    dspark = model.family == "dspark"   # DeepSpec's loop: eaglekit/analysis/acceptance/block_dspark.py
    extra = steps + 1 if dspark else 0  # its last cycle verifies past the budget
    notes = [f"simulated: {LOOP}.",
             f"K < {c.block_size - 1} drafts are measured with a block of K + 1 (anchor + K masks), as vLLM, SGLang "
             "and TensorRT-LLM run a DFlash drafter asked for fewer drafts."]
    if dspark:
        from eaglekit.analysis.acceptance.block_dspark import LOOP as DSPARK_LOOP, dspark_cycles

        notes = [f"simulated: {DSPARK_LOOP}; accept_length_authors is DeepSpec's pooled figure.",
                 f"K < {most} drafts are measured with a block of {'K' if c.anchor_drafts else 'K + 1'} slots."]
        if getattr(model, "confidence_threshold", 0.0):
            notes.append(f"proposals cut at the first slot of confidence below {model.confidence_threshold}.")
    sha = None
    if target is not None:
        if prompts is None:
            raise InputError("measuring against a target needs prompts (a JSONL file).")
        tmodel = target if isinstance(target, TargetModel) else load_target_model(
            target, device=device, dtype=dtype, trust_remote_code=trust_remote_code)
        check_target_fit(c, num_layers=tmodel.num_hidden_layers, hidden=tmodel.hidden_size, vocab=tmodel.vocab_size,
                         target=tmodel.name)
        plist, psource = prompt_records(prompts)
        ids_list = tmodel.tokenize_all(plist, source=psource, max_new_tokens=max_new_tokens)
        parts = target_parts_from_model(tmodel.model, name=tmodel.name)
        samples = _samples_from_target(tmodel, plist, ids_list, psource, layers=layers,
                                       max_new_tokens=max_new_tokens + extra)
        eos = tmodel.model.generation_config.eos_token_id
        stop_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        total, tname, source = len(plist), tmodel.name, "target"
        sha = tmodel.chat_template_sha256 if any(p.kind == "messages" for p in plist) else None
    else:
        if dspark:
            raise InputError(f"{c.source} is a DSpark drafter: DeepSpec's loop verifies past max_new_tokens and stops "
                             "at the target's stop tokens, which a dump does not hold; measure it with --target.")
        dump = hidden_states if isinstance(hidden_states, HiddenStateDump) else open_dump(hidden_states)
        m = dump.manifest
        tname, source, total, sha = m.target or str(dump.path), "hidden-states", len(dump), m.chat_template_sha256
        check_target_fit(c, num_layers=m.num_hidden_layers, hidden=m.hidden_size, vocab=m.vocab_size, target=tname)
        missing = [k for k in layers if k not in dump.layers]
        if missing:
            raise InputError(f"{dump.path} holds hidden states {list(dump.layers)} but {c.source} reads {layers} "
                             "(target layer outputs, id + 1); re-dump with `eaglekit dump-hidden ... --for-drafter "
                             "DRAFTER`.")
        where = embeddings if embeddings is not None else (_local_target(m.target, Path(dump.path)) if m.target
                                                          else None)
        if where is None:
            raise InputError(f"a DFlash drafter drafts through its target's embedding and lm_head, and {dump.path}'s "
                             "target is not a local folder here: give the target checkpoint with --embeddings.")
        parts = target_parts_from_checkpoint(where, vocab_size=m.vocab_size, hidden_size=m.hidden_size,
                                             endpoint=endpoint, timeout=timeout)
        pos = {k: i for i, k in enumerate(dump.layers)}
        samples = ((torch.as_tensor(np.array(s.input_ids)), torch.as_tensor(np.array(s.hidden_states))[
            [pos[k] for k in layers]], s.prompt_len) for s in dump)
        notes.append(f"the last blocks shrink to fit max_new_tokens = {max_new_tokens} as given: a dump does not "
                     "record the budget it was written with, so give the same --max-new-tokens.")
    by_k: list[list[PromptCycles]] = [[] for _ in range(steps)]
    kept = []
    try:
        for ids, hs, plen in tqdm(samples, total=total, desc="acceptance", unit="prompt",
                                  disable=None if progress is None else not progress, leave=False):
            T = int(ids.shape[0])
            if T - plen > max_new_tokens + extra:
                raise InputError(f"a sample continues for {T - plen} tokens after its prompt, more than "
                                 f"max_new_tokens = {max_new_tokens}: give the budget it was generated with.")
            if int(ids.max()) >= parts.vocab_size:
                raise InputError(f"token id {int(ids.max())} is outside {tname}'s vocabulary (0..{parts.vocab_size - 1}).")
            features = hs.permute(1, 0, 2).reshape(T, -1)                  # (T, n_aux * H), target_layer_ids order
            run = (dspark_cycles(model, parts, ids, features, plen, max_new_tokens=max_new_tokens,
                                 steps=range(1, steps + 1), stop_ids=stop_ids) if dspark else
                   sample_cycles(model, parts, ids, features, plen, max_new_tokens=max_new_tokens,
                                 steps=range(1, steps + 1)))
            for k, cycles in enumerate(run, 1):
                by_k[k - 1].append(cycles)
            if keep_samples:
                kept.append((np.asarray(ids[plen:].cpu()), by_k[-1][-1].matches))
    finally:
        parts.close()
    return _result(model, by_k, steps=steps, tname=tname, source=source, layers=layers, notes=notes, sha=sha,
                   kept=kept)


def _result(model: DFlashDrafter, by_k, *, steps, tname, source, layers, notes, sha, kept) -> AcceptanceResult:
    full = by_k[-1]
    counts_k = [tuple((p.generated, len(p.cycles)) for p in ps) for ps in by_k]
    figures = [_summary(ck) for ck in counts_k]
    value, interval = figures[-1]
    cond = np.sum([p.conditioned for p in full], axis=0) if full else np.zeros(steps)
    acc = np.sum([p.accepted for p in full], axis=0) if full else np.zeros(steps)
    means = [float(np.mean(p.cycles)) for p in full if p.cycles]
    if model.family == "dspark":  # DeepSpec's figure: acceptance_length_sum / proposal_count, pooled
        means = [value] if full and any(p.cycles for p in full) else []
    by_steps = tuple(v for v, _ in figures)
    return AcceptanceResult(
        drafter=model.source, target=tname, source=source, steps=steps, temperature=0.0, prompts=len(full),
        generated_tokens=sum(p.generated for p in full), cycles=sum(len(p.cycles) for p in full),
        accept_length=value, per_step_acceptance=tuple(float(a / n) if n else None for a, n in zip(acc, cond)),
        accept_length_by_steps=by_steps, aux_convention="outputs", aux_indices=tuple(layers),
        accept_length_by_convention={"outputs": value, "inputs": None},
        per_prompt_accept_length=tuple((p.generated / len(p.cycles)) if p.cycles else None for p in full),
        chat_template_sha256=sha, positions=sum(p.generated for p in full), notes=tuple(notes),
        accept_length_interval=interval, prompt_counts=counts_k[-1],
        accept_length_by_steps_interval=tuple(i for _, i in figures), samples=tuple(kept), estimator=ESTIMATOR,
        accept_length_by_convention_by_steps={"outputs": by_steps, "inputs": None}, family=model.family,
        block_size=model.config.block_size, accept_length_authors=float(np.mean(means)) if means else None,
        block_cycles=tuple(p.cycles for p in full),
        cycle_log=CycleLog.from_rows((row for r, p in enumerate(full) for row in p.rows(r, steps)), steps))
