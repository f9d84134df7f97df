"""Tree drafts on training pipelines' dumps (SpecForge, speculators, Model-Optimizer layouts of the trained
world's greedy continuations): the same tree figures as --target, in every layout."""

from __future__ import annotations

import json

import pytest

from eaglekit.analysis.acceptance.dumps import measure_dump
from eaglekit.analysis.acceptance.target import load_target_model
from eaglekit.analysis.acceptance.trees import measure_trees
from eaglekit.cli import main
from eaglekit.core.errors import InputError
from eaglekit.demo.dumps import FORMATS, write_training_dumps

N_PROMPTS, NEW, GRID = 5, 20, "4:3:10,3:1:4"


@pytest.fixture(scope="module")
def setup(trained, tmp_path_factory):
    lines = trained.prompts("k2").read_text().splitlines()[:N_PROMPTS]
    prompts = [json.loads(line)["input_ids"] for line in lines]
    root = tmp_path_factory.mktemp("tree-dumps") / "dumps"
    dirs = write_training_dumps(trained.target("k2"), root, prompts=prompts, max_new_tokens=NEW)
    f = tmp_path_factory.mktemp("tree-prompts") / "p.jsonl"
    f.write_text("".join(json.dumps({"input_ids": p}) + "\n" for p in prompts))
    ref = measure_trees(trained.drafter("k2"), trees=GRID, target=load_target_model(trained.target("k2")), prompts=f,
                        max_new_tokens=NEW, steps=4, progress=False)
    return root, dirs, ref


@pytest.mark.parametrize("fmt", FORMATS)
def test_training_dumps_give_the_target_tree_figures(trained, setup, fmt):
    root, dirs, ref = setup
    masks = root / f"{fmt}-loss-masks.jsonl"
    r = measure_dump(trained.drafter("k2"), dirs[fmt], target_head=str(trained.target("k2")), steps=4,
                     loss_masks=masks if masks.exists() else None, progress=False, trees=GRID)
    assert r.result.coverage == 1.0
    assert r.chain.accept_length == ref.result.accept_length
    assert [t.to_json() for t in r.trees] == [t.to_json() for t in ref.trees]
    assert r.trees[0].accept_length > r.trees[1].accept_length
    out = r.to_json()
    assert out["dump"]["coverage"] == 1.0 and [t["topk"] for t in out["trees"]] == [3, 1]


def test_training_dump_trees_refuse_temperature_and_take_the_cli_options(trained, setup, capsys):
    _root, dirs, _ref = setup
    with pytest.raises(InputError, match="measured greedy"):
        measure_dump(trained.drafter("k2"), dirs["specforge"], target_head=str(trained.target("k2")),
                     temperature=0.5, trees=GRID, progress=False)
    assert main(["acceptance", str(trained.drafter("k2")), "--hidden-states", str(dirs["specforge"]), "--target-head",
                 str(trained.target("k2")), "--steps", "3", "--topk", "2", "--draft-tokens", "6",
                 "--tree-attention", "sglang-slots", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tree_attention"] == "sglang-slots" and out["trees"][0]["draft_tokens"] == 6
