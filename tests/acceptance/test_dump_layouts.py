"""Dump folders as the training pipelines leave them: each recognised by what its writer writes (file names,
saved keys), a folder holding two layouts refused with the files that point to each, and a Model-Optimizer
dump of another layer count refused with the writer's rule, the layers it stored and the ones the drafter
needs."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from eaglekit.cli import main
from eaglekit.io.dumps.detect import open_training_dump


def _run(capsys, trained, folder, *extra):
    code = main(["acceptance", str(trained.drafter("k2")), "--hidden-states", str(folder),
                 "--target-head", str(trained.target("k2")), "--steps", "3", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _error(capsys, trained, folder, *extra) -> str:
    code, out, err = _run(capsys, trained, folder, *extra)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    return lines[0]


@pytest.fixture(scope="module")
def prompts(trained):
    return [json.loads(line)["input_ids"] for line in trained.prompts("k2").read_text().splitlines()[:2]]


@pytest.fixture(scope="module")
def written(trained, prompts, tmp_path_factory):
    from eaglekit.demo.dumps import write_training_dumps

    root = tmp_path_factory.mktemp("layouts") / "d"
    return write_training_dumps(trained.target("k2"), root, prompts=prompts, max_new_tokens=12,
                                formats=("speculators", "modelopt"))


def test_speculators_folder_as_prepare_data_leaves_it(trained, written, tmp_path, capsys):
    """prepare_data.py writes token_freq.pt (a dict of token counts), the Arrow dataset and its json files beside
    the data generation's hidden_states/: a .pt file that is not a Model-Optimizer sample."""
    folder = tmp_path / "output"
    shutil.copytree(written["speculators"], folder)
    torch.save({5: 10, 7: 3}, folder / "token_freq.pt")
    (folder / "dataset_info.json").write_text("{}")
    (folder / "state.json").write_text("{}")
    (folder / "data-00000-of-00001.arrow").write_bytes(b"\0" * 16)
    assert open_training_dump(folder).format == "speculators"
    code, out, err = _run(capsys, trained, folder, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["dump"]["format"] == "speculators" and res["dump"]["files"] == 2


def test_a_modelopt_folder_with_a_stray_pt_file(trained, written, tmp_path):
    """Model-Optimizer names its samples by conversation id: they are recognised by their keys."""
    folder = tmp_path / "mo"
    shutil.copytree(written["modelopt"], folder)
    torch.save({5: 10}, folder / "token_freq.pt")
    dump = open_training_dump(folder)
    assert dump.format == "modelopt" and "token_freq.pt" not in dump.files and len(dump) == 2


def test_two_layouts_name_the_files_of_each(trained, written, tmp_path, capsys):
    folder = tmp_path / "mixed"
    shutil.copytree(written["modelopt"], folder)
    shutil.copy(written["speculators"] / "hidden_states" / "hs_0.safetensors", folder)
    err = _error(capsys, trained, folder)
    assert "--dump-format" in err
    assert "speculators" in err and "hs_0.safetensors" in err
    assert "modelopt" in err and "conv-0000.pt" in err


def test_pt_files_of_no_known_writer_are_not_a_dump(trained, tmp_path, capsys):
    folder = tmp_path / "other"
    folder.mkdir()
    torch.save({"weights": torch.zeros(3)}, folder / "model.pt")
    err = _error(capsys, trained, folder)
    assert "no hidden-state dump files" in err and "aux_hidden_states" in err


def test_modelopt_layers_of_a_four_layer_target(trained, prompts, tmp_path, capsys):
    """Model-Optimizer's writer (compute_hidden_states_hf.py) on the demo's 4-layer target: sorted({2, 2, 1})
    = two layers; the demo drafter reads three."""
    from eaglekit.analysis.acceptance.target import load_target_model

    model = load_target_model(trained.target("k2")).model
    folder = tmp_path / "modelopt"
    folder.mkdir()
    L = model.config.num_hidden_layers
    ids = torch.tensor([prompts[0]])
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    layers = sorted({2, max(0, L // 2), max(1, L - 3)})
    torch.save({"input_ids": ids.squeeze(0), "hidden_states": out.hidden_states[-1].squeeze(0),
                "aux_hidden_states": torch.cat([out.hidden_states[i].squeeze(0) for i in layers], dim=-1),
                "conversation_id": "c0"}, folder / "c0.pt")
    err = _error(capsys, trained, folder)
    assert L == 4 and layers == [1, 2]
    assert "sorted({2, L//2, L-3})" in err and "[1, 2] (2 layers)" in err and "[1, 2, 3]" in err
