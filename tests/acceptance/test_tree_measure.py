"""Tree accept lengths on the trained demo world: topk 1 is the chain figure for figure, a grid equals its
configurations measured one by one, the JSON ``trees[]`` keys, temperature > 0, and one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eaglekit.analysis.acceptance.measure import measure_acceptance, simulate_cycles
from eaglekit.analysis.acceptance.target import load_target_model
from eaglekit.analysis.acceptance.tree import parse_tree_grid, tree_config, tree_configs
from eaglekit.analysis.acceptance.trees import cycle_starts, measure_trees
from eaglekit.cli import main
from eaglekit.core.errors import InputError

TREE_KEYS = ["steps", "topk", "draft_tokens", "accept_length", "accept_length_low", "accept_length_high"]


@pytest.fixture(scope="module")
def k2(trained):
    return load_target_model(trained.target("k2"))


@pytest.fixture(scope="module")
def grid(trained, k2):
    return measure_trees(trained.drafter("k2"), trees="3:1:4,4:1:5,4:3:10,5:4:20,3:4:12", target=k2,
                         prompts=trained.prompts("k2"), max_new_tokens=32, steps=4, progress=False)


@pytest.mark.parametrize("steps", [3, 4])
def test_topk_one_is_the_chain_exactly(trained, k2, grid, steps):
    chain = measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=32,
                               steps=steps, progress=False)
    tree = grid.tree(steps, 1, steps + 1)
    assert tree.accept_length == chain.accept_length and tree.cycles == chain.cycles
    assert tree.per_depth_acceptance == chain.per_step_acceptance
    assert (tree.interval.low, tree.interval.high) == (chain.interval.low, chain.interval.high)
    assert tree.left_first_child == 0.0
    assert grid.result.accept_length == chain.accept_length or steps != 4


def test_a_grid_equals_its_configurations_alone(trained, k2, grid):
    for label in ("4:3:10", "3:4:12"):
        alone = measure_trees(trained.drafter("k2"), trees=label, target=k2, prompts=trained.prompts("k2"),
                              max_new_tokens=32, steps=4, progress=False).trees[0]
        assert alone == grid.tree(*(int(x) for x in label.split(":")))


def test_trees_accept_more_than_the_chain_on_the_trained_world(grid):
    chain = grid.tree(4, 1, 5)
    wide = grid.tree(5, 4, 20)
    assert wide.accept_length > chain.accept_length
    assert 0 < wide.left_first_child <= 1
    assert wide.mean_accepted_depth > chain.mean_accepted_depth
    assert wide.interval.low <= wide.accept_length <= wide.interval.high


def test_json_trees_keys(grid):
    out = grid.to_json()
    assert out["tree_attention"] == "ancestors" and len(out["trees"]) == 5
    for t in out["trees"]:
        assert list(t)[:len(TREE_KEYS)] == TREE_KEYS
        assert t["accept_length"] == pytest.approx(t["generated_tokens"] / t["cycles"])
        assert len(t["per_depth_acceptance"]) == t["steps"]
    assert "Tree drafts" in str(grid) and "<table" in grid._repr_html_()


def test_a_tree_at_the_ceiling_the_run_allows_is_marked(grid):
    """Every cycle accepting all its steps is the most a run of these lengths can show: such rows tie with any
    deeper or wider tree, and the table says so instead of printing a zero-width interval as a finding."""
    for t in grid.trees:
        assert t.accept_length <= t.ceiling + 1e-9
        assert t.at_ceiling == (t.accept_length >= t.ceiling - 1e-9)
        assert t.to_json()["ceiling_accept_length"] == t.ceiling
    capped = [t for t in grid.trees if t.at_ceiling]
    text = str(grid)
    assert ("^ at the ceiling the run's lengths allow" in text) == bool(capped)
    assert all(f"{t.accept_length:.3f} ^" in text for t in capped)


def test_temperature_gives_the_engines_sampling_figure(trained, k2):
    r = measure_trees(trained.drafter("k2"), trees="3:1:4,3:4:12", target=k2, prompts=trained.prompts("k2"),
                      max_new_tokens=16, steps=3, temperature=0.7, progress=False)
    for t in r.trees:
        assert 1.0 <= t.expected_accept_length <= t.steps + 1
        assert all(c is None or 0 <= c <= 1 for c in t.expected_per_depth_acceptance)
    # more children can only add target probability at every node of the greedy path
    assert r.tree(3, 4, 12).expected_accept_length >= r.tree(3, 1, 4).expected_accept_length
    assert "expected_accept_length" in r.to_json()["trees"][0]


def test_temperature_towards_zero_is_the_greedy_figure(trained, k2):
    r = measure_trees(trained.drafter("k2"), trees="4:1:5,4:3:10", target=k2, prompts=trained.prompts("k2"),
                      max_new_tokens=16, steps=4, temperature=1e-4, progress=False)
    for t in r.trees:
        assert t.expected_accept_length == pytest.approx(t.accept_length, abs=1e-3)
        assert t.expected_per_depth_acceptance == pytest.approx(t.per_depth_acceptance, abs=1e-3)


def test_cycle_starts_follow_the_simulation():
    m = np.array([2, 0, 0, 3, 1, 5, 5, 5, 5, 5])
    assert cycle_starts(m, 10, 3) == [0, 3, 7]
    assert cycle_starts(m, 10, 1) == [0, 2, 3, 5, 7, 9]
    assert all(len(cycle_starts(m, 10, k)) == simulate_cycles(m, 10, k) for k in range(1, 6))


@pytest.mark.parametrize("args,says", [
    (("4", "0", "3"), "topk must be"), (("3", "2", "1"), "draft tokens must be"),
    (("3", "2", "12"), "draft only 10"), (("0", "1", "2"), "steps must be")])
def test_bad_configurations_are_refused(args, says):
    s, k, n = (int(a) for a in args)
    with pytest.raises(InputError, match=says):
        tree_config(s, k, n)
    assert tree_config(3, 2, 11).pool_size == 10


def test_grids_are_checked():
    assert [c.label for c in parse_tree_grid(" 6:10:60, 3:1:4 ")] == ["6:10:60", "3:1:4"]
    with pytest.raises(InputError, match="10,000 tree configurations"):
        parse_tree_grid(",".join(f"{s}:{k}:2" for s in range(1, 101) for k in range(1, 101)))
    with pytest.raises(InputError, match="twice"):
        tree_configs([(3, 1, 4), "3:1:4"])


def _error(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_cli_trees_json_and_refusals(capsys, trained):
    d, dump = str(trained.drafter("k2")), str(trained.hidden_dump("k2"))
    assert main(["acceptance", d, "--hidden-states", dump, "--steps", "3", "--topk", "3", "--draft-tokens", "8",
                 "--tree-attention", "sglang-slots", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tree_attention"] == "sglang-slots" and out["steps"] == 3
    assert [(t["steps"], t["topk"], t["draft_tokens"]) for t in out["trees"]] == [(3, 3, 8)]
    # the tree asked for is the headline (issue 39): top-level figures are the tree's, the chain is named
    (tree,) = out["trees"]
    assert out["headline"] == "tree 3:3:8" and (out["topk"], out["draft_tokens"]) == (3, 8)
    for key in ("accept_length", "accept_length_low", "accept_length_high", "cycles", "generated_tokens"):
        assert out[key] == tree[key], key
    assert out["chain"]["steps"] == 3 and "accept_length_by_steps" in out["chain"]
    assert "accept_length_by_steps" not in out and "per_step_acceptance" not in out
    assert main(["acceptance", d, "--hidden-states", dump, "--steps", "3", "--topk", "3", "--draft-tokens", "8"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("Accept length, tree 3:3:8") and f"{tree['accept_length']:.3f}" in first.split(";")[0]
    assert main(["acceptance", d, "--hidden-states", dump, "--steps", "3", "--tree-grid", "3:1:4,3:3:8", "--json"]) == 0
    grid = json.loads(capsys.readouterr().out)   # a grid: the chain heads, as before
    assert "headline" not in grid and grid["accept_length"] == grid["trees"][0]["accept_length"]
    assert main(["acceptance", d, "--hidden-states", dump, "--steps", "3", "--topk", "1"]) == 0
    assert "Tree drafts" in capsys.readouterr().out
    grid = ",".join(f"{s}:{k}:3" for s in range(1, 101) for k in range(1, 101))
    for args, says in [(["--topk", "0", "--draft-tokens", "4"], "topk must be"),
                       (["--topk", "2", "--draft-tokens", "1"], "draft tokens must be"),
                       (["--steps", "3", "--topk", "2", "--draft-tokens", "40"], "draft only 10"),
                       (["--tree-grid", grid], "at most"),
                       (["--topk", "3"], "needs --draft-tokens"),
                       (["--tree-attention", "ancestors"], "does nothing"),
                       (["--tree-grid", "3:1:4", "--topk", "2"], "not both")]:
        assert says in _error(capsys, "acceptance", d, "--hidden-states", dump, *args)


def test_the_ceiling_is_the_fewest_cycles_the_lengths_allow():
    """36 tokens per prompt at 4 steps: 8 cycles at the fewest (7 of 5 tokens and one of 1), so 4.5 is the most
    any tree can show; a prompt whose drafts all match sits there, one whose last depth misses twice need not."""
    from eaglekit.analysis.acceptance.measure import SampleStats
    from eaglekit.analysis.acceptance.trees import summarise_tree

    G, K = 36, 4
    full = SampleStats(np.full(G, K), G, np.full(K, G), np.full(K, G))
    config = tree_config(4, 4, 16)
    capped = summarise_tree(config, [(full, np.zeros(G, bool))] * 3)
    assert capped.ceiling == pytest.approx(4.5) and capped.accept_length == pytest.approx(4.5) and capped.at_ceiling
    short = np.full(G, K)
    short[[0, 2]] = 1  # the first two cycles take two tokens each: 36 = 2 x 2 + 6 x 5 + 2, nine cycles
    open_ = summarise_tree(config, [(SampleStats(short, G, np.full(K, G), np.full(K, G)), np.zeros(G, bool))])
    assert open_.ceiling == pytest.approx(4.5) and open_.accept_length == pytest.approx(4.0) and not open_.at_ceiling
