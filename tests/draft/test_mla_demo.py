"""The demo's MLA drafter (k25-mla: MLA attention, a full-vocabulary head, TorchSpec's vLLM export layout) on the
trained world's DeepseekV3 targets: --hidden-states dumps give --target's figures, writer by writer; trees and
chains run; greedy speculative decoding with eaglekit's own drafts and the target's verify gives the target's
greedy tokens. Bad MLA and MoE checkpoints are refused in one line, naming the tensor and the config key."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from bounded_cli import run_limited
from eaglekit.analysis.acceptance.dumps import measure_dump
from eaglekit.analysis.acceptance.measure import measure_acceptance
from eaglekit.analysis.acceptance.target import load_target_model
from eaglekit.analysis.draft import DraftModel, trained_convention
from eaglekit.demo.dumps import FORMATS, write_training_dumps

N_PROMPTS, NEW = 5, 24


@pytest.fixture(scope="module")
def prompts_file(trained, tmp_path_factory):
    lines = trained.prompts("k2").read_text().splitlines()[:N_PROMPTS]
    f = tmp_path_factory.mktemp("mla-prompts") / "p.jsonl"
    f.write_text("\n".join(lines) + "\n")
    return f


@pytest.fixture(scope="module")
def k2(trained):
    return load_target_model(trained.target("k2"))


@pytest.fixture(scope="module")
def reference(trained, prompts_file, k2):
    """The MLA drafter against K2 (not its own target: acceptance well below the ceiling) with --target."""
    return measure_acceptance(trained.drafter("k25-mla"), target=k2, prompts=prompts_file, max_new_tokens=NEW,
                              steps=4, progress=False)


def test_the_demo_mla_drafter_is_what_it_says(trained):
    with DraftModel.load(trained.drafter("k25-mla"), embeddings=trained.target("k25")) as model:
        assert model.families == ("mla", "dense") and model.full_vocabulary and model.layout == "speculators"
        assert trained_convention(model.config, model.layout) == "inputs"   # TorchSpec's --vllm export of kimi_k2
        assert model.vocab_notes == ()


@pytest.mark.parametrize("fmt", FORMATS)
def test_dumps_give_the_target_figures_for_an_mla_drafter(trained, prompts_file, reference, fmt, tmp_path):
    prompts = [json.loads(line)["input_ids"] for line in prompts_file.read_text().splitlines()]
    dirs = write_training_dumps(trained.target("k2"), tmp_path / "dumps", prompts=prompts, max_new_tokens=NEW,
                                formats=(fmt,))
    masks = tmp_path / "dumps" / f"{fmt}-loss-masks.jsonl"
    r = measure_dump(trained.drafter("k25-mla"), dirs[fmt], target_head=str(trained.target("k2")), steps=4,
                     embeddings=str(trained.target("k2")), loss_masks=masks if masks.exists() else None,
                     progress=False)
    assert 1.1 < reference.accept_length < 4.0            # neither nothing accepted nor the ceiling
    assert r.result.accept_length_by_steps == reference.accept_length_by_steps
    assert r.result.per_step_acceptance == reference.per_step_acceptance
    assert r.result.cycles == reference.cycles


def test_trees_and_temperature_run_on_the_mla_drafter(trained, prompts_file, k2, reference):
    from eaglekit.analysis.acceptance.trees import measure_trees

    model = DraftModel.load(trained.drafter("k25-mla"), embed=k2.embedding())
    chain = measure_trees(model, trees=["3:1:4"], target=k2, prompts=prompts_file, max_new_tokens=NEW,
                          progress=False).trees[0]
    assert chain.accept_length == pytest.approx(reference.accept_length_by_steps[2])   # topk 1 is the chain
    tree = measure_trees(model, trees=["3:3:8"], target=k2, prompts=prompts_file, max_new_tokens=NEW,
                         progress=False).trees[0]
    assert tree.accept_length >= chain.accept_length                 # a wider tree accepts at least the chain
    warm = measure_acceptance(model, target=k2, prompts=prompts_file, max_new_tokens=NEW, steps=3, temperature=0.7,
                              progress=False)
    assert 1.0 <= warm.accept_length <= 4.0


def test_greedy_decoding_with_the_mla_drafter_gives_the_target_tokens(trained):
    """Chains (topk 1) and trees drafted by the MLA drafter, verified by the DeepseekV3 target in one forward a
    cycle: the tokens are the target's greedy continuation, in the offline figure's cycles."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "acceptance"))
    from test_tree_decode import tree_decode

    from eaglekit.analysis.acceptance.target import read_prompts
    from eaglekit.analysis.acceptance.tree import TreeConfig
    from eaglekit.analysis.acceptance.trees import measure_trees

    tmodel = load_target_model(trained.target("k2"))
    model = DraftModel.load(trained.drafter("k25-mla"), embed=tmodel.embedding())
    layers = model.aux_indices(trained_convention(model.config, model.layout), tmodel.num_hidden_layers)
    prompts, _ = read_prompts(trained.prompts("k2"))
    prompts = prompts[:4]
    for config in (TreeConfig(3, 1, 4), TreeConfig(3, 2, 6)):
        offline = measure_trees(model, trees=[config], tree_attention="ancestors", target=tmodel, prompts=prompts,
                                max_new_tokens=20, progress=False).trees[0]
        cycles = 0
        for ids in tmodel.tokenize_all(prompts, source="prompts", max_new_tokens=20):
            greedy = tmodel.run(ids, max_new_tokens=20, layers=layers).input_ids[len(ids):].tolist()
            tokens, n = tree_decode(model, tmodel, list(ids), config, len(greedy) - 1, "ancestors", layers)
            assert tokens[:len(greedy)] == greedy
            cycles += n
        assert cycles == offline.cycles


# -- bad checkpoints: one line, exit 2, the tensor and the config key named -----------------------------------
def _bad(trained, tmp_path, edit_tensors=None, edit_config=None, moe=False):
    src = trained.drafter("k25-mla")
    t = load_file(str(src / "model.safetensors"))
    cfg = json.loads((src / "config.json").read_text())
    p = "layers.0.mlp."
    if moe:
        g = torch.Generator().manual_seed(0)
        for n in ("gate", "up", "down"):
            del t[f"{p}{n}_proj.weight"]
        cfg.update({"use_moe": True, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                    "n_shared_experts": 1, "scoring_func": "sigmoid", "norm_topk_prob": True,
                    "routed_scaling_factor": 2.0, "n_group": 1, "topk_group": 1})
        t[p + "gate.weight"] = torch.randn(4, 64, generator=g).to(torch.bfloat16)
        for e in range(4):
            t.update({f"{p}experts.{e}.gate_proj.weight": torch.randn(16, 64, generator=g).to(torch.bfloat16),
                      f"{p}experts.{e}.up_proj.weight": torch.randn(16, 64, generator=g).to(torch.bfloat16),
                      f"{p}experts.{e}.down_proj.weight": torch.randn(64, 16, generator=g).to(torch.bfloat16)})
        t.update({f"{p}shared_experts.gate_proj.weight": torch.randn(16, 64, generator=g).to(torch.bfloat16),
                  f"{p}shared_experts.up_proj.weight": torch.randn(16, 64, generator=g).to(torch.bfloat16),
                  f"{p}shared_experts.down_proj.weight": torch.randn(64, 16, generator=g).to(torch.bfloat16)})
    if edit_tensors:
        edit_tensors(t)
    if edit_config:
        edit_config(cfg)
    out = tmp_path / "bad"
    out.mkdir()
    save_file({k: v.contiguous() for k, v in t.items()}, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(cfg))
    return out


A = "layers.0.self_attn."
BAD = {
    "kv_b_proj-shape": (dict(edit_tensors=lambda t: t.update({A + "kv_b_proj.weight": t[A + "kv_b_proj.weight"][:-8]})),
                        ["kv_b_proj.weight", "kv_lora_rank"]),
    "kv_lora_rank-disagrees": (dict(edit_config=lambda c: c.update(kv_lora_rank=12)), ["kv_a", "kv_lora_rank"]),
    "q_lora-null-with-q_a": (dict(edit_config=lambda c: c.update(q_lora_rank=None)), ["q_a_proj.weight", "q_lora_rank"]),
    "q_lora-set-without-q_a": (dict(edit_tensors=lambda t: [t.pop(A + n) for n in ("q_a_proj.weight",
                                                                                    "q_a_layernorm.weight")]),
                               ["q_a_proj.weight", "q_lora_rank"]),
    "rope-odd": (dict(edit_config=lambda c: c.update(qk_rope_head_dim=7)), ["qk_rope_head_dim", "odd"]),
    "rope-larger-than-head": (dict(edit_config=lambda c: c.update(qk_rope_head_dim=16)),
                              ["q_b_proj.weight", "qk_rope_head_dim"]),
    "experts-per-token": (dict(moe=True, edit_config=lambda c: c.update(num_experts_per_tok=5)),
                          ["num_experts_per_tok", "n_routed_experts"]),
    "missing-expert": (dict(moe=True, edit_tensors=lambda t: t.pop("layers.0.mlp.experts.2.up_proj.weight")),
                       ["experts.2.up_proj.weight", "n_routed_experts"]),
    "missing-shared": (dict(moe=True, edit_tensors=lambda t: t.pop("layers.0.mlp.shared_experts.gate_proj.weight")),
                       ["shared_experts.gate_proj.weight", "n_shared_experts"]),
    "router-width": (dict(moe=True, edit_tensors=lambda t: t.update({"layers.0.mlp.gate.weight":
                                                                      t["layers.0.mlp.gate.weight"][:3]})),
                     ["gate.weight", "n_routed_experts"]),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_mla_and_moe_checkpoints_are_refused_in_one_line(trained, tmp_path, case):
    kwargs, words = BAD[case]
    bad = _bad(trained, tmp_path, **kwargs)
    r = run_limited("acceptance", str(bad), "--hidden-states", str(trained.hidden_dump("k25")), "--target-head",
                    str(trained.target("k25")), "--steps", "2", tmp=tmp_path)
    assert r.rc == 2, r.stderr
    assert len(r.error_lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.error_lines[0], r.error_lines[0]


def test_check_reads_the_demo_mla_drafter_as_acceptance_measures_it(trained):
    """Issue 49: `eaglekit check` on the drafter the pages say to serve was NOT READY for vLLM ("no ids vLLM can
    capture select the trained layers") while acceptance, under the layout rule, measured it as vLLM feeds it."""
    from eaglekit.analysis.compat.check import check

    r = check(trained.drafter("k25-mla"), target=trained.target("k25"), engine="vllm")
    assert r.ready and [v[2] for v in r.verdicts] == ["READY"], str(r)
    with DraftModel.load(trained.drafter("k25-mla"), embeddings=trained.target("k25")) as model:
        assert r.config.aux_convention == trained_convention(model.config, model.layout) == "inputs"
