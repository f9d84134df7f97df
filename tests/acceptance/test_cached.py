"""Each cached kind of answer read back equals a fresh computation of it (chains, trees, training dumps), says it
was cached, and is keyed by what was measured: another prompt file, option or drafter is measured afresh."""

from __future__ import annotations

import json

import pytest

from eaglekit.analysis.acceptance.dumps import measure_dump
from eaglekit.analysis.acceptance.measure import measure_acceptance
from eaglekit.analysis.acceptance.target import load_target_model
from eaglekit.analysis.acceptance.trees import measure_trees
from eaglekit.cli import main
from eaglekit.demo.dumps import write_training_dumps

N_PROMPTS, NEW = 4, 16


@pytest.fixture(scope="module")
def prompts(trained, tmp_path_factory):
    f = tmp_path_factory.mktemp("cached") / "p.jsonl"
    f.write_text("\n".join(trained.prompts("k2").read_text().splitlines()[:N_PROMPTS]) + "\n")
    return f


def _same(a, b) -> None:
    """Every figure equal, and the JSON too but for the cache's own keys."""
    assert a == b
    ja, jb = a.to_json(), b.to_json()
    for j in (ja, jb):
        for k in ("cached", "computed_at", "cache_dir"):
            j.pop(k, None)
    assert json.dumps(ja, sort_keys=True) == json.dumps(jb, sort_keys=True)


def test_a_chain_read_back_equals_a_fresh_one(trained, prompts, tmp_path):
    kw = dict(target=trained.target("k2"), prompts=prompts, steps=3, max_new_tokens=NEW, progress=False,
              cache_dir=tmp_path)
    fresh = measure_acceptance(trained.drafter("k2"), cache=False, **kw)
    first = measure_acceptance(trained.drafter("k2"), **kw)
    again = measure_acceptance(trained.drafter("k2"), **kw)
    assert fresh.cached is None and first.cached is None and again.cached is not None
    _same(fresh, again)
    assert again.prompt_counts == fresh.prompt_counts and again.accept_length_interval == fresh.accept_length_interval
    assert again.to_json()["cached"] is True and "cached: computed" in str(again)
    # a loaded target on the same folder, device and dtype is the same measurement
    loaded = measure_acceptance(trained.drafter("k2"), **{**kw, "target": load_target_model(trained.target("k2"))})
    assert loaded.cached is not None
    # another option, another prompt file: measured afresh
    at_two = measure_acceptance(trained.drafter("k2"), **{**kw, "steps": 2})
    assert at_two.cached is None
    # a measurement read at a smaller K is that K's measurement: the same cycles, figures and interval
    view = again.at_steps(2)
    assert (view.accept_length, view.interval, view.cycles, view.per_step_acceptance, view.accept_length_by_steps) == (
        at_two.accept_length, at_two.interval, at_two.cycles, at_two.per_step_acceptance, at_two.accept_length_by_steps)
    assert view.by_convention_at(2) == at_two.accept_length_by_convention
    other = tmp_path / "other.jsonl"
    other.write_text(prompts.read_text().replace("\n", "\n\n", 1))  # same prompts, other bytes
    assert measure_acceptance(trained.drafter("k2"), **{**kw, "prompts": other}).cached is None
    # refresh: recomputed, and what it wrote is read back next
    assert measure_acceptance(trained.drafter("k2"), cache="refresh", **kw).cached is None


def test_trees_read_back_equal_a_fresh_run(trained, prompts, tmp_path):
    kw = dict(trees="3:1:4,3:2:6", target=trained.target("k2"), prompts=prompts, max_new_tokens=NEW,
              progress=False, cache_dir=tmp_path)
    fresh = measure_trees(trained.drafter("k2"), cache=False, **kw)
    measure_trees(trained.drafter("k2"), **kw)
    again = measure_trees(trained.drafter("k2"), **kw)
    assert again.chain.cached is not None and fresh.chain.cached is None
    _same(fresh, again)
    assert again.trees == fresh.trees
    assert measure_trees(trained.drafter("k2"), **{**kw, "tree_attention": "sglang-slots"}).chain.cached is None


def test_a_dump_read_back_equals_a_fresh_reading(trained, prompts, tmp_path):
    ids = [json.loads(line)["input_ids"] for line in prompts.read_text().splitlines()]
    dirs = write_training_dumps(trained.target("k2"), tmp_path / "dumps", prompts=ids, max_new_tokens=NEW)
    kw = dict(target_head=str(trained.target("k2")), steps=3, progress=False, cache_dir=tmp_path / "cache")
    fresh = measure_dump(trained.drafter("k2"), dirs["specforge"], cache=False, **kw)
    measure_dump(trained.drafter("k2"), dirs["specforge"], **kw)
    again = measure_dump(trained.drafter("k2"), dirs["specforge"], **kw)
    assert again.result.cached is not None
    _same(fresh, again)
    assert "cached: computed" in str(again)


def test_the_cli_says_cached_and_no_cache_recomputes(trained, prompts, tmp_path, capsys):
    args = ["acceptance", str(trained.drafter("k2")), "--target", str(trained.target("k2")), "--prompts",
            str(prompts), "--steps", "3", "--max-new-tokens", str(NEW), "--json", "--cache-dir", str(tmp_path)]

    def run(*extra):
        assert main(args + list(extra)) == 0
        return json.loads(capsys.readouterr().out)
    first, second, third = run(), run(), run("--no-cache")
    assert first["cached"] is False and second["cached"] is True and third["cached"] is False
    assert second["computed_at"].endswith("UTC") and second["cache_dir"] == str(tmp_path)
    for j in (first, second, third):
        for k in ("cached", "computed_at", "cache_dir"):
            j.pop(k, None)
    assert first == second == third
