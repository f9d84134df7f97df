"""A DFlash drafter whose matrices are read from the checkpoint by range when used (a Kimi-K2.5-sized drafter does
not fit the memory of a CPU measurement) drafts exactly what the same drafter held in memory drafts: the same
hidden states bit for bit, the same cycles and accept lengths, against a target and from a dump."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent.parent))
import dflashfixtures as fx  # noqa: E402

from eaglekit.analysis.acceptance.measure import measure_acceptance  # noqa: E402
from eaglekit.analysis.draft.block import left_in_checkpoint  # noqa: E402
from eaglekit.analysis.draft.dflash import DFlashDrafter  # noqa: E402
from eaglekit.core.errors import InputError  # noqa: E402

FIGURES = ("accept_length", "accept_length_authors", "accept_length_by_steps", "per_step_acceptance",
           "generated_tokens", "cycles", "per_prompt_accept_length", "block_cycles")


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    return fx.world(tmp_path_factory)


@pytest.fixture(scope="module")
def target(w):
    from eaglekit.analysis.acceptance.target import load_target_model

    return load_target_model(str(w / "target"))


def _same(a, b) -> None:
    for key in FIGURES:
        assert getattr(a, key) == getattr(b, key), key


def test_left_in_checkpoint_takes_the_largest_first():
    sizes = {"a": 10, "b": 40, "c": 30, "d": 5}
    assert left_in_checkpoint(sizes, None) == set()
    assert left_in_checkpoint(sizes, 85) == set()
    assert left_in_checkpoint(sizes, 45) == {"b"}
    assert left_in_checkpoint(sizes, 15) == {"b", "c"}
    assert left_in_checkpoint(sizes, 14) == {"a", "b", "c"}
    assert left_in_checkpoint(sizes, 0) == set(sizes)


@pytest.mark.parametrize("drafter", ["trained", "random6"])   # random6: saved with a model. prefix
def test_read_by_range_gives_the_held_forward_bit_for_bit(w, drafter):
    held = DFlashDrafter.load(str(w / drafter))
    assert not held.streamed and held.checkpoint is None
    g = torch.Generator().manual_seed(0)
    c = held.config
    feats = torch.randn(9, c.n_aux * c.target_hidden_size, generator=g)
    groups = [(torch.randn(3, Q, c.hidden_size, generator=g), torch.tensor([2, 4, 7][:3])) for Q in (c.block_size, 2)]
    want_ctx = held.context(feats)
    want = held.forward_many(want_ctx, groups)
    total = sum(t.numel() * 4 for t in held.w.values())
    for keep in (0, total // 2):
        with DFlashDrafter.load(str(w / drafter), keep_bytes=keep) as d:
            assert d.streamed and d.owns_checkpoint
            assert set(d.w) | set(d.stored) == set(held.w) and not set(d.w) & set(d.stored)
            assert sum(t.numel() * 4 for t in d.w.values()) <= keep
            if keep == 0:
                assert not d.w    # norms too: every tensor read when used
            ctx = d.context(feats)
            assert all(torch.equal(a, b) for a, b in zip(ctx.keys + ctx.values, want_ctx.keys + want_ctx.values))
            got = d.forward_many(ctx, groups)
            assert all(torch.equal(a, b) for a, b in zip(got, want))
            # one group alone is what it is among others
            assert torch.equal(d.forward(ctx, *groups[1]), want[1])
        assert not d.owns_checkpoint   # closed with the drafter


def test_measure_by_range_equals_held_against_a_target(w, target, monkeypatch):
    import eaglekit.analysis.acceptance.block as block
    import eaglekit.analysis.draft.dflash as dflash

    kw = dict(target=target, prompts=str(w / "prompts.jsonl"), max_new_tokens=13, steps=3, cache=False)
    held = measure_acceptance(str(w / "trained"), **kw)
    assert held.accept_length > 1.2          # a drafter that accepts: a wrong draft would show
    loaded = []
    real = block.load_block_drafter
    monkeypatch.setattr(block, "load_block_drafter", lambda *a, **k: loaded.append(real(*a, **k)) or loaded[-1])
    monkeypatch.setattr(dflash, "KEEP_BYTES", 0)
    streamed = measure_acceptance(str(w / "trained"), **kw)
    assert loaded[0].streamed and not loaded[0].w
    assert not loaded[0].owns_checkpoint     # the measurement closed the checkpoint it opened
    _same(streamed, held)
    # a drafter handed in stays open for the caller
    with DFlashDrafter.load(str(w / "trained"), keep_bytes=0) as d:
        _same(measure_acceptance(d, **kw), held)
        assert d.owns_checkpoint
        _same(measure_acceptance(d, **kw), held)


def test_measure_by_range_equals_held_from_a_dump_with_a_streamed_head(w, target, tmp_path, monkeypatch):
    import eaglekit.analysis.acceptance.head as head
    from eaglekit.cli import main

    dump = tmp_path / "dump"
    assert main(["dump-hidden", "--target", str(w / "target"), "--prompts", str(w / "prompts.jsonl"), "--out",
                 str(dump), "--for-drafter", str(w / "trained"), "--max-new-tokens", "13", "--dtype", "float32"]) == 0
    kw = dict(hidden_states=str(dump), embeddings=str(w / "target"), max_new_tokens=13, steps=3, cache=False)
    held = measure_acceptance(str(w / "trained"), **kw)
    monkeypatch.setattr(head, "KEEP_HEAD", 0)   # the target's head streamed in row blocks, as Kimi's is
    with DFlashDrafter.load(str(w / "trained"), keep_bytes=0) as d:
        streamed = measure_acceptance(d, **kw)
    _same(streamed, held)
    assert held.generated_tokens > 20 and json.loads((dump / "manifest.json").read_text())["layers"] == [1, 3]


def test_a_nan_in_a_matrix_read_by_range_is_refused_at_its_first_read(w, tmp_path):
    cfg = fx.drafter_config(block_size=4)
    tensors = fx.random_tensors(cfg)
    tensors["layers.1.mlp.up_proj.weight"][3, 2] = float("nan")
    fx.save_drafter(tmp_path / "nan", cfg, tensors)
    with pytest.raises(InputError, match=r"layers\.1\.mlp\.up_proj\.weight holds NaN or Inf in 1 of"):
        DFlashDrafter.load(str(tmp_path / "nan"))                       # held: refused at load
    with DFlashDrafter.load(str(tmp_path / "nan"), keep_bytes=0) as d:  # read by range: at the first pass
        ctx = d.context(torch.randn(5, d.config.n_aux * d.config.target_hidden_size))
        with pytest.raises(InputError, match=r"layers\.1\.mlp\.up_proj\.weight holds NaN or Inf in 1 of"):
            d.forward(ctx, torch.randn(1, 4, d.config.hidden_size), torch.tensor([5]))


@pytest.mark.parametrize("keep", [-1, 1.5, True])
def test_a_bad_keep_bytes_is_refused(w, keep):
    with pytest.raises(InputError, match="keep_bytes must be a whole number"):
        DFlashDrafter.load(str(w / "trained"), keep_bytes=keep)
