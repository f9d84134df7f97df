"""Hostile drift inputs (issue 23): a compressed-tensors weight_shape declaring 2e8 entries or 2e8 columns,
num_bits "four", config_groups as a list, FP8 with NaN scales, hidden states that make CKA undefined.
Each is one line (exit 2) within 1 GiB, or a stated count; --json is strict JSON, never a bare NaN."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from bounded_cli import run_limited

from eaglekit.analysis.drift.measure import drift
from eaglekit.core.safejson import finite
from eaglekit.analysis.drift.stats import unit_sums
from eaglekit.cli import main
from eaglekit.io.dumps.native import DumpManifest, DumpSample, write_dump

PACKED = {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "config_groups": {"g": {"weights": {"num_bits": 4, "strategy": "channel"}}}}


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"bare {name} in --json output")
    return json.loads(text, parse_constant=refuse)


def _sparse_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    """A safetensors file whose header declares ``tensors`` ({name: (dtype, shape, nbytes)}), data left
    as a hole: a 1.6 GB declaration costs no disk."""
    header, offset = {}, 0
    for name, (dtype, shape, n) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)


def _folder(root: Path, name: str, config: dict | None) -> Path:
    folder = root / name
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_text(json.dumps({"quantization_config": config}))
    return folder


def test_a_weight_shape_declaring_2e8_entries_is_refused_unread(tmp_path):
    folder = _folder(tmp_path, "t", PACKED)
    _sparse_safetensors(folder / "model.safetensors", {
        "x.weight_packed": ("I32", [8, 8], 256), "x.weight_scale": ("BF16", [8, 1], 16),
        "x.weight_shape": ("I64", [200_000_000], 1_600_000_000)})
    r = run_limited("drift", str(folder), str(folder), "--full", "--scheduler", "inline", tmp=tmp_path)
    assert r.rc == 2 and len(r.error_lines) == 1, r.stderr
    assert "x.weight_shape is I64 [200000000]" in r.stderr and "two integers" in r.stderr


def test_a_weight_shape_of_2e8_columns_is_refused(tmp_path):
    from safetensors.torch import save_file

    folder = _folder(tmp_path, "t", PACKED)
    save_file({"x.weight_packed": torch.zeros(8, 8, dtype=torch.int32), "x.weight_scale": torch.ones(8, 1).bfloat16(),
               "x.weight_shape": torch.tensor([8, 200_000_000])}, str(folder / "model.safetensors"))
    r = run_limited("drift", str(folder), str(folder), "--full", "--scheduler", "inline", tmp=tmp_path)
    assert r.rc == 2 and len(r.error_lines) == 1, r.stderr
    assert "says 200000000 columns" in r.stderr and "packs at most 64" in r.stderr


@pytest.mark.parametrize("change,message", [
    ({"config_groups": {"g": {"weights": {"num_bits": "four"}}}}, "num_bits must be an integer, got 'four'"),
    ({"config_groups": [{"weights": {"num_bits": 4}}]}, "config_groups must be an object of named groups"),
])
def test_malformed_quantisation_config_is_one_line(tmp_path, capsys, change, message):
    from safetensors.torch import save_file

    folder = _folder(tmp_path, "t", {**PACKED, **change})
    save_file({"x.weight_packed": torch.zeros(8, 8, dtype=torch.int32), "x.weight_scale": torch.ones(8, 1).bfloat16()},
              str(folder / "model.safetensors"))
    assert main(["drift", str(folder), str(folder), "--full", "--scheduler", "inline"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


def _fp8(folder: Path, scales: list[float], nan_rows: slice | None = None) -> None:
    from safetensors.torch import save_file

    w = torch.randn(256, 128, generator=torch.Generator().manual_seed(0)).to(torch.float8_e4m3fn)
    if nan_rows is not None:  # the E4M3FN NaN code (S.1111.111) in those rows
        bits = w.view(torch.uint8).clone()
        bits[nan_rows] = 0x7F
        w = bits.view(torch.float8_e4m3fn)
    save_file({"model.layers.0.mlp.up_proj.weight": w,
               "model.layers.0.mlp.up_proj.weight_scale_inv": torch.tensor(scales).reshape(2, 1)},
              str(folder / "model.safetensors"))


def test_fp8_nan_codes_are_counted_and_said_not_silently_zero(tmp_path):
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    a, b = _folder(tmp_path, "a", fp8), _folder(tmp_path, "b", fp8)
    _fp8(a, [1.0, 1.0])
    _fp8(b, [1.5, 1.5], nan_rows=slice(128, 256))  # rows 128..255 of B dequantise to NaN
    report = drift(a, b, full=True, scheduler="inline", progress=False)
    assert report.not_finite == (("layers.0.mlp.up_proj.weight", 128),)
    assert "128 rows hold NaN or Inf after dequantisation" in str(report)
    assert report.whole.rows == 256 and report.strata[0].moved.value == 1.0  # the 128 finite rows all moved (x1.5)
    data = _strict(json.dumps(finite(report.to_json()), allow_nan=False))
    assert data["not_finite_rows"] == [{"weight": "layers.0.mlp.up_proj.weight", "rows": 128}]


def test_unit_sums_skip_rows_that_are_not_finite():
    a = np.ones((3, 4), np.float32)
    b = a.copy()
    b[1, 2] = np.nan
    b[2, 0] = np.inf
    sums, moved, skipped = unit_sums(a, b, tol=1e-3)
    assert skipped == 2 and sums.tolist() == [4.0, 4.0, 4.0, 0.0, 0.0, 1.0] and not moved.any()


def _dump(path: Path, states: np.ndarray) -> Path:
    ids = np.arange(6, dtype=np.int64)
    write_dump(path, DumpManifest(target=str(path), hidden_size=4, num_hidden_layers=1, vocab_size=100, layers=(1,),
                                  samples=1), [DumpSample(ids, states, ids, 3)])
    return path


def test_drift_hidden_json_has_null_and_a_reason_never_nan(tmp_path, capsys):
    from safetensors.torch import save_file

    a, b = _folder(tmp_path, "a", None), _folder(tmp_path, "b", None)
    for f in (a, b):
        save_file({"model.layers.0.mlp.up_proj.weight": torch.ones(8, 64).bfloat16()}, str(f / "model.safetensors"))
    constant = np.ones((1, 6, 4), np.float32)  # states that do not vary: CKA is 0/0
    da, db = _dump(tmp_path / "da", constant), _dump(tmp_path / "db", constant)
    assert main(["drift", str(a), str(b), "--full", "--scheduler", "inline", "--hidden", str(da), str(db),
                 "--json"]) == 0
    data = _strict(capsys.readouterr().out)
    layer = data["hidden_states"]["layers"][0]
    assert layer["cka"] is None and "CKA is undefined for constant states" in layer["not_a_number"]
    assert data["whole"]["cosine"]["value"] == pytest.approx(1.0)


def test_finite_replaces_every_nan_and_inf():
    value = {"a": [1.0, float("nan"), (float("inf"), 2)], "b": {"c": float("-inf")}, "d": "nan"}
    assert finite(value) == {"a": [1.0, None, [None, 2]], "b": {"c": None}, "d": "nan"}


def test_a_hostile_weight_name_in_the_not_finite_note_is_escaped_in_html(tmp_path):
    from safetensors.torch import save_file

    from eaglekit.view.drift_figures import save_drift_page

    name = "model.layers.0.mlp.<img src=x onerror=alert(1)>.weight"
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    a, b = _folder(tmp_path, "a", fp8), _folder(tmp_path, "b", fp8)
    w = torch.randn(128, 128, generator=torch.Generator().manual_seed(0)).to(torch.float8_e4m3fn)
    nan = w.view(torch.uint8).clone()
    nan[64:] = 0x7F  # the E4M3FN NaN code: rows counted as not finite
    for folder, weight in ((a, w), (b, nan.view(torch.float8_e4m3fn))):
        save_file({name: weight, name + "_scale_inv": torch.tensor([[1.0]])}, str(folder / "model.safetensors"))
    report = drift(a, b, full=True, scheduler="inline", progress=False)
    assert report.not_finite and "<img" in report.not_finite_note
    page = tmp_path / "drift.html"
    save_drift_page(report, str(page))
    for html in (report._repr_html_(), page.read_text()):
        assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
