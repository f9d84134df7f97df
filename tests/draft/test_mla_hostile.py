"""Hostile MLA and MoE drafters (issue 47): each is the right answer, or one line naming what is wrong.

A NaN row in the drafter's own lm_head (in memory and streamed), rotary settings no table can be built from,
grouped routing with one expert per group, fused experts of a width that cannot be gate-then-up, and a
down_proj that contradicts its gate_up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import save_file

from eaglekit.analysis.draft import DraftModel
from eaglekit.analysis.draft import load as loading
from eaglekit.core.errors import ConfigError, InputError
from mla_reference import HT, V, Reference, make_mla_drafter


def _inputs(seed=3, T=10):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, T, HT, generator=g), torch.randint(0, V, (T,), generator=g)


def _save(folder, cfg, t):
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in t.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_a_nan_row_of_the_drafters_own_head_is_refused_by_name():
    cfg, t = make_mla_drafter(d2t=False)
    t["lm_head.weight"][7, 3] = float("nan")
    t["lm_head.weight"][30, 0] = float("inf")
    with pytest.raises(InputError, match=r"lm_head\.weight holds NaN or Inf in rows \[7, 30\]"):
        DraftModel.from_tensors(cfg, t)


def test_a_streamed_head_is_checked_block_by_block(tmp_path, monkeypatch):
    """A head too large to keep is read in row blocks; the block holding the NaN row is refused as it is read,
    naming the row by its place in the whole head (not in the block)."""
    cfg, t = make_mla_drafter(d2t=False)
    t["lm_head.weight"][41, 5] = float("nan")
    folder = _save(tmp_path / "d", cfg, t)
    monkeypatch.setattr(loading, "KEEP_MATRIX", 0)
    monkeypatch.setattr("eaglekit.analysis.draft.weights.BLOCK_BYTES", 16 * 4 * t["lm_head.weight"].shape[1])
    aux, ids = _inputs()
    with DraftModel.load(folder) as model:
        assert model.head.weight is None                              # streamed, 16 rows a block
        with pytest.raises(InputError, match=r"in row \[41\]"):
            model.draft(model.project(aux), ids, 2)


@pytest.mark.parametrize("bad, words", [
    ({"factor": 0}, "factor 0: it must be at least 1"),
    ({"factor": "40"}, "factor '40': write the context-stretch factor as a number"),
    ({"original_max_position_embeddings": 0}, "original_max_position_embeddings 0"),
    ({"beta_fast": -1}, "beta_fast -1: it must be a positive number"),
    ({"rope_type": "longrope", "type": None}, "longrope needs short_factor and long_factor"),
    ({"type": "rotary-of-the-future"}, "rope_type 'rotary-of-the-future'"),
])
def test_rotary_settings_no_table_can_be_built_from_are_refused_before_any_maths(bad, words):
    cfg, t = make_mla_drafter(yarn=True)
    cfg["rope_scaling"].update(bad)
    with pytest.raises(ConfigError, match="rope_scaling") as e:
        DraftModel.from_tensors(cfg, t)
    assert words in str(e.value)


def test_a_longrope_of_the_wrong_length_names_the_frequencies():
    cfg, t = make_mla_drafter(rope=4)
    cfg["rope_scaling"] = {"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 3,
                           "original_max_position_embeddings": 64}
    with pytest.raises(ConfigError, match="short_factor has 3 numbers, but 4 rotary dimensions turn 2"):
        DraftModel.from_tensors(cfg, t)


def test_groups_of_one_expert_route_as_deepseek_and_torchspec_do():
    """n_group equal to the expert count under noaux_tc: a group's score is its one expert's (TorchSpec
    torchspec/models/draft/moe.py ``group_topk = min(2, experts_per_group)``); top-2 used to fail with "selected
    index k out of range". The drafts equal the token-by-token reference's."""
    cfg, t = make_mla_drafter(moe="fused")
    cfg.update(n_group=8, topk_group=4)
    model = DraftModel.from_tensors(cfg, t)
    aux, ids = _inputs()
    ref, _ = Reference(cfg, t).draft(aux, ids, 3, list(range(aux.shape[1])))
    assert model.draft(model.project(aux), ids, 3).tokens.tolist() == ref.tolist()
    # only the topk_group best groups compete: 4 of 8 single-expert groups leave 4 candidates for 3 slots
    idx, _ = model.mlp.route(torch.randn(5, model.hidden_size, generator=torch.Generator().manual_seed(1)))
    assert idx.shape == (5, 3) and all(len(set(r)) == 3 for r in idx.tolist())


def test_fused_experts_of_odd_width_are_refused_naming_the_tensor_and_its_shape():
    cfg, t = make_mla_drafter(moe="fused")
    t["midlayer.mlp.experts.gate_up_proj"] = t["midlayer.mlp.experts.gate_up_proj"][..., :-1]
    with pytest.raises(ConfigError, match=r"midlayer\.mlp\.experts\.gate_up_proj is \[8, \d+, 19\], expected "
                                          r"\[8, \d+, 20\]"):
        DraftModel.from_tensors(cfg, t)


def test_a_down_proj_contradicting_gate_up_is_refused_on_load():
    cfg, t = make_mla_drafter(moe="fused")
    t["midlayer.mlp.experts.down_proj"] = t["midlayer.mlp.experts.down_proj"][:, :-2]
    with pytest.raises(ConfigError, match=r"midlayer\.mlp\.experts\.down_proj is \[8, 8, \d+\], expected \[8, 10, "):
        DraftModel.from_tensors(cfg, t)


def test_a_per_expert_tensor_of_another_width_is_refused_before_any_is_read():
    cfg, t = make_mla_drafter(moe="experts")
    t["midlayer.mlp.experts.5.down_proj.weight"] = t["midlayer.mlp.experts.5.down_proj.weight"][:, :-1]
    with pytest.raises(ConfigError, match=r"experts\.5\.down_proj\.weight is \[\d+, 9\], expected \[\d+, 10\]"):
        DraftModel.from_tensors(cfg, t)


def test_the_cli_says_it_in_one_line_and_exits_2(tmp_path):
    """A YaRN factor of 0: ``eaglekit check`` is NOT READY naming it; ``eaglekit acceptance`` prints one line on
    stderr and exits 2, no traceback (it used to measure 1.0 and exit 0)."""
    from dflashfixtures import make_target

    cfg, t = make_mla_drafter(yarn=True, d2t=False)
    cfg["rope_scaling"]["factor"] = 0
    folder = _save(tmp_path / "d", cfg, t)
    r = subprocess.run([sys.executable, "-m", "eaglekit", "check", str(folder)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 4 and "factor 0" in r.stdout
    target = make_target(tmp_path / "target")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [3, 4, 5, 6]}) + "\n")
    r = subprocess.run([sys.executable, "-m", "eaglekit", "acceptance", str(folder), "--target", str(target),
                        "--prompts", str(prompts), "--max-new-tokens", "4", "--no-cache"],
                       capture_output=True, text=True, timeout=600)
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("[transformers]")]
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(lines) == 1 and "factor 0" in lines[0]


def test_rows_whose_experts_differ_between_float32_and_bfloat16_are_counted_and_said():
    """TorchSpec computes experts in bfloat16 (torchspec/models/draft/moe.py ``_run_experts_grouped_mm``). A row
    whose first value, 1 + 2**-10, rounds to 1 in bfloat16 routes to expert 0 in float32 and to expert 1 in
    bfloat16: counted, and the note says the figure is not exact there; a row far from any tie is not."""
    cfg, t = make_mla_drafter(moe="fused")
    cfg.update(num_experts_per_tok=1, n_group=1, topk_group=1)
    E, H = t["midlayer.mlp.gate.weight"].shape
    gate = torch.zeros(E, H)
    gate[0, 0], gate[1, 1] = 1.0, 1.0005
    t["midlayer.mlp.gate.weight"], t["midlayer.mlp.gate.e_score_correction_bias"] = gate, torch.zeros(E)
    model = DraftModel.from_tensors(cfg, t)
    x = torch.zeros(2, H)
    x[0, 0], x[0, 1] = 1 + 2 ** -10, 1.0          # a near tie: float32 picks expert 0, bfloat16 expert 1
    x[1, 0] = 3.0                                 # no tie
    idx, _ = model.mlp.route(x)
    assert idx[:, 0].tolist() == [0, 0] and model.mlp.route(x.bfloat16())[0][:, 0].tolist() == [1, 0]
    p = model.mlp.precision
    assert (p.differ, p.rows) == (1, 2)           # the float32 call's two rows; a bf16 call is not compared
    assert "at 1 of 2 routed rows the float32 top-k experts differ from the bfloat16 ones" in p.note()
    p.reset()
    assert p.note() is None
