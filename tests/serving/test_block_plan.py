"""Block drafters (DFlash) priced beside EAGLE-3 chains and trees in the serving plan."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from eaglekit.analysis.serving.plan import plan
from eaglekit.core.configs.block import read_block_config
from eaglekit.core.errors import InputError
from eaglekit.core.serving.block import BlockFit, block_candidate, block_prior, block_size
from eaglekit.core.serving.costmodel import GPUS
from eaglekit.core.serving.cyclefit import CycleFit, draft_prior, fit_cycle

CONFIG = {"architectures": ["DFlashDraftModel"], "hidden_size": 4096, "num_attention_heads": 32,
          "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336, "num_hidden_layers": 5,
          "vocab_size": 128256, "block_size": 8, "num_target_layers": 32,
          "dflash_config": {"mask_token_id": 128002, "target_layer_ids": [1, 8, 15, 22, 29]}}


def measurement(lengths=(1.85, 2.6, 3.25, 3.8, 4.25, 4.6, 4.9), spread=0.06, **extra):
    return {"family": "dflash", "block_size": 8, "steps": len(lengths), "drafter": "org/dflash-drafter",
            "accept_length_by_steps": list(lengths),
            "accept_length_by_steps_low": [L * (1 - spread) for L in lengths],
            "accept_length_by_steps_high": [L * (1 + spread) for L in lengths], **extra}


def _fit(prior, cls=CycleFit):
    f = fit_cycle([], prior)
    return cls(f.value, f.cov, f.prior, f.rows, f.noise, f.target_noise)


@pytest.mark.parametrize("batch", [1, 8])
def test_block_cycle_grows_with_k_far_less_than_a_chain_of_the_same_drafter(batch):
    size = block_size(read_block_config(CONFIG))
    gpu = GPUS["H100-SXM"]
    block = _fit(block_prior(size, gpu, context=4096), BlockFit)
    chain = _fit(draft_prior(size.as_shape(), gpu, context=4096))
    block_growth = block.extra_ms(batch, 7) - block.extra_ms(batch, 1)
    chain_growth = chain.extra_ms(batch, 7) - chain.extra_ms(batch, 1)
    assert block_growth > 0
    # one forward over K + 1 rows reads the weights once; a chain of K steps reads them K times
    assert block_growth < 0.1 * chain_growth
    # and the block forward of 7 drafts costs less than the chain's 7 steps
    assert block.extra_ms(batch, 7) < 0.35 * chain.extra_ms(batch, 7)


def _plan(block_lengths, *, eagle="0.75,0.65,0.6,0.55", batches=(1, 4, 16, 64, 256), **kw):
    per_step = tuple(float(c) for c in eagle.split(","))
    return plan([per_step, measurement(block_lengths)], block_drafter=CONFIG, target="llama-3.1-8b", gpu="H100-SXM",
                calibrate_points=[(1, 1, 7.0), (64, 1, 12.0), (1, 4, 7.6)], batches=batches, **kw)


def test_best_family_switches_where_the_arithmetic_says():
    # a strong block drafter wins at batch 1 (one forward for 7 drafts); on a GPU short of compute (an H20) its verify
    # of 8 tokens per request costs more than a short chain's at batch 16, where the forward is compute-bound
    p = plan([(0.8, 0.7, 0.6), measurement((1.6, 2.1, 2.5, 2.8, 3.0, 3.2, 3.35))], block_drafter=CONFIG,
             target="llama-3.1-8b", gpu="H20", context=1024, calibrate_points=[(1, 1, 7.0)], batches=(1, 4, 16))
    best = [b.best for b in p.fitting]
    assert best[0].block, best[0].family_label()
    assert not best[-1].block and best[-1].steps, best[-1].family_label()
    # where a block wins it beats the best EAGLE-3 option by more than 1%, and where it loses it does not
    for b in p.fitting:
        blk, eagle = b.best_block, b.best_eagle
        assert (blk.tokens_per_s > eagle.tokens_per_s * 1.01) == b.best.block
    fams = [c["family"] for c in p.choices]
    assert fams[0] == "dflash" and "eagle3" in fams
    # the cell's figures agree with the arithmetic: tok/s = batch x accept length / cycle
    for b in p.fitting:
        for o in b.blocks:
            assert o.tokens_per_s == pytest.approx(b.batch * o.accept_length * 1000 / o.cycle_ms)
            assert o.cycle_ms == pytest.approx(o.verify.ms + o.draft.ms)


def test_intervals_carried_through():
    narrow = _plan((1.85, 2.6, 3.25, 3.8, 4.25, 4.6, 4.9), batches=(1,))
    m = measurement(spread=0.2)
    wide = plan([(0.75, 0.65), m], block_drafter=CONFIG, target="llama-3.1-8b", gpu="H100-SXM",
                calibrate_points=[(1, 1, 7.0), (64, 1, 12.0), (1, 4, 7.6)], batches=(1,))
    a, b = narrow.plans[0].blocks[-1], wide.plans[0].blocks[-1]
    assert a.accept_length_interval.low == pytest.approx(4.9 * 0.94)
    assert b.tps.high / b.tps.low > a.tps.high / a.tps.low  # a wider accept length widens the throughput interval
    js = narrow.to_json()["batches"][0]
    blk = js["blocks"][-1]
    for key in ("tokens_per_s_low", "tokens_per_s_high", "speedup_low", "speedup_high", "accept_length_low",
                "accept_length_high"):
        assert blk[key] is not None
    assert js["best_label"] and js["verdict"] in ("GO", "NO-GO", "TOO CLOSE TO CALL")
    assert "rival" in js


def test_flags_printed_exactly():
    p = _plan((1.85, 2.6, 3.25, 3.8, 4.25, 4.6, 4.9), batches=(1,))
    c = p.choices[0]
    assert c["label"] == "DFlash K=7 (block 8)"
    assert c["sglang"] == ("--speculative-algorithm DFLASH --speculative-num-draft-tokens 8 "
                           "--speculative-draft-model-path org/dflash-drafter")
    assert c["vllm"] == {"method": "dflash", "model": "org/dflash-drafter", "num_speculative_tokens": 7}
    text = str(p)
    assert ("--speculative-config '{\"method\": \"dflash\", \"model\": \"org/dflash-drafter\", "
            "\"num_speculative_tokens\": 7}'") in text
    assert "EAGLE-3 chain k=" in text and "DFlash K=7 (block 8)" in text
    html = p._repr_html_()
    assert "DFlash K=7 (block 8)" in html and "EAGLE-3 and block drafters" in html
    assert p.to_json()["engine_config"]["choice"]["ranges"][0]["vllm"]["num_speculative_tokens"] == 7


def test_without_blocks_the_plan_is_unchanged():
    p = plan((0.75, 0.65), target="llama-3.1-8b", gpu="H100-SXM", calibrate_points=[(1, 1, 7.0)], batches=(1, 4))
    assert "blocks" not in p.to_json() and "choice" not in p.engine_config
    assert "best k" in str(p)


@pytest.mark.parametrize("change, message", [
    ({"block_size": None}, "block_size is None"),
    ({"block_size": 4}, "a block of 4 holds at most 3"),
    ({"family": "dflash2"}, "cannot price a DFlash2 cycle"),
    ({"family": "dspark"}, "cannot price a DSpark cycle"),
    ({"accept_length_by_steps": [1.5, 3.9], "steps": 2, "accept_length_by_steps_low": None},
     "accept length 3.9 at K = 2 is outside 1..3"),
    ({"accept_length_by_steps_low": [2.0] * 7}, "the interval at K = 1 (2-1.961) does not hold its accept length 1.85"),
])
def test_bad_measurements_are_refused(change, message):
    with pytest.raises(InputError, match=re.escape(message)):
        block_candidate({**measurement(), **change})


def test_block_measurement_without_config_is_refused():
    with pytest.raises(InputError, match="give one --block-drafter CONFIG per block measurement"):
        plan([(0.75,), measurement()], target="llama-3.1-8b", gpu="H100-SXM", calibrate_points=[(1, 1, 7.0)])


@pytest.fixture
def files(tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps(CONFIG))
    for name, change in (("ok", {}), ("noblock", {"block_size": None}), ("bigk", {"block_size": 4}),
                         ("dflash2", {"family": "dflash2"})):
        (tmp_path / f"{name}.json").write_text(json.dumps({**measurement(), **change}))
    return tmp_path


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "eaglekit", "plan", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("name, extra, message", [
    ("noblock", True, "block_size is None"),
    ("bigk", True, "holds at most 3"),
    ("dflash2", True, "cannot price a DFlash2 cycle"),
    ("dflash2", False, "cannot price a DFlash2 cycle"),
    ("ok", False, "give one --block-drafter CONFIG per block measurement"),
])
def test_cli_bad_block_input_is_one_line_and_exit_2(files, name, extra, message):
    args = ["--per-step", "0.7,0.6", "--acceptance", files / f"{name}.json", "--target", "llama-3.1-8b", "--gpu",
            "H100-SXM", "--calibrate", "1,1,7", "--batch", "1,8"]
    if extra:
        args += ["--block-drafter", files / "cfg.json"]
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


def test_cli_prices_both_families_side_by_side(files):
    r = _cli("--per-step", "0.75,0.65,0.6", "--acceptance", files / "ok.json", "--block-drafter", files / "cfg.json",
             "--target", "llama-3.1-8b", "--gpu", "H100-SXM", "--calibrate", "1,1,7", "--calibrate", "64,1,12",
             "--batch", "1,16", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    b = out["batches"][0]
    assert {o["family"] for o in b["blocks"]} == {"dflash"} and len(b["blocks"]) == 7
    assert out["blocks"][0]["block_size"] == 8 and out["blocks"][0]["fit"]["terms"][0]["term"] == "block_ms_per_cycle"
    assert out["engine_config"]["choice"]["ranges"]


def test_a_block_result_record_is_read_with_its_intervals():
    from types import SimpleNamespace

    from eaglekit.analysis.serving.plan import split_acceptance
    from eaglekit.core.uncertainty import Interval

    rec = SimpleNamespace(family="dflash", block_size=8, steps=2, drafter="org/d", accept_length_by_steps=(1.8, 2.5),
                          accept_length_by_steps_interval=(Interval(1.8, 1.7, 1.9), Interval(2.5, 2.3, 2.7)))
    eagle, blocks = split_acceptance([(0.7, 0.6), rec])
    assert eagle == (0.7, 0.6)
    cand = block_candidate(blocks[0][0])
    assert cand.at(2).low == 2.3 and cand.at(2).high == 2.7 and cand.drafter == "org/d"


def test_throughput_figure_draws_the_block_drafter():
    pytest.importorskip("plotly")
    from eaglekit.view.serving import plan_throughput_figure

    fig = plan_throughput_figure(_plan((1.85, 2.6, 3.25, 3.8, 4.25, 4.6, 4.9), batches=(1, 4)))
    trace = next(t for t in fig.data if t.name == "DFlash (best K)")
    assert trace.error_y.array is not None and trace.text[0].startswith("DFlash K=")
