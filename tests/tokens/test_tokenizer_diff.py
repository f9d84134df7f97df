"""``eaglekit tokenizer-diff A B``: exit 0 same, 4 different with every difference named, 2 on bad input;
local, HTTP and Hub locations read alike; no tokenizer code ever runs."""

from __future__ import annotations

import json

import pytest
from tokenfixtures import kimi_folder, write_tokenizer

from eaglekit.cli import main
from eaglekit.core.tokens.diff import diff_tokenizers
from eaglekit.io.tokens.tokenizer import read_tokenizer


def _run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _error(capsys, *args) -> str:
    code, out, err = _run(capsys, *args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_same_tokenizer_exits_0(capsys, tokenizers_pair):
    a, _ = tokenizers_pair
    code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(a))
    assert code == 0 and "are the same" in out


def test_every_difference_is_named(tokenizers_pair):
    a, b = tokenizers_pair
    d = diff_tokenizers(read_tokenizer(a), read_tokenizer(b))
    assert not d.same and d.exit_code == 4
    assert [(c.id, c.a, c.b) for c in d.changed_ids] == [(10, "w10", "<think>"), (11, "w11", "</think>")]
    assert d.special == {"eos_token": (None, "</think>")}
    assert [c.b for c in d.added_only_b] == ["<think>", "</think>"]
    lines = d.template_diff["default"]
    assert "+{% for m in messages %}{{ m['content'] }} {% endfor %}{% if add_generation_prompt %}<think> {% endif %}" in lines
    text = "\n".join(d.differences)
    assert "id 10: 'w10' -> '<think>'" in text and "eos_token: (none) -> '</think>'" in text
    assert "chat template 'default' differs: 2 lines changed" in text


def test_json_names_the_tokens_and_the_template_lines(capsys, tokenizers_pair):
    a, b = tokenizers_pair
    code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(b), "--json")
    data = json.loads(out)
    assert code == 4 and data["same"] is False
    assert data["changed_ids"] == [{"id": 10, "a": "w10", "b": "<think>"}, {"id": 11, "a": "w11", "b": "</think>"}]
    assert data["special_tokens"] == {"eos_token": {"a": None, "b": "</think>"}}
    assert any(ln.startswith("+") and "<think>" in ln for ln in data["chat_template_diff"]["default"])


def test_a_version_that_appends_special_tokens_is_diffed(capsys, tmp_path):
    # the most common version change: <think> and </think> appended, a new chat template, every old id kept
    a = write_tokenizer(tmp_path / "a", vocab=12, template="{% for m in messages %}{{ m['content'] }} {% endfor %}")
    b = write_tokenizer(tmp_path / "b", vocab=12, special=("<think>", "</think>"),
                        template="{% for m in messages %}{{ m['content'] }} {% endfor %}<think> ")
    d = diff_tokenizers(read_tokenizer(a), read_tokenizer(b))
    assert d.exit_code == 4 and d.vocab_sizes == (12, 14) and d.kept_count == 12 and d.changed_count == 0
    assert [(c.id, c.b) for c in d.appended] == [(12, "<think>"), (13, "</think>")] and d.dropped == ()
    text = "\n".join(d.differences)
    assert "vocabulary: B appends 2 ids (ids 12-13): 12 '<think>', 13 '</think>'" in text
    assert "hold other tokens" not in text and "chat template 'default' differs" in text
    impact = "\n".join(d.drafter_impact)
    assert "12 of A's 12 ids keep their token in B: every old id keeps its meaning" in impact
    assert "engines size it by the target config's vocab_size (not read here" in impact
    assert "from 12 to 14, the 2 appended ids False" in impact
    assert "2 rows appended (ids 12-13)" in impact
    # A full-vocabulary drafter (no d2t/t2d) is told apart: its lm_head grows instead of t2d.
    assert d.drafter_impact[-1] == ("a full-vocabulary drafter (no d2t/t2d: lm_head row i drafts id i): it needs "
                                    "2 lm_head rows appended and vocab_size / draft_vocab_size raised from 12 to 14, "
                                    "or the new ids cannot be drafted")
    code, out, err = _run(capsys, "tokenizer-diff", str(a), str(b), "--json")
    data = json.loads(out)
    assert code == 4 and not err and data["appended"] == [{"id": 12, "content": "<think>"}, {"id": 13, "content": "</think>"}]
    assert data["vocab_sizes"] == [12, 14] and data["kept_count"] == 12 and data["drafter_impact"]
    code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(b))
    assert code == 4 and "drafter" in out and "d2t" in out


def test_t2d_is_sized_by_the_configs_vocab_size(capsys, tmp_path):
    """Issue 39: the demo's tokenizers name 96 and 98 ids while both configs say vocab_size 128; engines size t2d
    (and the embedding) by the config, so t2d keeps 128 entries rather than growing from 96 to 98."""
    a = write_tokenizer(tmp_path / "a", vocab=12)
    b = write_tokenizer(tmp_path / "b", vocab=12, special=("<think>", "</think>"))
    for folder in (a, b):
        (folder / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "vocab_size": 16}))
    d = diff_tokenizers(read_tokenizer(a), read_tokenizer(b))
    assert d.config_vocab_sizes == (16, 16)
    impact = "\n".join(d.drafter_impact)
    assert "config.json's vocab_size, 16 on both: it keeps its size" in impact and "grow it" not in impact
    assert "keep their 16 rows" in impact and "rows appended" not in impact
    # a multimodal config (Kimi-K2.5) keeps it under text_config; a grown one says from what to what
    (b / "config.json").write_text(json.dumps({"model_type": "kimi_k25", "text_config": {"vocab_size": 32}}))
    d = diff_tokenizers(read_tokenizer(a), read_tokenizer(b))
    assert d.config_vocab_sizes == (16, 32)
    assert "up to config.json's vocab_size: grow it from 16 to 32, the 2 appended ids False" in "\n".join(d.drafter_impact)
    code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(b), "--json")
    assert code == 4 and json.loads(out)["config_vocab_sizes"] == [16, 32]


def test_a_grown_vocabulary_that_also_renames_ids_says_which_moved(tmp_path):
    a = write_tokenizer(tmp_path / "a", vocab=12)
    b = write_tokenizer(tmp_path / "b", vocab=13, names={5: "<|im_end|>"})
    d = diff_tokenizers(read_tokenizer(a), read_tokenizer(b))
    assert [(c.id, c.a, c.b) for c in d.changed_ids] == [(5, "w5", "<|im_end|>")] and d.kept_count == 11
    assert "vocabulary: 1 of 12 ids hold other tokens: id 5: 'w5' -> '<|im_end|>'" in d.differences
    assert "vocabulary: B appends 1 id (id 12): 12 'w12'" in d.differences
    assert "1 id changed or dropped: a d2t entry that lands on one of them drafts another token" in d.drafter_impact[0]
    back = diff_tokenizers(read_tokenizer(b), read_tokenizer(a))      # the other way round: B drops an id
    assert [c.id for c in back.dropped] == [12] and any("t2d shrinks from 13 to 12" in x for x in back.drafter_impact)
    assert "its lm_head rows for the 1 changed or dropped id draft other tokens now" in d.drafter_impact[-1]
    assert "its lm_head and vocab_size / draft_vocab_size shrink from 13 to 12" in back.drafter_impact[-1]


def test_one_difference_is_one_way(tmp_path):
    a = write_tokenizer(tmp_path / "a", template="x")
    b = write_tokenizer(tmp_path / "b", template="y")
    assert diff_tokenizers(read_tokenizer(a), read_tokenizer(b)).summary == "tokenizers differ in 1 way"


def test_unrelated_vocabularies_are_diffed_with_a_note(tmp_path):
    a = write_tokenizer(tmp_path / "a", vocab=12)
    b = write_tokenizer(tmp_path / "b", vocab=20, names={i: f"x{i}" for i in range(20)})
    d = diff_tokenizers(read_tokenizer(a), read_tokenizer(b))
    assert d.exit_code == 4 and d.changed_count == 12 and d.kept_count == 0 and d.appended
    assert any("look like different tokenizers" in n for n in d.notes)


@pytest.mark.parametrize("breakage,message", [
    (lambda f: (f / "tokenizer.json").write_text("{ not json"), "tokenizer.json is not valid JSON"),
    (lambda f: (f / "tokenizer.json").write_text("[" * 50_000 + "]" * 50_000), "nests"),
    (lambda f: open(f / "chat_template.jinja", "wb").truncate(100 << 20), "larger than 1,048,576 bytes"),
    (lambda f: [p.unlink() for p in f.iterdir()], "holds no tokenizer files"),
])
def test_bad_tokenizer_files_are_one_line(capsys, tokenizers_pair, breakage, message):
    a, b = tokenizers_pair
    breakage(b)
    assert message in _error(capsys, "tokenizer-diff", str(a), str(b))


def test_a_missing_location_is_one_line(capsys, tokenizers_pair):
    a, _ = tokenizers_pair
    assert "no such file or folder" in _error(capsys, "tokenizer-diff", str(a), str(a.parent / "nowhere"))


def test_kimi_tokenizers_compare_without_running_their_code(capsys, tmp_path):
    ranks = [b"a", b"b", b"c"]
    a = kimi_folder(tmp_path / "k2", ranks, {3: "[BOS]", 4: "[EOS]"}, template="{{ messages[0].content }}")
    b = kimi_folder(tmp_path / "k25", ranks, {3: "[BOS]", 4: "<|im_end|>"},
                    template="{{ messages[0].content }}<|im_assistant|>assistant<|im_middle|><think>")
    for flag in ((), ("--trust-remote-code",)):
        code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(b), "--json", *flag)
        data = json.loads(out)
        assert code == 4 and data["changed_ids"] == [{"id": 4, "a": "[EOS]", "b": "<|im_end|>"}]
        assert data["remote_code"]["b"] == "tokenization_kimi.TikTokenTokenizer"
        assert any("not run" in n for n in data["notes"])
    assert not (a / "RAN").exists() and not (b / "RAN").exists()


def test_http_locations_read_by_small_gets(capsys, tokenizers_pair):
    from eaglekit.demo.fileserver import FileServer

    a, b = tokenizers_pair
    with FileServer(a.parent) as server:
        code, out, _ = _run(capsys, "tokenizer-diff", f"{server.endpoint}/files/a", f"{server.endpoint}/files/b", "--json")
        paths = {r.path for r in server.log}
    assert code == 4 and json.loads(out)["changed_ids"][0]["b"] == "<think>"
    assert "/files/b/tokenizer.json" in paths and "/files/b/tiktoken.model" not in paths


def test_drafter_claims(capsys, tokenizers_pair, tmp_path):
    a, b = tokenizers_pair
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"speculators_config": {"verifier": {"name_or_path": "org/k2"}}}))
    code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(b), "--drafter", str(drafter))
    assert code == 4 and "its config names the target 'org/k2'" in out
    (drafter / "config.json").write_text("{}")
    code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(b), "--drafter", str(drafter))
    assert "does not say which tokenizer" in out


def test_hub_locations(capsys, tmp_path):
    from eaglekit.demo.hubserver import HubServer

    write_tokenizer(tmp_path / "org" / "k2", template="{{ messages[0]['content'] }}")
    write_tokenizer(tmp_path / "org" / "k25", names={11: "<think>"}, special=("<think>",),
                    template="{{ messages[0]['content'] }}<think>")
    with HubServer(tmp_path) as server:
        code, out, err = _run(capsys, "tokenizer-diff", "hf://org/k2", "hf://org/k25", "--endpoint", server.endpoint,
                              "--json")
    assert code == 4, err
    data = json.loads(out)
    assert data["changed_ids"] == [{"id": 11, "a": "w11", "b": "<think>"}] and data["chat_template_diff"]["default"]


def test_terminal_escapes_from_files_are_shown_not_sent(capsys, tokenizers_pair, tmp_path):
    a, b = tokenizers_pair
    cfg = json.loads((b / "tokenizer_config.json").read_text())
    cfg["eos_token"] = "\x1b]52;c;ZXZpbA==\x07"
    cfg["auto_map"] = {"AutoTokenizer": ["evil\x1b[2J.Tok", None]}
    (b / "tokenizer_config.json").write_text(json.dumps(cfg))
    (b / "chat_template.jinja").write_text("{{ messages }}\x1b[2J")
    drafter = tmp_path / "d"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"speculators_config": {"verifier": {"name_or_path": "x\x1b[2J"}}}))
    code, out, _ = _run(capsys, "tokenizer-diff", str(a), str(b), "--drafter", str(drafter))
    assert code == 4 and "\x1b" not in out and "\x07" not in out and "\\x1b" in out
