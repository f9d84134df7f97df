"""Fixtures of the accept-length tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The trained world's models are tiny: one torch thread per test worker (two on two cores starve)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
