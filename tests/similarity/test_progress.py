"""Progress bars are decided by the size of the work, never by elapsed time, so a notebook renders the same
on an idle and on a loaded machine (item 14: notebook 04's test failed when a bar delayed by 0.5 s appeared
under load)."""

from __future__ import annotations

import tqdm.auto

from eaglekit.analysis.similarity import measure as sim


def _bars(monkeypatch) -> list[dict]:
    seen: list[dict] = []
    real = tqdm.auto.tqdm

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(tqdm.auto, "tqdm", recording)
    return seen


def test_small_comparison_never_shows_a_bar_and_a_large_one_always_does(demo, monkeypatch):
    seen = _bars(monkeypatch)
    a, b = demo.drafter("k2"), demo.drafter("k25-finetuned")
    sim.similarity(a, b, tensors="norm.weight")
    assert seen[-1]["disable"] is True and "delay" not in seen[-1]
    monkeypatch.setattr(sim, "PROGRESS_BYTES", 1)  # the same call, as if the drafter were large
    sim.similarity(a, b, tensors="norm.weight")
    assert seen[-1]["disable"] is False and "delay" not in seen[-1]
    sim.similarity(a, b, tensors="norm.weight", progress=False)
    assert seen[-1]["disable"] is True
