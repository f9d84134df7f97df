"""docs/serving-plan.md states what the library computes: the seed's verify by k, the config-only ratios,
the GPU table."""

from __future__ import annotations

from pathlib import Path

from eaglekit.core.serving.account import Account
from eaglekit.core.serving.costmodel import GPUS, shape_from_config
from eaglekit.core.serving.published import KIMI_K2_FP8, KIMI_K25_INT4

DOC = " ".join((Path(__file__).resolve().parents[2] / "docs" / "serving-plan.md").read_text(encoding="utf-8").split())


def test_the_seed_table_is_the_account_s_growing_verify():
    k25, k2 = Account.seed().growing
    for k in (1, 3, 5, 8):
        assert f"| {k25.verify_ms[k - 1]:.1f} | {k2.verify_ms[k - 1]:.1f} |" in DOC, k
    assert f"({max(k25.ceiling_tps(k) for k in range(1, 9)):.0f} tok/s at most on K2.5" in DOC
    assert f"accept length 3.2 gives {k25.tokens_per_s(3.2, 3):.0f} tok/s at k = 3" in DOC


def test_config_only_ratios_and_the_gpu_table():
    for config, figure in ((KIMI_K25_INT4, "1.71x"), (KIMI_K2_FP8, "2.24x")):
        s = shape_from_config(config)
        assert f"{s.weight_bytes(3) / s.weight_bytes(1):.2f}x" == figure and figure in DOC
    for g in GPUS.values():
        assert f"| {g.name}" in DOC and f"| {g.hbm_tb_s:g} | {g.bf16_tflops:g} |" in DOC, g.name
        assert f"| {g.memory_gb:g} |" in DOC, g.name


def test_the_doc_says_only_what_the_seed_says_and_states_the_prior():
    from eaglekit.core.serving.cyclefit import ALLREDUCE_US, DRAFT_KERNELS, KERNEL_US

    assert "without CUDA graphs" not in DOC and "ran without" not in DOC  # nothing in the seed says so
    assert f"{DRAFT_KERNELS} kernels x {KERNEL_US:g} us" in DOC and f"{ALLREDUCE_US:g} us per layer" in DOC
    assert "--measured" in DOC and "bench_speculative.py" in DOC and "--save-result" in DOC
