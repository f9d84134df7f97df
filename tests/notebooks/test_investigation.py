"""The investigation notebook's conclusion comes from the results: other parameters, other verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglekit.analysis.compat.pair import compat
from eaglekit.analysis.investigation import conclude
from eaglekit.core.serving.account import Account

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "00_investigation.ipynb"


def _conclusion(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("from eaglekit import conclude"):
            return cell.outputs[0]["data"]["text/plain"]
    raise AssertionError("no conclusion cell")


@pytest.mark.notebook
def test_parameters_change_the_conclusion(demo, trained, executed_notebook):  # trained: the world 00 runs on
    from eaglekit.view.report import execute_notebook
    from runfixtures import CELL_TIMEOUT

    default = _conclusion(executed_notebook(NOTEBOOK.stem))
    other = _conclusion(execute_notebook(NOTEBOOK, demo=demo.root, parameters={
        "DRAFTER_B": "hf://demo-lab/Llama-small-EAGLE3"}, timeout=CELL_TIMEOUT))
    shared = len(set(trained.manifest["common_k2"]) & set(trained.manifest["common_k25"]))
    assert "compatible-after-remap" in default and f"only {shared} draft tokens are shared" in default
    assert "trained independently" in default
    assert "verdict='incompatible'" in other and "cannot initialise B" in other
    assert "Weights:" not in other  # similarity is skipped for an incompatible pair


def test_conclusion_sentences_follow_the_numbers(demo):
    account = Account.from_measurements(82, 60, 2.0, verify_ms=30, steps=2, targets=(150,), expected=(3.2,))
    ft = conclude(compat(demo.drafter("k2"), demo.drafter("k25-finetuned")), account=account)
    assert ft.verdict == "compatible-after-remap"
    assert "only 1,800 draft tokens are shared (90% of the smaller vocabulary)" in ft.sentences[0]
    text = str(ft)
    assert "33.3 ms per draft-verify cycle" in text and "accept length 2.73" in text
    # one account: the verify-only figures beside the measured ones, steps and draft cost stated
    assert "break-even 2.46; 150 tok/s needs 4.5 (78% per-token acceptance)" in text
    assert "k = 2 draft steps" in text and "2 steps of 1.67 ms" in text
    assert "150 tok/s is out of reach at k = 2" in text and "it takes k = 5" in text
    assert "150 tok/s needs accept length 5.00 (per-token" not in text  # not reachable at k = 2, never claimed
    assert "Accept length 3.2 needs at least 3 draft steps; there it gives 91 tok/s" in text
    twin = conclude(compat(demo.drafter("k2"), demo.drafter("k2-speculators")))
    assert "drop-in" in twin.sentences[0]
    assert "<li>" in twin._repr_html_()


def test_conclusion_and_account_say_the_same_as_the_cli(demo, capsys):
    from eaglekit.cli import main

    account = Account.seed()
    conclusion = conclude(compat(demo.drafter("k2"), demo.drafter("k25-finetuned")), account=account)
    assert main(["speedup", "--baseline-tps", "82", "--verify-ms", "30", "--accept-length", "2.0", "--steps", "2",
                 "--spec-tps", "60", "--target-tps", "150", "--target-tps", "200"]) == 0
    cli = " ".join(capsys.readouterr().out.split())
    for sentence in account.sentences()[:4]:  # measured, verify-only, 150, 200
        assert sentence in conclusion.sentences
        assert " ".join(sentence.split()) in cli


def test_hidden_state_drift_answers_the_open_risk_in_the_conclusion(demo, trained):
    """Given two targets' hidden-state dumps, the conclusion reports them per layer instead of saying that
    shapes cannot tell."""
    from eaglekit.analysis.compat.pair import compat
    from eaglekit.analysis.investigation import conclude
    from eaglekit.analysis.drift.hidden import hidden_drift

    hidden = hidden_drift(trained.hidden_dump("k2"), trained.hidden_dump("k25"))
    text = str(conclude(compat(demo.drafter("k2"), demo.drafter("k25-finetuned")), hidden=hidden))
    assert "Shapes cannot say" not in text
    worst = min(hidden.layers, key=lambda d: d.cka)
    assert f"output of layer {worst.index - 1} (CKA {worst.cka:.3f})" in text
    plain = str(conclude(compat(demo.drafter("k2"), demo.drafter("k25-finetuned"))))
    assert "Shapes cannot say" in plain


@pytest.mark.notebook
def test_section_7_check_headline_names_each_engine_release(executed_notebook):
    """Issue 24/26: page 00's check of the warm-start export gives a verdict per engine release, never
    "READY to serve with SGLang and vLLM" while its details say the aux ids are ambiguous."""
    import json

    nb = executed_notebook("00_investigation")
    cell = next(c for c in nb.cells if c.cell_type == "code" and "display(eaglekit.check(warm.out" in c.source)
    text = json.dumps(cell.get("outputs", []))
    assert "READY to serve" not in text
    assert ("UNSURE for SGLang since #25454 (aux ids ambiguous); UNSURE for SGLang before #25454 (aux ids "
            "ambiguous); UNSURE for vLLM (aux ids ambiguous)") in text, text[:2000]


def test_the_bottom_line_numbers_are_the_pages_own(executed_notebook):
    """Issue 24: page 00 ends with one paragraph answering the seed's question on the demo, and each number in
    it appears where the page measured it: the K2 drafter on K2.5 (section 6b), the break-even from the measured
    cycle of section 6 at K = 3 (30 ms verify + 3 draft steps), the warm start and the scratch drafter (section 8)."""
    import re

    nb = executed_notebook("00_investigation")

    def text_of(marker: str, kind: str = "text/plain") -> str:
        cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
        return "".join(o.get("data", {}).get(kind, "") for o in cell.get("outputs", []))

    bottom = text_of("bottom_line = eaglekit.conclude_acceptance(")
    measured = text_of("measured = eaglekit.measure_demo(", "text/html")  # the table the page shows
    account = text_of("account = eaglekit.Account.from_measurements(", "text/html")
    on_new = float(re.search(r"on the new target version it falls to (\d+\.\d\d)", bottom).group(1))
    shown = float(re.search(r"(\d+\.\d{3}) \(vLLM convention", measured).group(1))
    assert round(shown, 2) == on_new, (on_new, shown)
    # the cycle at K = 3: section 6's verify of K2.5 at k = 3 (its cost model) plus three draft steps of 1.67 ms
    assert "accept length 2.73 on the measured cycle" in account
    be = re.search(r"([\d.]+) ms per cycle \(K = 3: verify ([\d.]+) ms \+ 3 x 1\.67 ms drafting, the verify growing "
                   r"([\d.]+) ms per drafted token\) the break-even accept length is (\d+\.\d\d)", bottom)
    assert be, bottom
    cycle, verify, growth = float(be.group(1)), be.group(2), float(be.group(3))
    assert re.search(rf"the verify of k = 3[^:]* takes {re.escape(verify)}\b", account), verify  # section 6's k = 3
    assert abs(cycle - (30.0 + growth + 3 * 5 / 3)) < 0.051 and abs(float(be.group(4)) - cycle * 82 / 1000) <= 0.0092
    # issue 30: every accept length with its interval, every verdict from it (GO only when the whole interval
    # clears break-even; TOO CLOSE TO CALL when it straddles), the interval's method stated
    best = re.search(r"warm start (\d+\.\d\d) \((\d+\.\d\d)-(\d+\.\d\d)\) at K = (\d) against (\d+\.\d\d) "
                     r"\((GO|NO-GO|TOO CLOSE TO CALL)\)", bottom)
    assert best, bottom
    low, high, be_k = float(best.group(2)), float(best.group(3)), float(best.group(5))
    assert best.group(6) == ("GO" if low > be_k else "NO-GO" if high < be_k else "TOO CLOSE TO CALL")
    # the drafter A on the new target never pays at any K (the demo's answer to the seed's question)
    assert re.search(r"old drafter on the new target \d+\.\d\d \([\d.-]+\) at K = \d against \d+\.\d\d \(NO-GO\)",
                     bottom)
    assert re.search(r"warm-started drafter reaches \d+\.\d\d \([\d.-]+\) and the one trained from scratch "
                     r"\d+\.\d\d \([\d.-]+\)", bottom)
    assert re.search(r"warm start \d+\.\d\d \([\d.-]+\) \((GO|NO-GO|TOO CLOSE TO CALL)\)", bottom)
    assert "bootstrap over 48 prompts, 95%" in bottom
    # the bottom line is not a coin toss: the warm start is judged GO at its best K with its whole interval
    assert best.group(6) == "GO"
    # one cycle model on the page: the conclusion judges drafter A on the bottom line's cycle at K = 3
    conclusion = text_of("conclusion = conclude(")
    assert f"{cycle:.1f} ms per cycle" in conclusion and f"break-even {be.group(4)}" in conclusion, conclusion
    assert "35.0 ms per cycle" not in conclusion


@pytest.mark.notebook
def test_the_bottom_line_agrees_with_page_06(executed_notebook):
    """Issue 24: one world, one set of numbers: page 00's bottom line (K = 3) says what page 06's table of
    accept length by K says for the same drafters and targets."""
    import re

    def text_of(nb, marker, kind="text/plain"):
        cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
        return "".join(o.get("data", {}).get(kind, "") for o in cell.get("outputs", []))

    bottom = text_of(executed_notebook("00_investigation"), "bottom_line = eaglekit.conclude_acceptance(")
    table = text_of(executed_notebook("06_acceptance"), "steps_table(results, serving)", "text/html")
    rows = {int(r[0]): r[1:] for r in (re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", tr)
                                       for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)) if r and r[0].isdigit()}
    be, own, new, scratch, warm = (float(x.split()[0]) for x in rows[3][:5])  # K = 3, three decimals (interval after)

    def said(pattern):  # the bottom line's two decimals
        return float(re.search(pattern, bottom).group(1))

    assert abs(said(r"reaches accept length (\d+\.\d\d) \([\d.-]+\) at K = 3") - own) <= 0.0051
    assert abs(said(r"on the new target version it falls to (\d+\.\d\d)") - new) <= 0.0051
    assert abs(said(r"warm-started drafter reaches (\d+\.\d\d)") - warm) <= 0.0051
    assert abs(said(r"the one trained from scratch (\d+\.\d\d)") - scratch) <= 0.0051
    assert abs(said(r"the break-even accept length is (\d+\.\d\d)") - be) <= 0.0051


#: the DFlash candidate's sentence in a bottom line: its accept length and interval at K = 3, the block cycle it is
#: judged on, and its verdict at its best K
DFLASH_AT_3 = (r"At K = 3 its (\d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\)) is (?:above|below|within the interval of) "
               r"the best EAGLE-3")


def dflash_figures(text: str) -> tuple[str, ...]:
    """(K = 3 accept length and interval, every K's 'K = j L (lo-hi) against BE (VERDICT)') from a conclusion."""
    import re

    at3 = re.search(DFLASH_AT_3, text)
    assert at3, text
    by_k = re.findall(r"K = \d \d+\.\d+ \([\d.]+-[\d.]+\) against \d+\.\d+ \((?:GO|NO-GO|TOO CLOSE TO CALL)\)", text)
    return (at3.group(1), *by_k)


@pytest.mark.notebook
def test_the_bottom_line_judges_the_dflash_candidate_on_its_block_cycle(executed_notebook):
    """Page 00's section 8 puts the DFlash drafter beside the three EAGLE-3 candidates: its accept length with its
    interval at every K against the BLOCK cycle's break-even (one draft forward, not K steps), its best K, and what
    the demo can and cannot say about the real block drafters."""
    import re

    nb = executed_notebook("00_investigation")
    cell = next(c for c in nb.cells
                if c.cell_type == "code" and "bottom_line = eaglekit.conclude_acceptance(" in c.source)
    bottom = "".join(o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))
    assert "The DFlash drafter (block 5) drafts K tokens in ONE forward, so it is judged on the block cycle" in bottom
    assert "plus one draft forward of 1.67 ms whatever K" in bottom
    at3, *by_k = dflash_figures(bottom)
    assert [re.match(r"K = (\d)", s).group(1) for s in by_k] == ["1", "2", "3", "4"]
    # the block break-even at K = 3 is the chain's less two draft steps (one forward instead of three)
    chain_be = float(re.search(r"the break-even accept length is (\d+\.\d\d)", bottom).group(1))
    block_be = float(re.search(r"K = 3 \d+\.\d+ \([\d.-]+\) against (\d+\.\d+)", bottom).group(1))
    assert abs((chain_be - block_be) - 2 * (5 / 3) * 82 / 1000) <= 0.011, (chain_be, block_be)
    assert re.search(r"At its best K of 1 to 4: DFlash \d+\.\d+ \([\d.-]+\) at K = \d against [\d.]+ "
                     r"\((GO|NO-GO|TOO CLOSE TO CALL)\)", bottom)
    markdown = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "z-lab/Kimi-K2.5-DFlash" in markdown and "5.3 on GSM8K" in markdown and "the mechanics" in markdown
    per_forward = "".join(o.get("data", {}).get("text/plain", "") for c in nb.cells if c.cell_type == "code"
                          and "bottom_line_per_forward = " in c.source for o in c.get("outputs", []))
    assert dflash_figures(per_forward)[0] == at3  # the same measurement on the other reading of the verify
