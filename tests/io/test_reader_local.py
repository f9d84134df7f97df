"""Reading local checkpoints: single, sharded, several files; every bad input a clear error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from eaglekit.core.errors import ConfigError, HeaderError, NotFoundError
from eaglekit.io.reader import open_checkpoint, read_inventory


def write(folder, name, tensors, **kw):
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / name), **kw)


@pytest.fixture
def single(tmp_path):
    write(tmp_path, "model.safetensors", {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                                          "d2t": np.array([0, 5, 7], np.int64)}, metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 3}))
    return tmp_path


def test_single_folder_and_file(single):
    inv = read_inventory(single)
    assert inv.names == ("d2t", "w")
    assert inv["w"].shape == (2, 3) and inv["w"].dtype == "F32"
    assert inv.config == {"hidden_size": 3}
    assert inv.metadata == {"format": "pt"}
    assert inv.parameters == 9 and inv.total_bytes == 24 + 24
    assert read_inventory(single / "model.safetensors").names == inv.names


def test_read_tensor_values(single):
    with open_checkpoint(single) as ckpt:
        np.testing.assert_array_equal(ckpt.read_numpy("d2t"), [0, 5, 7])
        assert ckpt.read_tensor("w").tolist() == [[0, 1, 2], [3, 4, 5]]
        assert b"".join(ckpt.iter_bytes("w", chunk_bytes=5)) == ckpt.read_bytes("w")


def test_sharded_index(tmp_path):
    write(tmp_path, "a.safetensors", {"x": np.zeros(2, np.float32)})
    write(tmp_path, "b.safetensors", {"y": np.zeros(3, np.int64)})
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}))
    inv = read_inventory(tmp_path)
    assert [f.path for f in inv.files] == ["a.safetensors", "b.safetensors"]
    assert inv["y"].file == "b.safetensors"


def test_several_files_without_index(tmp_path):
    write(tmp_path, "one.safetensors", {"x": np.zeros(2, np.float32)})
    write(tmp_path, "two.safetensors", {"y": np.zeros(3, np.float32)})
    assert read_inventory(tmp_path).names == ("x", "y")


def test_duplicate_tensor_across_files(tmp_path):
    write(tmp_path, "one.safetensors", {"x": np.zeros(2, np.float32)})
    write(tmp_path, "two.safetensors", {"x": np.zeros(2, np.float32)})
    with pytest.raises(HeaderError, match="appears in both one.safetensors and two.safetensors"):
        read_inventory(tmp_path)


def test_missing(tmp_path):
    with pytest.raises(NotFoundError, match="no such file or folder"):
        read_inventory(tmp_path / "nope")
    with pytest.raises(NotFoundError, match="no such file"):
        read_inventory(str(tmp_path / "nope" / "model.safetensors"))


def test_folder_without_safetensors(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"PK\x03\x04")
    with pytest.raises(NotFoundError, match="no safetensors files here"):
        read_inventory(tmp_path)


@pytest.mark.parametrize("shard", ["../x.safetensors", "/etc/passwd", "sub/../../x.safetensors", "C:/x.safetensors"])
def test_index_outside_folder(tmp_path, shard):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": shard}}))
    with pytest.raises(HeaderError, match="points outside the checkpoint folder"):
        read_inventory(tmp_path)


def test_index_missing_shard(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "gone.safetensors"}}))
    with pytest.raises(NotFoundError, match="gone.safetensors: no such file"):
        read_inventory(tmp_path)


def test_index_names_absent_tensor(tmp_path):
    write(tmp_path, "a.safetensors", {"x": np.zeros(2, np.float32)})
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "a.safetensors", "ghost": "a.safetensors"}}))
    with pytest.raises(HeaderError, match="that shard has no such tensor"):
        read_inventory(tmp_path)


@pytest.mark.parametrize("text, err, fragment", [
    ("not json", HeaderError, "is not valid JSON"),
    ("[]", HeaderError, "has no weight_map"),
])
def test_bad_index(tmp_path, text, err, fragment):
    (tmp_path / "model.safetensors.index.json").write_text(text)
    with pytest.raises(err, match=fragment):
        read_inventory(tmp_path)


def test_not_safetensors_file(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"<html><body>Error 502</body></html>")
    with pytest.raises(HeaderError, match="looks like an HTML page"):
        read_inventory(tmp_path)


def test_truncated_data(tmp_path, single):
    blob = (single / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(blob[:-4])
    with pytest.raises(HeaderError, match="truncated"):
        read_inventory(tmp_path)


@pytest.mark.parametrize("text, fragment", [("{", "is not valid JSON"), ("[1]", "must be a JSON object")])
def test_bad_config(single, text, fragment):
    (single / "config.json").write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        read_inventory(single)


def test_renders(single):
    inv = read_inventory(single)
    text = str(inv)
    assert "d2t" in text and "[2, 3]" in text and "F32" in text
    html = inv._repr_html_()
    assert "<table" in html and "d2t" in html and "format=pt" in html
    assert inv.to_pandas().shape == (2, 6)


def test_nothing_written(single):
    before = sorted((p.name, p.stat().st_mtime_ns) for p in single.iterdir())
    read_inventory(single)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in single.iterdir()) == before


def test_named_file_that_is_not_a_checkpoint(single):
    from eaglekit.core.errors import LocationError

    (single / "notes.txt").write_text("hello")
    with pytest.raises(LocationError, match="notes.txt, which is not a checkpoint file"):
        read_inventory(single / "notes.txt")
    assert read_inventory(single / "config.json").names == ("d2t", "w")  # config.json means its folder


def test_special_file_is_not_a_folder():
    from eaglekit.core.errors import LocationError

    with pytest.raises(LocationError):
        read_inventory("/dev/null")
