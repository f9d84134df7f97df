"""Fixtures of the drafter-forward tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "hostile"))  # bounded_cli


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one torch thread per test worker (two on two cores starve)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
