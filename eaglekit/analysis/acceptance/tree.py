"""Tree drafts (EAGLE-2/3 dynamic trees) drafted from every position at once, and their accepted depth.

The tree, as SafeAILab/EAGLE ``eagle/model/cnets.py`` ``Model.topK_genrate`` and SGLang
``eagle_worker.py`` ``draft_forward`` / ``select_top_k_tokens`` / ``organize_draft_results`` build it,
with SGLang's names (``--speculative-num-steps s --speculative-eagle-topk k
--speculative-num-draft-tokens n``; EAGLE: ``depth = s - 1``, ``top_k = k``, ``total_token = n``):

* the root is the last token the target produced: verified, never drafted; it is one of the ``n``;
* level 1: the k best draft tokens of the drafter's pass at the base (chain step 1), score = log p;
* each further pass (s - 1 of them) feeds the k frontier nodes (entry: the parent pass's pre-norm
  hidden state ``g`` and the node's token, at RoPE position ``t + level``) and gives each its k best
  children, score = parent's score + log p; all k^2 children join the pool, the k best by score are
  the next frontier. Pool size: ``k + (s - 1) k^2``;
* the ``n - 1`` pool nodes with the best scores (``torch.topk``, as both engines) are verified with the
  root. Greedy: the accepted depth is the length of the longest root-to-node path of verified nodes whose
  tokens equal the target's tokens ``t + 1, t + 2, ...`` (siblings hold distinct tokens, so the path is
  unique).

Attention of a frontier node's pass (``attention``):

* ``"ancestors"`` (EAGLE's tree mask): the prefix ``0..t`` and the entries of its true ancestors;
* ``"sglang-slots"`` (SGLang's draft KV, one slot per branch: ``generate_draft_decode_kv_indices``
  gives branch ``j`` the prefix and slot ``j``'s entries of every earlier pass): after a frontier
  re-selection slot ``j`` holds another lineage's earlier entries, so from level 3 on the drafter can
  draft other tokens.

With ``topk = 1`` both are the chain of :meth:`~eaglekit.analysis.draft.frame.DraftModel.draft`,
computed with the same operations in the same order, so the figures are the chain's exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from eaglekit.analysis.acceptance.measure import SampleStats
from eaglekit.core.errors import InputError

TreeAttention = Literal["ancestors", "sglang-slots"]
TREE_ATTENTIONS: tuple[str, ...] = ("ancestors", "sglang-slots")
#: the largest top-k and grid eaglekit drafts (k^2 rows per node and per configuration add up fast)
MAX_TOPK = 32
MAX_STEPS = 64
MAX_GRID = 32
#: bound on the logits held at once: rows x draft vocabulary floats
LOGIT_BUDGET = 2 ** 25
#: bound on one sequence's tree search: drafted nodes per position (the pool, k + (s - 1) k^2) x positions drafted
#: from. 6:10:60 (a pool of 510) drafts from 16,000 positions of a sequence within it; the largest pool (64 steps
#: of top-32, 64,544 nodes) from 129; past it a sequence is one line, not minutes and gigabytes of pools
MAX_TREE_WORK = 2 ** 23


@dataclass(frozen=True)
class TreeConfig:
    """One tree: ``steps`` drafter passes, ``topk`` children per node, ``draft_tokens`` verified (root
    included)."""

    steps: int
    topk: int
    draft_tokens: int

    @property
    def pool_size(self) -> int:
        return self.topk + (self.steps - 1) * self.topk ** 2

    @property
    def label(self) -> str:
        return f"{self.steps}:{self.topk}:{self.draft_tokens}"


def tree_config(steps, topk, draft_tokens) -> TreeConfig:
    """Check one configuration; one line saying what is wrong otherwise."""
    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not whole(steps) or not 1 <= steps <= MAX_STEPS:
        raise InputError(f"steps must be an integer from 1 to {MAX_STEPS}, got {steps!r}.")
    if not whole(topk) or not 1 <= topk <= MAX_TOPK:
        raise InputError(f"topk must be an integer from 1 to {MAX_TOPK} (1 is the chain), got {topk!r}.")
    if not whole(draft_tokens) or draft_tokens < 2:
        raise InputError(f"draft tokens must be an integer >= 2 (the root plus at least one drafted token), "
                         f"got {draft_tokens!r}.")
    cfg = TreeConfig(steps, topk, draft_tokens)
    if draft_tokens - 1 > cfg.pool_size:
        raise InputError(f"draft tokens {draft_tokens} verify {draft_tokens - 1} drafted nodes, but steps {steps} and "
                         f"topk {topk} draft only {cfg.pool_size} (k + (s-1)k^2); give at most "
                         f"{cfg.pool_size + 1} draft tokens.")
    return cfg


def parse_tree_grid(text: str) -> tuple[TreeConfig, ...]:
    """``"6:10:60,4:8:32"`` -> configurations (steps:topk:draft_tokens), duplicates refused."""
    return tree_configs([s.strip() for s in str(text).split(",") if s.strip()])


def tree_configs(trees) -> tuple[TreeConfig, ...]:
    """Configurations from ``"S:K:N,..."``, or a list of ``"S:K:N"`` strings, TreeConfig records or (s, k, n)."""
    if isinstance(trees, str):
        return parse_tree_grid(trees)
    items = list(trees)
    if not items:
        raise InputError("no tree configuration given: STEPS:TOPK:DRAFT_TOKENS,... e.g. 6:10:60,4:8:32.")
    if len(items) > MAX_GRID:
        raise InputError(f"{len(items):,} tree configurations given; at most {MAX_GRID} are measured in one run.")
    out = []
    for t in items:
        if isinstance(t, TreeConfig):
            t = (t.steps, t.topk, t.draft_tokens)
        elif isinstance(t, str):
            parts = t.split(":")
            # ASCII digits, six at most: a superscript is a "digit" int() refuses, 5,000 digits are past its limit
            if len(parts) != 3 or not all(re.fullmatch(r"[0-9]{1,6}", p.strip()) for p in parts):
                shown = t if len(t) <= 40 else t[:40] + "..."
                raise InputError(f"tree configuration {shown!r} is not STEPS:TOPK:DRAFT_TOKENS (three whole numbers "
                                 "of at most six ASCII digits).")
            t = tuple(int(p) for p in parts)
        if not isinstance(t, (tuple, list)) or len(t) != 3:
            raise InputError(f"a tree configuration is 'S:K:N' or (steps, topk, draft_tokens), got {t!r}.")
        out.append(tree_config(*t))
    if len(set(out)) != len(out):
        raise InputError("a tree configuration is listed twice; give each once.")
    return tuple(out)


def check_attention(attention: str) -> None:
    if attention not in TREE_ATTENTIONS:
        raise InputError(f"tree attention must be 'ancestors' (EAGLE) or 'sglang-slots' (SGLang), got {attention!r}.")


# -- drafting ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TreePool:
    """Every pool node of the trees drafted from ``n`` bases with one ``topk`` over ``steps`` levels, level
    by level in EAGLE's order (level 1: k nodes; each further level: the k^2 children of the k frontier
    nodes, parent slot ``c // k``, rank ``c % k``)."""

    tokens: torch.Tensor        # (n, P) int64 target ids
    scores: torch.Tensor        # (n, P) float32 cumulative log p
    parents: torch.Tensor       # (n, P) int64 pool index of the parent, -1 for the root
    level: torch.Tensor         # (P,) int64, 1..steps
    rank: torch.Tensor          # (P,) int64, the child's rank under its parent (0: the parent's best child)


def level_bounds(topk: int, level: int) -> tuple[int, int]:
    """Pool index range [lo, hi) of a level."""
    if level == 1:
        return 0, topk
    lo = topk + (level - 2) * topk ** 2
    return lo, lo + topk ** 2


def _layout(topk: int, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    level = [torch.ones(topk, dtype=torch.int64)]
    rank = [torch.arange(topk)]
    for L in range(2, steps + 1):
        level.append(torch.full((topk ** 2,), L, dtype=torch.int64))
        rank.append(torch.arange(topk ** 2) % topk)
    return torch.cat(level), torch.cat(rank)


def _top_children(model, out: torch.Tensor, k: int):
    """The k best draft rows of each head input ``norm(g)`` (R, H): target ids (R, k) and log p (R, k). Ranked
    on the logits themselves (the order of log_softmax without its rounding ties); k = 1 is the chain's argmax.
    A head too large to keep is streamed (the drafter's :class:`~eaglekit.analysis.draft.head.DraftHead`)."""
    idx, logp = model.head.top(out, k)
    return model.draft_to_target[idx], logp


@dataclass
class _FirstPass:
    """The drafter's pass at every base (chain step 1), shared by every tree of a grid."""

    h: torch.Tensor        # (n, H) the bases' features
    g: torch.Tensor        # (n, H) the pass's pre-norm output: level-1 nodes' entry hidden state
    out: torch.Tensor      # (n, H) the head's input norm(g)
    k1: torch.Tensor       # (nh, T, dq) prefix keys
    v1: torch.Tensor
    pos: torch.Tensor      # (n,) base positions


@torch.no_grad()
def first_pass(model, h: torch.Tensor, next_ids: torch.Tensor, *, start: int = 0) -> _FirstPass:
    """Chain step 1 from bases start..T-1 (the same operations as :meth:`DraftModel.chain`)."""
    q, k1, v1, hb, _, pos = model.prefix(h, next_ids, start=start)
    attn = model.attend(q, k1, v1, pos, [], [])
    g, out = model.finish(hb, attn)
    return _FirstPass(hb, g, out, k1, v1, pos)


@torch.no_grad()
def grow_trees(model, fp: _FirstPass, *, topk: int, steps: int, attention: TreeAttention = "ancestors",
               bases: slice | None = None) -> TreePool:
    """The pools of the trees from the bases ``bases`` of a first pass: one batched pass per level over
    every base's k frontier nodes (k x (steps - 1) drafter rows per base after the first pass)."""
    check_attention(attention)
    sl = bases or slice(0, fp.pos.shape[0])
    pos0 = fp.pos[sl]
    n, k = pos0.shape[0], topk
    H = fp.g.shape[1]
    tok1, lp1 = _top_children(model, fp.out[sl], k)                         # (n, k)
    tokens, scores = [tok1], [lp1]
    parents = [torch.full((n, k), -1, dtype=torch.int64, device=tok1.device)]
    ftok, fscore = tok1, lp1                                                   # the frontier (n, k)
    fpool = torch.arange(k, device=tok1.device).expand(n, k)
    fh = fp.g[sl][:, None, :].expand(n, k, H)                                  # entry hidden state per node
    anc = torch.empty(n, k, 0, dtype=torch.int64, device=tok1.device)         # slot of the entry per earlier pass
    tree_k: list[torch.Tensor] = []
    tree_v: list[torch.Tensor] = []
    rows_pos_base = pos0.repeat_interleave(k)
    for L in range(2, steps + 1):
        rows_h = fh.reshape(n * k, H)
        q, kL, vL = model.entries(rows_h, ftok.reshape(n * k), rows_pos_base + (L - 1))  # (nh, n*k, d)
        tree_k.append(kL)
        tree_v.append(vL)
        own_k, own_v = _own_entries(tree_k, tree_v, anc, n, k)
        attn = model.attend(q, fp.k1, fp.v1, rows_pos_base, own_k, own_v, rows_per_base=k)
        g, out = model.finish(rows_h, attn)                                   # (n*k, H) each
        ctok, clp = _top_children(model, out, k)                              # (n*k, k)
        cu = fscore[:, :, None] + clp.view(n, k, k)                            # (n, k, k)
        lo, _ = level_bounds(k, L)
        tokens.append(ctok.view(n, k * k))
        scores.append(cu.view(n, k * k))
        parents.append(fpool.repeat_interleave(k, dim=1))
        if L == steps:
            break
        if k == 1:
            cs = torch.zeros(n, 1, dtype=torch.int64, device=cu.device)
        else:
            cs = torch.topk(cu.view(n, k * k), k, dim=-1).indices             # (n, k) the next frontier
        slot = cs // k                                                         # the parent's slot
        ftok = ctok.view(n, k * k).gather(1, cs)
        fscore = cu.view(n, k * k).gather(1, cs)
        fpool = lo + cs
        fh = g.view(n, k, H).gather(1, slot[:, :, None].expand(n, k, H))
        if attention == "ancestors":
            anc = torch.cat([anc.gather(1, slot[:, :, None].expand(n, k, anc.shape[2])), slot[:, :, None]], 2)
        else:                                                                  # slot j keeps slot j's entries
            anc = torch.arange(k, device=cu.device).view(1, k, 1).expand(n, k, L - 1)
    level, rank = _layout(k, steps)
    return TreePool(torch.cat(tokens, 1).cpu(), torch.cat(scores, 1).float().cpu(), torch.cat(parents, 1).cpu(),
                    level, rank)


def _own_entries(tree_k, tree_v, anc, n: int, k: int):
    """Each row's tree entries: per earlier pass the entry of slot ``anc[:, :, p]``, then its own."""
    own_k, own_v = [], []
    for p in range(anc.shape[2]):
        idx = (anc[:, :, p] + torch.arange(n, device=anc.device)[:, None] * k).reshape(-1)   # (n*k,) row index
        own_k.append(tree_k[p].index_select(1, idx))
        own_v.append(tree_v[p].index_select(1, idx))
    own_k.append(tree_k[-1])
    own_v.append(tree_v[-1])
    return own_k, own_v


# -- verifying -----------------------------------------------------------------------------------------
def select_nodes(pool: TreePool, config: TreeConfig) -> torch.Tensor:
    """The ``n - 1`` verified nodes of each tree: (bases, P_s) bool over the pool's levels 1..steps."""
    P = config.pool_size
    scores = pool.scores[:, :P]
    top = torch.topk(scores, config.draft_tokens - 1, dim=-1).indices
    chosen = torch.zeros_like(scores, dtype=torch.bool)
    chosen.scatter_(1, top, True)
    return chosen


@dataclass(frozen=True)
class TreeVerdict:
    """Per base: the accepted depth, whether the accepted path left a first child, and at temperature > 0
    the probability of accepting some child of the greedy path's node at each depth."""

    depth: np.ndarray          # (n,) int64
    left_first: np.ndarray     # (n,) bool
    soft: np.ndarray | None    # (steps, n)


def verify_greedy(pool: TreePool, config: TreeConfig, expected: torch.Tensor, *, target_probs=None) -> TreeVerdict:
    """Accepted depth of every base's tree against ``expected`` (steps, n): the target's tokens at depth
    1..steps, -1 where none exists. ``target_probs(depth_index, base_index, tokens)`` -> probabilities of
    those tokens under the target's distribution at that depth (temperature > 0)."""
    s = config.steps
    chosen = select_nodes(pool, config)                                       # (n, P)
    n = chosen.shape[0]
    accepted = torch.zeros_like(chosen)
    left = torch.zeros(n, dtype=torch.bool)
    depth = torch.zeros(n, dtype=torch.int64)
    soft = np.zeros((s, n)) if target_probs is not None else None
    rank = pool.rank
    for L in range(1, s + 1):
        lo, hi = level_bounds(config.topk, L)
        if L == 1:
            par_ok = torch.ones(n, hi - lo, dtype=torch.bool)
        else:
            par_ok = accepted.gather(1, pool.parents[:, lo:hi])
        live = chosen[:, lo:hi] & par_ok                                      # verified children of the greedy node
        if soft is not None:
            bases = live.any(1).nonzero().flatten()
            if len(bases):
                p = target_probs(L - 1, bases, pool.tokens[bases, lo:hi])     # (m, width)
                soft[L - 1, bases.numpy()] = (p * live[bases].to(p.dtype)).sum(1).double().numpy()
        ok = live & (pool.tokens[:, lo:hi] == expected[L - 1][:, None]) & (expected[L - 1][:, None] >= 0)
        accepted[:, lo:hi] = ok
        hit = ok.any(1)
        depth += hit.to(torch.int64)
        left |= (ok & (rank[lo:hi] > 0)[None, :]).any(1)
        if not hit.any():
            break
    return TreeVerdict(depth.numpy(), left.numpy(), soft)


# -- one sequence, a grid of configurations ------------------------------------------------------------
@torch.no_grad()
def tree_sample_stats(model, aux, input_ids, target_ids, prompt_len: int | None, configs: Sequence[TreeConfig], *,
                      attention: TreeAttention = "ancestors", temperature: float = 0.0, target_logits=None,
                      spans: Sequence[tuple[int, int]] | None = None) -> dict[TreeConfig, list]:
    """Draft trees from every continuation position of one sequence for every configuration (sharing the
    first pass, and one tree growth per top-k up to its deepest configuration) and count accepted depths.

    Returns ``{config: [(SampleStats, left_first (G,) bool), ...]}``: one entry for the continuation after
    ``prompt_len``, or one per span ``[a, b]`` of ``spans`` (greedy-consistent spans, cut as
    :mod:`~eaglekit.analysis.acceptance.spans` cuts them: bases ``a - 1 .. b - 2``, tokens compared up to
    ``b - 1``). ``target_logits`` (T, V): the target's logits, for temperature > 0."""
    T = int(input_ids.shape[0])
    if spans is None:
        if T - prompt_len - 1 <= 0:                     # nothing generated after prefill: zero counts
            return {c: [(_empty(c.steps, temperature), np.zeros(0, bool))] for c in configs}
        spans = [(prompt_len, T - 1)]
    spans = [(a, b) for a, b in spans if b - a >= 1]
    out: dict[TreeConfig, list] = {c: [] for c in configs}
    if not spans:
        return out
    start = spans[0][0] - 1
    check_tree_work(configs, T - 1 - start)
    fp = first_pass(model, model.project(aux)[:T - 1], input_ids[1:], start=start)
    pools = {k: _grow_all(model, fp, k, max(c.steps for c in configs if c.topk == k), attention)
             for k in dict.fromkeys(c.topk for c in configs)}
    tgt = target_ids.cpu().to(torch.int64)
    for c in configs:
        pool = pools[c.topk]
        jj = torch.arange(1, c.steps + 1)[:, None]
        for a, b in spans:
            bases = torch.arange(a - 1, b - 1)                                  # (G,)
            cols = bases - start
            idx = bases[None, :] + jj                                           # (s, G): t + d
            avail = idx <= b - 1
            expected = torch.where(avail, tgt[idx.clamp(max=len(tgt) - 1)], torch.full_like(idx, -1))
            probs = None
            if temperature > 0:
                def probs(d, sel, toks, idx=idx):
                    rows = target_logits[idx[d, sel].clamp(max=T - 1)].float() / temperature   # (m, V)
                    return torch.softmax(rows, -1).gather(1, toks)
            sub = TreePool(pool.tokens[cols], pool.scores[cols], pool.parents[cols], pool.level, pool.rank)
            v = verify_greedy(sub, c, expected, target_probs=probs)
            m = torch.from_numpy(v.depth)
            reached = (m[None, :] >= jj - 1) & avail
            acc = (m[None, :] >= jj) & avail
            soft = None if v.soft is None else np.where(reached.numpy(), v.soft, 0.0)
            out[c].append((SampleStats(v.depth, len(bases), reached.sum(1).numpy(), acc.sum(1).numpy(),
                                       None if soft is None else soft.sum(1), soft, base=a - 1), v.left_first))
    return out


def check_tree_work(configs: Sequence[TreeConfig], positions: int) -> None:
    """One line where growing ``configs``' pools from ``positions`` positions of one sequence passes
    :data:`MAX_TREE_WORK` drafted nodes (each top-k grows once, to its deepest configuration)."""
    deepest: dict[int, TreeConfig] = {}
    for c in configs:
        if c.topk not in deepest or c.steps > deepest[c.topk].steps:
            deepest[c.topk] = c
    for c in deepest.values():
        if c.pool_size * positions > MAX_TREE_WORK:
            raise InputError(f"tree {c.label} drafts {c.pool_size:,} nodes from each of a sequence's {positions:,} "
                             f"positions, {c.pool_size * positions:,} in all, past the {MAX_TREE_WORK:,} one sequence "
                             f"may take; give fewer steps or a smaller topk (at most "
                             f"{max(MAX_TREE_WORK // c.pool_size, 1):,} positions at this pool), or shorter sequences.")


def _grow_all(model, fp: _FirstPass, k: int, steps: int, attention: TreeAttention) -> TreePool:
    """Every base's pool for one top-k, grown in chunks of bases that bound the logits held at once."""
    n = fp.pos.shape[0]
    chunk = max(1, LOGIT_BUDGET // max(1, model.draft_rows * k))
    parts = [grow_trees(model, fp, topk=k, steps=steps, attention=attention, bases=slice(c0, min(n, c0 + chunk)))
             for c0 in range(0, n, chunk)]
    if len(parts) == 1:
        return parts[0]
    return TreePool(torch.cat([p.tokens for p in parts]), torch.cat([p.scores for p in parts]),
                    torch.cat([p.parents for p in parts]), parts[0].level, parts[0].rank)


def _empty(steps: int, temperature: float):
    z = np.zeros(steps, np.int64)
    return SampleStats(np.zeros(0, np.int64), 0, z, z.copy(), np.zeros(steps) if temperature > 0 else None,
                       np.zeros((steps, 0)) if temperature > 0 else None)
