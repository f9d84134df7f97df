"""Hostile dumps, target heads and tokenizers (issue 33): a gzip bomb, stride-0 views declaring a million
positions, sparse and float8 tensors, a loss-mask line too long to parse, a target head declaring a 14 GB
lm_head of another model, one +Inf (or all NaN) in a head, aux layer ids past the target's, a tokenizer.json
nested 100,000 deep, coverage over many short samples and one long one. Each is one line and exit 2, in
bounded memory, or a correct answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from bounded_cli import REPO_ROOT, run_limited
from hostile import gzip_bomb

from eaglekit.analysis.acceptance import dumps as dumps_module
from eaglekit.analysis.acceptance.head import read_target_head
from eaglekit.cli import main
from eaglekit.core.errors import EaglekitError, HeaderError, InputError, VocabMapError
from eaglekit.core.tokens.coverage import covered_share
from eaglekit.io.dumps import files as files_module
from eaglekit.io.dumps.files import DumpFolder, gunzip

H, V, LAYERS = 64, 96, 4   # the trained world's target


def _sample(T=20, *, h=H, n_aux=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, V, (T,), generator=g), "loss_mask": torch.ones(T, dtype=torch.int64),
            "hidden_state": torch.randn(1, T, h, generator=g), "aux_hidden_state": torch.randn(1, T, n_aux * h, generator=g)}


def _dump(root, sample):
    """A SpecForge dump folder of one sample."""
    (root / "rows_0-2000").mkdir(parents=True)
    torch.save(sample, root / "rows_0-2000" / "data_0.ckpt")
    return root


def _one_line(capsys, args) -> str:
    try:
        code = main(args)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    return lines[0]


def _acceptance(trained, folder, *extra) -> list[str]:
    return ["acceptance", str(trained.drafter("k2")), "--hidden-states", str(folder),
            "--target-head", str(trained.target("k2")), "--steps", "3", *extra]


# -- gzip ------------------------------------------------------------------------------------------------
def test_a_gzip_bomb_is_refused_within_bounded_memory(trained, tmp_path):
    """1.25 GiB of zeros in a ~1.3 MB .ckpt.gz, read under a 1 GiB address-space limit: refused once it has
    inflated past 16 times its size (the floor: 64 MiB), never inflated whole."""
    folder = tmp_path / "dump" / "rows_0-2000"
    folder.mkdir(parents=True)
    (folder / "data_0.ckpt.gz").write_bytes(gzip_bomb(1280 << 20))
    r = run_limited("vocab-coverage", str(trained.drafter("k2")), "--hidden-states", str(tmp_path / "dump"),
                    tmp=tmp_path, limit_s=120)
    assert r.rc == 2 and len(r.error_lines) == 1, r
    assert "inflates to more than" in r.stderr and "gzip bomb" in r.stderr


def test_gunzip_streams_and_stops_at_the_cap(tmp_path, monkeypatch):
    (tmp_path / "x.gz").write_bytes(gzip_bomb(8 << 20))
    monkeypatch.setattr(files_module, "GZIP_FLOOR", 1 << 20)
    folder = DumpFolder(tmp_path)
    orig, read = folder.source.read, []

    def spy(name, start, length):
        read.append(length)
        return orig(name, start, length)

    folder.source.read = spy
    with pytest.raises(HeaderError, match="inflates to more than"):
        gunzip(folder, "x.gz")
    assert read and max(read) <= 1 << 20   # the compressed file is read a step at a time too


def test_a_truncated_gzip_is_one_line(tmp_path):
    import gzip

    (tmp_path / "x.gz").write_bytes(gzip.compress(b"abc" * 1000)[:-12])
    with pytest.raises(HeaderError, match="not a valid gzip file"):
        gunzip(DumpFolder(tmp_path), "x.gz")


# -- tensors that declare more than they store -------------------------------------------------------------
def test_stride_zero_views_declaring_a_million_positions_are_refused(trained, tmp_path, capsys):
    T = 1_000_000
    s = {"input_ids": torch.zeros(1, dtype=torch.int64).expand(T), "loss_mask": torch.ones(1).expand(T),
         "hidden_state": torch.zeros(1, 1, H).expand(1, T, H), "aux_hidden_state": torch.zeros(1, 1, 3 * H).expand(1, T, 3 * H)}
    folder = _dump(tmp_path / "d", s)
    assert (folder / "rows_0-2000" / "data_0.ckpt").stat().st_size < 64 << 10
    line = _one_line(capsys, _acceptance(trained, folder))
    assert "stride-0" in line or "declares" in line


def test_sparse_and_float8_tensors_in_a_dump_are_one_line(trained, tmp_path, capsys):
    sparse = _sample()
    sparse["aux_hidden_state"] = sparse["aux_hidden_state"].to_sparse()
    fp8 = _sample()
    fp8["hidden_state"] = fp8["hidden_state"].to(torch.float8_e4m3fn)
    ids = _sample()
    ids["input_ids"] = ids["input_ids"].to_sparse()
    for name, s in (("sparse", sparse), ("fp8", fp8), ("ids", ids)):
        line = _one_line(capsys, _acceptance(trained, _dump(tmp_path / name, s)))
        assert "sparse" in line or "float8" in line, line
        line = _one_line(capsys, ["vocab-coverage", str(trained.drafter("k2")), "--hidden-states", str(tmp_path / name)])
        assert "sparse" in line or "float8" in line, line


def test_a_loss_mask_line_is_measured_before_it_is_parsed(tmp_path, monkeypatch):
    path = tmp_path / "masks.jsonl"
    path.write_text(json.dumps({"file": "a.pt", "loss_mask": [1] * 5000}) + "\n")
    monkeypatch.setattr(dumps_module, "MAX_MASK_LINE", 1000)

    def never(*a, **k):
        raise AssertionError("the line was parsed before its length was checked")

    monkeypatch.setattr(dumps_module, "loads", never)
    with pytest.raises(InputError, match="more than a loss mask of"):
        dumps_module._read_masks(path)


# -- the target head ----------------------------------------------------------------------------------------
def _head_folder(tmp_path, trained, tensors: dict[str, torch.Tensor]):
    from safetensors.torch import save_file

    folder = tmp_path / "head"
    folder.mkdir()
    shutil.copy(trained.target("k2") / "config.json", folder / "config.json")
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def _sparse_head(folder, rows: int, cols: int) -> None:
    """A safetensors file declaring lm_head.weight F32 [rows, cols] with its data a hole (no disk)."""
    header = {"lm_head.weight": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [0, rows * cols * 4]}}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path = folder / "model.safetensors"
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        f.truncate(8 + len(raw) + rows * cols * 4)


def test_a_head_of_another_shape_is_refused_before_a_byte_is_read(trained, tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    shutil.copy(trained.target("k2") / "config.json", folder / "config.json")
    _sparse_head(folder, 7_000_000, 512)        # 14.3 GB declared, consistent with the file's size
    from eaglekit.io.reader import Checkpoint

    def never(self, name, *a, **k):
        raise AssertionError(f"{name} was read before its shape was compared")

    original = Checkpoint.read_tensor
    Checkpoint.read_tensor = never
    try:
        with pytest.raises(VocabMapError, match="nothing was read"):
            read_target_head(folder, vocab_size=V, hidden_size=H)
    finally:
        Checkpoint.read_tensor = original


def test_a_14gb_head_is_refused_in_bounded_memory_by_the_cli(trained, tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    shutil.copy(trained.target("k2") / "config.json", folder / "config.json")
    _sparse_head(folder, 7_000_000, 512)
    dump = _dump(tmp_path / "d", _sample())
    r = run_limited("acceptance", str(trained.drafter("k2")), "--hidden-states", str(dump), "--target-head",
                    str(folder), "--steps", "3", tmp=tmp_path, limit_s=120)
    assert r.rc == 2 and len(r.error_lines) == 1 and "vocabulary mismatch" in r.stderr, r


@pytest.mark.parametrize("poison,says", [("inf", "1 of its"), ("nan-all", "every value")])
def test_a_head_with_inf_or_nan_is_refused(trained, tmp_path, capsys, poison, says):
    from safetensors.torch import load_file

    weights = load_file(str(trained.target("k2") / "model.safetensors"))
    head = weights["lm_head.weight"].clone()
    if poison == "inf":
        head[7, 3] = float("inf")
    else:
        head[:] = float("nan")
    folder = _head_folder(tmp_path, trained, {"lm_head.weight": head, "model.norm.weight": weights["model.norm.weight"]})
    with pytest.raises(InputError, match="NaN or Inf") as e:
        read_target_head(folder)
    assert says in str(e.value)
    line = _one_line(capsys, ["acceptance", str(trained.drafter("k2")), "--hidden-states",
                              str(_dump(tmp_path / "d", _sample())), "--target-head", str(folder), "--steps", "3"])
    assert "NaN or Inf" in line and "lm_head.weight" in line


def test_a_norm_with_nan_is_refused(trained, tmp_path):
    from safetensors.torch import load_file

    weights = load_file(str(trained.target("k2") / "model.safetensors"))
    norm = weights["model.norm.weight"].clone()
    norm[0] = float("nan")
    folder = _head_folder(tmp_path, trained, {"lm_head.weight": weights["lm_head.weight"], "model.norm.weight": norm})
    with pytest.raises(InputError, match="model.norm.weight holds NaN or Inf"):
        read_target_head(folder)


# -- aux layers -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ids", ["1,2,7", "1,2,4"])
def test_aux_layers_past_the_targets_layers_are_refused(trained, tmp_path, capsys, ids):
    line = _one_line(capsys, _acceptance(trained, _dump(tmp_path / "d", _sample()), "--aux-layers", ids))
    assert "--aux-layers names layer" in line and f"has {LAYERS} layers" in line


def test_a_26_digit_aux_layer_is_refused_while_parsing(trained, tmp_path, capsys):
    line = _one_line(capsys, _acceptance(trained, _dump(tmp_path / "d", _sample()), "--aux-layers", "1,2," + "9" * 26))
    assert "--aux-layers" in line and "expected layer ids" in line


# -- tokenizer.json ---------------------------------------------------------------------------------------------
def test_a_tokenizer_json_nested_100k_deep_is_one_error(trained, tmp_path):
    from eaglekit.analysis.acceptance.target import load_target_model

    folder = tmp_path / "target"
    shutil.copytree(trained.target("k2"), folder)
    (folder / "tokenizer.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(EaglekitError, match="nests"):
        load_target_model(folder)


# -- coverage ----------------------------------------------------------------------------------------------------
def test_coverage_of_many_short_samples_and_one_long_one_is_ragged():
    """1,200 samples of 8 tokens and one of a million, under a 1 GiB address-space limit: a dense samples x
    longest matrix would take 19 GB."""
    code = textwrap.dedent("""
        import resource, numpy as np
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from eaglekit.core.tokens.coverage import covered_share
        seqs = [np.arange(8) % 50 for _ in range(1200)] + [np.arange(1_000_000) % 100]
        overall, by_pos, total = covered_share(np.zeros(50, np.int64), seqs, 100)
        print(total, len(by_pos), round(overall, 6), by_pos[0], by_pos[10])
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    total, positions, overall, first, tenth = p.stdout.split()
    assert int(total) == 1200 * 8 + 1_000_000 and int(positions) == 1_000_000
    assert float(overall) == pytest.approx((1200 * 8 + 500_000) / (1200 * 8 + 1_000_000), abs=1e-6)
    assert float(first) == 1.0 and float(tenth) == 1.0   # position 10: only the long sample, id 10 < 50


def test_coverage_by_position_matches_a_dense_count():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 30, rng.integers(0, 12)) for _ in range(40)]
    d2t = np.zeros(12, np.int64)  # d2t holds offsets: target id = i + d2t[i]
    overall, by_pos, total = covered_share(d2t, seqs, 30)
    longest = max(len(s) for s in seqs)
    for i in range(longest):
        col = [s[i] for s in seqs if len(s) > i]
        assert by_pos[i] == pytest.approx(np.mean(np.asarray(col) < 12))
    assert total == sum(len(s) for s in seqs)
    assert overall == pytest.approx(np.mean(np.concatenate(seqs) < 12))


def test_sparse_token_ids_in_coverage_are_an_input_error():
    from eaglekit.core.tokens.coverage import coverage

    with pytest.raises(InputError, match="sparse"):
        coverage(np.arange(4), [torch.tensor([1, 2, 3]).to_sparse()], vocab_size=10)
    with pytest.raises(InputError, match="whole numbers"):
        coverage(np.arange(4), [np.array([0.5, 1.5])], vocab_size=10)


def test_concatenated_gzip_members_inflate_to_their_concatenation(tmp_path, monkeypatch):
    import gzip

    monkeypatch.setattr(files_module, "_GZIP_STEP", 1000)   # members that end inside and at a step's edge
    parts = [os.urandom(3000), b"abc" * 700, os.urandom(1234)]
    (tmp_path / "x.gz").write_bytes(b"".join(gzip.compress(p) for p in parts) + b"\0" * 16)
    assert bytes(gunzip(DumpFolder(tmp_path), "x.gz")) == b"".join(parts)
    (tmp_path / "y.gz").write_bytes(gzip.compress(parts[0]) + b"not gzip")
    with pytest.raises(HeaderError, match="not a valid gzip file"):
        gunzip(DumpFolder(tmp_path), "y.gz")
