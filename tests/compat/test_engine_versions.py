"""Which layers each engine release feeds (issue 26): every reading is pinned against the rule in the
engine's own source, re-enacted here as a capture loop over a target's decoder layers.

Each ``*_capture`` helper below does what the quoted engine code does: turn the configured ids into the
engine's capture list, walk the layers appending the residual stream where the engine appends it, and
report which decoder layer's output each captured state is (-1: the embedding output). The readings in
eaglekit.core.configs.engine_readings / aux_view must agree with them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from eaglekit.core.configs.aux_view import aux_engine_view
from eaglekit.core.configs.engine_readings import SGLANG_RELEASES, ids_selecting, outputs_selected, parse_engine
from eaglekit.core.errors import InputError

L = 61  # Kimi-K2 / K2.5
DEEPSEEK, LLAMA, GPT_OSS = "DeepseekV3ForCausalLM", "LlamaForCausalLM", "GptOssForCausalLM"
IDS = [(2, 30, 58), (1, 29, 57), (3, 31, 59), (0, 5, 9), (1, 30, 59)]


def _walk_before(layers_to_capture, num_layers):
    """The capture loop SGLang and vLLM share: before running layer i, append the residual stream if i is
    listed. The state entering layer i is the output of layer i - 1."""
    return tuple(i - 1 for i in range(num_layers) if i in layers_to_capture)


def sglang_capture_before_25454(ids, num_layers):
    """sgl-project/sglang python/sglang/srt/models/deepseek_v2.py (and llama.py, qwen3.py) before PR #25454,
    DeepseekV2ForCausalLM.set_eagle3_layers_to_capture::

        # we plus 1 here because in sglang, for the ith layer, it takes the output
        # of the (i-1)th layer as aux hidden state
        self.model.layers_to_capture = [val + 1 for val in layer_ids]
    """
    return _walk_before([v + 1 for v in ids], num_layers)


def sglang_capture_since_25454(ids, num_layers):
    """sgl-project/sglang PR #25454 ("drop +1 offset on aux layer ids when first id != 1", merged
    2026-05-16), as it reads in python/sglang/srt/models/glm4_moe_lite.py, copied from deepseek_v2.py::

        if layer_ids and layer_ids[0] == 1:
            self.model.layers_to_capture = [val + 1 for val in layer_ids]
        else:
            self.model.layers_to_capture = list(layer_ids)
    """
    return _walk_before([v + 1 for v in ids] if ids and ids[0] == 1 else list(ids), num_layers)


def sglang_gpt_oss_capture_since_32334(ids, num_layers):
    """sgl-project/sglang PR #32334 ("Fix GPT-OSS EAGLE3 hidden states"): "Interpret GPT-OSS EAGLE3 layer IDs
    as hidden-state boundary indices" and "Capture a requested final GPT-OSS boundary before the target
    model's final normalization": boundary i is the state after i blocks, boundary L the last block's
    output before the final norm."""
    captured = list(_walk_before(list(ids), num_layers))
    if num_layers in ids:
        captured.append(num_layers - 1)
    return tuple(captured)


def vllm_capture(ids, num_layers):
    """vllm-project/vllm vllm/v1/worker/gpu_model_runner.py ``_get_eagle3_aux_layers_from_config`` returns
    ``tuple(layer_ids)`` unchanged for ``set_aux_hidden_state_layers``; the model appends
    ``hidden_states + residual`` before layer ``idx`` when ``idx in self.aux_hidden_state_layers``."""
    return _walk_before(list(ids), num_layers)


@pytest.mark.parametrize("ids", IDS)
def test_sglang_before_25454_adds_one_for_every_target(ids):
    for arch in (DEEPSEEK, LLAMA, GPT_OSS):
        v = aux_engine_view(ids, trained_by="specforge", num_layers=L, architecture=arch, engines=["sglang==0.5.9"])
        (r,) = v.engines
        assert r.name == "SGLang 0.5.9" and r.rule == "plus-one"
        assert r.outputs_of == sglang_capture_before_25454(ids, L)


@pytest.mark.parametrize("ids", IDS)
def test_sglang_since_25454_reads_by_the_first_id_on_deepseek_targets(ids):
    v = aux_engine_view(ids, trained_by="specforge", num_layers=L, architecture=DEEPSEEK, engines=["sglang"])
    newest = v.readings("sglang")[0]
    assert newest.outputs_of == sglang_capture_since_25454(ids, L)
    assert newest.rule == ("plus-one" if ids[0] == 1 else "first-id")  # ids from 1: the same reading as before
    older = v.readings("sglang")[-1]
    assert older.outputs_of == sglang_capture_before_25454(ids, L)
    # Two rows only where the releases disagree: ids starting at 1 read alike.
    assert len(v.readings("sglang")) == (1 if ids[0] == 1 else 2)


@pytest.mark.parametrize("ids", IDS)
def test_llama_targets_keep_the_plus_one_in_every_sglang_release(ids):
    # The #25454 change sits in the DeepSeek model code; llama.py kept [val + 1 for val in layer_ids].
    v = aux_engine_view(ids, trained_by="specforge", num_layers=L, architecture=LLAMA, engines=["sglang"])
    (r,) = v.engines
    assert r.key == "sglang" and r.outputs_of == sglang_capture_before_25454(ids, L)


@pytest.mark.parametrize("ids", IDS)
def test_vllm_reads_inputs(ids):
    v = aux_engine_view(ids, trained_by="specforge", num_layers=L, architecture=DEEPSEEK, engines=["vllm"])
    assert v.reading("vllm").outputs_of == vllm_capture(ids, L)


def test_gpt_oss_boundaries_since_32334():
    # nvidia/gpt-oss-120b-Eagle3-v3 asks for boundaries [24, 30, 36] of a 36-block target (SGLang #32226).
    ids, n = (24, 30, 36), 36
    v = aux_engine_view(ids, trained_by="specforge", num_layers=n, architecture=GPT_OSS, engines=["sglang"])
    since, before = v.readings("sglang")
    assert since.name == "SGLang since #32334" and since.rule == "boundary"
    assert since.outputs_of == sglang_gpt_oss_capture_since_32334(ids, n) == (23, 29, 35) and since.in_range
    # Before it SGLang shifted them to [25, 31, 37] and never captured the last: fewer states than fc takes.
    assert before.in_range is False and len(sglang_capture_before_25454(ids, n)) == 2
    assert any("SGLang before #32334 cannot capture ids [36] of a 36-layer target (valid 0..34)" in p
               for p in v.problems)


def test_k2_specforge_ids_on_61_layers_current_and_pre_25454_readings():
    """Issue 26: SpecForge ids [2, 30, 58] on a 61-layer DeepSeek target: current SGLang feeds the outputs
    of [1, 29, 57], SGLang before #25454 those of [2, 30, 58]; training is ambiguous, never "as trained"."""
    v = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=L, architecture=DEEPSEEK)
    assert v.reading("sglang>=25454").outputs_of == (1, 29, 57)
    assert v.reading("sglang<25454").outputs_of == (2, 30, 58)
    assert v.reading("sglang").key == "sglang>=25454"  # an engine name means its newest reading
    assert v.training.ambiguous and {c.outputs_of for c in v.training.candidates} == {(2, 30, 58), (1, 29, 57)}
    assert {e.as_trained for e in v.engines} == {"ambiguous"}
    assert "as trained" not in v.summary.replace("NOT as trained", "") and "AMBIGUOUS" in v.summary
    # What to write, per meaning: since #25454 [3, 31, 59] selects the outputs of [2, 30, 58].
    assert dict(v.reading("sglang>=25454").writes) == {(2, 30, 58): (3, 31, 59), (1, 29, 57): (1, 29, 57)}
    assert dict(v.reading("sglang<25454").writes) == {(2, 30, 58): (2, 30, 58), (1, 29, 57): (1, 29, 57)}


def test_ids_starting_at_1_agree_in_every_sglang_release():
    v = aux_engine_view([1, 29, 57], trained_by="specforge", num_layers=L, architecture=DEEPSEEK,
                        engines=["sglang"])
    (r,) = v.engines
    assert r.outputs_of == (1, 29, 57) and r.as_trained == "yes" and v.training.settled
    assert not v.problems and not v.notes


def test_settled_training_with_two_sglang_readings_says_no_id_list_serves_both():
    # An eaglekit export that declares its ids as outputs settles training; SGLang's releases then need
    # different ids for the same tensors, and the view says so plainly.
    v = aux_engine_view([2, 30, 58], trained_by="declared-outputs", num_layers=L, architecture=DEEPSEEK,
                        engines=["sglang"])
    assert v.training.settled and v.reading("sglang>=25454").write == (3, 31, 59)
    assert v.reading("sglang<25454").write == (2, 30, 58)
    assert v.notes == ("No one id list makes SGLang since #25454 and SGLang before #25454 feed the trained tensors "
                       "(outputs of [2, 30, 58]): write [3, 31, 59] for SGLang since #25454; [2, 30, 58] for SGLang "
                       "before #25454.",)


def test_first_id_rule_cannot_select_layer_0_first():
    # The outputs of layer 0 first need ids starting at 1, which the first-id rule reads as outputs.
    assert ids_selecting("first-id", (0, 28, 56), L) is None
    assert ids_selecting("first-id", (-1, 28, 56), L) == (0, 29, 57)  # the embedding output is id 0
    assert ids_selecting("first-id", (1, 29, 57), L) == (1, 29, 57)
    assert outputs_selected("first-id", ids_selecting("first-id", (2, 30, 58), L)) == (2, 30, 58)


@pytest.mark.parametrize("spec, pinned, keys", [
    ("sglang", False, ("sglang>=32334", "sglang>=25454", "sglang<25454")),
    ("sglang==0.5.9", True, ("sglang<25454",)),
    ("SGLang==v0.5.10", True, ("sglang<25454",)),
    ("sglang==0.5.10rc1", True, ("sglang<25454",)),
    ("sglang==0.5.10.post1", False, ("sglang>=32334", "sglang>=25454", "sglang<25454")),
    ("sglang==0.5.12", False, ("sglang>=32334", "sglang>=25454", "sglang<25454")),
    ("vllm", True, ("vllm",)),
])
def test_engine_specs(spec, pinned, keys):
    c = parse_engine(spec)
    assert c.pinned is pinned and tuple(r.key for r in c.releases) == keys


def test_an_unpinned_release_shows_every_reading_it_may_have():
    v = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=L, architecture=DEEPSEEK,
                        engines=["sglang==0.5.12"])
    assert [e.key for e in v.engines] == ["sglang>=25454", "sglang<25454"]
    assert any("SGLang 0.5.12: eaglekit does not know whether this release carries PR #25454" in n for n in v.notes)


@pytest.mark.parametrize("spec", ["tgi", "sglang==abc", "sglang>=0.5", ""])
def test_bad_engine_specs_are_refused(spec):
    with pytest.raises(InputError, match="expected sglang or vllm|Cannot read the release number"):
        parse_engine(spec)


def test_release_table_never_invents_a_release_number():
    # The first release carrying #25454 or #32334 is not known: it stays None, shown as "unknown".
    assert [(r.first, r.last) for r in SGLANG_RELEASES] == [(None, "0.5.10"), (None, None), (None, None)]
    v = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=L, architecture=DEEPSEEK)
    assert v.reading("sglang>=25454").releases == "merged 2026-05-16; first release unknown"


# --- check, export and compat use the version (demo world) ---------------------------------------------


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "eaglekit", *map(str, args)], capture_output=True, text=True)


def test_check_json_reports_both_sglang_readings_and_names_the_versions(demo):
    r = _cli("check", demo.drafter("k2"), "--target", demo.target("kimi-k2").parent, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    sglang = {e["release"]: e for e in out["aux"]["engines"] if e["engine"] == "sglang"}
    assert sglang["sglang>=25454"]["outputs_of_layers"] == [1, 29, 57]
    assert sglang["sglang<25454"]["outputs_of_layers"] == [2, 30, 58]
    assert out["aux"]["training"]["settled"] is False
    head = out["summary"]
    assert "READY to serve with SGLang" not in head and "READY for SGLang" not in head
    assert head.startswith("k2 for target kimi-k2: UNSURE for SGLang since #25454 (aux ids ambiguous); "
                           "UNSURE for SGLang before #25454 (aux ids ambiguous); UNSURE for vLLM"), head
    text = _cli("check", demo.drafter("k2"), "--target", demo.target("kimi-k2").parent, "--engine", "sglang==0.5.9")
    assert text.returncode == 0 and text.stdout.splitlines()[0].startswith(
        "k2 for target kimi-k2: UNSURE for SGLang 0.5.9 (aux ids ambiguous)")


def test_export_for_sglang_states_what_each_release_needs(demo, tmp_path):
    from eaglekit import check, export

    target = demo.target("kimi-k2").parent
    new = export(demo.drafter("k2"), tmp_path / "new", engine="sglang", target=target)
    assert new.aux_layer_ids == (3, 31, 59) and new.aux_ids_read_as == "inputs"
    assert "leaves its training ambiguous" in new.aux_note and "the first was assumed" in new.aux_note
    assert ("No one id list means the same under SGLang since #25454 and SGLang before #25454 (up to 0.5.10): for "
            "the latter write [2, 30, 58] (eaglekit export --engine sglang==0.5.10).") in new.aux_note
    old = export(demo.drafter("k2"), tmp_path / "old", engine="sglang==0.5.9", target=target)
    assert old.aux_layer_ids == (2, 30, 58) and old.aux_ids_read_as == "outputs"
    # The exports declare their meaning: check then knows what training used.
    rep = check(new.out, target=target, engine="sglang")
    assert rep.aux.training.settled and rep.aux.reading("sglang>=25454").as_trained == "yes"
    assert rep.aux.reading("sglang<25454").as_trained == "no"
    assert "trained by declared" not in new.note and "SpecForge" in new.note


def test_compat_after_export_for_vllm_does_not_warn_about_aux_ids(demo, tmp_path):
    from eaglekit import compat, export

    out = export(demo.drafter("k2"), tmp_path / "vllm", engine="vllm")
    assert out.aux_layer_ids == (3, 31, 59)
    r = compat(demo.drafter("k2"), out.out)
    assert not [w for w in r.warnings if "aux" in w], r.warnings
    assert r.aux_layers["same_meaning"] is True and r.aux_layers["same"] is False
    # Against a K2.5 target the source's own meaning is ambiguous: said beside its ids, not as a warning.
    r = compat(demo.drafter("k2"), out.out, target=str(demo.target("kimi-k25")))
    assert not [w for w in r.warnings if "aux" in w], r.warnings
    assert "training AMBIGUOUS: the outputs of [2, 30, 58]" in r.aux_layers["a"]["explanation"]
    # Ids that do mean other tensors are still flagged.
    shifted = export(demo.drafter("k2"), tmp_path / "shifted", engine="sglang==0.5.9")
    cfg = json.loads((shifted.out / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [5, 30, 58]
    (shifted.out / "config.json").write_text(json.dumps(cfg))
    r = compat(demo.drafter("k2"), shifted.out)
    assert any(w.startswith("aux layer ids mean different tensors") for w in r.warnings), r.warnings


def test_export_without_engine_keeps_an_ambiguous_meaning_ambiguous(demo, tmp_path):
    from eaglekit import check, export, normalize_config

    out = export(demo.drafter("k2"), tmp_path / "kept", target=demo.target("kimi-k25").parent, format="speculators")
    assert out.aux_layer_ids == (2, 30, 58) and out.aux_ids_read_as == "ambiguous"
    assert out.config["eaglekit_export"]["aux_ids_read_as"] is None
    assert normalize_config(out.config).trained_by == "specforge"  # not guessed "speculators" from the layout
    rep = check(out.out, target=demo.target("kimi-k25").parent)
    # SGLang does not load the speculators layout; vLLM does, and its aux ids stay ambiguous.
    assert rep.aux.training.ambiguous and rep.summary.startswith(
        "kept for target kimi-k25: NOT READY for SGLang since #25454 (architecture); NOT READY for SGLang before "
        "#25454 (architecture); UNSURE for vLLM (aux ids ambiguous)"), rep.summary


def test_export_note_names_the_trainer_in_plain_words(demo, tmp_path):
    from eaglekit import export

    first = export(demo.drafter("k2"), tmp_path / "first", engine="vllm")
    again = export(first.out, tmp_path / "again")
    assert "trained by declared" not in again.note and "declared-" not in again.note
    assert "its aux ids declared as layer inputs by an earlier eaglekit export" in again.note
    assert "trained with SpecForge, as guessed from its format" in first.note


def test_unknown_target_code_is_said_not_assumed_silently():
    v = aux_engine_view([2, 30, 58], trained_by="specforge", num_layers=L)
    assert v.reading("sglang").releases == "every release eaglekit knows, if the target runs Llama-style model code"
    assert any(n.startswith("Target model code unknown") for n in v.notes)
    assert not aux_engine_view([1, 29, 57], trained_by="specforge", num_layers=L).notes  # ids from 1 read alike
