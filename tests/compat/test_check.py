"""eaglekit check: each deliberately broken demo drafter is caught, the healthy ones pass."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from eaglekit.analysis.compat.check import check


def _errors(report, check_id=None):
    return [f for f in report.findings if f.severity == "error" and (check_id is None or f.check == check_id)]


@pytest.mark.parametrize("name, target", [
    ("k2", "kimi-k2"), ("k2-sharded", "kimi-k2"), ("k2-speculators", "kimi-k2"), ("k25-finetuned", "kimi-k25"),
    ("k25-scratch", "kimi-k25"),
])
def test_healthy_drafters_are_ready(demo, name, target):
    r = check(demo.drafter(name), target=demo.target(target).parent)
    assert r.ready and r.exit_code == 0, str(r)
    assert {f.check for f in r.findings} >= {"lm_head", "embed_tokens", "vocab map", "fc", "target", "aux layers",
                                             "dtype", "architecture", "method"}


def test_scratch_embedding_is_compared_by_value_with_the_targets(demo):
    r = check(demo.drafter("k25-scratch"), target=demo.target("kimi-k25").parent)
    assert r.embed is not None and r.embed.rows == 64 and r.embed.differing == 0
    full = check(demo.drafter("k25-scratch"), target=demo.target("kimi-k25").parent, full=True)
    assert full.embed.full and full.embed.rows == 10240 and full.embed.differing == 0


@pytest.mark.parametrize("name, check_id, fragment", [
    ("no-lm-head", "lm_head", "lm_head.weight is missing"),
    ("zero-d2t", "vocab map", "an all-zero d2t means identity"),
    ("fc-4-layers", "fc", "fc.weight [448, 1792] reads 4 aux layers of width 448, but the config names 3"),
    ("foreign-embed", "embed_tokens", "embed_tokens.weight is not the target's: 64 of 64 sampled rows differ"),
    ("ids-out-of-range", "aux layers", "aux ids [2, 30, 61] name layers a 61-layer target does not have"),
    ("eagle1-architecture", "architecture", "names the EAGLE(-1/2) model on an EAGLE-3 checkpoint"),
])
def test_each_broken_drafter_is_caught(demo, name, check_id, fragment):
    r = check(demo.broken(name), target=demo.target("kimi-k2").parent)
    assert not r.ready and r.exit_code == 4
    found = _errors(r, check_id)
    assert any(fragment in f.message for f in found), str(r)
    assert all(f.fix for f in found)  # every finding says what to do
    # Only the planted fault: every other check passes.
    assert {f.check for f in _errors(r)} == {check_id}


@pytest.mark.parametrize("name, check_id, fragment", [
    ("no-lm-head", "lm_head", "lm_head.weight is missing"),
    ("zero-d2t", "vocab map", "an all-zero d2t means identity"),
    ("fc-4-layers", "fc", "fc.weight [64, 256] reads 4 aux layers of width 64, but the config names 3"),
    ("foreign-embed", "embed_tokens", "embed_tokens.weight is not the target's"),
    ("ids-out-of-range", "aux layers", "aux ids [0, 1, 4] name layers a 4-layer target does not have"),
    ("eagle1-architecture", "architecture", "names the EAGLE(-1/2) model on an EAGLE-3 checkpoint"),
])
def test_each_fault_planted_in_the_demo_world_is_caught(trained, name, check_id, fragment):
    """Issue 24: the planted faults are copies of the demo world's trained K2 drafter, checked against its own
    trained target (a folder transformers wrote); the healthy drafter passes the same checks."""
    r = check(trained.broken(name), target=trained.target("k2"))
    assert not r.ready and r.exit_code == 4
    assert any(fragment in f.message for f in _errors(r, check_id)), str(r)
    assert {f.check for f in _errors(r)} == {check_id}
    healthy = check(trained.drafter("k2"), target=trained.target("k2"))
    assert not _errors(healthy) and healthy.exit_code == 0, str(healthy)


def test_aux_layers_per_engine(demo):
    # The demo K2 drafter is a SpecForge config [2, 30, 58] on a DeepseekV3 target: its training is
    # ambiguous (SpecForge's HF backend fed the outputs of [2, 30, 58], its SGLang backend on a release
    # with #25454 those of [1, 29, 57]), so vLLM is neither "as trained" nor flagged wrong: UNSURE.
    r = check(demo.drafter("k2"), target=demo.target("kimi-k2").parent, engine="vllm")
    assert r.ready and r.verdicts == (("vllm", "vLLM", "UNSURE", "aux ids ambiguous"),)
    (f,) = [f for f in r.by_check("aux layers") if f.severity == "warning"]
    assert "vLLM feeds the outputs of layers [1, 29, 57]" in f.message and "ambiguous" in f.message
    assert "if trained on the outputs of [2, 30, 58]: eagle_aux_hidden_state_layer_ids = [3, 31, 59]" in f.fix
    assert "--aux-convention outputs and --aux-convention inputs" in f.fix
    r = check(demo.drafter("k2"), target=demo.target("kimi-k2").parent, engine="sglang==0.5.9")
    assert r.engines == ("sglang==0.5.9",) and r.aux.reading("sglang").outputs_of == (2, 30, 58)
    both = check(demo.drafter("k2"), target=demo.target("kimi-k2").parent)
    assert both.aux.engines_agree is False and both.ready  # ambiguity is a warning, not an error


def _pure_check(demo, drafter: str, architecture: str, **kw):
    """check_drafter on a demo drafter against the K2 target config with another architecture name."""
    from eaglekit.analysis.compat.check import check_drafter
    from eaglekit.io.drafter import read_maps
    from eaglekit.io.reader import open_checkpoint

    target = {**json.loads(demo.target("kimi-k2").read_text()), "architectures": [architecture]}
    with open_checkpoint(demo.drafter(drafter)) as ck:
        return check_drafter(ck.inventory, ck.inventory.config, read_maps(ck), target=target, name=drafter,
                             target_name="llama-style", **kw)


def test_settled_training_makes_the_other_engine_not_ready(demo):
    # On a Llama-style target every SGLang release adds one, so SpecForge's [2, 30, 58] is settled: the
    # outputs of [2, 30, 58]. vLLM feeds [1, 29, 57]: with --engine vllm an error with the ids to write;
    # without --engine a warning, and the first line says NOT READY for vLLM (issue 24: never "READY to
    # serve with SGLang and vLLM" while a warning says vLLM feeds other layers).
    r = _pure_check(demo, "k2", "LlamaForCausalLM", engine="vllm")
    assert not r.ready
    (f,) = _errors(r, "aux layers")
    assert "vLLM feeds the outputs of layers [1, 29, 57]" in f.message
    assert "eagle_aux_hidden_state_layer_ids = [3, 31, 59]" in f.fix and "--engine vllm" in f.fix
    both = _pure_check(demo, "k2", "LlamaForCausalLM")
    assert both.ready and both.summary == ("k2 for target llama-style: READY for SGLang (every release eaglekit knows); "
                                           "NOT READY for vLLM (aux layers); 1 warning")


def test_without_a_target_the_target_checks_are_skipped(demo):
    r = check(demo.broken("ids-out-of-range"))
    assert r.ready  # nothing says the target has 61 layers
    assert any(f.check == "target" and f.severity == "info" for f in r.findings)


def test_other_target_is_not_judged_on_aux_layers(demo):
    r = check(demo.drafter("llama-small"), target=demo.target("kimi-k2").parent)
    assert {f.check for f in _errors(r)} == {"target"}
    assert r.aux.num_layers is None


def test_report_renders_and_serialises(demo):
    r = check(demo.broken("no-lm-head"), target=demo.target("kimi-k2"))
    text, html = str(r), r._repr_html_()
    assert text.splitlines()[0] == "no-lm-head: NOT READY (1 error) for target kimi-k2; 3 warnings"
    assert "fix: Add lm_head.weight" in text and "<table" in html and "lm_head.weight is missing" in html
    out = r.to_json()
    assert out["ready"] is False and out["aux"]["engines_agree"] is False


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "eaglekit", *map(str, args)], capture_output=True, text=True)


def test_cli_exit_codes(demo):
    target = demo.target("kimi-k2").parent
    assert _cli("check", demo.drafter("k2"), "--target", target).returncode == 0
    r = _cli("check", demo.broken("zero-d2t"), "--target", target, "--json")
    assert r.returncode == 4 and json.loads(r.stdout)["ready"] is False
    r = _cli("check", demo.root / "nope")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    r = _cli("check", demo.drafter("k2"), "--engine", "tgi")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_compat_without_b_points_at_check(demo):
    r = _cli("compat", demo.drafter("k2"), "--target", demo.target("kimi-k2"))
    assert r.returncode == 2
    assert r.stderr.strip().startswith("eaglekit compat: error: compat compares two drafters; to check one drafter "
                                       "against a target run: eaglekit check ")


def test_missing_d2t_is_caught(demo, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "no-d2t"
    shutil.copytree(demo.drafter("k2"), folder)
    tensors = load_file(str(folder / "model.safetensors"))
    del tensors["d2t"]
    save_file(tensors, str(folder / "model.safetensors"))
    r = check(folder, target=demo.target("kimi-k2"))
    (f, *_) = _errors(r, "vocab map")
    assert "d2t is missing" in f.message and "vLLM reads draft ids as target ids" in f.message


def test_out_of_range_ids_fix_suggests_the_real_defaults_per_engine(demo):
    # 61 layers: without ids every engine captures the inputs of [2, 30, 58] = the outputs of [1, 29, 57].
    # Every suggested id must be in the engine's range.
    r = check(demo.broken("ids-out-of-range"), target=demo.target("kimi-k2").parent)
    fixes = [f.fix for f in _errors(r, "aux layers")]
    assert any("without ids every engine captures the inputs of layers [2, 30, 58] (the outputs of [1, 29, 57])" in f
               for f in fixes), fixes
    assert "Write ids in range 0..59 for SGLang before #25454, or drop them (every engine's default)." in fixes
    assert "Write ids in range 0..60 for vLLM, or drop them (every engine's default)." in fixes
    import re
    for fix in fixes:
        for ids in re.findall(r"\[(\d+(?:, \d+)*)\]", fix):
            assert all(int(i) <= 60 for i in ids.split(", ")), fix


def test_the_eagle1_architecture_fault_is_reported_once_and_consistently(demo):
    r = check(demo.broken("eagle1-architecture"), target=demo.target("kimi-k2").parent)
    arch = [f for f in r.findings if f.check == "architecture"]
    assert [f.severity for f in arch] == ["error"], str(r)
    assert not any("loads architecture" in f.message for f in r.findings), str(r)
