"""Prompt files: three kinds of line, errors naming the file and the line."""

from __future__ import annotations

import pytest

from eaglekit.core.errors import InputError
from eaglekit.core.acceptance.prompts import parse_prompts


def test_three_kinds_and_blank_lines():
    text = '{"input_ids": [1, 2]}\n\n{"text": "hi"}\n{"messages": [{"role": "user", "content": "x"}]}\n'
    p = parse_prompts(text, source="p.jsonl")
    assert [x.kind for x in p] == ["input_ids", "text", "messages"] and [x.line for x in p] == [1, 3, 4]
    assert p[0].value == (1, 2)


@pytest.mark.parametrize("line, msg", [
    ("nope", "line 2: not valid JSON"),
    ("[1]", "line 2: expected a JSON object"),
    ('{"text": "a", "input_ids": [1]}', "line 2: give exactly one of"),
    ('{"input_ids": [1, -2]}', "line 2: input_ids must be"),
    ('{"input_ids": [true]}', "line 2: input_ids must be"),
    ('{"text": ""}', "line 2: text must be"),
    ('{"messages": [{"role": "user"}]}', "line 2: messages must be"),
])
def test_bad_lines_name_file_and_line(line, msg):
    with pytest.raises(InputError, match=f"p.jsonl {msg}"):
        parse_prompts('{"text": "ok"}\n' + line + "\n", source="p.jsonl")


def test_empty_file():
    with pytest.raises(InputError, match="holds no prompts"):
        parse_prompts("\n\n", source="p.jsonl")
