"""Hidden-state dumps: the documented format, read back exactly (bf16 as torch rounds it), malformed
dumps refused with errors naming the file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eaglekit.core.errors import HeaderError, InputError, NotFoundError
from eaglekit.io.dumps.native import DumpManifest, DumpSample, encode_sample, open_dump, write_dump


def _manifest(**kw):
    base = dict(target="t", hidden_size=5, num_hidden_layers=4, vocab_size=10, layers=(1, 2, 4), samples=0,
                dtype="float32")
    return DumpManifest(**{**base, **kw})


def _sample(seed=0, T=7):
    rng = np.random.default_rng(seed)
    return DumpSample(rng.integers(0, 10, T), rng.standard_normal((3, T, 5)).astype(np.float32),
                      rng.integers(0, 10, T), 3)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_round_trip(tmp_path, dtype):
    import torch

    samples = [_sample(0), _sample(1, T=4)]
    dump = write_dump(tmp_path / "d", _manifest(dtype=dtype), samples)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [
        "manifest.json", "sample-000000.safetensors", "sample-000001.safetensors"]
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["format"] == "eaglekit-hidden-states" and manifest["version"] == 1 and manifest["samples"] == 2
    assert manifest["eaglekit_version"]
    back = open_dump(tmp_path / "d")
    assert len(back) == 2 and back.layers == (1, 2, 4) and back.manifest == dump.manifest
    for a, b in zip(samples, back):
        want = a.hidden_states if dtype == "float32" else torch.from_numpy(a.hidden_states).bfloat16().float().numpy()
        assert np.array_equal(b.hidden_states, want) and b.hidden_states.dtype == np.float32
        assert np.array_equal(b.input_ids, a.input_ids) and np.array_equal(b.target_ids, a.target_ids)
        assert b.prompt_len == 3
    assert back[-1].length == 4
    # the files are plain safetensors: safetensors itself reads them
    from safetensors.numpy import load_file

    if dtype == "float32":
        raw = load_file(str(tmp_path / "d" / "sample-000000.safetensors"))
        assert np.array_equal(raw["hidden_states"], samples[0].hidden_states)


def test_malformed_dumps(tmp_path):
    with pytest.raises(NotFoundError, match="no such hidden-state dump"):
        open_dump(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match="manifest.json: missing"):
        open_dump(tmp_path / "empty")
    write_dump(tmp_path / "d", _manifest(), [_sample()])
    with pytest.raises(InputError, match="not an empty folder"):
        write_dump(tmp_path / "d", _manifest(), [_sample()])
    m = tmp_path / "d" / "manifest.json"
    good = json.loads(m.read_text())
    for change, msg in (({"format": "x"}, "not an eaglekit hidden-state manifest"), ({"version": 2}, "version 2"),
                        ({"layers": [9]}, "exceeds num_hidden_layers"), ({"dtype": "f16"}, "'dtype'"),
                        ({"samples": 3}, "only 1 sample files")):
        m.write_text(json.dumps({**good, **change}))
        with pytest.raises(HeaderError, match=msg):
            open_dump(tmp_path / "d")
    m.write_text("{")
    with pytest.raises(HeaderError, match="not valid JSON"):
        open_dump(tmp_path / "d")
    m.write_text(json.dumps({**good, "hidden_size": 6}))
    with pytest.raises(HeaderError, match=r"sample-000000.safetensors: hidden_states is \[3, 7, 5\]"):
        open_dump(tmp_path / "d")[0]
    m.write_text(json.dumps(good))
    f = tmp_path / "d" / "sample-000000.safetensors"
    f.write_bytes(f.read_bytes()[:-8])
    with pytest.raises(HeaderError, match="sample-000000.safetensors"):
        open_dump(tmp_path / "d")[0]
    bad = DumpSample(np.arange(4), np.zeros((3, 4, 5), np.float32), np.arange(4), 9)
    f.write_bytes(encode_sample(bad))
    with pytest.raises(HeaderError, match="prompt_len 9 is outside"):
        open_dump(tmp_path / "d")[0]
    with pytest.raises(InputError, match=r"expected \[3, T, 5\]"):
        write_dump(tmp_path / "e", _manifest(), [DumpSample(np.arange(4), np.zeros((2, 4, 5)), np.arange(4), 1)])
