"""Tree drafts against a slow reference written from the definition: tree by tree, node by node, each node's
drafter pass recomputed over its whole context (prefix + the entries it attends to) with plain causal
attention; the pool, the verified nodes and the accepted depth compared with the batched pass, for several
(steps, topk, draft tokens) and both attention readings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eaglekit.analysis.draft import DraftModel
from eaglekit.analysis.acceptance.tree import TreeConfig, first_pass, grow_trees, tree_sample_stats, verify_greedy
from test_draft_model import HT, N, V, _layer_ref, _rms, make_drafter


class Node:
    def __init__(self, token, score, parent, level, rank, entry_h):
        self.token, self.score, self.parent, self.level, self.rank, self.entry_h = (
            token, score, parent, level, rank, entry_h)
        self.hist: list = []


def reference_tree(t, h, next_ids, base, steps, k, attention):
    """The pool of the tree drafted at ``base``, in EAGLE's order, from the definition."""
    p = "midlayer."
    emb = t["embed_tokens.weight"]
    targets = torch.arange(N) + t["d2t"]
    prefix = [(h[i], next_ids[i], i) for i in range(base + 1)]

    def run(entries):
        hs = torch.stack([e[0] for e in entries])
        es = emb[torch.stack([torch.as_tensor(e[1]) for e in entries])]
        g, logits = _layer_ref(t, p, hs, es, [e[2] for e in entries])
        return g[-1], torch.log_softmax(logits[-1], -1)

    g, lp = run(prefix)
    top = torch.topk(lp, k)
    frontier = [Node(int(targets[i]), float(v), None, 1, r, g) for r, (v, i) in enumerate(zip(top.values, top.indices))]
    pool = list(frontier)
    for L in range(2, steps + 1):
        entries = [(node.entry_h, torch.tensor(node.token), base + L - 1) for node in frontier]
        children = []
        for j, node in enumerate(frontier):
            g, lp = run(prefix + node.hist + [entries[j]])
            top = torch.topk(lp, k)
            for r, (v, i) in enumerate(zip(top.values, top.indices)):
                child = Node(int(targets[i]), node.score + float(v), node, L, r, g)
                child.slot = j
                children.append(child)
        pool.extend(children)
        if L == steps:
            break
        order = sorted(range(len(children)), key=lambda c: -children[c].score)[:k]
        new = []
        for j2, c in enumerate(order):
            child = children[c]
            if attention == "ancestors":
                child.hist = child.parent.hist + [entries[child.slot]]
            else:                                   # slot j2 keeps what slot j2 wrote before, then its new entry
                child.hist = frontier[j2].hist + [entries[j2]]
            new.append(child)
        frontier = new
    return pool


def reference_depth(pool, n, expected):
    """Greedy: the longest path of the n - 1 best-scoring nodes matching ``expected`` (depth 1, 2, ...)."""
    chosen = set(sorted(range(len(pool)), key=lambda i: -pool[i].score)[:n - 1])
    node, depth, left = None, 0, False
    while depth < len(expected):
        nxt = [pool[i] for i in chosen if pool[i].parent is node and pool[i].token == expected[depth]]
        if not nxt or expected[depth] < 0:
            break
        node = nxt[0]
        left |= node.rank > 0
        depth += 1
    return depth, left


@pytest.mark.parametrize("attention", ["ancestors", "sglang-slots"])
@pytest.mark.parametrize("steps,topk,draft_tokens", [(3, 2, 6), (4, 3, 12), (4, 2, 11), (2, 4, 20), (3, 1, 4)])
def test_batched_trees_equal_the_reference(attention, steps, topk, draft_tokens):
    cfg, t = make_drafter(seed=1)
    model = DraftModel.from_tensors(cfg, t)
    g = torch.Generator().manual_seed(7)
    T, P = 12, 4
    aux = torch.randn(3, T, HT, generator=g)
    input_ids = torch.randint(0, V, (T,), generator=g)
    h = model.project(aux)
    fp = first_pass(model, h[:T - 1], input_ids[1:], start=P - 1)
    pool = grow_trees(model, fp, topk=topk, steps=steps, attention=attention)
    config = TreeConfig(steps, topk, draft_tokens)
    # target tokens that follow a tree path now and then: walk the reference tree of every third base
    target_ids = torch.randint(0, V, (T,), generator=g)
    refs = {}
    rng = np.random.default_rng(0)
    for base in range(P - 1, T - 1):
        refs[base] = reference_tree(t, h.detach(), input_ids[1:], base, steps, topk, attention)
    for base in range(P - 1, T - 1, 3):
        node = None
        for d in range(1, steps + 1):
            kids = [x for x in refs[base] if x.parent is node]
            if not kids or base + d > T - 1:
                break
            node = kids[int(rng.integers(0, len(kids)))] if d > 1 or rng.random() < 0.5 else kids[-1]
            target_ids[base + d] = node.token
    seen_depth = seen_left = 0
    for col, base in enumerate(range(P - 1, T - 1)):
        ref = refs[base]
        assert pool.tokens[col].tolist() == [x.token for x in ref]
        np.testing.assert_allclose(pool.scores[col].numpy(), [x.score for x in ref], rtol=1e-4, atol=1e-4)
        parents = [-1 if x.parent is None else next(i for i, y in enumerate(ref) if y is x.parent) for x in ref]
        assert pool.parents[col].tolist() == parents
        assert pool.rank.tolist() == [x.rank for x in ref]
    expected = torch.stack([torch.where(torch.arange(P - 1, T - 1) + d <= T - 2,
                                        target_ids[(torch.arange(P - 1, T - 1) + d).clamp(max=T - 1)], -1)
                            for d in range(1, steps + 1)])
    fast = verify_greedy(pool, config, expected)
    for col, base in enumerate(range(P - 1, T - 1)):
        depth, left = reference_depth(refs[base], draft_tokens, expected[:, col].tolist())
        assert (int(fast.depth[col]), bool(fast.left_first[col])) == (depth, left), base
        seen_depth += depth > 0
        seen_left += left
    assert seen_depth >= 2                             # the comparison saw accepted paths
    stats = tree_sample_stats(model, aux, input_ids, target_ids, P, [config], attention=attention)[config]
    assert stats[0][0].matches.tolist() == fast.depth[:-1].tolist()   # (the last base has nothing to verify)


def test_the_two_readings_differ_from_level_three_only():
    cfg, t = make_drafter(seed=3)
    model = DraftModel.from_tensors(cfg, t)
    g = torch.Generator().manual_seed(5)
    T = 14
    aux = torch.randn(3, T, HT, generator=g)
    ids = torch.randint(0, V, (T,), generator=g)
    fp = first_pass(model, model.project(aux)[:T - 1], ids[1:], start=2)
    a = grow_trees(model, fp, topk=3, steps=4, attention="ancestors")
    s = grow_trees(model, fp, topk=3, steps=4, attention="sglang-slots")
    upto2 = 3 + 9
    assert torch.equal(a.tokens[:, :upto2], s.tokens[:, :upto2])
    assert not torch.equal(a.tokens[:, upto2:], s.tokens[:, upto2:])


def test_verification_by_hand():
    """k = 2, two levels. Level 1: tokens 5 (log p -0.1) and 7 (-0.5); the frontier re-selection put node 1 in
    slot 0, so level 2 holds node 1's children 9 (-0.6), 4 (-2.0), then node 0's 8 (-0.3), 6 (-0.4). With
    n = 4 the verified nodes are the three best: 5, 8, 6."""
    from eaglekit.analysis.acceptance.tree import TreePool, select_nodes

    pool = TreePool(tokens=torch.tensor([[5, 7, 9, 4, 8, 6]] * 2),
                    scores=torch.tensor([[-0.1, -0.5, -0.6, -2.0, -0.3, -0.4]] * 2),
                    parents=torch.tensor([[-1, -1, 1, 1, 0, 0]] * 2),
                    level=torch.tensor([1, 1, 2, 2, 2, 2]), rank=torch.tensor([0, 1, 0, 1, 0, 1]))
    cfg = TreeConfig(2, 2, 4)
    assert select_nodes(pool, cfg)[0].tolist() == [True, False, False, False, True, True]
    # base 0: the target says 5 then 6 (node 0's second child); base 1: 5 then 9 (not verified)
    expected = torch.tensor([[5, 5], [6, 9]])
    p = {0: {5: 0.6, 7: 0.3}, 1: {8: 0.2, 6: 0.5, 9: 0.1}}

    def probs(d, bases, toks):
        return torch.tensor([[p[d].get(int(x), 0.0) for x in row] for row in toks])

    v = verify_greedy(pool, cfg, expected, target_probs=probs)
    assert v.depth.tolist() == [2, 1] and v.left_first.tolist() == [True, False]
    # P(some verified child accepted): depth 1, only 5 is verified; depth 2, node 0's verified children 8 and 6
    np.testing.assert_allclose(v.soft, [[0.6, 0.6], [0.7, 0.7]])
