"""find_drafters against the loopback Hub: detection by config, pagination, target fit and ranking,
and every bad input a clear error or a reasoned row."""

from __future__ import annotations

import json
import shutil

import pytest

from eaglekit.core.errors import AuthError, ConfigError, InputError, LocationError, NotFoundError, OfflineError, RateLimitError
from eaglekit.demo.hubserver import HubServer
from eaglekit.analysis.search import DrafterHit, SearchResults, find_drafters, load_target_config, target_from_name

KIMI_DRAFTERS = {
    "demo-aqmed/Kimi-K2-Instruct-eagle3", "demo-aqmed/Kimi-K2-Instruct-eagle3-sharded",
    "demo-redhat/Kimi-K2-Instruct-speculator.eagle3", "demo-team/Kimi-K2.5-eagle3-finetuned",
    "demo-team/Kimi-K2.5-eagle3-scratch", "demo-someone/draft-head-v2", "demo-lightseekorg/kimi-k2-eagle3-mla",
}
OTHER_DRAFTERS = {
    "demo-lab/Llama-small-EAGLE3", "demo-yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "demo-lmsys/sglang-EAGLE3-Llama-3.1-8B-Instruct", "demo-nvidia/Llama-3.3-70B-Instruct-Eagle3",
    "demo-AngelSlim/Qwen3-8B_eagle3", "demo-RedHatAI/Qwen3-8B-speculator.eagle3",
}
#: the demo world's drafters (trained, hidden 64): they fit its small targets, not the real-shape ones
MINI_DRAFTERS = {"demo-mini/Kimi-K2-mini-eagle3", "demo-mini/Kimi-K2-mini-speculator.eagle3",
                 "demo-team/Kimi-K2.5-mini-eagle3-scratch"}
BROKEN = {"demo-wip/Qwen3-4B-Eagle3", "demo-wip/Llama-3.1-8B-Instruct-eagle3-upload"}
LOOK_ALIKES = {"demo-mirror/Llama-3.1-8B-Instruct-EAGLE3", "demo-rwkv/Eagle-7B", "demo-recursal/EagleX-7B",
               "demo-nvidia/Eagle2-1B"}


@pytest.fixture(scope="module")
def own_hub(demo):
    """A server of this module's own, so its request log holds only this module's requests."""
    with HubServer(demo.hub_root) as server:
        yield server


@pytest.fixture
def hub_log(own_hub):
    own_hub.clear_log()
    return own_hub


@pytest.fixture(scope="module")
def everything(hub) -> SearchResults:
    return find_drafters(endpoint=hub.endpoint)


@pytest.fixture(scope="module")
def for_k2(hub) -> SearchResults:
    return find_drafters(target="demo-moonshot/Kimi-K2-Instruct", endpoint=hub.endpoint)


# -- detection by config ---------------------------------------------------------------------------

def test_keeps_exactly_the_repos_whose_config_says_eagle3(everything):
    assert {h.repo for h in everything} == KIMI_DRAFTERS | OTHER_DRAFTERS | MINI_DRAFTERS | BROKEN
    assert {repo for repo, _ in everything.excluded} == LOOK_ALIKES


def test_drafter_named_repo_with_plain_llama_config_is_excluded_with_reason(everything):
    reasons = dict(everything.excluded)
    assert reasons["demo-mirror/Llama-3.1-8B-Instruct-EAGLE3"] == (
        "config.json has architectures ['LlamaForCausalLM'], model_type 'llama': not an EAGLE-3 drafter")
    assert reasons["demo-rwkv/Eagle-7B"].startswith("config.json has architectures ['Rwkv5ForCausalLM']")


def test_unusual_name_found_by_config(everything):
    hit = everything["demo-someone/draft-head-v2"]
    assert (hit.format, hit.architecture, hit.hidden_size, hit.vocab_size) == ("specforge", "LlamaForCausalLMEagle3", 448, 10240)


def test_formats_and_fields(everything):
    assert everything["demo-RedHatAI/Qwen3-8B-speculator.eagle3"].format == "speculators"
    mla = everything["demo-lightseekorg/kimi-k2-eagle3-mla"]
    assert (mla.format, mla.architecture) == ("mla", "Eagle3DeepseekV2ForCausalLM")
    angel = everything["demo-AngelSlim/Qwen3-8B_eagle3"]
    assert (angel.format, angel.architecture) == ("specforge", "Eagle3LlamaForCausalLM")
    k2 = everything["hf://demo-aqmed/Kimi-K2-Instruct-eagle3"]
    assert (k2.hidden_size, k2.draft_vocab_size, k2.vocab_size, k2.aux_layer_ids) == (448, 2000, 10240, (2, 30, 58))
    assert (k2.downloads, k2.likes, k2.updated) == (5210, 61, "2025-08-12")
    assert k2.parameters == 4_666_064  # the Hub's safetensors total (d2t and t2d included, as inspect counts)
    assert everything["demo-yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"].aux_layer_ids is None
    assert everything["demo-nvidia/Llama-3.3-70B-Instruct-Eagle3"].parameters == 5_623_584


def test_declared_target_beats_guesses_and_card_pointing_at_a_drafter_is_ignored(everything):
    redhat = everything["demo-RedHatAI/Qwen3-8B-speculator.eagle3"]
    assert (redhat.target, redhat.target_source, redhat.target_label) == ("demo-Qwen/Qwen3-8B", "declared", "demo-Qwen/Qwen3-8B")
    angel = everything["demo-AngelSlim/Qwen3-8B_eagle3"]  # card base_model names the RedHat drafter
    assert angel.base_model == "demo-RedHatAI/Qwen3-8B-speculator.eagle3"
    assert (angel.target, angel.target_source, angel.target_label) == ("Qwen3-8B", "name", "Qwen3-8B (inferred from name)")
    head = everything["demo-someone/draft-head-v2"]  # card names the aqmed drafter; the name says nothing
    assert (head.target, head.target_source) == (None, None)
    yuhuili = everything["demo-yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]
    assert (yuhuili.target, yuhuili.target_source) == ("demo-meta-llama/Llama-3.1-8B-Instruct", "card")


@pytest.mark.parametrize("repo, expected", [
    ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "LLaMA3.1-Instruct-8B"),
    ("lmsys/sglang-EAGLE3-Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct"),
    ("nvidia/Llama-3.3-70B-Instruct-Eagle3", "Llama-3.3-70B-Instruct"),
    ("AngelSlim/Qwen3-8B_eagle3", "Qwen3-8B"),
    ("RedHatAI/Qwen3-8B-speculator.eagle3", "Qwen3-8B"),
    ("lightseekorg/kimi-k2-eagle3-mla", "kimi-k2"),
    ("someone/draft-head-v2", None),
    ("rwkv/Eagle-7B", None),
])
def test_target_from_name(repo, expected):
    assert target_from_name(repo) == expected


def test_broken_and_missing_configs_are_rows_with_reasons(everything):
    broken = everything["demo-wip/Qwen3-4B-Eagle3"]
    assert broken.format == "unknown" and broken.hidden_size is None and broken.fits_target is None
    assert broken.problem.startswith("hf://demo-wip/Qwen3-4B-Eagle3/config.json is not valid JSON: ")
    missing = everything["demo-wip/Llama-3.1-8B-Instruct-eagle3-upload"]
    assert missing.problem == "no config.json in the repo, so nothing says it is an EAGLE-3 drafter"
    assert [h.repo for h in everything][-2:] == sorted(BROKEN, key=lambda r: -everything[r].downloads)


def test_without_target_ranked_by_downloads(everything):
    readable = [h for h in everything if h.problem is None]
    assert [h.downloads for h in readable] == sorted((h.downloads for h in readable), reverse=True)
    assert all(h.fits_target is None and h.why is None for h in everything)


# -- pagination, query, author, limit --------------------------------------------------------------

def test_pagination_followed(demo):
    with HubServer(demo.hub_root, page_size=4) as small:
        results = find_drafters(endpoint=small.endpoint)
        pages = [r for r in small.log if r.path == "/api/models"]
    assert len(pages) == -(-results.scanned // 4) >= 5
    assert [("cursor=" in r.query) for r in pages] == [False] + [True] * (len(pages) - 1)
    assert all(r.status == 200 for r in pages)
    assert {h.repo for h in results} == KIMI_DRAFTERS | OTHER_DRAFTERS | MINI_DRAFTERS | BROKEN


def test_only_candidates_configs_are_fetched(hub_log):
    find_drafters("Qwen", endpoint=hub_log.endpoint)
    fetched = {r.path for r in hub_log.log if r.path.endswith("/config.json")}
    # demo-Qwen/Qwen3-8B matches the query but nothing about it suggests a drafter
    assert fetched == {"/demo-AngelSlim/Qwen3-8B_eagle3/resolve/main/config.json",
                       "/demo-RedHatAI/Qwen3-8B-speculator.eagle3/resolve/main/config.json",
                       "/demo-wip/Qwen3-4B-Eagle3/resolve/main/config.json"}


def test_query_author_and_limit(hub):
    assert {h.repo for h in find_drafters("qwen3-8b", endpoint=hub.endpoint)} == {
        "demo-AngelSlim/Qwen3-8B_eagle3", "demo-RedHatAI/Qwen3-8B-speculator.eagle3"}
    assert [h.repo for h in find_drafters(author="demo-someone", endpoint=hub.endpoint)] == ["demo-someone/draft-head-v2"]
    few = find_drafters(limit=3, endpoint=hub.endpoint)
    assert few.scanned == 3


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_bad_limit(limit):
    with pytest.raises(InputError, match=r"limit must be a positive integer \(how many Hub models to examine\)"):
        find_drafters(limit=limit, endpoint="http://127.0.0.1:9")


# -- target fit and ranking ------------------------------------------------------------------------

def test_target_fit_and_ranking(for_k2):
    assert {h.repo for h in for_k2.fitting} == KIMI_DRAFTERS
    flags = [h.fits_target for h in for_k2]
    assert flags == [True] * 7 + [False] * 9 + [None] * 2
    fitting = list(for_k2)[:7]
    assert [h.downloads for h in fitting] == sorted((h.downloads for h in fitting), reverse=True)
    assert fitting[0].repo == "demo-aqmed/Kimi-K2-Instruct-eagle3"
    assert all(h.why is None for h in fitting)
    assert for_k2["demo-lab/Llama-small-EAGLE3"].why == "hidden 256 != target 448; vocab 8016 != target 10240"
    assert for_k2["demo-AngelSlim/Qwen3-8B_eagle3"].why == "hidden 256 != target 448; vocab 9496 != target 10240"
    assert for_k2.target == "demo-moonshot/Kimi-K2-Instruct"
    assert (for_k2.target_config.hidden_size, for_k2.target_config.vocab_size) == (448, 10240)


def test_the_demo_worlds_drafters_fit_its_small_target(hub):
    """Issue 24: the demo world's target finds exactly the world's drafters fitting it, by config."""
    results = find_drafters(target="demo-mini/Kimi-K2.5-mini", endpoint=hub.endpoint)
    assert {h.repo for h in results.fitting} == MINI_DRAFTERS
    assert (results.target_config.hidden_size, results.target_config.vocab_size) == (64, 96)
    assert results["demo-mini/Kimi-K2-mini-eagle3"].aux_layer_ids == (0, 1, 2)


def test_only_hidden_misfit_is_explained_alone(hub):
    results = find_drafters("llama", target="hf://demo-meta-llama/Llama-3.1-8B-Instruct", endpoint=hub.endpoint)
    assert results["demo-nvidia/Llama-3.3-70B-Instruct-Eagle3"].why == "hidden 512 != target 256"
    assert {h.repo for h in results.fitting} == {"demo-lab/Llama-small-EAGLE3", "demo-yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                                 "demo-lmsys/sglang-EAGLE3-Llama-3.1-8B-Instruct"}


def test_target_forms(demo, hub):
    wrapped = load_target_config(demo.target("kimi-k25"))  # a local file; K2.5 keeps its fields under text_config
    assert (wrapped.hidden_size, wrapped.vocab_size, wrapped.text_config_key) == (448, 10240, "text_config")
    folder = load_target_config(str(demo.target("kimi-k2").parent))
    assert folder.source.endswith("targets/kimi-k2/config.json")
    assert load_target_config({"num_hidden_layers": 2, "hidden_size": 8, "vocab_size": 16}).hidden_size == 8
    assert load_target_config(folder) is folder
    via_http = load_target_config(f"{hub.endpoint}/files/demo-moonshot/Kimi-K2.5/config.json")
    assert via_http.text_config_key == "text_config"


def test_bad_targets(demo, hub, tmp_path):
    with pytest.raises(ConfigError, match="is an EAGLE-3 drafter config, not a target model config"):
        load_target_config("demo-aqmed/Kimi-K2-Instruct-eagle3", endpoint=hub.endpoint)
    with pytest.raises(NotFoundError, match="repo not found"):
        load_target_config("demo-nobody/nothing", endpoint=hub.endpoint)
    with pytest.raises(NotFoundError, match=r"^Target '.*' has no config.json: give the target model's config.json"):
        load_target_config(str(tmp_path))
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_target_config("demo-wip/Qwen3-4B-Eagle3", endpoint=hub.endpoint)
    with pytest.raises(InputError, match="target must be a path, a location, a Hub repo id or a config dict, got int"):
        load_target_config(7)


def test_bad_target_fails_before_listing(hub_log):
    with pytest.raises(NotFoundError):
        find_drafters(target="demo-nobody/nothing", endpoint=hub_log.endpoint)
    assert [r.path for r in hub_log.log] == ["/demo-nobody/nothing/resolve/main/config.json"]


# -- errors ----------------------------------------------------------------------------------------

def test_offline(monkeypatch, hub):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OfflineError, match=r"^Hub search at http://127\.0\.0\.1:\d+: offline mode is on \(HF_HUB_OFFLINE"):
        find_drafters(endpoint=hub.endpoint)


def test_unreachable_endpoint_fails_fast():
    with pytest.raises(LocationError, match=r"^Cannot reach http://127\.0\.0\.1:9\b.*ConnectError.*Check the address"):
        find_drafters("eagle")  # HF_ENDPOINT is a closed port in tests


@pytest.mark.parametrize("status", [401, 403])
def test_auth_refused(demo, status):
    with HubServer(demo.hub_root) as server:
        server.inject("/api/models", status)
        with pytest.raises(AuthError, match=rf"access refused \(HTTP {status}\)\. Check that HF_TOKEN"):
            find_drafters(endpoint=server.endpoint)


def test_rate_limited_says_when_to_retry(demo):
    with HubServer(demo.hub_root, page_size=10) as server:
        server.inject("/api/models", 429, {"Retry-After": "17"}, times=1)
        with pytest.raises(RateLimitError, match=r"rate limiting requests \(HTTP 429\); the server asks to retry after 17 s"):
            find_drafters(endpoint=server.endpoint)
        assert len(server.log) == 1  # no silent retry


def test_rate_limited_while_reading_configs(demo):
    with HubServer(demo.hub_root) as server:
        server.inject("/demo-someone/draft-head-v2/resolve", 429, {"Retry-After": "5"})
        with pytest.raises(RateLimitError, match="retry after 5 s"):
            find_drafters(author="demo-someone", endpoint=server.endpoint)


def test_gated_config_is_a_row_not_an_error(demo, tmp_path):
    root = tmp_path / "hub"
    for repo in ("demo-someone/draft-head-v2", "demo-aqmed/Kimi-K2-Instruct-eagle3"):
        (root / repo).mkdir(parents=True)
        shutil.copy(demo.hub_root / repo / "config.json", root / repo / "config.json")
    meta = {"gated": "manual", "downloads": 3}
    (root / "demo-someone/draft-head-v2/.hub.json").write_text(json.dumps(meta))
    with HubServer(root) as server:
        results = find_drafters(endpoint=server.endpoint)
    gated = results["demo-someone/draft-head-v2"]
    assert gated.problem.startswith("config.json not readable: hf://demo-someone/draft-head-v2@main/config.json: "
                                    "the repo is gated (HTTP 401)")
    assert [h.repo for h in results] == ["demo-aqmed/Kimi-K2-Instruct-eagle3", "demo-someone/draft-head-v2"]


# -- the result table ------------------------------------------------------------------------------

def test_json_schema_exactly(for_k2):
    data = for_k2.to_json()
    assert list(data) == ["drafters"]
    keys = ["repo", "format", "family", "block_size", "target", "hidden_size", "draft_vocab_size", "vocab_size", "aux_layer_ids",
            "parameters", "downloads", "likes", "fits_target", "why"]
    assert all(list(row) == keys for row in data["drafters"])
    first = data["drafters"][0]
    assert first == {"repo": "demo-aqmed/Kimi-K2-Instruct-eagle3", "format": "specforge", "family": "EAGLE-3",
                     "block_size": None,
                     "target": "Kimi-K2-Instruct (inferred from name)", "hidden_size": 448, "draft_vocab_size": 2000,
                     "vocab_size": 10240, "aux_layer_ids": [2, 30, 58], "parameters": 4666064, "downloads": 5210,
                     "likes": 61, "fits_target": True, "why": None}
    broken = next(r for r in data["drafters"] if r["repo"] == "demo-wip/Llama-3.1-8B-Instruct-eagle3-upload")
    assert broken["why"].startswith("no config.json") and broken["fits_target"] is None
    json.dumps(data)  # serialisable


def test_text_and_html(for_k2):
    text = str(for_k2)
    assert text.splitlines()[0] == ("16 EAGLE-3 drafters among 28 Hub models; 4 look-alikes excluded by config; "
                                   "2 candidates with no readable config; 7 fit target demo-moonshot/Kimi-K2-Instruct "
                                   "(hidden 448, vocab 10240)")
    assert "hidden 256 != target 448; vocab 8016 != target 10240" in text
    assert text.splitlines()[-1].startswith("excluded: demo-nvidia/Eagle2-1B (config.json has architectures")
    html = for_k2._repr_html_()
    assert html.count("<tr") == 19 and html.count('onclick="var t=this.closest(&#x27;table&#x27;)') == 13
    assert "excluded by config (4)" in html and "demo-mirror/Llama-3.1-8B-Instruct-EAGLE3" in html


def test_pandas_and_locations(for_k2, hub):
    frame = for_k2.to_pandas()
    assert len(frame) == 18 and frame["location"][0] == "hf://demo-aqmed/Kimi-K2-Instruct-eagle3"
    assert str(frame["hidden_size"].dtype) == "Int64" and frame["hidden_size"].isna().sum() == 2
    assert frame["fits_target"].sum() == 7
    with pytest.raises(KeyError, match="'nope/nope' is not among the 18 drafters found"):
        for_k2["nope/nope"]
    from eaglekit.io.reader import read_inventory

    inv = read_inventory(for_k2["demo-someone/draft-head-v2"].location, endpoint=hub.endpoint, progress=False)
    assert inv["fc.weight"].shape == (448, 3 * 448) and inv.parameters == for_k2["demo-someone/draft-head-v2"].parameters


def test_hit_defaults():
    hit = DrafterHit("o/r", "unknown", problem="x")
    assert hit.location == "hf://o/r" and hit.to_json()["why"] == "x" and hit.target_label is None


def test_repr_is_the_caption(for_k2):
    assert repr(for_k2).startswith("<SearchResults: 16 EAGLE-3 drafters among 28 Hub models;")
