"""Greedy tree decoding for real, with eaglekit's own tree drafts: the target verifies each cycle's tree in one
forward with a tree mask (EAGLE's ``tree_decoding``: the root and the verified nodes after the committed
tokens, each node attending to the committed tokens, its ancestors and itself, at position ``committed +
depth``), the longest matching path and the target's next token are committed, and the drafter drafts the
next tree from the verify pass's hidden states (as EAGLE does). The tokens are the target's greedy
continuation and the cycle count is the offline figure's."""

from __future__ import annotations

import pytest
import torch

from eaglekit.analysis.draft import DraftModel, trained_convention
from eaglekit.analysis.acceptance.target import load_target_model, read_prompts
from eaglekit.analysis.acceptance.tree import TreeConfig, first_pass, grow_trees, select_nodes
from eaglekit.analysis.acceptance.trees import measure_trees


def _verify(tmodel, committed: list[int], nodes: list[int], parents: list[int], depth: list[int], layers):
    """One target forward over committed + tree (index 0 the root): logits and hidden states of the tree."""
    c = len(committed) - 1                                       # the root is committed[-1]: not yet in the cache
    n = len(nodes) + 1
    ids = torch.tensor([committed + nodes])
    L = c + n
    allowed = torch.ones(L, L).tril().bool()
    tree = torch.eye(n, dtype=torch.bool)
    tree[:, 0] = True
    for i in range(1, n):                                        # nodes are in pool order: parents come first
        tree[i] |= tree[parents[i - 1] + 1] if parents[i - 1] >= 0 else tree[0]
    allowed[c:, c:] = tree
    mask = torch.zeros(1, 1, L, L).masked_fill(~allowed, float("-inf"))
    pos = torch.tensor([list(range(c)) + [c + d for d in [0] + depth]])
    with torch.no_grad():
        out = tmodel.model(ids, attention_mask=mask, position_ids=pos, output_hidden_states=True, use_cache=False)
    hs = torch.stack([out.hidden_states[k][0] for k in layers])  # (n_aux, L, H)
    return out.logits[0, c:].argmax(-1), hs[:, c:]


def tree_decode(model, tmodel, prompt: list[int], config: TreeConfig, generate: int, attention: str, layers):
    """Greedy speculative decoding with trees: ``generate`` tokens after the prefill token; returns the
    tokens (prefill token first) and the cycles."""
    with torch.no_grad():
        out = tmodel.model(torch.tensor([prompt]), output_hidden_states=True, use_cache=False)
    feats = torch.stack([out.hidden_states[k][0] for k in layers])       # (n_aux, c, H): committed positions
    seq = list(prompt) + [int(out.logits[0, -1].argmax())]              # the prefill token: the first root
    cycles = 0
    while len(seq) - len(prompt) - 1 < generate:
        c = len(seq) - 1
        h = model.project(feats)                                         # (c, H)
        fp = first_pass(model, h, torch.tensor(seq[1:]), start=c - 1)
        pool = grow_trees(model, fp, topk=config.topk, steps=config.steps, attention=attention)
        chosen = select_nodes(pool, config)[0].nonzero().flatten().tolist()   # pool order
        where = {p: i for i, p in enumerate(chosen)}
        nodes = [int(pool.tokens[0, p]) for p in chosen]
        parents = [where[int(pool.parents[0, p])] if int(pool.parents[0, p]) >= 0 else -1 for p in chosen]
        depth = [int(pool.level[p]) for p in chosen]
        nxt, hs = _verify(tmodel, seq, nodes, parents, depth, layers)
        path, cur = [0], -1                                              # tree indices (0: the root)
        while True:
            kids = [i for i, p in enumerate(parents) if p == cur and nodes[i] == int(nxt[path[-1]])]
            if not kids:
                break
            cur = kids[0]
            path.append(cur + 1)
        seq += [nodes[i - 1] for i in path[1:]] + [int(nxt[path[-1]])]
        feats = torch.cat([feats, hs[:, path]], 1)                      # the root and the accepted nodes
        cycles += 1
    return seq[len(prompt):], cycles


@pytest.mark.parametrize("config,attention", [(TreeConfig(4, 3, 10), "ancestors"), (TreeConfig(3, 2, 6), "sglang-slots"),
                                              (TreeConfig(4, 1, 5), "ancestors")])
def test_tree_decoding_gives_the_greedy_tokens_in_the_offline_cycles(trained, config, attention):
    tmodel = load_target_model(trained.target("k2"))
    model = DraftModel.load(trained.drafter("k2"), embed=tmodel.embedding())
    layers = model.aux_indices(trained_convention(model.config), tmodel.num_hidden_layers)
    prompts, _ = read_prompts(trained.prompts("k2"))
    prompts = prompts[:6]
    offline = measure_trees(model, trees=[config], tree_attention=attention, target=tmodel, prompts=prompts,
                            max_new_tokens=24, progress=False).trees[0]
    cycles = 0
    for p, ids in zip(prompts, tmodel.tokenize_all(prompts, source="prompts", max_new_tokens=24)):
        greedy = tmodel.run(ids, max_new_tokens=24, layers=layers).input_ids[len(ids):].tolist()
        tokens, n = tree_decode(model, tmodel, list(ids), config, len(greedy) - 1, attention, layers)
        assert tokens[:len(greedy)] == greedy
        cycles += n
    assert cycles == offline.cycles
    assert offline.accept_length > 1.5                   # the comparison saw long accepted paths
