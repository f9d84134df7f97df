"""What a new user tripped over in accept-length output (issue 24): break-even per K, the collapse beyond the
trained chain steps, the sampled figure on the greedy figure's cycle basis, temperatures refused at parse
time, another model's embeddings, prompts the tokenizer does not know, a go/no-go that counts drafting free."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from eaglekit.analysis.acceptance.measure import expected_cycles, measure_acceptance, simulate_cycles
from eaglekit.analysis.acceptance.notes import collapse_step, embeddings_note, unknown_tokens_note
from eaglekit.analysis.acceptance.target import dump_hidden_states, load_target_model
from eaglekit.cli import main
from eaglekit.core.errors import InputError
from eaglekit.core.speedup.specmath import Scenario


# -- the sampled figure on the cycle basis ---------------------------------------------------------------
def test_expected_cycles_equal_the_greedy_simulation_when_acceptance_is_certain():
    rng = np.random.default_rng(0)
    for _ in range(200):
        generated, steps = int(rng.integers(1, 40)), int(rng.integers(1, 7))
        matches = rng.integers(0, steps + 3, generated)
        certain = (np.arange(1, steps + 1)[:, None] <= matches[None, :]).astype(float)  # (K, G) one-hot overlap
        assert expected_cycles(certain, generated, steps) == pytest.approx(simulate_cycles(matches, generated, steps))


def test_expected_cycles_match_a_sampled_simulation():
    rng = np.random.default_rng(1)
    generated, steps = 30, 3
    accept = rng.random((steps, generated))
    counts = []
    for _ in range(20000):
        i = cycles = 0
        while i < generated:
            a = 0
            while a < steps and rng.random() < accept[a, i]:
                a += 1
            i, cycles = i + a + 1, cycles + 1
        counts.append(cycles)
    exact = expected_cycles(accept, generated, steps)
    assert abs(exact - np.mean(counts)) < 5 * np.std(counts) / np.sqrt(len(counts))


@pytest.fixture(scope="module")
def k2(trained):
    return load_target_model(trained.target("k2"))


def test_sampled_accept_length_is_on_the_greedy_cycle_basis(trained, k2):
    """The old figure (1 + sum of running products of per-step means) was above the greedy one (4.18 > 3.84):
    sampling never accepts more than the greedy chain it softens, so on the same cycles it is not above it."""
    kw = dict(target=k2, prompts=trained.prompts("k2"), max_new_tokens=16, steps=3, progress=False)
    greedy = measure_acceptance(trained.drafter("k2"), **kw)
    sampled = measure_acceptance(trained.drafter("k2"), temperature=0.7, **kw)
    assert sampled.accept_length == pytest.approx(greedy.accept_length)  # the headline is the greedy measurement
    assert 1 <= sampled.expected_accept_length <= greedy.accept_length
    old_basis = 1 + np.cumsum(np.cumprod(sampled.expected_acceptance))[-1]
    assert old_basis > sampled.expected_accept_length
    nearly_greedy = measure_acceptance(trained.drafter("k2"), temperature=1e-3, **kw)
    assert nearly_greedy.expected_accept_length == pytest.approx(greedy.accept_length, abs=0.02)
    text = str(sampled)
    assert "accept length (greedy)" in text and "expected accept length at T = 0.7" in text
    assert "same cycles as the greedy figure" in text


# -- temperatures -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["inf", "nan", "-0.5", "-inf", "hot"])
def test_bad_temperature_is_refused_at_parse_time(capsys, trained, value):
    with pytest.raises(SystemExit) as info:
        main(["acceptance", str(trained.drafter("k2")), "--target", "no-such-target", "--prompts", "none.jsonl",
              f"--temperature={value}"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert f"expected a finite temperature >= 0 (0 is greedy), got '{value}'" in err


def test_bad_temperature_is_refused_by_the_library_before_any_model_loads(trained):
    for value in (float("inf"), float("nan"), -1.0, True):
        with pytest.raises(InputError, match="temperature must be a finite number >= 0"):
            measure_acceptance(trained.drafter("k2"), target="no-such-target", prompts="none.jsonl",
                               temperature=value, progress=False)


def test_a_refused_temperature_prints_no_traceback(trained):
    p = subprocess.run([sys.executable, "-m", "eaglekit", "acceptance", str(trained.drafter("k2")), "--target", "x",
                        "--prompts", "y", "--temperature", "inf", "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.count("\n") == 1


# -- collapse beyond the trained chain steps ---------------------------------------------------------------
def test_collapse_step_finds_where_acceptance_falls_apart():
    assert collapse_step([0.984, 0.992, 0.988, 0.396]) == 4        # the demo drafter, trained for 3 steps
    assert collapse_step([0.473, 0.424, 0.225, 0.0]) == 4          # the same drafter on the new target
    assert collapse_step([0.96, 0.81, 0.76, 0.515]) is None        # a steady decline is not a collapse
    assert collapse_step([0.2, 0.05, None]) is None                # too little to fall from
    assert collapse_step([]) is None


def test_the_demo_drafter_notes_its_collapse_and_the_world_records_its_steps(trained, k2):
    assert trained.chain_steps == 3 and "trained for 3 chain steps" in str(trained)
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=32,
                           steps=5, progress=False)
    assert r.per_step_acceptance[2] > 0.9 > 0.6 > r.per_step_acceptance[3]
    note = [n for n in r.notes if n.startswith("per-step acceptance collapses at step 4")]
    assert note and "seems trained for 3 chain steps" in note[0] and "K <= 3" in note[0]
    assert note[0] in str(r) and note[0] in r.to_json()["notes"]


# -- break-even per K ---------------------------------------------------------------------------------------
def test_break_even_rises_with_k_on_the_chart_and_in_the_table(trained, k2):
    from eaglekit import accept_length_vs_steps, break_even_by_steps, steps_table

    seed = Scenario(baseline_tps=82.0, verify_ms=30.0, draft_ms=1.67, steps=4)  # its own K is ignored
    assert [round(b, 2) for b in break_even_by_steps(seed, 4)] == [2.60, 2.73, 2.87, 3.01]
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=16,
                           steps=4, progress=False)
    fig = accept_length_vs_steps({"k2": r}, scenario=seed, trained_steps=3)
    line = next(t for t in fig.data if t.name == "break-even at K")
    assert list(line.x) == [1, 2, 3, 4] and [round(y, 2) for y in line.y] == [2.60, 2.73, 2.87, 3.01]
    assert not fig.layout.shapes or all(s.y0 != s.y1 for s in fig.layout.shapes)  # no flat break-even line
    assert any("trained for 3 steps" in (a.text or "") for a in fig.layout.annotations)
    table = steps_table({"k2": r}, seed)
    assert list(table.index) == [1, 2, 3, 4] and list(table["break-even"]) == [2.597, 2.734, 2.871, 3.008]
    assert list(table["k2"]) == [r.interval_at(k).text(3) for k in range(1, 5)]
    # a payer is one whose whole interval clears break-even; one that straddles is too close to call
    for k in table.index:
        i, be = r.interval_at(k), table.loc[k, "break-even"]
        assert (table.loc[k, "pays at this K"] == "k2") == (i.low > be)
        assert (table.loc[k, "too close to call"] == "k2") == (i.low <= be <= i.high)
    assert list(fig.data[-1].error_y.array) == pytest.approx([r.interval_at(k).high - r.accept_length_by_steps[k - 1]
                                                             for k in range(1, 5)])


def test_page_06_judges_hundredths_with_intervals():
    """Page 06 said "pays" at 2.735 against a break-even of 2.733: an interval that straddles break-even is
    TOO CLOSE TO CALL, not a payer."""
    from eaglekit.analysis.acceptance.measure import AcceptanceResult
    from eaglekit.core.uncertainty import Interval
    from eaglekit.view.acceptance_figures import steps_table

    seed = Scenario(baseline_tps=82.0, verify_ms=30.0, draft_ms=1.67, steps=2)
    be2 = seed.at_steps(2).break_even_accept_length                      # 2.733
    r = AcceptanceResult(drafter="d", target="t", source="target", steps=2, temperature=0.0, prompts=12,
                         generated_tokens=100, cycles=40, accept_length=be2 + 0.002,
                         per_step_acceptance=(0.9, 0.8), accept_length_by_steps=(1.9, be2 + 0.002),
                         aux_convention="outputs", aux_indices=(1, 2, 3), accept_length_by_convention={},
                         per_prompt_accept_length=(),
                         accept_length_interval=Interval(be2 + 0.002, be2 - 0.1, be2 + 0.1, "bootstrap over 12 prompts, 95%"),
                         accept_length_by_steps_interval=(Interval(1.9, 1.85, 1.95, "bootstrap"), None))
    table = steps_table({"d": r}, seed)
    assert table.loc[2, "pays at this K"] == "none" and table.loc[2, "too close to call"] == "d"
    assert table.loc[2, "d"].startswith(f"{be2 + 0.002:.3f} (")


# -- another model's embeddings, unknown prompts ----------------------------------------------------------------
def test_embeddings_note_compares_names_then_content():
    assert embeddings_note(None, "org/k2") is None
    assert embeddings_note("hf://org/k25", "org/k25") is None
    assert embeddings_note("org/k2", "org/k25").startswith("warning: --embeddings org/k2 is not the dump's target")
    assert embeddings_note("copy/of/k25", "org/k25", cosine=0.9999) is None  # the content decides
    assert "mean cosine 0.9758" in embeddings_note("org/k2", "org/k25", cosine=0.9758)


@pytest.fixture(scope="module")
def k25_dump(trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("dumps") / "k25"
    dump_hidden_states(str(trained.target("k25")), trained.prompts("k25"), out, layers=[0, 1, 2, 3],
                       max_new_tokens=16, progress=False)
    return out


def test_embeddings_of_another_model_are_warned_about(capsys, trained, k25_dump):
    """The real-world trap: K2 and K2.5 share every shape, so K2's embeddings load on a K2.5 dump silently."""
    base = ["acceptance", str(trained.drafter("k2")), "--hidden-states", str(k25_dump), "--steps", "3", "--json"]
    assert main([*base, "--embeddings", str(trained.target("k25"))]) == 0
    right = capsys.readouterr()
    assert "warning" not in right.err and not [n for n in json.loads(right.out)["notes"] if "warning" in n]
    assert main([*base, "--embeddings", str(trained.target("k2"))]) == 0
    wrong = capsys.readouterr()
    warnings = [line.rsplit("\r", 1)[-1] for line in wrong.err.split("\n") if "warning" in line]  # bar: \r
    assert len(warnings) == 1 and warnings[0].startswith("eaglekit acceptance: warning: the embeddings from ")
    assert "do not match the dump's hidden_states[0]" in warnings[0]
    assert any(n.startswith("warning: the embeddings from") for n in json.loads(wrong.out)["notes"])


def test_a_dump_without_hidden_state_0_compares_the_names(trained, tmp_path):
    out = tmp_path / "dump"
    dump_hidden_states(str(trained.target("k25")), trained.prompts("k25"), out, layers=[1, 2, 3], max_new_tokens=8,
                       progress=False)
    r = measure_acceptance(trained.drafter("k2"), hidden_states=out, embeddings=trained.target("k2"), steps=2,
                           progress=False)
    assert any(n.startswith(f"warning: --embeddings {trained.target('k2')} is not the dump's target") for n in r.notes)


def test_prompts_of_unknown_tokens_are_warned_about(trained, k2, tmp_path):
    english = tmp_path / "english.jsonl"
    english.write_text('{"text": "Hello, how are you today?"}\n{"text": "Write a poem about the sea"}\n')
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=english, max_new_tokens=8, steps=2,
                           progress=False)
    warning = [n for n in r.notes if n.startswith("warning: ")]
    assert len(warning) == 1 and "are " in warning[0] and "unknown token" in warning[0] and "(100%)" in warning[0]
    ok = tmp_path / "language.jsonl"
    ok.write_text('{"text": "t5 t17 t40 t2"}\n')
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=ok, max_new_tokens=8, steps=2, progress=False)
    assert not [n for n in r.notes if "unknown token" in n]
    assert unknown_tokens_note(1, 2, target="t") is None and unknown_tokens_note(2, 3, target="t")


# -- go/no-go without a draft cost --------------------------------------------------------------------------
def test_go_no_go_without_draft_ms_says_drafting_is_free(trained, k2):
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=8,
                           steps=2, progress=False)
    free = r.go_no_go(baseline_tps=82, verify_ms=30)
    assert "Drafting counted free (no draft_ms given)" in free
    assert "counted free" not in r.go_no_go(baseline_tps=82, verify_ms=30, draft_ms=1.67)
    assert r.speedup(baseline_tps=82, verify_ms=30).to_json()["drafting_counted_free"] is True
    assert r.speedup(baseline_tps=82, verify_ms=30, draft_ms=1.67).to_json()["drafting_counted_free"] is False


def test_who_pays_stays_short_enough_for_a_table_cell():
    """The "pays at this K" column said "K2 drafter on K2, scratch on K2.5, warm start ..." (pandas cuts cells
    at 50 characters): with three or more drafters it names the ones that do not pay instead."""
    from eaglekit.view.acceptance_figures import _payers

    every = ["K2 drafter on K2", "K2 drafter on K2.5", "scratch on K2.5", "warm start on K2.5"]
    assert _payers(["K2 drafter on K2", "scratch on K2.5", "warm start on K2.5"], every) == "all but K2 drafter on K2.5"
    assert _payers(every, every) == "all" and _payers([], every) == "none"
    assert _payers(["K2 drafter on K2", "warm start on K2.5"], every) == "K2 drafter on K2, warm start on K2.5"
    assert _payers(["k2"], ["k2"]) == "k2"


def test_the_generation_limit_is_said_when_it_holds_the_accept_length_down():
    """Review: "per-step acceptance 1.00, 1.00, 1.00" beside accept length 3.84 at K = 3: each prompt's last
    cycle is cut at the generation limit (31 tokens: 7 full cycles of 4 and one of 3)."""
    from eaglekit.analysis.acceptance.notes import generation_limit_note

    note = generation_limit_note([31] * 12, 3)
    assert note is not None and "at most 3.875 per cycle at K = 3" in note and "--max-new-tokens" in note
    assert generation_limit_note([4000] * 12, 3) is None      # long generations: the cut last cycle is noise
    assert generation_limit_note([32] * 12, 3) is None        # 32 = 8 full cycles of 4: nothing is cut
    assert generation_limit_note([], 3) is None
