"""The token-level story on the trained demo: the tokenizer diff finds the new specials and template, the
thinking template costs accept length where the thinking block is, the old traffic's map covers the new
traffic worse than the recommended one, and drafters without a usable d2t are named and measured."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eaglekit.cli import main
from eaglekit.core.tokens.coverage import coverage, recommend_map

STEPS, NEW = 4, 16


def _run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def chats(tokens_world, tmp_path_factory):
    """Four of the held-out chats (the measurement's cost grows with every prompt)."""
    path = tmp_path_factory.mktemp("chats") / "chats.jsonl"
    path.write_text("".join(tokens_world.prompts().read_text().splitlines(keepends=True)[:4]))
    return path


def test_tokenizer_diff_finds_the_new_specials_and_template(capsys, tokens_world):
    code, out, _ = _run(capsys, "tokenizer-diff", str(tokens_world.target("k25")), str(tokens_world.target("k25-think")),
                        "--json")
    data = json.loads(out)
    marks = tokens_world.manifest["markers"]
    assert code == 4
    assert {c["id"]: c["b"] for c in data["changed_ids"]} == {i: m for m, i in marks.items()}
    assert data["special_tokens"]["eos_token"] == {"a": None, "b": "<|im_end|>"}
    assert any("<|assistant|> <think>" in ln for ln in data["chat_template_diff"]["default"] if ln.startswith("+"))


def test_the_thinking_template_costs_accept_length_where_the_thinking_is(capsys, tokens_world, chats):
    w = tokens_world
    code, out, err = _run(capsys, "acceptance", str(w.drafter("k25-warm")), "--target", str(w.target("k25-think")),
                          "--prompts", str(chats), "--compare-templates", str(w.template("k25")),
                          str(w.template("k25-think")), "--max-new-tokens", str(NEW), "--steps", str(STEPS), "--json")
    assert code == 0, err
    data = json.loads(out)
    a, b = data["a"]["acceptance"]["accept_length"], data["b"]["acceptance"]["accept_length"]
    assert data["gap"] == pytest.approx(b - a) and b < a - 0.5
    assert any("<|assistant|> <think>" in t for t in data["added_by_b"]) and not data["added_by_a"]
    seg = data["segments"]
    assert seg["thinking"]["b"] < seg["answer"]["a"] and seg["thinking"]["positions_b"] > 0
    assert data["b"]["sha256"] and data["a"]["acceptance"]["chat_template_sha256"] == data["a"]["sha256"]


def test_hostile_templates_end_as_one_line(capsys, tokens_world, chats, tmp_path):
    w = tokens_world
    for text, message in (("{{ raise_exception('no system role') }}", "raised an error: no system role"),
                          ("{{ 'x' * 3000000000 }}", "needed more memory")):
        bad = tmp_path / "bad.jinja"
        bad.write_text(text)
        code, out, err = _run(capsys, "acceptance", str(w.drafter("k25-warm")), "--target", str(w.target("k25-think")),
                              "--prompts", str(chats), "--chat-template", str(bad), "--max-new-tokens", "4")
        assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_old_traffic_map_covers_new_traffic_worse_than_the_recommended(tokens_world, chats, trained):
    from eaglekit.analysis.acceptance.coverage import traffic_tokens

    w = tokens_world
    old = traffic_tokens(target=str(w.target("k25")), prompts=str(trained.prompts("k25")), max_new_tokens=NEW,
                         progress=False)[:4]
    new = traffic_tokens(target=str(w.target("k25-think")), prompts=str(chats), chat_template=str(w.template("k25-think")),
                         max_new_tokens=NEW, progress=False)
    old_map, _ = recommend_map(old, 48, 96)
    c = coverage(old_map, new, vocab_size=96)
    assert c.coverage < c.recommended_coverage - 0.3
    from eaglekit.core.tokens.vocab import target_ids

    thinking = set(w.manifest["think_tokens"]) & set(np.concatenate(new).tolist()) - set(target_ids(old_map).tolist())
    assert thinking and thinking <= set(c.tokens_added)      # the thinking register's tokens come in


def test_recommended_map_exports_and_is_measured(capsys, tokens_world, chats, tmp_path):
    from safetensors.numpy import load_file

    w = tokens_world
    out_map = tmp_path / "recommended.safetensors"
    code, out, err = _run(capsys, "vocab-coverage", str(w.drafter("k25-warm")), "--target", str(w.target("k25-think")),
                          "--prompts", str(chats), "--chat-template", str(w.template("k25-think")),
                          "--max-new-tokens", str(NEW), "--out", str(out_map), "--json")
    assert code == 0, err
    cov = json.loads(out)
    assert cov["coverage"] < cov["recommended_coverage"] - 0.15 and cov["written"] == str(out_map)
    assert len(cov["coverage_by_position"]) == NEW and "caps per-step acceptance" in cov["note"]
    remapped = tmp_path / "remapped"
    code, _, err = _run(capsys, "export", str(w.drafter("k25-warm")), "--out", str(remapped), "--vocab-map",
                        str(out_map), "--target", str(w.target("k25-think")))
    assert code == 0, err
    assert np.array_equal(_d2t(remapped / "model.safetensors"), load_file(str(out_map))["d2t"])
    results = {}
    for name, drafter in (("original", w.drafter("k25-warm")), ("remapped", remapped)):
        code, out, err = _run(capsys, "acceptance", str(drafter), "--target", str(w.target("k25-think")), "--prompts",
                              str(chats), "--chat-template", str(w.template("k25-think")), "--max-new-tokens", str(NEW),
                              "--steps", str(STEPS), "--json")
        assert code == 0, err
        results[name] = json.loads(out)["accept_length"]
    assert all(1.0 <= v <= STEPS + 1 for v in results.values())
    print("accept length, original vs re-mapped without training:", results)


@pytest.fixture(scope="module")
def broken_maps(tokens_world, tmp_path_factory):
    """k25-warm without d2t/t2d, and with d2t zeroed."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("maps")
    src = tokens_world.drafter("k25-warm")
    tensors = load_file(str(src / "model.safetensors"))
    out = {}
    for name in ("no-d2t", "zero-d2t"):
        folder = root / name
        folder.mkdir()
        shutil.copy(src / "config.json", folder / "config.json")
        t = dict(tensors)
        if name == "no-d2t":
            del t["d2t"], t["t2d"]
        else:
            t["d2t"] = torch.zeros_like(t["d2t"])
        save_file(t, str(folder / "model.safetensors"))
        out[name] = folder
    return out


def test_check_names_missing_and_zeroed_d2t_with_the_engines_reading(capsys, broken_maps, tokens_world):
    for name in ("no-d2t", "zero-d2t"):
        code, out, _ = _run(capsys, "check", str(broken_maps[name]), "--json")
        data = json.loads(out)
        vocab = [f for f in data["findings"] if f["check"] == "vocab map" and f["severity"] == "error"]
        assert code == 4 and vocab, data["findings"]
        assert any("draft id i" in f["message"] and "target ids 0..47" in f["message"] for f in vocab)


def test_acceptance_measures_what_the_engine_would_get(capsys, broken_maps, tokens_world, chats):
    w = tokens_world
    figures = {}
    for name, drafter in (("sound", w.drafter("k25-warm")), *broken_maps.items()):
        code, out, err = _run(capsys, "acceptance", str(drafter), "--target", str(w.target("k25")), "--prompts",
                              str(w.trained.prompts("k25")), "--max-new-tokens", str(NEW), "--steps", str(STEPS), "--json")
        assert code == 0, err
        data = json.loads(out)
        figures[name] = data["accept_length"]
        if name != "sound":
            assert any("draft id i as target id i" in n for n in data["notes"])
    assert figures["no-d2t"] == pytest.approx(figures["zero-d2t"])
    assert figures["no-d2t"] < figures["sound"] - 0.3


def test_check_compares_the_tokenizer_a_drafter_ships(capsys, tokens_world, tmp_path):
    import shutil

    w = tokens_world
    drafter = tmp_path / "drafter"
    shutil.copytree(w.drafter("k25-warm"), drafter)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (w.target("k25") / f).exists():
            shutil.copy(w.target("k25") / f, drafter / f)
    findings = {}
    for name in ("k25", "k25-think"):
        code, out, _ = _run(capsys, "check", str(drafter), "--target", str(w.target(name)), "--json")
        findings[name] = [f for f in json.loads(out)["findings"] if f["check"] == "tokenizer"]
    assert [f["severity"] for f in findings["k25"]] == ["ok"]
    assert findings["k25-think"][0]["severity"] == "warning" and "<think>" in findings["k25-think"][0]["message"]
    code, out, _ = _run(capsys, "check", str(w.drafter("k25-warm")), "--target", str(w.target("k25")), "--json")
    assert not [f for f in json.loads(out)["findings"] if f["check"] == "tokenizer"]
    code, out, _ = _run(capsys, "compat", str(drafter), str(w.drafter("k25-warm")), "--target",
                        str(w.target("k25-think")), "--json")
    warnings = [x for x in json.loads(out)["warnings"] if "tokenizer" in x]
    assert len(warnings) == 1 and warnings[0].startswith("drafter: ") and "<think>" in warnings[0]


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_export_reads_specforge_pt_maps_and_never_unpickles_code(capsys, tokens_world, tmp_path):
    import torch

    from eaglekit.analysis.acceptance.coverage import write_vocab_map

    w = tokens_world
    d2t, t2d = recommend_map([np.arange(30, 96)], 48, 96)
    pt = write_vocab_map(tmp_path / "map.pt", d2t, t2d)
    code, _, err = _run(capsys, "export", str(w.drafter("k25-warm")), "--out", str(tmp_path / "out"), "--vocab-map",
                        str(pt), "--target", str(w.target("k25-think")))
    assert code == 0, err
    assert np.array_equal(_d2t(tmp_path / "out" / "model.safetensors"), d2t)
    marker = tmp_path / "RAN"
    torch.save({"d2t": _Evil(marker), "t2d": torch.from_numpy(t2d)}, str(tmp_path / "evil.pt"))
    code, _, err = _run(capsys, "export", str(w.drafter("k25-warm")), "--out", str(tmp_path / "out2"), "--vocab-map",
                        str(tmp_path / "evil.pt"), "--target", str(w.target("k25-think")))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "weights_only" in err
    assert not marker.exists()


def test_coverage_from_a_dump_equals_coverage_from_the_target(capsys, tokens_world, tmp_path):
    w = tokens_world
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(w.trained.prompts("k25").read_text().splitlines(keepends=True)[:3]))
    code, _, err = _run(capsys, "dump-hidden", "--target", str(w.target("k25")), "--prompts", str(prompts), "--out",
                        str(tmp_path / "dump"), "--layers", "1,2,3", "--max-new-tokens", str(NEW))
    assert code == 0, err
    figures = []
    for source in (("--hidden-states", str(tmp_path / "dump")),
                   ("--target", str(w.target("k25")), "--prompts", str(prompts), "--max-new-tokens", str(NEW))):
        code, out, err = _run(capsys, "vocab-coverage", str(w.drafter("k25-warm")), *source, "--json")
        assert code == 0, err
        data = json.loads(out)
        figures.append((data["tokens"], data["coverage"], data["coverage_by_position"], data["tokens_added"]))
    assert figures[0] == figures[1] and figures[0][0] == 3 * NEW


def _d2t(path):
    """d2t of a drafter file (its weights are bf16, which numpy cannot hold)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return f.get_tensor("d2t").numpy()
