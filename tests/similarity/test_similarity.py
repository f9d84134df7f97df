"""Weight similarity: the numbers against dense references, the alignment rules, the demo's drift pattern,
and the bytes a remote comparison reads."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import eaglekit.analysis.similarity.measure as sim
from eaglekit.core.errors import InputError
from eaglekit.analysis.similarity.measure import similarity
from eaglekit.analysis.similarity.plan import matrix_shape
from eaglekit.core.tokens.vocab import build_vocab_map


def _save(folder, tensors, config=None):
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous().clone() for k, v in tensors.items()}, str(folder / "model.safetensors"))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def _bf16(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 0.02).bfloat16()


def _pair(tmp_path, a, b, config=None):
    return _save(tmp_path / "a", a, config), _save(tmp_path / "b", b, config)


def test_self_negative_and_orthogonal(tmp_path):
    x = _bf16(48, 64)
    pairs = x.float().view(48, 32, 2)
    orth = torch.stack([pairs[..., 1], -pairs[..., 0]], -1).view(48, 64).bfloat16()  # exactly orthogonal per pair
    a, b = _pair(tmp_path, {"w": x, "neg": x, "orth": x}, {"w": x, "neg": -x, "orth": orth})
    r = similarity(a, b, grid=(4, 8), progress=False)
    assert r["w"].cosine == pytest.approx(1.0, abs=1e-12) and r["w"].rel_diff == 0.0 and r["w"].norm_ratio == 1.0
    assert r["neg"].cosine == pytest.approx(-1.0, abs=1e-12) and r["neg"].rel_diff == pytest.approx(2.0)
    assert r["orth"].cosine == pytest.approx(0.0, abs=1e-6) and r["orth"].norm_ratio == pytest.approx(1.0)
    assert r["orth"].rel_diff == pytest.approx(math.sqrt(2))
    assert np.allclose(r["w"].grid(), 1.0) and np.allclose(r["neg"].grid(), -1.0)
    assert np.allclose(r["orth"].grid(), 0.0, atol=1e-6)  # cells are even-width: pairs never straddle them


def _reference(a: np.ndarray, b: np.ndarray, grid) -> np.ndarray:
    """Dense float64 cell sums [aa, bb, ab, dd] over np.array_split blocks."""
    rows, cols = a.shape
    out = np.zeros((min(grid[0], rows), min(grid[1], cols), 4))
    for i, rs in enumerate(np.array_split(np.arange(rows), out.shape[0])):
        for j, cs in enumerate(np.array_split(np.arange(cols), out.shape[1])):
            x, y = a[np.ix_(rs, cs)], b[np.ix_(rs, cs)]
            out[i, j] = [(x * x).sum(), (y * y).sum(), (x * y).sum(), ((x - y) ** 2).sum()]
    return out


SHAPES = [((37, 53), (4, 6)), ((64, 64), (64, 64)), ((100, 7), (7, 3)), ((5,), (64, 64)), ((3, 4, 5), (3, 2)),
          ((130, 200), (9, 13)), ((1, 1), (2, 2))]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_grids_match_dense_reference(tmp_path, monkeypatch, dtype):
    monkeypatch.setattr(sim, "BLOCK_ELEMENTS", 333)  # many compute blocks, cut mid-cell
    a_t = {f"t{i}": (torch.randn(*s, generator=torch.Generator().manual_seed(i)) * 0.02).to(dtype)
           for i, (s, _) in enumerate(SHAPES)}
    b_t = {k: (v.float() * 0.7 + torch.randn(v.shape, generator=torch.Generator().manual_seed(99)) * 0.01).to(dtype)
           for k, v in a_t.items()}
    a, b = _pair(tmp_path, a_t, b_t)
    for i, (shape, grid) in enumerate(SHAPES):
        r = similarity(a, b, tensors=f"t{i}", grid=grid, chunk_bytes=1024, progress=False)
        (ts,) = r.tensors
        x = a_t[f"t{i}"].double().numpy().reshape(matrix_shape(shape))
        y = b_t[f"t{i}"].double().numpy().reshape(matrix_shape(shape))
        ref = _reference(x, y, grid)
        assert ts.sums.shape == ref.shape
        np.testing.assert_allclose(ts.sums, ref, rtol=2e-6, atol=1e-12)
        cos = (x * y).sum() / math.sqrt((x * x).sum() * (y * y).sum())
        assert ts.cosine == pytest.approx(cos, abs=1e-7)
        assert ts.rel_diff == pytest.approx(np.linalg.norm(x - y) / np.linalg.norm(x), rel=1e-6)
        assert ts.norm_ratio == pytest.approx(np.linalg.norm(y) / np.linalg.norm(x), rel=1e-6)
        assert ts.rows_compared == matrix_shape(shape)[0]


def test_lm_head_rows_are_paired_by_target_token(tmp_path):
    vocab, hidden = 500, 16
    rng = np.random.default_rng(3)
    ids_a = np.sort(rng.choice(vocab, 60, replace=False))
    ids_b = np.sort(np.concatenate([rng.choice(ids_a, 45, replace=False),
                                    rng.choice(np.setdiff1d(np.arange(vocab), ids_a), 15, replace=False)]))
    token_rows = torch.randn(vocab, hidden, generator=torch.Generator().manual_seed(5)).bfloat16()  # one row per token

    def drafter(ids):
        d2t, t2d = build_vocab_map(ids, vocab)
        return {"lm_head.weight": token_rows[torch.from_numpy(ids)], "d2t": torch.from_numpy(d2t),
                "t2d": torch.from_numpy(t2d)}

    a, b = _pair(tmp_path, drafter(ids_a), drafter(ids_b))
    r = similarity(a, b, grid=(8, 4), chunk_bytes=1024, progress=False)
    head = r["lm_head.weight"]
    assert head.rows_compared == 45 and head.aligned
    assert head.cosine == pytest.approx(1.0, abs=1e-12) and head.rel_diff == 0.0
    assert np.allclose(head.grid(), 1.0)
    by_index = torch.nn.functional.cosine_similarity(drafter(ids_a)["lm_head.weight"].float().flatten(),
                                                     drafter(ids_b)["lm_head.weight"].float().flatten(), dim=0)
    assert abs(float(by_index)) < 0.5  # unaligned rows are different tokens: the test can fail
    assert r.lm_head_alignment.to_json() == {"shared_rows": 45, "draft_vocab_a": 60, "draft_vocab_b": 60,
                                             "method": "target token", "full_vocabulary_a": False,
                                             "full_vocabulary_b": False}
    d2t, t2d = (next(x for x in r.buffers if x.name == n) for n in ("d2t", "t2d"))
    assert not d2t.equal and d2t.differing == int(np.count_nonzero(build_vocab_map(ids_a, vocab)[0]
                                                                   != build_vocab_map(ids_b, vocab)[0]))
    assert t2d.differing == 30  # 15 tokens leave, 15 arrive


def test_lm_head_without_d2t_pairs_by_row_index(tmp_path):
    x = _bf16(30, 8)
    a, b = _pair(tmp_path, {"lm_head.weight": x}, {"lm_head.weight": x})
    r = similarity(a, b, progress=False)
    assert r.lm_head_alignment.method == "row index" and r["lm_head.weight"].cosine == pytest.approx(1.0)


def test_parts_one_sided_mismatched_and_buffers(tmp_path):
    h = 8
    cfg = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}}
    base = {"fc.weight": _bf16(h, 3 * h), "midlayer.self_attn.q_proj.weight": _bf16(16, 2 * h, seed=1),
            "norm.weight": _bf16(h, seed=2), "extra.weight": _bf16(4, seed=3), "t2d": torch.ones(10, dtype=torch.bool)}
    other = dict(base)
    other["fc.weight"] = torch.cat([base["fc.weight"][:, :2 * h], -base["fc.weight"][:, 2 * h:]], 1)
    other["norm.weight"] = _bf16(h + 1, seed=2)
    other["t2d"] = torch.tensor([True] * 7 + [False] * 3)
    other["new.bias"] = _bf16(4, seed=4)
    del other["extra.weight"]
    renamed = {k.replace("midlayer.", "layers.0."): v for k, v in other.items()}  # speculators spelling
    a, b = _save(tmp_path / "a", base, cfg), _save(tmp_path / "b", renamed, cfg)
    r = similarity(a, b, progress=False)
    assert r.names == ("fc.weight[low: aux layer 2]", "fc.weight[mid: aux layer 30]", "fc.weight[high: aux layer 58]",
                       "midlayer.self_attn.q_proj.weight[embed]", "midlayer.self_attn.q_proj.weight[hidden]")
    assert [round(t.cosine, 6) for t in r.tensors[:3]] == [1.0, 1.0, -1.0]
    assert r["fc.weight[high: aux layer 58]"].cols == (16, 24)
    assert r.only_a == ("extra.weight",) and r.only_b == ("new.bias",)
    assert [(m.name, m.reason) for m in r.mismatched] == [("norm.weight", "shape [8] vs [9]")]
    (t2d,) = r.buffers
    assert (t2d.name, t2d.equal, t2d.differing) == ("t2d", False, 3)
    text = str(r)
    assert "only in A: extra.weight" in text and "norm.weight: not compared (shape [8] vs [9])" in text
    assert "t2d (BOOL [10]): differ in 3 of 10 elements" in text
    assert "<table" in r._repr_html_() and "fc.weight[high: aux layer 58]" in r._repr_html_()
    with pytest.raises(KeyError, match=r"split into fc.weight\[low: aux layer 2\]"):
        r["fc.weight"]


def test_json_schema_and_undefined_measures(tmp_path):
    a, b = _pair(tmp_path, {"w": torch.zeros(4, 4, dtype=torch.bfloat16), "v": _bf16(4, 4)},
                 {"w": _bf16(4, 4), "v": _bf16(4, 4)})
    out = json.loads(json.dumps(similarity(a, b, grid=(2, 2), progress=False).to_json(), allow_nan=False))
    assert set(out) >= {"tensors", "only_a", "only_b", "lm_head_alignment"}
    assert [sorted(t) for t in out["tensors"]] == [["cosine", "grid", "name", "norm_ratio", "rel_diff",
                                                    "rows_compared"]] * 2
    v, w = out["tensors"]
    assert w["name"] == "w" and w["cosine"] is None and w["grid"] == [[None, None], [None, None]]  # ||a|| = 0
    assert v["cosine"] == pytest.approx(1.0) and v["rows_compared"] == 4 and out["lm_head_alignment"] is None


def test_dtype_mismatch_and_option_errors(tmp_path):
    a, b = _pair(tmp_path, {"w": _bf16(4)}, {"w": torch.arange(4)})
    r = similarity(a, b, progress=False)
    assert r.mismatched[0].reason.startswith("dtype BF16 vs I64")
    with pytest.raises(InputError, match=r"grid must be two positive integers \(rows, cols\), e.g. \(64, 64\); "
                                         r"got \(0, 4\)\."):
        similarity(a, b, grid=(0, 4))
    with pytest.raises(InputError, match=r"no tensor matches 'mlp\*'; names are normalised"):
        similarity(a, b, tensors="mlp*")
    with pytest.raises(InputError, match="device must be 'cpu', 'cuda' or 'auto'; got 'tpu'"):
        similarity(a, b, device="tpu")


# -- the demo drafters -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finetuned(demo):
    return similarity(demo.drafter("k2"), demo.drafter("k25-finetuned"), progress=False)


def test_demo_finetune_shows_the_drift_pattern(finetuned, demo):
    r = finetuned
    fc = [r[f"fc.weight[{p}: aux layer {i}]"].cosine for p, i in (("low", 2), ("mid", 30), ("high", 58))]
    assert fc[0] > fc[1] > fc[2] and fc[2] < 0.9 < fc[0]
    for p in "qkv":
        embed, hidden = (r[f"midlayer.self_attn.{p}_proj.weight[{h}]"] for h in ("embed", "hidden"))
        assert embed.cosine > 0.99 > 0.95 > hidden.cosine
        assert embed.rel_diff == pytest.approx(0.05, rel=0.05) and hidden.rel_diff == pytest.approx(0.4, rel=0.05)
    for name in ("gate_proj", "up_proj", "down_proj"):
        t = r[f"midlayer.mlp.{name}.weight"]
        prof = t.row_profile("rel_diff")
        assert prof[0] < 0.1 and prof[-1] > 0.4
        assert np.corrcoef(np.arange(prof.size), prof)[0, 1] > 0.95  # drift grows with the row
        first_band = t.grid("rel_diff")[0]
        assert first_band.max() < 0.1  # ... and not along the columns
        cos = t.row_profile("cosine")
        assert np.all(np.diff(cos[::8]) < 0)  # cosine falls row band by row band
    assert r["lm_head.weight"].rows_compared == demo.manifest["overlap"]["k2~k25-finetuned"]
    assert r["lm_head.weight"].rel_diff == pytest.approx(0.15, rel=0.05)
    assert all(t.cosine > 0.8 for t in r.tensors)


def test_demo_scratch_is_unrelated(demo):
    r = similarity(demo.drafter("k2"), demo.drafter("k25-scratch"), progress=False)
    matrices = [t for t in r.tensors if "norm" not in t.name]
    assert matrices and all(abs(t.cosine) < 0.02 for t in matrices)
    assert r.only_b == ("embed_tokens.weight",)
    assert r.lm_head_alignment.shared_rows == demo.manifest["overlap"]["k2~k25-scratch"]


def test_demo_speculators_layout_is_the_same_drafter(demo):
    r = similarity(demo.drafter("k2"), demo.drafter("k2-speculators"), tensors=["midlayer.self_attn.*", "d2t"],
                   progress=False)
    assert len(r.tensors) == 7 and all(t.cosine == pytest.approx(1.0) and t.rel_diff == 0 for t in r.tensors)
    assert r.buffers[0].equal


def test_remote_reads_only_the_compared_bytes(demo, hub):
    from eaglekit.io.reader import read_inventory

    a, b = "hf://demo-aqmed/Kimi-K2-Instruct-eagle3", "hf://demo-team/Kimi-K2.5-eagle3-finetuned"
    inv = read_inventory(demo.drafter("k2"))
    for pattern in ("midlayer.mlp.*", None):
        hub.clear_log()
        r = similarity(a, b, tensors=pattern, endpoint=hub.endpoint, progress=False)
        log = hub.log
        data = [x for x in log if x.path.endswith(".safetensors") and not x.range.startswith("bytes=0-")]
        headers = [x for x in log if x.path.endswith(".safetensors") and x.range.startswith("bytes=0-")]
        assert len(headers) == 2 and all(x.bytes_sent == 65536 for x in headers)  # one header window per file
        assert sum(x.bytes_sent for x in data) == sum(r.bytes_read)
        other = [x for x in log if not x.path.endswith(".safetensors")]
        assert sum(x.bytes_sent for x in other) < 4096  # a listing and config.json per side
        if pattern:
            compared = sum(t.nbytes for t in inv.tensors if t.name.startswith("midlayer.mlp."))
            assert r.bytes_read == (compared, compared)
        else:
            assert sum(r.bytes_read) <= 2 * inv.total_bytes  # lm_head: only the spans holding shared rows
    assert r["fc.weight[high: aux layer 58]"].cosine == pytest.approx(
        similarity(demo.drafter("k2"), demo.drafter("k25-finetuned"), tensors="fc.weight", progress=False)
        ["fc.weight[high: aux layer 58]"].cosine, abs=1e-12)


def test_mixed_locations_local_against_plain_http(demo, hub):
    url = f"{hub.endpoint}/files/demo-team/Kimi-K2.5-eagle3-finetuned/model.safetensors"
    remote = similarity(demo.drafter("k2"), url, tensors=["midlayer.self_attn.o_proj.weight", "lm_head.weight"],
                        progress=False)
    local = similarity(demo.drafter("k2"), demo.drafter("k25-finetuned"),
                       tensors=["midlayer.self_attn.o_proj.weight", "lm_head.weight"], progress=False)
    assert [t.name for t in remote] == [t.name for t in local]
    for r, l in zip(remote, local):
        np.testing.assert_array_equal(r.sums, l.sums)
