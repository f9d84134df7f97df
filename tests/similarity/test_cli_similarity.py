"""``eaglekit similarity``: the --json schema, the offline --html page, one-line errors with exit 2."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from eaglekit.cli import main


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["similarity", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_schema(demo, capsys):
    code, out, _ = _run(capsys, str(demo.drafter("k2")), str(demo.drafter("k25-finetuned")), "--json",
                        "--tensors", "lm_head.weight", "--tensors", "fc.*", "--grid", "4", "3")
    assert code == 0
    doc = json.loads(out)
    assert {"tensors", "only_a", "only_b", "lm_head_alignment"} <= set(doc)
    assert [t["name"] for t in doc["tensors"]] == ["fc.weight[low: aux layer 2]", "fc.weight[mid: aux layer 30]",
                                                   "fc.weight[high: aux layer 58]", "lm_head.weight"]
    for t in doc["tensors"]:
        assert list(t) == ["name", "cosine", "rel_diff", "norm_ratio", "grid", "rows_compared"]
        assert len(t["grid"]) == 4 and all(len(row) == 3 and all(isinstance(v, float) for v in row)
                                           for row in t["grid"])
    assert doc["tensors"][-1]["rows_compared"] == 1800
    assert doc["lm_head_alignment"] == {"shared_rows": 1800, "draft_vocab_a": 2000, "draft_vocab_b": 2000,
                                        "method": "target token", "full_vocabulary_a": False,
                                        "full_vocabulary_b": False}
    assert doc["incomparable"] == []  # two Llama drafters: every family compares
    assert doc["only_a"] == [] and doc["only_b"] == []


def test_text_through_the_hub(hub, capsys):
    code, out, _ = _run(capsys, "hf://demo-aqmed/Kimi-K2-Instruct-eagle3", "hf://demo-team/Kimi-K2.5-eagle3-scratch",
                        "--endpoint", hub.endpoint, "--tensors", "midlayer.mlp.up_proj.weight", "--tensors", "embed*")
    assert code == 0
    assert "midlayer.mlp.up_proj.weight" in out and "only in B: embed_tokens.weight" in out
    assert "\x1b[" not in out  # no colour when stdout is not a terminal


def test_html_page_is_self_contained(demo, tmp_path, capsys):
    page = tmp_path / "sim.html"
    code, _, err = _run(capsys, str(demo.drafter("k2")), str(demo.drafter("k25-finetuned")),
                        "--tensors", "midlayer.self_attn.q_proj.weight", "--html", str(page))
    assert code == 0 and f"wrote {page}" in err
    text = page.read_text()
    assert text.count("* plotly.js v") == 1  # the bundle, inlined once
    assert not re.findall(r"<script[^>]*\bsrc=|<link[^>]*\bhref=", text)  # nothing fetched from elsewhere
    assert text.count('class="plotly-graph-div"') == 3  # overview + embed and hidden halves


def test_errors_are_one_line_with_exit_2(demo, capsys, tmp_path):
    k2 = str(demo.drafter("k2"))
    with pytest.raises(SystemExit) as exit_:   # a usage error: refused while the flags are parsed
        main(["similarity", k2, k2, "--grid", "0", "3"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("eaglekit similarity: error: argument --grid: expected a grid size from 1 to "
                                       "4,096, got '0'\n")
    code, _, err = _run(capsys, k2, k2, "--tensors", "nope*")
    assert code == 2 and err.startswith("eaglekit similarity: error: no tensor matches 'nope*'")
    code, _, err = _run(capsys, k2, k2, "--tensors", "norm.weight", "--html", str(tmp_path / "missing" / "x.html"))
    assert code == 2 and "cannot write" in err and "choose a writable path for --html" in err
    code, _, err = _run(capsys, k2, str(tmp_path / "nothing-here"))
    assert code == 2 and err.count("\n") == 1 and "nothing-here" in err


@pytest.mark.browser
def test_html_page_opens_offline_with_hover(demo, tmp_path, capsys):
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    page_path = tmp_path / "sim.html"
    assert main(["similarity", str(demo.drafter("k2")), str(demo.drafter("k25-finetuned")),
                 "--tensors", "midlayer.mlp.up_proj.weight", "--grid", "8", "8", "--html", str(page_path)]) == 0
    with sync_api.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=chromium)
        except Exception as e:  # no browser on this machine
            pytest.skip(f"no Chromium to drive: {e}")
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        blocked: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
                   else (blocked.append(r.request.url), r.abort()))
        page.goto(page_path.as_uri())
        plots = page.locator(".js-plotly-plot")
        plots.nth(1).locator(".nsewdrag").first.wait_for(state="attached", timeout=15_000)
        assert plots.count() == 2
        box = plots.nth(1).locator(".nsewdrag").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.05, box["y"] + box["height"] * 0.95)  # bottom-left cell
        hover = page.locator(".hoverlayer .hovertext").first
        hover.wait_for(state="attached", timeout=5_000)
        text = hover.text_content()
        browser.close()
    assert not errors and not blocked
    assert "rows 1008–1151" in text and "cols 0–55" in text and "cosine" in text


def test_incompatible_pair_says_why_nothing_was_compared_and_exits_4(demo, capsys):
    """Item 10: an incompatible pair printed "0 compared" and exited 0."""
    code, out, err = _run(capsys, str(demo.drafter("k2")), str(demo.drafter("llama-small")))
    assert code == 4 and "0 compared" in out
    assert err.startswith("eaglekit similarity: nothing compared between ") and err.count("\n") == 1
    assert "every tensor both have differs: d2t (shape [2000] vs [1000])" in err and "eaglekit compat A B" in err


@pytest.mark.parametrize("measure", ["rel_diff", "cosine", "norm_ratio"])
def test_html_measure_colours_on_a_range_that_shows_the_drift(demo, tmp_path, capsys, measure):
    """Item 8: cosine on -1..1 painted a fine-tune one uniform colour."""
    import json as _json

    page = tmp_path / f"{measure}.html"
    args = [str(demo.drafter("k2")), str(demo.drafter("k25-finetuned")), "--tensors", "midlayer.mlp.up_proj.weight",
            "--grid", "8", "8", "--html", str(page)]
    code, _, _ = _run(capsys, *args, *(["--measure", measure] if measure != "rel_diff" else []))
    assert code == 0
    text = page.read_text()
    figures = [_json.loads(m) for m in re.findall(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', text, re.DOTALL)]
    lo, hi = figures[-1][0]["zmin"], figures[-1][0]["zmax"]
    assert figures[0][1]["zmin"] == lo and figures[0][1]["zmax"] == hi  # the overview shares the range

    from eaglekit.analysis.similarity.measure import similarity
    from eaglekit.analysis.similarity.report import measures_from_sums

    report = similarity(demo.drafter("k2"), demo.drafter("k25-finetuned"), tensors="midlayer.mlp.up_proj.weight",
                        grid=(8, 8), progress=False)
    z = measures_from_sums(report.tensors[0].sums)[measure]
    assert lo <= z.min() and z.max() <= hi
    assert (z.max() - z.min()) / (hi - lo) > 0.8  # the data spans the colours: the drift from 0.05 to 0.5 shows
    if measure == "rel_diff":
        assert lo == 0.0 and "Colour: ‖a−b‖/‖a‖ (0 means unchanged), from 0 to" in text
    if measure == "cosine":
        assert lo > 0.5  # not -1..1: a fine-tune's cosines all sit near 1
    assert "the same in every figure" in text


def test_device_cuda_without_a_gpu_says_so_in_user_words(demo, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    k2 = str(demo.drafter("k2"))
    code, _, err = _run(capsys, k2, k2, "--tensors", "norm.weight", "--device", "cuda")
    assert code == 2 and err.count("\n") == 1
    assert "cannot compute on a GPU" in err and "--device cpu" in err and "--device auto" in err


def test_an_unwritable_html_is_refused_before_any_work(demo, tmp_path, monkeypatch, capsys):
    import eaglekit.analysis.similarity.measure as similarity_module

    def no_work(*args, **kwargs):
        raise AssertionError("similarity ran before --html was checked")

    monkeypatch.setattr(similarity_module, "similarity", no_work)
    k2 = str(demo.drafter("k2"))
    code, _, err = _run(capsys, k2, k2, "--html", str(tmp_path / "missing" / "x.html"))
    assert code == 2 and err.count("\n") == 1 and "cannot write" in err and "writable path for --html" in err
    code, _, err = _run(capsys, k2, k2, "--html", str(tmp_path))
    assert code == 2 and "cannot write" in err


def _narrower_copy(src, dst):
    """``src`` with every weight tensor at half its size (hidden 448 -> 224), d2t and t2d unchanged."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    tensors = load_file(str(dst / "model.safetensors"))
    save_file({k: v if k in ("d2t", "t2d") else torch.zeros([max(1, n // 2) for n in v.shape], dtype=v.dtype)
               for k, v in tensors.items()}, str(dst / "model.safetensors"))
    config = json.loads((dst / "config.json").read_text())
    config["hidden_size"] //= 2
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def test_different_hidden_sizes_with_equal_maps_exit_4(demo, capsys, tmp_path):
    """Issue 24: only d2t/t2d compared (equal) between hidden 448 and 224, and the exit code was 0."""
    narrow = _narrower_copy(demo.drafter("k2"), tmp_path / "narrow")
    code, out, err = _run(capsys, str(demo.drafter("k2")), str(narrow))
    assert code == 4 and "d2t (I64 [2000]): equal" in out
    assert err.startswith("eaglekit similarity: no weight tensor compared (only d2t and t2d) between ")
    assert "fc.weight (shape [448, 1344] vs [224, 672])" in err and err.count("\n") == 1


def test_maps_alone_asked_for_are_not_an_incompatible_pair(demo, capsys):
    code, out, _ = _run(capsys, str(demo.drafter("k2")), str(demo.drafter("k2")), "--tensors", "d2t")
    assert code == 0 and "d2t (I64 [2000]): equal" in out
