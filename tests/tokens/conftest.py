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


@pytest.fixture(scope="session")
def tokens_world(trained):
    """The token-level demo (a k25 version with a thinking template), built once beside the trained world."""
    from eaglekit.demo.tokens import build_token_demo

    return build_token_demo(trained, progress=False)  # where notebook 09 finds it too (safe when both build)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one torch thread (two on two shared cores starve)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
