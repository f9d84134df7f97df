"""Accept length by context position: the cycle log's positions by hand, a planted fall with position recovered
within the buckets' intervals, the drafter's position range read from its config, the figure and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eaglekit.analysis.acceptance.block_cycles import PromptCycles, walk_cycles
from eaglekit.analysis.acceptance.measure import SampleStats, cycle_log, summarise
from eaglekit.analysis.acceptance.positions import CycleLog, PositionRange, by_position, position_range
from eaglekit.core.errors import InputError
from eaglekit.core.records import decode, encode

K = 4
#: the planted fall: per-step acceptance 0.8 before this context length, 0.3 from it on
FALL_AT, EARLY, LATE = 1024, 0.8, 0.3


def chain_accept_length(alpha: float, k: int) -> float:
    """Accept length of a K-step chain whose steps are accepted i.i.d. with ``alpha`` (Leviathan et al. 2023,
    arXiv 2211.17192: (1 - alpha^(K+1)) / (1 - alpha), the bonus token included)."""
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def planted(requests: int = 24, prompt_len: int = 200, generated: int = 1800, seed: int = 3) -> list[SampleStats]:
    """Continuations whose leading matches at each position are drawn with per-step acceptance EARLY before
    context length FALL_AT and LATE from it on (the position of base t is t + 2)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(requests):
        base = prompt_len - 1
        ctx = base + 2 + np.arange(generated)                               # context length at each offset
        alpha = np.where(ctx < FALL_AT, EARLY, LATE)
        hits = rng.random((K + 1, generated)) < alpha[None, :]              # (K+1, G) step j accepted
        matches = np.cumprod(hits, axis=0).sum(0)                           # leading accepted steps
        z = np.zeros(K, np.int64)
        out.append(SampleStats(matches, generated, z, z.copy(), base=base))
    return out


def test_positions_by_hand():
    # prompt of 5 tokens (base 4), 10 generated tokens after the prefill token
    s = SampleStats(np.array([2, 0, 0, 3, 1, 5, 5, 5, 5, 5]), 10, np.zeros(3), np.zeros(3), base=4)
    log = cycle_log([s], [0], 3)
    # K = 3: offsets 0 (2 accepted), 3 (3 accepted), 7 (capped at 2: two tokens left after the bonus)
    assert log.position == (6, 9, 13) and log.accepted == (2, 3, 2) and log.drafted == (3, 3, 2)
    assert summarise([s], steps=3)["cycle_log"] == log
    # the pooled buckets give back the headline figure
    one = by_position(log, buckets=[0, 100])
    assert one.buckets[0].accept_length.value == pytest.approx(10 / 3)
    # a block drafter's cycles: the authors' walk, the first cycle at the prompt plus the prefill token
    m = np.array([2, 0, 0, 3, 1, 5, 5, 5, 5, 5])
    p = PromptCycles(walk_cycles(m, 10), 10, m, np.zeros(3), np.zeros(3), origin=6)
    assert p.rows(0, 3) == [(0, 6, 2, 3), (0, 9, 3, 3), (0, 13, 2, 2)]


def test_buckets_recover_a_planted_fall():
    stats = planted()
    main = summarise(stats, steps=K)
    profile = by_position(main["cycle_log"], buckets=[200, 600, FALL_AT, 1500, 2000],
                          break_even=2.0)
    early, late = chain_accept_length(EARLY, K), chain_accept_length(LATE, K)
    assert len(profile.buckets) == 4
    for b in profile.buckets:
        truth = early if b.end <= FALL_AT else late
        assert b.accept_length.low <= truth <= b.accept_length.high, (b, truth)
        assert b.requests == 24
        # the per-step acceptance at the cycle starts is the planted one
        assert b.per_step_acceptance[0] == pytest.approx(EARLY if b.end <= FALL_AT else LATE, abs=0.05)
    assert [b.verdict for b in profile.buckets] == ["GO", "GO", "NO-GO", "NO-GO"]
    assert profile.stops_paying_at == FALL_AT
    # the whole-run figure sits between the two: one number hides the fall
    assert late < main["accept_length"] < early
    text = str(profile)
    assert "stops paying" in text and f"from position {FALL_AT}" in text and "NO-GO" in text
    js = profile.to_json()
    assert js["stops_paying_at"] == FALL_AT and js["buckets"][0]["accept_length_low"] is not None


def test_equal_width_buckets_and_errors():
    log = CycleLog.from_rows([(0, 10, 1, 3), (0, 12, 0, 3), (1, 30, 3, 3)], 3)
    edges = [b.start for b in by_position(log, buckets=2).buckets]
    assert edges == [10, 21]                       # 10..30 in two buckets of 11 positions
    with pytest.raises(InputError, match="ascending"):
        by_position(log, buckets=[5, 5])
    with pytest.raises(InputError, match="at least 1"):
        by_position(log, buckets=0)
    with pytest.raises(InputError, match="no cycle positions"):
        by_position(CycleLog(3), buckets=2)
    # the cache's strict decoder reads the log back exactly
    assert decode(json.loads(json.dumps(encode(log)))) == log


def test_position_range_from_config():
    cfg = {"max_position_embeddings": 131072, "max_length": 4096,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}}
    r = position_range(cfg)
    assert r == PositionRange(4096, 131072, "yarn", 32.0, 4096)
    assert r.scaled_range == 131072
    assert [at for _, at in r.lines()] == [4096, 4096, 131072]
    assert position_range({"transformer_layer_config": {"max_position_embeddings": 2048}},
                          trained_length=512).lines() == [("trained length", 512), ("max_position_embeddings", 2048)]
    assert position_range({}).text() == "not stated in the drafter's config"


def test_cli_by_position_on_target_and_dump(capsys, trained, tmp_path):
    """``eaglekit acceptance --by-position``: the buckets hold every counted cycle and pool back to the headline
    figure; a dump of the same continuations gives the same positions as the target run."""
    from eaglekit.cli import main

    d, t, p = str(trained.drafter("k2")), str(trained.target("k2")), str(trained.prompts("k2"))
    args = ["--max-new-tokens", "16", "--steps", "3", "--by-position", "3", "--break-even", "1.5"]
    assert main(["acceptance", d, "--target", t, "--prompts", p, *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    prof = out["by_position"]
    assert sum(b["cycles"] for b in prof["buckets"]) == out["cycles"]
    tokens = sum(b["accept_length"] * b["cycles"] for b in prof["buckets"])
    assert tokens == pytest.approx(out["generated_tokens"])
    assert all(b["accept_length_low"] <= b["accept_length"] <= b["accept_length_high"] for b in prof["buckets"])
    assert prof["break_even"] == 1.5 and {b["verdict"] for b in prof["buckets"]} <= {"GO", "NO-GO", "TOO CLOSE TO CALL"}
    assert main(["acceptance", d, "--target", t, "--prompts", p, *args]) == 0
    text = capsys.readouterr().out
    assert "Accept length by context position" in text and "max_position_embeddings" in text

    dump = tmp_path / "dump"
    assert main(["dump-hidden", "--target", t, "--prompts", p, "--out", str(dump), "--for-drafter", d,
                 "--max-new-tokens", "16", "--dtype", "float32"]) == 0
    capsys.readouterr()
    assert main(["acceptance", d, "--hidden-states", str(dump), "--steps", "3", "--by-position", "3", "--json"]) == 0
    from_dump = json.loads(capsys.readouterr().out)["by_position"]
    assert [(b["start"], b["cycles"]) for b in from_dump["buckets"]] == [(b["start"], b["cycles"]) for b in prof["buckets"]]
    # a tree: the headline tree's own cycles, fewer than the chain's when it accepts more
    assert main(["acceptance", d, "--target", t, "--prompts", p, "--max-new-tokens", "16", "--steps", "3",
                 "--topk", "2", "--draft-tokens", "6", "--by-position", "2", "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert sum(b["cycles"] for b in tree["by_position"]["buckets"]) == tree["cycles"]
    assert tree["by_position"]["buckets"][0]["start"] == prof["buckets"][0]["start"]
    with pytest.raises(SystemExit) as info:
        main(["acceptance", d, "--target", t, "--prompts", p, "--by-position", "0"])
    assert info.value.code == 2 and "at least 1 bucket" in capsys.readouterr().err


def test_figure_draws_buckets_intervals_and_the_drafters_range():
    from eaglekit.view.acceptance_figures import accept_length_by_position

    rng = PositionRange(trained_length=512, max_position_embeddings=4096, rope_type="yarn", rope_factor=4.0,
                        original_max_position_embeddings=1024)
    prof = by_position(summarise(planted(requests=6), steps=K)["cycle_log"], buckets=[200, FALL_AT, 2000],
                       break_even=2.0, drafter_range=rng)
    fig = accept_length_by_position(prof)
    trace = fig.data[0]
    assert list(trace.y) == [b.accept_length.value for b in prof.buckets]
    assert list(trace.error_y.arrayminus) == pytest.approx([b.accept_length.value - b.accept_length.low
                                                            for b in prof.buckets])
    drawn = {round(s.x0) for s in fig.layout.shapes if s.x0 == s.x1}
    assert drawn == {512, 1024, 4096, FALL_AT}   # trained length, YaRN original (= the fall here), max positions
    assert any(s.y0 == s.y1 == 2.0 for s in fig.layout.shapes)


def test_block_drafter_cycles_keep_their_positions_through_the_cache(tmp_path_factory, tmp_path):
    """A DFlash drafter's cycles: each prompt's positions step by the tokens each cycle produced, the buckets
    pool back to the headline figure, and a cached result reads back the same log."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent))
    import dflashfixtures as fx

    from eaglekit.analysis.acceptance.measure import measure_acceptance

    w = fx.world(tmp_path_factory)
    kw = dict(target=str(w / "target"), prompts=str(w / "prompts.jsonl"), max_new_tokens=20,
              cache_dir=tmp_path / "cache")
    first = measure_acceptance(str(w / "trained"), **kw)
    log = first.cycle_log
    assert first.family == "dflash" and len(log) == first.cycles
    for r, cycles in enumerate(first.block_cycles):
        pos = [p for q, p in zip(log.request, log.position) if q == r]
        assert [b - a for a, b in zip(pos, pos[1:])] == list(cycles[:-1])
        assert sum(a + 1 for q, a in zip(log.request, log.accepted) if q == r) == first.prompt_counts[r][0]
    pooled = first.by_position([0, 10**6]).buckets[0].accept_length
    assert pooled.value == pytest.approx(first.accept_length)
    again = measure_acceptance(str(w / "trained"), **kw)
    assert again.cached is not None and again.cycle_log == log
