"""Reading tokenizer files from bytes: every format's vocabulary, special tokens and templates, and
one clear error for each malformed file."""

from __future__ import annotations

import json

import pytest
from tokenfixtures import kimi_folder, write_tokenizer

from eaglekit.core.errors import EaglekitError, InputError
from eaglekit.core.tokens.tokenizer_files import parse_tokenizer_files
from eaglekit.io.tokens.tokenizer import read_tokenizer


def test_a_transformers_folder_reads_as_transformers_sees_it(tmp_path):
    from transformers import AutoTokenizer

    folder = write_tokenizer(tmp_path / "t", names={10: "<think>"}, eos="<think>", special=("<think>",),
                             template="{{ messages[0]['content'] }}")
    t = read_tokenizer(folder)
    hf = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    assert t.vocab == {i: s for s, i in hf.get_vocab().items()}
    assert t.special["eos_token"] == hf.eos_token == "<think>"
    assert t.special["unk_token"] == "w0" and t.special["bos_token"] is None
    assert [(a.id, a.content, a.special) for a in t.added if a.content == "<think>"] == [(10, "<think>", True)]
    assert t.template == hf.chat_template
    assert t.kind == "WordLevel" and t.remote_code is None


def test_chat_template_file_takes_priority_over_the_config(tmp_path):
    folder = write_tokenizer(tmp_path / "t", template="from config")
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "from config"
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    (folder / "chat_template.jinja").write_text("from file")
    assert read_tokenizer(folder).template == "from file"


def test_named_templates_in_a_config_list():
    cfg = {"chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]}
    t = parse_tokenizer_files({"tokenizer_config.json": json.dumps(cfg).encode()}, source="x")
    assert t.templates == {"default": "A", "tool_use": "B"}


def test_kimi_tiktoken_ids_and_names_and_its_code_never_runs(tmp_path):
    folder = kimi_folder(tmp_path / "kimi", [b"a", b"b", b"\xff\xfe"], {3: "[BOS]", 4: "[EOS]", 5: "<|im_end|>"})
    t = read_tokenizer(folder)
    assert t.kind == "tiktoken" and t.vocab_size == 6
    assert t.vocab[0] == "a" and t.vocab[2] == repr(b"\xff\xfe") and t.vocab[5] == "<|im_end|>"
    assert t.special["bos_token"] == "[BOS]" and t.remote_code == "tokenization_kimi.TikTokenTokenizer"
    assert not (folder / "RAN").exists()


def test_unigram_vocab_ids_are_positions():
    tj = {"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -2.0]]}, "added_tokens": []}
    t = parse_tokenizer_files({"tokenizer.json": json.dumps(tj).encode()}, source="x")
    assert t.vocab == {0: "<unk>", 1: "a", 2: "b"} and t.kind == "Unigram"


def test_a_binary_sentencepiece_model_is_compared_by_hash():
    t = parse_tokenizer_files({"tokenizer.model": b"\x0a\x80\x01binary"}, source="x")
    assert t.kind == "binary-model" and not t.vocab and "tokenizer.model" in t.files


@pytest.mark.parametrize("name,data,message", [
    ("tokenizer.json", b"{not json", "tokenizer.json is not valid JSON"),
    ("tokenizer.json", b"[" * 100_000 + b"]" * 100_000, "tokenizer.json nests"),
    ("tokenizer.json", b'{"model": {"vocab": {"a": ' + b"9" * 5000 + b"}}}", "tokenizer.json is not usable JSON"),
    ("tokenizer.json", b'{"model": {"vocab": {"a": -1}}}', "has id -1"),
    ("tokenizer.json", b'[1, 2]', "must be a JSON object"),
    ("tokenizer_config.json", b'{"added_tokens_decoder": {"x": {"content": "a"}}}', "is not a token id"),
    ("tiktoken.model", b"YQ== 0\nbad line here\n", "line 2"),
    ("tiktoken.model", b"!!!! 0\n", "not a base64 token"),
])
def test_malformed_files_are_one_clear_error(name, data, message):
    with pytest.raises(InputError, match=message) as e:
        parse_tokenizer_files({name: data}, source="target")
    assert "\n" not in str(e.value)


def test_a_folder_without_tokenizer_files_says_so(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(InputError, match="holds no tokenizer files"):
        read_tokenizer(tmp_path)


def test_sizes_are_checked_before_reading(tmp_path):
    folder = write_tokenizer(tmp_path / "t")
    with open(folder / "chat_template.jinja", "wb") as f:  # 100 MB, sparse: nothing is written or read
        f.truncate(100 * 1024 * 1024)
    with pytest.raises(InputError, match="chat_template.jinja is larger than 1,048,576 bytes"):
        read_tokenizer(folder)


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    import os

    folder = write_tokenizer(tmp_path / "t")
    os.mkfifo(folder / "chat_template.jinja")
    with pytest.raises(EaglekitError, match="is a FIFO, not a regular file"):
        read_tokenizer(folder)


def test_a_file_of_millions_of_strings_is_refused_before_parsing():
    data = b'{"model": {"vocab": {' + b",".join(b'"%d":0' % i for i in range(4_200_001)) + b"}}}"
    with pytest.raises(InputError, match="more than 4,194,304 strings"):
        parse_tokenizer_files({"tokenizer.json": data}, source="target")
