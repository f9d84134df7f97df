"""The live reading's parsing and arithmetic (eaglekit.core.serving.live), on pages as the engines write them."""

from __future__ import annotations

import math

import pytest
from livefixtures import SGLANG_AFTER, SGLANG_BEFORE, SGLANG_LOG, VLLM_AFTER, VLLM_BEFORE, vllm_pages

from eaglekit.core.errors import InputError
from eaglekit.core.serving.live import (MAX_FAMILIES, CounterReset, difference, parse_metrics, parse_sglang_log)
from eaglekit.demo.metricsserver import VllmCounters, sglang_metrics_text, vllm_metrics_text


def test_two_vllm_snapshots_give_the_arithmetic_exactly():
    before, after = (parse_metrics(t) for t in vllm_pages(VLLM_BEFORE, VLLM_AFTER))
    r = difference(before, after, 4.0)
    assert (r.engine, r.drafts, r.draft_tokens, r.accepted_tokens) == ("vllm", 500, 1500, 830)
    assert r.accepted_per_position == (355, 265, 210)
    assert r.accept_length.value == 1 + 830 / 500
    assert r.per_position_acceptance == (355 / 500, 265 / 500, 210 / 500)
    assert r.conditional_acceptance == (355 / 500, 265 / 355, 210 / 265)
    assert r.acceptance_rate == 830 / 1500
    assert r.generation_tokens_per_s == 2000 / 4.0
    assert r.steps == 3 and r.running_requests == 8.0
    j = r.to_json()
    for key in ("engine", "window_s", "drafts", "draft_tokens", "accepted_tokens", "accept_length",
                "per_position_acceptance", "generation_tokens_per_s"):
        assert key in j
    assert j["accept_length"] == 1 + 830 / 500 and j["batch"] == 8 and j["steps"] == 3


def test_the_interval_is_the_spread_of_accepted_tokens_per_draft():
    before, after = (parse_metrics(t) for t in vllm_pages(VLLM_BEFORE, VLLM_AFTER))
    r = difference(before, after, 1.0)
    # drafts by accepted count: 0: 500-355, 1: 355-265, 2: 265-210, 3: 210
    counts = {0: 145, 1: 90, 2: 55, 3: 210}
    values = [a for a, n in counts.items() for _ in range(n)]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = 1.959963984540054 * sd / math.sqrt(len(values))
    assert r.accept_length.low == pytest.approx(1 + mean - half, rel=1e-12)
    assert r.accept_length.high == pytest.approx(1 + mean + half, rel=1e-12)
    assert "per-position counts" in r.accept_length.method


def test_label_sets_are_summed_or_selected_by_model():
    a = vllm_metrics_text(VLLM_BEFORE, model="a", engine="0")
    b = vllm_metrics_text(VllmCounters(10, 30, 6, (3, 2, 1), 40), model="b", engine="1")
    text = a + b.replace("# HELP", "# XHELP").replace("# TYPE", "# XTYPE")  # the second server's lines only
    text = "\n".join(l for l in text.splitlines() if not l.startswith("# X"))
    both = parse_metrics(text)
    assert both.counters["drafts"] == 1010 and both.per_position == (713, 532, 421)
    assert both.models == ("a", "b")
    only_b = parse_metrics(text, model="b")
    assert only_b.counters["drafts"] == 10
    with pytest.raises(InputError, match="no speculative counters for model 'c'.*a, b"):
        parse_metrics(text, model="c")


def test_a_counter_that_went_down_is_a_restart_counted_from_zero():
    before, after = (parse_metrics(t) for t in vllm_pages(VLLM_AFTER, VLLM_BEFORE))
    r = difference(before, after, 1.0)
    assert (r.drafts, r.accepted_tokens, r.accepted_per_position) == (1000, 1660, (710, 530, 420))
    assert any("reset during the window" in n for n in r.notes)
    with pytest.raises(CounterReset, match="changed from vllm to sglang"):
        difference(before, parse_metrics(sglang_metrics_text(**SGLANG_AFTER)), 1.0)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("1660.0", "NaN"), "finite number >= 0"),
    (lambda t: t.replace("1660.0", "-3.0"), "finite number >= 0"),
    (lambda t: t.replace(',position="1"', ""), "no position label"),
    (lambda t: t.replace('position="2"', 'position="x"'), "position 'x'"),
    (lambda t: "\n".join(l for l in t.splitlines() if "num_draft_tokens" not in l), "num_draft_tokens_total missing"),
    (lambda t: "<html>{oops}</html>", "not Prometheus text"),
    (lambda t: "up 1\n", "neither vLLM's nor SGLang's"),
    (lambda t: 'vllm:num_requests_running{model_name="m"} 1.0\n', "serves no speculative decoding"),
    (lambda t: "\n".join(l for l in t.splitlines() if "num_drafts" not in l and "per_pos" not in l), "V0 engine"),
])
def test_broken_pages_are_refused_with_a_reason(edit, message):
    with pytest.raises(InputError, match=message):
        parse_metrics(edit(vllm_metrics_text(VLLM_BEFORE)))


def test_too_many_families_are_refused():
    text = "".join(f"f{i} 1\n" for i in range(MAX_FAMILIES + 5))
    with pytest.raises(InputError, match="metric families"):
        parse_metrics(text)


def test_inconsistent_counters_are_refused():
    before = parse_metrics(vllm_metrics_text(VLLM_BEFORE))
    after = parse_metrics(vllm_metrics_text(VllmCounters(1500, 4500, 2490, (1065, 1100, 1000), 29453)))
    with pytest.raises(InputError, match="position i \\+ 1 is only accepted where position i was"):
        difference(before, after, 1.0)
    idle = parse_metrics(vllm_metrics_text(VLLM_BEFORE))
    with pytest.raises(InputError, match="no drafts in the"):
        difference(before, idle, 1.0)


def test_two_sglang_snapshots_give_the_arithmetic_exactly():
    before = parse_metrics(sglang_metrics_text(**SGLANG_BEFORE))
    after = parse_metrics(sglang_metrics_text(**SGLANG_AFTER))
    r = difference(before, after, 8.0)
    assert r.engine == "sglang"
    assert (r.drafts, r.generation_tokens, r.requests_finished) == (800, 2440, 40)
    assert r.accepted_tokens == 2440 - 40 - 800
    assert r.accept_length.value == (2440 - 40) / 800 == 1 + r.accepted_tokens / r.drafts
    assert r.accept_length_prefill_included == 2440 / 800
    assert r.generation_tokens_per_s == 2440 / 8.0 and r.running_requests == 6.0
    assert r.engine_gauges == {"spec_accept_length": 2.9}
    assert not r.accept_length.has_interval and "--log" in r.accept_length.method


def test_sglang_log_lines_are_pooled_by_running_requests():
    r = parse_sglang_log(SGLANG_LOG, source="server.log", steps=3)
    assert r.accept_length.value == (2 * 3.0 + 4 * 2.5 + 2 * 2.0) / 8
    assert r.accept_length.has_interval and "bootstrap over 3 log lines" in r.accept_length.method
    assert r.window_s == 8.0 and r.generation_tokens_per_s == 200.0 and r.steps == 3
    with pytest.raises(InputError, match="outside 1..3"):
        parse_sglang_log(SGLANG_LOG.replace("3.00", "4.50"), steps=2)
    with pytest.raises(InputError, match="no 'Decode batch"):
        parse_sglang_log("nothing here\n")


def test_a_reading_renders_as_text_html_and_json():
    before, after = (parse_metrics(t) for t in vllm_pages(VLLM_BEFORE, VLLM_AFTER))
    r = difference(before, after, 2.0, source="http://127.0.0.1/metrics")
    assert "2.66 (" in str(r) and "per-step (conditional)" in str(r)
    assert "<table" in r._repr_html_() and "0.710" in r._repr_html_()
    assert r.to_json()["per_step_acceptance"] == [355 / 500, 265 / 355, 210 / 265]


def test_sglangs_step_gauges_give_the_served_steps():
    """sglang:spec_num_steps and sglang:spec_num_draft_tokens (gauges, one per scheduler) as SGLang's
    observability/metrics_collector.py exports them; no release exports a speculative_config_info metric."""
    info = ('# TYPE sglang:spec_num_steps gauge\nsglang:spec_num_steps{model_name="m",tp_rank="0"} 3.0\n'
            '# TYPE sglang:spec_num_draft_tokens gauge\nsglang:spec_num_draft_tokens{model_name="m",tp_rank="0"} 4.0\n')
    before = parse_metrics(sglang_metrics_text(**SGLANG_BEFORE) + info)
    after = parse_metrics(sglang_metrics_text(**SGLANG_AFTER) + info)
    r = difference(before, after, 8.0)
    assert r.steps == 3 and r.draft_tokens == 800 * 3 and r.spec_config == {"spec_num_steps": 3,
                                                                            "spec_num_draft_tokens": 4}
    assert r.acceptance_rate == (2440 - 40 - 800) / (800 * 3)


def test_a_page_listing_series_twice_is_refused_naming_them():
    page = vllm_metrics_text(VLLM_BEFORE)
    samples = [l for l in page.splitlines() if not l.startswith("#")]
    with pytest.raises(InputError, match=r'the series vllm:num_requests_running\{engine="0",model_name=.*listed twice'):
        parse_metrics(page + "\n".join(samples) + "\n")
    reordered = [l.replace('engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"',
                           'model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"') for l in samples]
    with pytest.raises(InputError, match="listed twice"):
        parse_metrics(page + "\n".join(reordered) + "\n")


def test_nothing_after_openmetrics_eof_is_read():
    """Series after `# EOF` (here, 10x the drafts) are not part of the exposition."""
    before, after = vllm_pages(VLLM_BEFORE, VLLM_AFTER)
    junk = vllm_metrics_text(VllmCounters(10_000, 30_000, 29_000, (10_000, 10_000, 9_000), 1), engine="9")
    r = difference(parse_metrics(before), parse_metrics(after + "# EOF\n" + junk), 1.0)
    assert (r.drafts, r.accepted_tokens) == (500, 830)


@pytest.mark.parametrize("counters, says", [
    (VllmCounters(1001, 1_000_003_000, 1_000_001_660, (711, 531, 421), 30_000), "more than 64 per draft"),  # L = 10^9
    (VllmCounters(1001, 3100, 1760, (711, 531, 421), 30_000), "more than 64 per draft"),  # 100 tokens in a draft
])
def test_drafts_no_engine_can_emit_are_refused(counters, says):
    with pytest.raises(InputError, match=says):
        difference(parse_metrics(vllm_metrics_text(VLLM_BEFORE)), parse_metrics(vllm_metrics_text(counters)), 1.0)


@pytest.mark.parametrize("position", ["\u00b2", "1" * 5000, "٣", "64"])
def test_a_position_is_a_short_ascii_number(position):
    with pytest.raises(InputError, match="vLLM labels draft positions 0 to num_speculative_tokens - 1"):
        parse_metrics(vllm_metrics_text(VLLM_BEFORE).replace('position="2"', f'position="{position}"'))


def test_long_lines_and_many_labels_are_refused_before_parsing():
    """prometheus_client's parser is quadratic in a line's length: a 4 MB comment line and a sample line with
    1.2 million labels are refused by their length or label count before it sees them (so in time linear in
    the page, which is at most 16 MiB)."""
    from eaglekit.core.serving.promtext import MAX_LABELS, MAX_LINE_CHARS, bounded_text

    page = vllm_metrics_text(VLLM_BEFORE)
    with pytest.raises(InputError, match="line 1 is 4,000,002 characters long"):
        parse_metrics("# " + "x" * 4_000_000 + "\n" + page)
    labels = ",".join(f'l{i}="v"' for i in range(1_200_000))
    with pytest.raises(InputError, match="characters long"):
        parse_metrics(page + f"vllm:x{{{labels}}} 1\n")
    few = ",".join(f'l{i}="v"' for i in range(MAX_LABELS + 1))
    assert len(few) < MAX_LINE_CHARS
    with pytest.raises(InputError, match=f"more than {MAX_LABELS} labels"):
        parse_metrics(page + f"vllm:x{{{few}}} 1\n")
    assert bounded_text(page, "p") == page  # an engine's page passes whole
