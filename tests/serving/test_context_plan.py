"""The plan by (batch size, context length): planted costs that grow with context move the best k where they must;
acceptance by context read from a by-position result; the CLI grid and its vLLM schedule agree cell for cell."""

from __future__ import annotations

import json

import pytest

from eaglekit.cli import main
from eaglekit.core.errors import InputError
from eaglekit.core.serving.context import acceptance_at_contexts, check_contexts, plan_grid
from eaglekit.core.serving.plan import TIE, Acceptance, Cost

ALPHA, DRAFT_MS, BASE_MS = 0.8, 0.5, 2.0


def verify_ms(batch: int, tokens: int, context: int) -> float:
    """A planted verify: a fixed part plus attention compute per verified row that grows with the context."""
    return BASE_MS + batch * tokens * 0.004 * context / 1024


def brute_best(batch: int, context: int, max_steps: int = 8) -> int:
    """The best k by the closed form (Leviathan et al. 2023: (1 - a^(k+1)) / (1 - a) tokens per cycle), the fewest
    steps within the plan's tie tolerance of the fastest."""
    tps = [(1 - ALPHA ** (k + 1)) / (1 - ALPHA) / (verify_ms(batch, k + 1, context) + k * DRAFT_MS)
           for k in range(max_steps + 1)]
    return next(k for k, t in enumerate(tps) if t >= max(tps) * (1 - TIE))


def test_best_k_moves_with_context_where_the_planted_costs_say():
    grid = plan_grid([1, 8, 32], [2048, 65536], lambda c: Acceptance((ALPHA,)),
                     lambda b, n, c: Cost(verify_ms(b, n, c), False), lambda b, c: Cost(DRAFT_MS, False))
    for c, plans in grid.items():
        for p in plans:
            assert p.best.steps == brute_best(p.batch, c), (c, p.batch)
    short = {p.batch: p.best.steps for p in grid[2048]}
    long = {p.batch: p.best.steps for p in grid[65536]}
    assert short[8] > long[8]            # at batch 8 the long context's verify makes every extra draft dear
    assert long[32] == 0 < short[32]     # and at batch 32 speculation stops paying at 64k only


def test_acceptance_at_contexts_reads_the_buckets():
    result = {"by_position": {"buckets": [
        {"start": 100, "end": 1024, "per_step_acceptance": [0.8, 0.7]},
        {"start": 1024, "end": 4096, "per_step_acceptance": [0.3, None]}]}}
    got = acceptance_at_contexts(result, [50, 512, 2048, 100000])
    assert [a.per_step for a in got] == [(0.8, 0.7), (0.8, 0.7), (0.3,), (0.3,)]
    assert "not measured at 100000" in got[3].source and "positions 100-1023" in got[1].source
    with pytest.raises(InputError, match="--by-position"):
        acceptance_at_contexts({"per_step_acceptance": [0.8]}, [2048])
    with pytest.raises(InputError, match="must rise"):
        check_contexts([4096, 2048])


def test_cli_grid_and_its_vllm_schedule(tmp_path, capsys):
    # a drafter whose acceptance falls past 8k tokens, priced by the cost model at each context
    result = {"steps": 4, "per_step_acceptance": [0.85, 0.8, 0.75, 0.7],
              "by_position": {"buckets": [{"start": 1, "end": 8192, "per_step_acceptance": [0.85, 0.8, 0.75, 0.7]},
                                          {"start": 8192, "end": 200000, "per_step_acceptance": [0.3, 0.2, 0.1, 0.1]}]}}
    path = tmp_path / "acc.json"
    path.write_text(json.dumps(result))
    args = ["plan", "--acceptance", str(path), "--target", "llama-3.1-8b", "--gpu", "H100-SXM", "--batch", "1,4,16",
            "--contexts", "2048,32768", "--max-steps", "4"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cells = {(c["context"], c["batch"]): c for c in out["cells"]}
    assert cells[(2048, 1)]["best_steps"] >= 2 and cells[(32768, 1)]["best_steps"] < cells[(2048, 1)]["best_steps"]
    assert all(c["verdict"] in ("GO", "NO-GO", "TOO CLOSE TO CALL") for c in out["cells"] if c["fits"])
    assert main([*args, "--schedule-format", "vllm"]) == 0
    table = json.loads(capsys.readouterr().out)["num_speculative_tokens_per_batch_size"]
    for (ctx, batch), cell in cells.items():
        (k,) = [e[4] for e in table if e[0] <= batch <= e[1] and e[2] <= ctx <= e[3]]
        assert k == (cell["best_steps"] if cell["fits"] else 0), (ctx, batch)
    assert main(["plan", "--per-step", "0.8", "--costs", str(path), "--contexts", "2048,4096"]) == 2
    assert "give --target" in capsys.readouterr().err


def test_one_context_schedule_from_measured_costs(tmp_path, capsys):
    """Without --contexts the schedule is written from the plan at --context, from any costs."""
    (tmp_path / "costs.csv").write_text("batch,tokens,ms\n1,1,12.2\n1,3,13\n")
    (tmp_path / "draft.csv").write_text("batch,ms\n1,1.6667\n")
    args = ["plan", "--per-step", "0.9,0.85,0.8", "--costs", str(tmp_path / "costs.csv"), "--draft-costs",
            str(tmp_path / "draft.csv"), "--batch", "1"]
    assert main([*args, "--json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert main([*args, "--schedule-format", "profile"]) == 0
    prof = json.loads(capsys.readouterr().out)["4096"]
    assert prof["conditional"][:3] == [0.9, 0.85, 0.8] and prof["marginal"][1] == pytest.approx(0.9 * 0.85)
    assert main([*args, "--schedule-format", "vllm"]) == 0
    table = json.loads(capsys.readouterr().out)["num_speculative_tokens_per_batch_size"]
    assert table == [[1, 1, best["batches"][0]["best_steps"]]]


def test_measured_runs_with_a_context_column_are_fitted_per_context(tmp_path, capsys):
    """Runs that carry a context column: each context's plan fits the runs measured there, so a drafter that pays
    at 2k and loses at 64k (as measured) gets k > 0 at 2k and k = 0 at 64k."""
    (tmp_path / "runs.csv").write_text(
        "batch,steps,topk,draft_tokens,accept_length,tokens_per_s,context\n"
        "1,0,,,,100,2048\n1,3,1,4,3.0,230,2048\n1,0,,,,60,65536\n1,3,1,4,1.2,40,65536\n")
    args = ["plan", "--measured", str(tmp_path / "runs.csv"), "--target", "llama-3.1-8b", "--gpu", "H100-SXM",
            "--batch", "1", "--contexts", "2048,65536", "--max-steps", "3", "--json"]
    assert main(args) == 0
    cells = {c["context"]: c for c in json.loads(capsys.readouterr().out)["cells"]}
    assert cells[2048]["best_steps"] > 0 and cells[65536]["best_steps"] == 0
    (tmp_path / "bad.csv").write_text("batch,steps,topk,draft_tokens,accept_length,tokens_per_s,context\n1,0,,,,100,x\n")
    assert main([*args[:2], str(tmp_path / "bad.csv"), *args[3:]]) == 2
    assert "is not a whole number of tokens" in capsys.readouterr().err


@pytest.mark.parametrize("bad, words", [
    ({"by_position": {"buckets": [{"start": "a", "end": None, "per_step_acceptance": [0.5]}]}}, "whole start < end"),
    ({"by_position": {"buckets": [{"start": 0, "end": 9, "per_step_acceptance": [2.0]}]}}, "not probabilities"),
    ({"by_position": {"buckets": [{"start": 0, "end": 9, "per_step_acceptance": [0.5]}]},
      "by_position_by_steps": [{"buckets": [{"start": 0, "end": 9, "accept_length": float("nan")}]}]}, "not an accept"),
])
def test_a_malformed_position_result_is_one_clear_error(bad, words):
    with pytest.raises(InputError, match=words):
        acceptance_at_contexts(bad, [4])
