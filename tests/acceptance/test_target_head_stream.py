"""Issue 38: a Kimi-sized target head (163,840 x 7,168, 2.3 GB in bf16, 4.7 GB in float32) is not held by the dump
path: past KEEP_HEAD bytes it is streamed from the checkpoint in row blocks. The streamed head gives the held
head's next tokens and probabilities exactly (ties to the first id, as torch.argmax), and refuses a block with
NaN as the held head refuses the whole."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from eaglekit.analysis.acceptance import head as head_mod
from eaglekit.analysis.acceptance.head import read_target_head
from eaglekit.analysis.draft import weights as weights_mod
from eaglekit.core.errors import EaglekitError

V, H = 1000, 24


def _target(folder, *, nan_row=None, tie=False):
    g = torch.Generator().manual_seed(5)
    lm = torch.randn(V, H, generator=g)
    if tie:  # two rows equal: the first id must win in both paths
        lm[777] = lm[5]
    if nan_row is not None:
        lm[nan_row, 3] = float("nan")
    folder.mkdir()
    save_file({"lm_head.weight": lm, "model.norm.weight": 1 + 0.1 * torch.randn(H, generator=g)},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "vocab_size": V, "hidden_size": H,
                                                    "rms_norm_eps": 1e-6, "num_hidden_layers": 4}))
    return folder


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(weights_mod, "BLOCK_BYTES", 37 * H * 4)      # 37 rows a block: 28 blocks, the last short
    monkeypatch.setattr(head_mod, "KEEP_HEAD", 1024)                  # every head here is "large"


@pytest.mark.parametrize("normed", [True, False])
def test_the_streamed_head_equals_the_held_head(tmp_path, monkeypatch, normed):
    folder = _target(tmp_path / "t", tie=True)
    held = read_target_head(folder)
    monkeypatch.setattr(weights_mod, "BLOCK_BYTES", 37 * H * 4)
    monkeypatch.setattr(head_mod, "KEEP_HEAD", 1024)
    streamed = read_target_head(folder)
    assert held.lm_head is not None and streamed.streamed and streamed.vocab_size == V and streamed.hidden_size == H
    final = torch.randn(50, H, generator=torch.Generator().manual_seed(1))
    final[7] = 0.0
    final[8] = held.lm_head[5] * 3   # its best rows are 5 and 777, equal: 5 wins
    columns = torch.tensor([0, 5, 36, 37, 38, 777, 999, 500, 5])
    b_ids = _same_tokens(held, streamed, final, normed=normed, columns=columns)
    assert int(b_ids[8]) == 5
    assert torch.allclose(held.logits(final, normed=normed), streamed.logits(final, normed=normed), atol=1e-5)
    streamed.close()


def _same_tokens(a, b, final, *, normed, columns):
    """Both heads give the same greedy tokens, and at temperature 0.7 the same probabilities (none at 0); the last
    token ids."""
    for temperature in (0.0, 0.7):
        a_ids, a_p = a.next_tokens(final, normed=normed, temperature=temperature, columns=columns)
        b_ids, b_p = b.next_tokens(final, normed=normed, temperature=temperature, columns=columns)
        assert torch.equal(a_ids, b_ids)
        if temperature:
            assert torch.allclose(a_p, b_p, rtol=1e-5, atol=1e-7)
        else:
            assert a_p is None and b_p is None
    return b_ids


def test_a_streamed_block_with_nan_is_refused_by_name(tmp_path, small_blocks):
    head = read_target_head(_target(tmp_path / "t", nan_row=600))
    assert head.streamed
    with pytest.raises(EaglekitError, match=r"lm_head\.weight \(rows 592-628\)"):
        head.next_tokens(torch.randn(3, H), normed=True)
    head.close()


def test_a_remote_head_is_copied_once_and_streamed_as_the_local_one(tmp_path, small_blocks):
    """Issue 46: a remote head past KEEP_HEAD is no longer read whole: it is copied once, by range, to a private local
    file (never next to the user's model) and streamed from there; the copy gives the held head's tokens, the
    server sees the head's bytes about once, and close() deletes the copy."""
    import tempfile

    from eaglekit.demo.fileserver import FileServer

    folder = _target(tmp_path / "t", tie=True)
    local = read_target_head(folder)
    final = torch.randn(40, H, generator=torch.Generator().manual_seed(2))
    columns = torch.tensor([0, 5, 37, 777, 999])
    with FileServer(tmp_path) as server:
        remote = read_target_head(f"{server.endpoint}/files/t")
        sent = sum(rec.bytes_sent for rec in server.log)
        assert remote.streamed and remote.spool is not None
        spool = remote.spool
        assert str(spool).startswith(tempfile.gettempdir()) and not str(spool).startswith(str(tmp_path))
        _same_tokens(local, remote, final, normed=False, columns=columns)
        after = sum(rec.bytes_sent for rec in server.log)
    head_bytes = V * H * 4
    assert head_bytes <= sent < 2 * head_bytes and after == sent   # copied once; the passes read the copy
    remote.close()
    local.close()
    from pathlib import Path

    assert not Path(spool).exists() and list(folder.iterdir())   # the copy is gone, the model folder untouched
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]


def test_only_a_folder_the_spool_made_is_removed(tmp_path):
    """remove_spool deletes a folder only with the marker spool_tensor writes, and only the files it wrote: a folder
    named like one but without the marker, and a file a link points at, are left."""
    from eaglekit.io.spool import FILE, remove_spool

    foreign = tmp_path / "eaglekit-spool-abc"
    foreign.mkdir()
    (foreign / FILE).write_text("someone else's")
    remove_spool(foreign)
    assert (foreign / FILE).exists()
