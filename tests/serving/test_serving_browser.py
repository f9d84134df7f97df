"""The serving widget's JavaScript computes what its Python twin computes (Debian's headless Chromium)."""

from __future__ import annotations

import itertools
import json
import re

import pytest

import eaglekit
from eaglekit.view.frontend import esm
from eaglekit.view.serving import FRONT_END, numbers, values_from_plan
from reportfixtures import report  # noqa: F401  (report: the session fixture)

pytestmark = [pytest.mark.browser]



def _close(py, js, path=()):
    if isinstance(py, dict):
        assert set(py) == set(js), path
        for k in py:
            _close(py[k], js[k], (*path, k))
    elif isinstance(py, list):
        assert len(py) == len(js), path
        for i, (a, b) in enumerate(zip(py, js)):
            _close(a, b, (*path, i))
    elif isinstance(py, float):
        assert js is not None and abs(js - py) <= 1e-9 * max(1.0, abs(py)), (path, js, py)
    else:
        assert js == py, (path, js, py)


def test_serving_javascript_computes_what_python_computes(chromium):
    plans = [
        eaglekit.plan((0.8, 0.7, 0.6), target="kimi-k25-int4", gpu="H20", tp=8, context=2048,
                      calibrate_points=[(1, 1, 12.2)], draft_costs={1: 0.4, 256: 1.2}),
        eaglekit.plan((0.618034, 0.618034), costs=[(1, 1, 12.2), (1, 3, 30.0)], target="kimi-k2-fp8", tp=8,
                      batches=(1,), draft_costs={1: 5 / 3}),
        eaglekit.plan((0.9,), costs=[(1, 1, 12.2), (1, 3, 30.0), (4, 1, 15.0)], max_steps=5),
        eaglekit.plan((0.8, 0.5), target="llama-3.1-8b", gpu="H100-SXM", tp=2, context=512),
        eaglekit.plan((0.8, 0.7), measured=[(1, 0, None, None, None, 141.4), (16, 0, None, None, None, 900.0),
                                            (64, 0, None, None, None, 1500.0), (1, 2, 1, 3, 2.3, 230.0)],
                      target="llama-3.1-8b", gpu="H100-SXM"),  # a cost per request, drafting and overhead fitted
        # six decodes the terms miss (SpecForge #339's baseline): forwards anchored to them, interpolated between
        eaglekit.plan((0.6, 0.5, 0.4), measured=[(b, 0, None, None, None, t) for b, t in (
            (1, 222.47), (4, 566.21), (8, 733.61), (16, 1012.96), (32, 1077.55), (64, 1073.69))],
                      target="qwen3-30b-a3b", gpu="H100-SXM", tp=2, context=1024, batches=(1, 2, 4, 8, 16, 32, 64)),
    ]
    assert plans[-1].model.misfit and values_from_plan(plans[-1])["decode_offsets"]
    grid = []
    for p in plans:
        for b, ctx in itertools.product((0, 3, 6, 9), (0, 4096, 65536)):
            grid.append({**values_from_plan(p), "batch_log2": b, "context": ctx})
    page = chromium.new_page()
    page.set_content("<html><body></body></html>")
    got = page.evaluate("""async ([src, grid]) => {
        const mod = await import(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
        return grid.map((p) => mod.compute(p));
    }""", [esm(FRONT_END), grid])
    page.close()
    assert len(got) == len(grid)
    for p, js in zip(grid, got):
        _close(numbers(p), js)


@pytest.mark.notebook
def _plan_state(html_path) -> dict:
    """The serving widget's values as the page inlines them for its front end (``const values = {...}``)."""
    text, decoder = html_path.read_text(), json.JSONDecoder()
    for m in re.finditer(r"const values = ", text):
        values, _ = decoder.raw_decode(text, m.end())
        if "plan_schedule" in values:
            return values
    raise AssertionError("no serving widget values in the page")


def test_the_rendered_plan_page_recomputes_without_a_kernel(chromium, report):  # noqa: F811
    """Notebook 08 as the session's report renders it (from the page the suite executed once): the widget's batch
    and context controls recompute the plan offline."""
    problems: list[str] = []
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file://", "data:", "blob:"))
               else (problems.append(r.request.url), r.abort()))
    page.goto(report.pages["08_serving_plan"].html_path.as_uri())
    widget = page.locator(".eaglekit-serving").first
    summary = widget.locator("p.summary")
    summary.wait_for(timeout=20_000)
    first = summary.text_content()
    state = _plan_state(report.pages["08_serving_plan"].html_path)
    choice = {int(c[0]): (int(c[1]), c[2]) for c in state["plan_choice"]}
    # while the controls hold the plan's inputs, the page shows the plan's own schedule and choice (they weigh the
    # 95% intervals the widget cannot recompute) beside what the point values alone say
    shown = re.search(r"planned batch sizes \(1-64\): the plan's (\{[^}]*\})", first)
    assert shown and json.loads(shown.group(1)) == {str(k): v for k, v in state["plan_schedule"].items()}, first
    assert first.startswith("Batch 1: "), first
    k1, verdict1 = choice[1]
    assert f"The plan: k = {k1} ({verdict1}" in first or f"The plan chooses k = {k1} here ({verdict1}" in first, first
    stops = state["plan_stops_paying_at"]
    assert (f"speculation stops paying at batch {stops}." in first if stops is not None
            else "pays at every planned batch size" in first), first

    def set_value(name: str, value: str) -> None:
        box = widget.locator(f'input[name="{name}-value"]')
        box.fill(value)
        box.press("Enter")

    set_value("batch_log2", "6")
    at64 = summary.text_content()
    k64, verdict64 = choice[64]
    assert at64.startswith("Batch 64: "), at64
    assert f"The plan: k = {k64} ({verdict64}" in at64 or f"The plan chooses k = {k64} here ({verdict64}" in at64, at64
    set_value("batch_log2", "11")  # batch 2048: does not fit, and the page never says speculation pays everywhere
    text = summary.text_content()
    assert text.startswith("Batch 2048 does not fit in memory (at most 109 requests at 2048 tokens)"), text
    assert "pays at every planned batch size" not in text
    set_value("batch_log2", "6")
    set_value("context", "65536")  # a long context: KV reads hide the verify's extra compute, and fewer fit
    assert summary.text_content().startswith("Batch 64 does not fit in memory (at most 3 requests at 65536 tokens)")
    assert "the plan's" not in summary.text_content()  # its choices were for 2048 tokens of context
    set_value("context", "1024")
    assert "Point values for these inputs" in summary.text_content(), summary.text_content()
    set_value("context", "65536")
    fixed = widget.locator('input[name="fixed_ms-value"]').input_value()
    assert len(fixed) <= 6, fixed  # the number box shows the value to its step (11.08), not 11.077967...
    assert widget.locator("table.readout tr").count() == 7 and widget.locator("table.readout tr.best").count() == 1
    note = widget.locator("p.input-note")
    assert note.is_hidden()
    set_value("context", "1e12")  # out of range: clamped to the slider's maximum, and the page says so
    assert note.is_visible() and "is outside this control's range" in note.text_content(), note.text_content()
    kept = widget.locator('input[name="context-value"]').input_value()
    assert note.text_content().endswith(f"set to {kept}.") and float(kept) < 1e12
    assert problems == []
    page.close()


def test_the_calculator_s_verify_moves_along_the_account_s_line_in_javascript_too(chromium):
    """The calculator's verify anchored at the measured k (verify_steps): its front end and its Python twin agree."""
    from eaglekit.view.calculator import FRONT_END as CALC, Calculator
    from eaglekit.view.calculator import numbers as calc_numbers

    base = Calculator.preset("seed").values
    grid = [{**base, "steps": k, "accept_length": L, "verify_steps": anchor}
            for k, L, anchor in itertools.product((1, 2, 3, 6), (1.5, 3.2), (0, 2, 4))]
    page = chromium.new_page()
    page.set_content("<html><body></body></html>")
    got = page.evaluate("""async ([src, grid]) => {
        const mod = await import(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
        return grid.map((p) => mod.compute(p));
    }""", [esm(CALC), grid])
    page.close()
    for p, js in zip(grid, got):
        _close(calc_numbers(p), js)
    assert base["verify_steps"] == 2
