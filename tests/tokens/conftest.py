"""Fixtures of the token-level tests."""

from __future__ import annotations

import pytest
from tokenfixtures import write_tokenizer


@pytest.fixture
def tokenizers_pair(tmp_path):
    a = write_tokenizer(tmp_path / "a", template="{% for m in messages %}{{ m['content'] }} {% endfor %}")
    b = write_tokenizer(tmp_path / "b", names={10: "<think>", 11: "</think>"}, eos="</think>",
                        special=("<think>", "</think>"),
                        template="{% for m in messages %}{{ m['content'] }} {% endfor %}"
                                 "{% if add_generation_prompt %}<think> {% endif %}")
    return a, b
