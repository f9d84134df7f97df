"""The demo's long traces (issue 48): accept length against context on the trained world, judged and planned by
context, and the schedules written from that plan read back by the engines' own parsing code."""

from __future__ import annotations

import json
import math

import pytest

from eaglekit.analysis.acceptance.measure import measure_acceptance
from eaglekit.analysis.context_verdict import bucket_acceptance, judge_by_context
from eaglekit.analysis.verdict import judge
from eaglekit.core.errors import InputError
from eaglekit.demo.candidates import (LONG_CANDIDATES, LONG_CONTEXTS, SEED_BASELINE_RUN, SEED_GPU, SEED_TARGET, SEED_TP,
                                      SEED_VERIFY, STEPS, demo_context_plan, demo_context_verdicts, demo_verdicts,
                                      measure_demo, measure_long)
from eaglekit.demo.prompts import (LONG_BUCKETS, LONG_LENGTHS, LONG_PER_LENGTH, MAX_NEW_TOKENS, MEASURED_PROMPTS,
                                   long_prompts, measurement_prompts)
from eaglekit.demo.trained import CONTEXT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _engine_parsers():
    """The faithful copies of the engines' schedule parsers (tests/serving/test_schedules.py names their sources)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "serving" / "test_schedules.py"
    spec = importlib.util.spec_from_file_location("eaglekit_engine_schedule_parsers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lengths(path):
    return [len(json.loads(line)["input_ids"]) for line in path.read_text().splitlines() if line.strip()]


def test_long_prompts_hold_the_measured_prompts_then_the_long_lengths(trained):
    path = long_prompts(trained)
    lines = path.read_text().splitlines()
    assert lines[:MEASURED_PROMPTS] == measurement_prompts(trained, "k25").read_text().splitlines()
    longs = _lengths(path)[MEASURED_PROMPTS:]
    assert longs == [n for n in LONG_LENGTHS for _ in range(LONG_PER_LENGTH)]
    assert long_prompts(trained) == path and path.read_text().splitlines() == lines   # written once, the same
    # every trace and its continuation fit the positions the targets claim
    assert max(LONG_LENGTHS) + MAX_NEW_TOKENS < CONTEXT
    cfg = json.loads((trained.target("k25") / "config.json").read_text())
    assert cfg["max_position_embeddings"] == CONTEXT


@pytest.fixture(scope="module")
def long_results(trained):
    return {label: measure_long(trained, name, progress=False) for label, name in LONG_CANDIDATES.items()}


def test_the_first_bucket_is_the_measured_pages_cycles(trained, long_results):
    """Context 47's bucket holds exactly the chat-length requests pages 06 and 08 measure: the same figure and
    interval, so the pages agree."""
    for label, name in LONG_CANDIDATES.items():
        short = measure_demo(trained, name, "k25", progress=False)
        first = long_results[label].by_position(LONG_BUCKETS).buckets[0]
        assert (first.start, first.end) == (0, LONG_BUCKETS[1])
        assert first.requests == MEASURED_PROMPTS
        assert first.accept_length.value == pytest.approx(short.accept_length, abs=1e-12)
        assert (first.accept_length.low, first.accept_length.high) == pytest.approx(
            (short.accept_length_interval.low, short.accept_length_interval.high), abs=1e-12)


def test_acceptance_falls_past_the_trained_length(long_results):
    """Every candidate's accept length at 4k positions lies wholly below its chat-length interval; the MLA drafter
    (trained on many more samples) holds up best there."""
    last = {}
    for label, r in long_results.items():
        prof = r.by_position(LONG_BUCKETS)
        assert [b.start for b in prof.buckets] == list(LONG_BUCKETS[:-1])
        first, last[label] = prof.buckets[0].accept_length, prof.buckets[-1].accept_length
        assert last[label].high < first.low, label
        assert all(LONG_LENGTHS[-1] < b <= LONG_LENGTHS[-1] + MAX_NEW_TOKENS
                   for b in [prof.buckets[-1].mean_position])
    assert last["public MLA drafter"].low > max(last["warm start"].high, last["scratch"].high)


def test_at_steps_keeps_the_cycles_of_a_shallower_run(trained):
    """A measurement at K = 4 read at K = 2 holds the cycles a K = 2 measurement counts: position for position."""
    kw = dict(target=trained.target("k25"), prompts=trained.prompts("k25"), max_new_tokens=MAX_NEW_TOKENS,
              progress=False, cache=False)
    deep = measure_acceptance(trained.drafter("k25-warm"), steps=4, **kw)
    shallow = measure_acceptance(trained.drafter("k25-warm"), steps=2, **kw)
    assert deep.at_steps(2).cycle_log == shallow.cycle_log
    assert len(deep.at_steps(2).cycle_log) > len(deep.cycle_log)  # fewer drafts a cycle: more cycles
    assert deep.at_steps(2).by_position(4).to_json() == shallow.by_position(4).to_json()
    # a bucket without cycles is left out, and a context there is refused, not read from a neighbour
    [got] = bucket_acceptance(deep, [20], [0, 5, 10, 60])
    assert got.lengths and "positions 10-59" in got.source
    with pytest.raises(InputError, match="context 7 lies outside the measured positions"):
        bucket_acceptance(deep, [7], [0, 5, 10, 60])


def test_context_verdicts_judge_each_context_with_its_bucket(trained, long_results):
    cv = demo_context_verdicts(trained)
    assert cv.contexts == LONG_CONTEXTS and cv.candidates == tuple(LONG_CANDIDATES)
    kw = dict(costs=list(SEED_VERIFY), measured=[SEED_BASELINE_RUN], target=SEED_TARGET, gpu=SEED_GPU, tp=SEED_TP,
              batch=1, max_steps=STEPS)
    for c in LONG_CONTEXTS:
        for label, r in long_results.items():
            cell = cv.cell(label, c)
            # the centre's verdict is judge's own on the bucket's acceptance; TOO CLOSE TO CALL only adds doubt
            centre = judge({label: bucket_acceptance(r, [c], LONG_BUCKETS, max_steps=STEPS)[0]}, context=c, **kw)[label]
            assert cell.steps == centre.steps and cell.tokens_per_s == centre.tokens_per_s
            assert cell.verdict in (centre.verdict, "TOO CLOSE TO CALL")
            b = r.at_steps(cell.steps).by_position(LONG_BUCKETS).buckets[LONG_CONTEXTS.index(c)]
            assert cell.accept_length == b.accept_length
    # the fall reaches the verdicts: the team's two drafters stop paying on long traces
    for label in ("warm start", "scratch"):
        assert cv.cell(label, LONG_CONTEXTS[-1]).verdict == "NO-GO"
        assert cv.cell(label, LONG_CONTEXTS[0]).verdict != "NO-GO"
        assert cv.stops_paying_at(label) is not None and cv.stops_paying_at(label) > LONG_CONTEXTS[0]
        assert f"NO-GO from context {cv.stops_paying_at(label)}" in str(cv)
    html = cv._repr_html_()
    assert "eaglekit-context-verdict" in html and "warm start@4096=NO-GO" in html
    assert set(cv.to_json()["candidates"]) == set(LONG_CANDIDATES)


def test_a_context_outside_the_measured_positions_is_refused(long_results):
    r = long_results["warm start"]
    with pytest.raises(InputError, match="outside the measured positions"):
        bucket_acceptance(r, [65536], LONG_BUCKETS)
    with pytest.raises(InputError, match="outside the measured positions"):
        judge_by_context({"warm start": r}, [47, 65536], LONG_BUCKETS, costs=list(SEED_VERIFY),
                         measured=[SEED_BASELINE_RUN], target=SEED_TARGET, gpu=SEED_GPU, tp=SEED_TP)


def test_the_chat_verdict_says_where_its_acceptance_was_measured(trained):
    head = demo_verdicts(trained).headline()
    assert "measured on requests whose cycles start at positions 11-" in head
    assert "short of context 2048" in head


def test_the_grid_and_the_answer_agree_and_the_schedule_encodes_the_grid(trained, long_results):
    engines = _engine_parsers()
    build_dynamic_sd_schedule_lookup, trtllm_parse = engines.build_dynamic_sd_schedule_lookup, engines.trtllm_parse
    get_draft_len = engines.get_draft_len_for_batch_size

    label = "public MLA drafter"
    grid = demo_context_plan(trained, label, batches=(1, 4, 16, 64))
    cv = demo_context_verdicts(trained)
    for c in LONG_CONTEXTS:   # batch 1 of the grid is the answer block's cell: same k, same call
        assert grid.cell(c, 1).best_eagle.steps in (0, cv.cell(label, c).steps)
        assert grid.call(c, 1) == cv.cell(label, c).verdict, c
    choices = grid.choices()
    cfg = grid.schedule("vllm")
    lookup = build_dynamic_sd_schedule_lookup(cfg["num_speculative_tokens_per_batch_size"], 64,
                                              cfg["num_speculative_tokens"])
    for i, c in enumerate(LONG_CONTEXTS):
        bucket = lookup.bucket_of(c)
        for j, b in enumerate(grid.batches):
            assert lookup.dense[b][bucket] == choices.steps[i][j], (c, b)
    first = json.loads(json.dumps(grid.schedule("trtllm", context=LONG_CONTEXTS[0])))
    for j, b in enumerate(grid.batches):
        assert get_draft_len(trtllm_parse(first), b, first["max_draft_len"]) == choices.steps[0][j]
    prof = grid.schedule("profile", context=1024)
    assert math.isclose(prof["accept_length"], 1 + math.fsum(prof["marginal"]))


def test_the_command_line_gives_the_pages_grid(trained, long_results, tmp_path, capsys):
    """``eaglekit acceptance --by-position EDGES --json`` then ``eaglekit plan --contexts``: the grid page 11 shows,
    cell for cell (the bucket's accept length at each k, both ends of its interval priced)."""
    from eaglekit.cli import main

    label = "public MLA drafter"
    name = LONG_CANDIDATES[label]
    edges = ",".join(map(str, LONG_BUCKETS))
    assert main(["acceptance", str(trained.drafter(name)), "--target", str(trained.target("k25")), "--prompts",
                 str(long_prompts(trained)), "--steps", str(STEPS), "--max-new-tokens", str(MAX_NEW_TOKENS),
                 "--by-position", edges, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["by_position_by_steps"]) == STEPS
    (tmp_path / "r.json").write_text(json.dumps(data))
    b, n, ms = SEED_VERIFY[0]
    (tmp_path / "costs.csv").write_text(f"batch,tokens,ms\n{b},{n},{ms}\n")
    (tmp_path / "runs.csv").write_text("batch,steps,topk,draft_tokens,accept_length,tokens_per_s\n"
                                       f"{SEED_BASELINE_RUN[0]},0,,,,{SEED_BASELINE_RUN[-1]}\n")
    assert main(["plan", "--acceptance", str(tmp_path / "r.json"), "--costs", str(tmp_path / "costs.csv"),
                 "--measured", str(tmp_path / "runs.csv"), "--target", SEED_TARGET, "--gpu", SEED_GPU, "--tp",
                 str(SEED_TP), "--batch", "1,4,16,64", "--max-steps", str(STEPS),
                 "--contexts", ",".join(map(str, LONG_CONTEXTS)), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    page = demo_context_plan(trained, label, batches=(1, 4, 16, 64)).to_json()
    assert cli["cells"] == page["cells"]
