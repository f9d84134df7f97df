"""``eaglekit search``: the table, the --json schema, options passed through, errors as one line."""

from __future__ import annotations

import json

import pytest

from eaglekit.cli import main
from eaglekit.demo.hubserver import HubServer


def test_table(hub, capsys):
    assert main(["search", "qwen", "--endpoint", hub.endpoint]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 EAGLE-3 drafters among 4 Hub models matching 'qwen'; 0 look-alikes excluded by config; "
                           "1 candidate with no readable config\n")
    assert "demo-RedHatAI/Qwen3-8B-speculator.eagle3  speculators  demo-Qwen/Qwen3-8B" in out
    assert "demo-wip/Qwen3-4B-Eagle3" in out and "is not valid JSON" in out


def test_json_with_target_and_author(hub, capsys):
    argv = ["search", "--target", "demo-moonshot/Kimi-K2-Instruct", "--author", "demo-aqmed", "--json",
            "--endpoint", hub.endpoint]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["repo"], d["fits_target"], d["why"]) for d in data["drafters"]] == [
        ("demo-aqmed/Kimi-K2-Instruct-eagle3", True, None), ("demo-aqmed/Kimi-K2-Instruct-eagle3-sharded", True, None)]
    assert list(data["drafters"][0]) == ["repo", "format", "family", "block_size", "target", "hidden_size",
                                         "draft_vocab_size", "vocab_size",
                                         "aux_layer_ids", "parameters", "downloads", "likes", "fits_target", "why"]


def test_misfit_json(hub, capsys):
    assert main(["search", "llama-small", "--target", "demo-moonshot/Kimi-K2.5", "--json", "--endpoint", hub.endpoint]) == 0
    (row,) = json.loads(capsys.readouterr().out)["drafters"]
    assert (row["fits_target"], row["why"]) == (False, "hidden 256 != target 448; vocab 8016 != target 10240")


def test_limit(demo, capsys):
    with HubServer(demo.hub_root, page_size=2) as server:
        assert main(["search", "--limit", "5", "--json", "--endpoint", server.endpoint]) == 0
        pages = [r for r in server.log if r.path == "/api/models"]
    assert len(pages) == 3  # 2 + 2 + 1 models, then the search stops paging
    json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv, message", [
    (["search", "--limit", "0"], "eaglekit search: error: argument --limit: expected a positive whole number, got '0'"),
    (["search", "--limit", "many"], "argument --limit: expected a positive whole number, got 'many'"),
])
def test_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_errors_are_one_line(demo, capsys):
    assert main(["search", "eagle"]) == 2  # HF_ENDPOINT is a closed port in tests
    err = capsys.readouterr().err
    assert err.startswith("eaglekit search: error: Cannot reach http://127.0.0.1:9") and err.count("\n") == 1
    with HubServer(demo.hub_root) as server:
        server.inject("/api/models", 429, {"Retry-After": "30"})
        assert main(["search", "--endpoint", server.endpoint]) == 2
    err = capsys.readouterr().err
    assert "rate limiting requests (HTTP 429); the server asks to retry after 30 s" in err


def test_bad_target_is_one_line(hub, capsys):
    assert main(["search", "--target", "demo-aqmed/Kimi-K2-Instruct-eagle3", "--endpoint", hub.endpoint]) == 2
    assert "is an EAGLE-3 drafter config, not a target model config" in capsys.readouterr().err
