"""Target drift on the demo's two quantised targets: figures against a dense torch reference, sampled
intervals against the full pass, Dask against the single process (and a worker killed mid-run), the
drafter's view, and one-line errors for bad quantised input."""

from __future__ import annotations

import json
import os
import re
import signal
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

from eaglekit.analysis.drift import plan as drift_plan
from eaglekit.analysis.drift.dequant import quant_weights
from eaglekit.analysis.drift.measure import _execute, drift, parse_size
from eaglekit.analysis.drift.plan import make_plan, pair_weights, sample
from eaglekit.analysis.drift.stats import Stratum, sample_estimate
from eaglekit.cli import main
from eaglekit.core.errors import InputError
from eaglekit.demo import targets as demo_targets
from eaglekit.io.reader import open_checkpoint


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("targets")
    built = demo_targets.build_targets(root)
    return root / built["k2"], root / built["k25"]


@pytest.fixture(scope="module")
def drafter(tmp_path_factory):
    """A drafter config + d2t/t2d over the demo vocabulary (aux ids [2, 30, 58], 2000 draft tokens)."""
    from safetensors.torch import save_file

    from eaglekit.core.tokens.vocab import build_vocab_map
    from eaglekit.demo.spec import DRAFT_VOCAB, VOCAB, specforge_config

    folder = tmp_path_factory.mktemp("drafter")
    ids = np.sort(np.random.default_rng(1).choice(VOCAB, DRAFT_VOCAB, replace=False))
    d2t, t2d = build_vocab_map(ids, VOCAB)
    save_file({"d2t": torch.from_numpy(d2t.astype(np.int64)), "t2d": torch.from_numpy(t2d.astype(bool)),
               "norm.weight": torch.ones(8)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(specforge_config()))
    return folder, ids


@pytest.fixture(scope="module")
def full_report(pair, drafter):
    return drift(*pair, drafter=drafter[0], full=True, scheduler="inline", progress=False)


def _dense(folder: Path) -> dict[str, torch.Tensor]:
    """Every weight of a demo target dequantised by the reference implementations (torch float8, and
    compressed-tensors' own unpacking, scaled in float64: its dequantize rounds to the bf16 scale dtype),
    keyed by aligned name."""
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from safetensors.torch import load_file

    from eaglekit.analysis.drift.dequant import align_name

    raw = {}
    for f in sorted(folder.glob("*.safetensors")):
        raw.update(load_file(str(f)))
    out = {}
    for name, t in raw.items():
        if name.endswith("weight_scale_inv") or name.endswith(("weight_scale", "weight_shape")):
            continue
        if name.endswith("weight_packed"):
            m = name[:-len("_packed")]
            q = unpack_from_int32(t, 4, torch.Size(raw[m + "_shape"].tolist()))  # (rows, cols) int8
            out[align_name(m)] = q.double() * raw[m + "_scale"].double().repeat_interleave(32, 1)  # float64, not bf16
        elif t.dtype == torch.float8_e4m3fn:
            s = raw[name + "_scale_inv"]
            rows, cols = t.shape
            expanded = s.double().repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]  # (rows, cols)
            out[align_name(name)] = t.double() * expanded
        else:
            out[align_name(name)] = t.double()
    return out


def test_full_pass_equals_dense_reference(pair, full_report):
    a, b = _dense(pair[0]), _dense(pair[1])
    for stratum, match in [("layer 60 routed experts", "layers.60.mlp.experts."),
                           ("layer 7 attention", "layers.7.self_attn.")]:
        keys = [k for k in a if k.startswith(match) and "norm" not in k]
        ab = sum(float((a[k] * b[k]).sum()) for k in keys)
        aa = sum(float((a[k] * a[k]).sum()) for k in keys)
        bb = sum(float((b[k] * b[k]).sum()) for k in keys)
        dd = sum(float(((a[k] - b[k]) ** 2).sum()) for k in keys)
        fig = full_report.figure(stratum)
        assert fig.cosine.value == pytest.approx(ab / (aa * bb) ** 0.5, rel=1e-6)  # row sums in float32
        assert fig.relative.value == pytest.approx((dd / aa) ** 0.5, rel=1e-6)
        assert fig.cosine.low == fig.cosine.high == fig.cosine.value  # full pass: exact


def test_drafters_view(full_report, drafter):
    gen = torch.Generator().manual_seed(demo_targets.SEED)
    _, _, moved = demo_targets.target_tensors(gen)
    assert full_report.embedding_moved == tuple(int(i) for i in moved)  # exactly the rows the demo re-learned
    assert full_report.embedding.moved.value == pytest.approx(demo_targets.MOVED_TOKENS / 10240)
    assert full_report.draft_lm_head.rows == len(drafter[1])
    assert set(full_report.draft_moved) <= set(int(i) for i in drafter[1])
    feeds = {(f.engine, f.aux_id): f.layer for f in full_report.feeds}
    assert feeds[("SGLang before #25454", 2)] == 2 and feeds[("vLLM", 2)] == 1  # output of layer i vs input of layer i
    assert feeds[("SGLang since #25454", 2)] == 1  # DeepSeek-family model code reads ids not starting at 1 as inputs
    deep, shallow = (next(f for f in full_report.feeds if f.layer == k) for k in (58, 2))
    assert deep.own.relative.value > shallow.own.relative.value  # the demo drifts more with depth
    assert full_report.only_b == ("vision_tower.patch_embed.proj.weight",)
    text, page = str(full_report), full_report._repr_html_()
    assert "embedding: rows moved" in text and "layer 60 routed experts" in text and "<table" in page
    # issue 24: "0.0293 of 10240 rows" mixed a fraction with a count
    n = len(full_report.embedding_moved)
    assert f"{n} of 10240 rows (fraction {n / 10240:.4f})" in text and "of 10240 rows;" not in text
    assert "fraction " in text.split("lm_head, draft rows moved", 1)[1].splitlines()[0]


def test_sampled_intervals_cover_the_full_pass(pair):
    """200 seeded samples at 30% of the bytes: each interval (95%) covers the full-pass value."""
    ca, cb = open_checkpoint(pair[0]), open_checkpoint(pair[1])
    with ca, cb:
        pairs, oa, ob, mm = pair_weights(quant_weights(ca.inventory), quant_weights(cb.inventory))
    plan = make_plan(pairs, oa, ob, mm, unit_bytes=512)
    order = np.arange(len(plan))
    values, _, _, _ = _execute(plan, order, (str(pair[0]), str(pair[1])), None, 1e-3, "inline", False, None)
    figures = {"whole": list(plan.strata), "embedding": ["embedding"], "lm_head": ["lm_head"]}
    truth = {k: sample_estimate([Stratum(len(plan.strata[s]), values[plan.strata[s]]) for s in v]) for k, v in figures.items()}
    total = plan.nbytes.sum()
    hits = {(k, j): 0 for k in figures for j in range(3)}
    trials = 200
    for seed in range(trials):
        chosen = sample(plan, 0.3 * total, np.random.default_rng(seed))
        for k, names in figures.items():
            est = sample_estimate([Stratum(len(plan.strata[s]), values[chosen[s]]) for s in names])
            for j in range(3):
                hits[k, j] += est[j].low <= truth[k][j].value <= est[j].high
    rates = {key: h / trials for key, h in hits.items()}
    assert min(rates.values()) >= 0.95, rates


def test_sampled_mode_reads_under_budget(pair):
    r = drift(*pair, full=False, budget="4MB", progress=False, seed=3)
    assert r.mode == "sampled" and sum(r.bytes_read) <= 4e6 and sum(r.bytes_read) < 0.45 * sum(r.bytes_total)
    assert r.whole.cosine.low < r.whole.cosine.value < r.whole.cosine.high
    again = drift(*pair, full=False, budget="4MB", progress=False, seed=3)
    assert again.to_json()["strata"] == r.to_json()["strata"]  # a seed fixes the sample


def _kill_once(marker: str, index: int) -> None:
    """Task hook: the worker running task 1 dies (SIGKILL) the first time, as if its machine failed."""
    if index == 1 and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)


def test_dask_equals_single_process_and_survives_a_killed_worker(pair, full_report, drafter, tmp_path):
    from distributed import Client, LocalCluster

    def same(r):
        assert [f.to_json() for f in r.strata] == [f.to_json() for f in full_report.strata]
        assert r.embedding_moved == full_report.embedding_moved and r.draft_moved == full_report.draft_moved

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      memory_limit="1GiB") as cluster, Client(cluster) as client:
        r = drift(*pair, drafter=drafter[0], full=True, scheduler=client, task_bytes=1 << 20, progress=False)
        same(r)
        assert r.where == "a Dask cluster (2 workers)"  # no machine address on a page
        marker = tmp_path / "killed"
        r = drift(*pair, drafter=drafter[0], scheduler=cluster.scheduler_address, task_bytes=1 << 20,
                  progress=False, _task_hook=partial(_kill_once, str(marker)))  # an address, as --scheduler gives
        assert marker.exists()  # a worker did die mid-run ...
        same(r)  # ... and Dask re-ran its task elsewhere: the same figures
        assert r.where.startswith(f"a Dask cluster at {cluster.scheduler_address} (")  # the address the user gave


def test_parse_size():
    assert parse_size("4GB") == 4_000_000_000 and parse_size("512MiB") == 512 << 20 and parse_size(1000) == 1000
    with pytest.raises(InputError, match="not a size"):
        parse_size("lots")


# -- the command line ------------------------------------------------------------------------------------
def test_cli_json(pair, capsys):
    assert main(["drift", str(pair[0]), str(pair[1]), "--budget", "3MB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "sampled" and out["whole"]["cosine"]["low"] <= out["whole"]["cosine"]["value"]


def _write(folder: Path, tensors: dict, config: dict | None) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def _packed(group: int) -> dict:
    from eaglekit.demo.targets import _int4_pack

    return {f"model.layers.0.mlp.up_proj.{k}": v for k, v in _int4_pack(torch.randn(8, 64), group).items()}


@pytest.mark.parametrize("case,message", [
    ("unknown", "unknown quantisation scheme quant_method='awq'"),
    ("missing", "scale tensor missing: model.layers.0.mlp.up_proj.weight is F8_E4M3"),
    ("group", "mismatched group size"),
])
def test_cli_bad_quantisation_is_one_line_exit_2(tmp_path, capsys, case, message):
    good = _write(tmp_path / "a", {"model.layers.0.mlp.up_proj.weight": torch.randn(8, 64).bfloat16()}, None)
    if case == "unknown":
        bad = _write(tmp_path / "b", {"model.layers.0.mlp.up_proj.weight": torch.randn(8, 64).bfloat16()},
                     {"quantization_config": {"quant_method": "awq"}})
    elif case == "missing":
        bad = _write(tmp_path / "b", {"model.layers.0.mlp.up_proj.weight": torch.randn(8, 64).to(torch.float8_e4m3fn)},
                     {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    else:
        bad = _write(tmp_path / "b", _packed(32), {"quantization_config": {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 16}}}}})
    assert main(["drift", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and message in err, err


def test_unit_plan_covers_every_row_once(pair):
    ca = open_checkpoint(pair[0])
    with ca:
        w = quant_weights(ca.inventory)
    pairs, *rest = pair_weights(w, w)
    plan = make_plan(pairs, *rest, unit_bytes=drift_plan.UNIT_BYTES)
    rows = {}
    for i in range(len(plan)):
        u = plan.unit(i)
        rows.setdefault(u.pair, []).append((u.r0, u.r1))
    for i, spans in rows.items():
        assert spans[0][0] == 0 and spans[-1][1] == plan.pairs[i].n_rows
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


def test_remote_targets_default_to_sampled_and_send_only_sampled_ranges(pair):
    from eaglekit.demo.fileserver import FileServer

    with FileServer(pair[0].parent) as server:
        base = f"{server.endpoint}/files"
        r = drift(f"{base}/{pair[0].name}", f"{base}/{pair[1].name}", budget="4MB", unit_bytes=8192, progress=False)
        sent = sum(rec.bytes_sent for rec in server.log)
    assert r.mode == "sampled" and "reading threads" in r.where
    fixed = sum((d / "model.safetensors.index.json").stat().st_size + (d / "config.json").stat().st_size
                + sum(f.header_bytes for f in open_checkpoint(d).inventory.files) for d in pair)
    # the sampled units' ranges (a unit re-reads its scale rows: a little over their amortised share), the
    # headers, indexes and configs: never the files
    assert sent - fixed <= 1.25 * sum(r.bytes_read) and sent < 0.6 * sum(r.bytes_total)
    assert r.embedding.cosine.low <= r.embedding.cosine.value <= r.embedding.cosine.high


def test_mode_arguments_that_contradict_each_other(pair):
    with pytest.raises(InputError, match="scheduler runs full passes"):
        drift(*pair, full=False, scheduler="local", progress=False)
    with pytest.raises(InputError, match="budget applies to sampled passes"):
        drift(*pair, full=True, budget="1GB", progress=False)


class _Tokens:
    """A stand-in tokenizer: token id -> "<tok N>"."""

    def convert_ids_to_tokens(self, ids):
        return [f"<tok {i}>" for i in ids]


def test_moved_rows_decoded_and_figures_render(pair, full_report, tmp_path, capsys):
    r = drift(*pair, tokenizer=_Tokens(), full=True, scheduler="inline", progress=False)
    assert r.embedding_decoded[:3] == tuple(f"<tok {i}>" for i in r.embedding_moved[:3])
    assert "<tok " in str(r)
    from eaglekit.view.drift_figures import drafter_view, drift_map

    fig = drift_map(full_report)
    assert fig.data[0].z.shape == (6, 61)  # attention, dense mlp, shared, routed, router, norms x 61 layers
    assert list(fig.layout.xaxis.tickvals) == list(range(0, 61, 4))  # at most 20 ticks, whole layers
    assert len(fig.layout.shapes) == len(full_report.feeds)  # the layers feeding the drafter, marked
    view = drafter_view(full_report)
    bars = view.data[0]
    spread = max(bars.y) / min(bars.y)
    assert view.layout.yaxis.type == ("log" if spread > 10 else "linear")  # bars from zero unless they span decades
    assert list(bars.x)[:3] == ["whole target", "embedding", "lm_head (draft rows)"]
    fed = sorted({f.layer for f in full_report.feeds})
    assert list(bars.x)[3:] == [f"layer {k} output" for k in fed]  # one bar per layer, however many engines feed it
    assert "SGLang before #25454 (id 2)" in bars.text[3 + fed.index(2)]
    assert "SGLang since #25454 (id 2)" in bars.text[3 + fed.index(1)] and "vLLM (id 2)" in bars.text[3 + fed.index(1)]
    page = tmp_path / "drift.html"
    assert main(["drift", str(pair[0]), str(pair[1]), "--full", "--scheduler", "inline", "--html", str(page)]) == 0
    html = page.read_text()
    assert "plotly" in html and "Drift map" in html and "layer 60 routed experts" in html
    assert f"wrote {page}" in capsys.readouterr().err


# -- review fixes: seed, bounded d2t, a drafter that does not fit, --html checked first, bytes read --------------
def _drafter_folder(folder: Path, *, d2t_entries: int, vocab: int) -> Path:
    from safetensors.torch import save_file

    from eaglekit.demo.spec import specforge_config

    folder.mkdir(parents=True)
    save_file({"d2t": torch.zeros(d2t_entries, dtype=torch.int64), "norm.weight": torch.ones(8)},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(specforge_config(vocab=vocab)))
    return folder


def test_a_negative_seed_is_one_line_exit_2(pair, capsys):
    with pytest.raises(InputError, match="seed must be a whole number, 0 or more, got -1"):
        drift(*pair, full=False, budget="1MB", seed=-1, progress=False)
    with pytest.raises(InputError, match="seed must be a whole number"):
        drift(*pair, full=False, budget="1MB", seed=1.5, progress=False)
    assert main(["drift", str(pair[0]), str(pair[1]), "--budget", "1MB", "--seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert err == "eaglekit drift: error: seed must be a whole number, 0 or more, got -1.\n"


def test_a_huge_drafter_d2t_is_refused_unread(pair, tmp_path, monkeypatch, capsys):
    from eaglekit.core.errors import VocabMapError
    from eaglekit.io.reader import Checkpoint

    big = _drafter_folder(tmp_path / "big-d2t", d2t_entries=4001, vocab=10240)  # config: 2,000 draft tokens
    read = []
    monkeypatch.setattr(Checkpoint, "read_numpy", lambda self, name, _real=Checkpoint.read_numpy:
                        read.append(name) or _real(self, name))
    with pytest.raises(VocabMapError, match="refusing to read it"):
        drift(*pair, drafter=big, full=True, scheduler="inline", progress=False)
    assert "d2t" not in read
    assert main(["drift", str(pair[0]), str(pair[1]), "--drafter", str(big)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to read it" in err


def test_a_drafter_of_another_vocabulary_is_named_and_its_rows_not_shown(pair, tmp_path, capsys):
    other = _drafter_folder(tmp_path / "llama", d2t_entries=1000, vocab=8016)
    r = drift(*pair, drafter=other, full=True, scheduler="inline", progress=False)
    assert r.drafter_misfit == ("hidden size 448 vs the targets' 64", "vocab size 8,016 vs the targets' 10,240")
    assert r.draft_lm_head is None and r.draft_moved == () and r.feeds == ()
    text = str(r)
    assert "does not fit these targets" in text and "lm_head, draft rows" not in text and "aux id" not in text
    assert "does not fit" in r.summary and r.to_json()["drafter_misfit"] == list(r.drafter_misfit)
    assert main(["drift", str(pair[0]), str(pair[1]), "--drafter", str(other)]) == 0
    out = capsys.readouterr().out
    assert "vocab size 8,016 vs the targets' 10,240" in out and "draft rows" not in out


def test_a_drafter_of_another_hidden_size_is_named_beside_its_rows(full_report):
    # the fixture drafter is made for the demo's K2 config (hidden 448), the thin targets are hidden 64
    assert full_report.drafter_misfit == ("hidden size 448 vs the targets' 64",)
    assert full_report.draft_lm_head is not None and full_report.feeds
    assert "does not fit these targets (hidden size 448 vs the targets' 64)" in str(full_report)


def test_an_unwritable_html_is_refused_before_any_work(pair, tmp_path, monkeypatch, capsys):
    import eaglekit.analysis.drift.measure as drift_module

    def no_work(*args, **kwargs):
        raise AssertionError("drift ran before --html was checked")

    monkeypatch.setattr(drift_module, "drift", no_work)
    code = main(["drift", str(pair[0]), str(pair[1]), "--html", str(tmp_path / "missing" / "drift.html")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot write" in err and "writable path for --html" in err
    assert main(["drift", str(pair[0]), str(pair[1]), "--html", str(tmp_path)]) == 2  # a folder in its place
    assert "cannot write" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_full_pass_reads_at_most_the_targets_bytes(full_report):
    # draft lm_head rows are read again by the whole-lm_head pass: counted once, the full pass is <= 100%
    read, total = full_report.bytes_read, full_report.bytes_total
    assert full_report.draft_lm_head is not None
    assert all(r <= t for r, t in zip(read, total)) and sum(read) / sum(total) > 0.99
    import re

    shown = float(re.search(r"\(([0-9.]+)%\)", full_report._how()).group(1))
    assert 99.0 < shown <= 100.0


def test_contradicting_mode_options_are_worded_for_library_and_cli(pair, capsys):
    assert main(["drift", str(pair[0]), str(pair[1]), "--budget", "1GB", "--scheduler", "X"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "drop the scheduler, or the budget" in err
    assert "full=True" not in err and "(--full)" not in err


def test_the_demo_worlds_drafter_fits_its_targets_and_the_map_names_the_embeddings(trained):
    """Issue 24: the demo world's K2 drafter fits its FP8/INT4 targets (no misfit line, every figure of what it
    reads is there), and the map's note says "the token embeddings" where vLLM's aux id 0 reads them."""
    from eaglekit.view.drift_figures import drift_map

    r = drift(trained.target_weights("k2"), trained.target_weights("k25"), drafter=trained.drafter("k2"), full=True,
              progress=False)
    assert r.drafter_misfit == () and "does not fit" not in str(r)
    assert {(f.engine, f.layer) for f in r.feeds} >= {("SGLang before #25454", 2), ("vLLM", -1)}
    fig = drift_map(r)
    title = fig.layout.title.text
    one = title.replace("</sup><br><sup>", " ")
    assert re.search(r"the token embeddings \([^)]*vLLM[^)]*\)", one) and "layer -1" not in title
    # page 07: the subtitle wraps instead of running off the right edge, and the layer ticks are whole layers
    subtitle = title.split("<br>")[1:]
    assert len(subtitle) > 1 and all(len(line) <= 80 + len("<sup></sup>") for line in subtitle)
    ticks = list(fig.layout.xaxis.tickvals)
    assert ticks == sorted({f.layer for f in r.strata if f.layer is not None})
    assert all(float(t).is_integer() and t >= 0 for t in ticks)


def test_drift_names_the_engine_releases_check_names_and_the_same_layers(trained):
    """Page 07 said "SGLang aux id 0: output of layer 0" while `check` on page 00 said SGLang since #25454 feeds
    [-1, 0, 1] (now "[embeddings, 0, 1]"): drift lists every reading check lists, by the same name, with the same
    layers."""
    import re

    from eaglekit.analysis.compat.check import check

    r = drift(trained.target_weights("k2"), trained.target_weights("k25"), drafter=trained.drafter("k2"), full=True,
              progress=False)
    said = {m.group(1): [-1 if x == "embeddings" else int(x) for x in m.group(2).split(", ")] for f in
            check(trained.drafter("k2"), target=trained.target_weights("k2")).findings
            for m in [re.match(r"(.+?) feeds the outputs of layers \[([-\w, ]+)\]", f.message)] if m}
    fed: dict[str, list[int]] = {}
    for f in r.feeds:
        fed.setdefault(f.engine, []).append(f.layer)
    assert fed == said and set(fed) == {"SGLang before #25454", "SGLang since #25454", "vLLM"}


def test_the_drafter_view_draws_bars_from_zero_unless_they_span_decades():
    """Page review: on a log axis the bars started at an arbitrary floor, so 0.045 looked a tenth of 0.1."""
    from types import SimpleNamespace

    from eaglekit.core.uncertainty import Interval
    from eaglekit.view.drift_figures import drafter_view

    def fig(c):
        return SimpleNamespace(cosine=Interval(c, c - 0.001, c + 0.001, "test"))

    def report(cosines):
        whole, emb, head = (fig(c) for c in cosines)
        return SimpleNamespace(whole=whole, embedding=emb, draft_lm_head=head, feeds=())

    near = drafter_view(report((0.955, 0.95, 0.9)))
    assert near.layout.yaxis.type == "linear" and near.layout.yaxis.rangemode == "tozero"
    far = drafter_view(report((0.9999, 0.95, 0.5)))
    assert far.layout.yaxis.type == "log" and "log scale" in far.layout.yaxis.title.text
    assert far.layout.yaxis.dtick == 1  # one label a decade: plotly's 2s and 5s crowded the axis (issue 39)
