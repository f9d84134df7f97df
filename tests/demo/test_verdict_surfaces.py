"""Every surface gives each demo candidate one verdict: the function (eaglekit.demo_verdicts), the block pages 00,
06, 08 and 10 open with, page 08's candidate table at batch 1, `eaglekit plan` on the candidate's measured acceptance
and `eaglekit speedup` at the candidate's k. (`live` judges a gap between offline and served acceptance, not a
candidate; `check` judges readiness: neither gives a candidate verdict to compare.)"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest

from eaglekit.demo.candidates import (K25_CANDIDATES, SEED_BASELINE_RUN, SEED_CONTEXT, SEED_GPU, SEED_TARGET, SEED_TP,
                                      SEED_VERIFY, demo_candidates, demo_verdicts)

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("00_investigation", "06_acceptance", "08_serving_plan", "10_after_deploy")


@pytest.fixture(scope="module")
def world(notebook_demo):
    """The trained world the pages run on, named as the pages name it (from notebooks/, by the relative path the
    report runner gives them): the result cache keys a measurement by the drafter's path as given too, so the pages
    and this module read one measurement."""
    from eaglekit.demo.trained import build_trained_demo

    notebooks, here = ROOT / "notebooks", os.getcwd()
    os.chdir(notebooks)
    try:
        yield build_trained_demo(os.path.join(os.path.relpath(notebook_demo.root.resolve(), notebooks.resolve()),
                                              "trained"))
    finally:
        os.chdir(here)


@pytest.fixture(scope="module")
def verdicts(world):
    return demo_verdicts(world)


def _block(nb) -> dict[str, str]:
    """{candidate: "VERDICT@k"} from the first verdict block of an executed page, and the cell it was in."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/html", "")
            m = re.search(r'class="eaglekit-verdict" data-verdicts="([^"]*)"', text)
            if m:
                return index, dict(item.split("=", 1) for item in html.unescape(m.group(1)).split(";"))
    raise AssertionError("no verdict block")


def _expected(verdicts) -> dict[str, str]:
    return {c.candidate: f"{c.verdict}@{c.steps}" for c in verdicts.candidates}


def test_the_function_judges_every_candidate_once(verdicts):
    assert [c.candidate for c in verdicts.candidates] == list(K25_CANDIDATES)
    assert {c.verdict for c in verdicts.candidates} <= {"GO", "NO-GO", "TOO CLOSE TO CALL"}
    assert verdicts["DFlash"].block and not verdicts["warm start"].block


@pytest.mark.notebook
@pytest.mark.parametrize("page", PAGES)
def test_each_page_opens_with_the_same_verdicts(executed_notebook, verdicts, page):
    nb = executed_notebook(page)
    index, block = _block(nb)
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert index == first_code  # the first output after the title
    assert block == _expected(verdicts)


@pytest.mark.notebook
def test_page_08_table_at_batch_1_reads_the_same_figures(executed_notebook, verdicts):
    nb = executed_notebook("08_serving_plan")
    table = next(o["data"]["text/html"] for c in nb.cells for o in c.get("outputs", [])
                 if "verdict (both readings)" in str(o.get("data", {}).get("text/html", "")))
    table = "".join(table) if isinstance(table, list) else table
    for c in verdicts.candidates:
        assert c.tokens_per_s.text(1) in table and c.verdict in table


@pytest.fixture(scope="module")
def seed_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seed")
    runs, costs = folder / "runs.csv", folder / "verify.csv"
    runs.write_text("batch,steps,topk,draft_tokens,accept_length,tokens_per_s\n"
                    + ",".join("" if x is None else str(x) for x in SEED_BASELINE_RUN) + "\n")
    costs.write_text("batch,tokens,ms\n" + "".join(",".join(map(str, row)) + "\n" for row in SEED_VERIFY))
    return folder, runs, costs


def test_plan_gives_each_candidate_the_same_verdict(world, verdicts, seed_files, capsys):
    from eaglekit.cli import main

    folder, runs, costs = seed_files
    for name, result in demo_candidates(world, progress=False).items():
        path = folder / f"{K25_CANDIDATES[name]}.json"
        path.write_text(json.dumps(result.to_json()))
        block = (["--block-drafter", str(world.drafter(K25_CANDIDATES[name]) / "config.json")]
                 if name == "DFlash" else [])
        assert main(["plan", "--acceptance", str(path), *block, "--measured", str(runs), "--costs", str(costs),
                     "--target", SEED_TARGET, "--gpu", SEED_GPU, "--tp", str(SEED_TP), "--context", str(SEED_CONTEXT),
                     "--batch", "1", "--max-steps", "4", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        calls = {out["batches"][0]["verdict"]} | {r["batches"][0]["verdict"] for r in out["verify_readings"]}
        assert (calls.pop() if len(calls) == 1 else "TOO CLOSE TO CALL") == verdicts[name].verdict, name


def test_speedup_at_the_candidates_k_agrees_where_it_can_tell(verdicts, capsys):
    """`speedup` prices the candidate's accept length at its k on the measured cycle (point figures, both readings,
    a point within the two throughputs' noise no answer): its first line is the verdict. Where the plan decides,
    it is the plan's call; where the plan is TOO CLOSE TO CALL, speedup never gives the opposite of either
    reading's call. (speedup knows the seed's speculative run, so its drafting is measured; the plan leaves that
    run out, as it belongs to another drafter, and prices drafting under a prior, so its interval is wider.)"""
    from eaglekit.cli import main

    for c in verdicts.candidates:
        if c.block:
            continue  # speedup prices a chain cycle
        value = round(c.accept_length.value, 4)
        assert main(["speedup", "--baseline-tps", "82", "--verify-ms", "30", "--accept-length", "2.0", "--steps", "2",
                     "--spec-tps", "60", "--candidate-accept-length", str(value), "--candidate-steps", str(c.steps),
                     "--verify-grows-for", SEED_TARGET, "--tp", str(SEED_TP)]) == 0
        first = " ".join(capsys.readouterr().out.split("Throughput account")[0].split())
        assert first.startswith(f"Verdict: accept length {value:g} at k = {c.steps}: "), first
        call = first.split(f"at k = {c.steps}: ", 1)[1].split(" (", 1)[0]
        if c.verdict != "TOO CLOSE TO CALL":
            assert call == c.verdict, (c.candidate, first)
        else:
            readings = {v for _, v in c.readings}
            opposite = {"GO": "NO-GO", "NO-GO": "GO"}.get(call)
            assert call == "TOO CLOSE TO CALL" or opposite not in readings, (c.candidate, first, c.readings)
