"""Accept length from training pipelines' dumps (SpecForge, speculators, Model-Optimizer) on the trained
demo world: the same figures as ``--target`` on greedy text, a slow reference on dataset text, one
process == a 2-worker Dask cluster (a killed worker retried), and every conventions' definition."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from eaglekit.analysis.draft import DraftModel
from eaglekit.analysis.acceptance.dumps import measure_dump
from eaglekit.analysis.acceptance.measure import measure_acceptance
from eaglekit.analysis.acceptance.target import load_target_model
from eaglekit.analysis.acceptance.span_estimate import COMPLETED, CYCLES
from eaglekit.demo.dumps import FORMATS, dataset_texts, write_training_dumps

N_PROMPTS, NEW = 5, 24


@pytest.fixture(scope="module")
def prompts(trained):
    lines = trained.prompts("k2").read_text().splitlines()[:N_PROMPTS]
    return [json.loads(line)["input_ids"] for line in lines]


@pytest.fixture(scope="module")
def greedy(trained, prompts, tmp_path_factory):
    root = tmp_path_factory.mktemp("greedy") / "dumps"
    return root, write_training_dumps(trained.target("k2"), root, prompts=prompts, max_new_tokens=NEW)


@pytest.fixture(scope="module")
def k2(trained):
    return load_target_model(trained.target("k2"))


@pytest.fixture(scope="module")
def reference(trained, prompts, k2, tmp_path_factory):
    """The same drafter measured with --target on the same prompts."""
    f = tmp_path_factory.mktemp("prompts") / "p.jsonl"
    f.write_text("".join(json.dumps({"input_ids": p}) + "\n" for p in prompts))
    return measure_acceptance(trained.drafter("k2"), target=k2, prompts=f, max_new_tokens=NEW, steps=4,
                              progress=False)


def _masks(root, fmt):
    f = root / f"{fmt}-loss-masks.jsonl"
    return f if f.exists() else None


@pytest.mark.parametrize("fmt", FORMATS)
def test_dumps_give_the_target_figures(trained, greedy, reference, fmt):
    root, dirs = greedy
    r = measure_dump(trained.drafter("k2"), dirs[fmt], target_head=str(trained.target("k2")), steps=4,
                     loss_masks=_masks(root, fmt), progress=False)
    assert r.format == fmt and r.coverage == 1.0 and r.files_read == N_PROMPTS
    assert r.accept_length == reference.accept_length > 2.5
    from eaglekit.analysis.acceptance import dumps as dump_module
    assert dump_module._LOADED == {}  # the drafter and the head are not kept once the result is back
    assert r.result.per_step_acceptance == reference.per_step_acceptance
    assert r.result.accept_length_by_steps == reference.accept_length_by_steps
    assert r.result.generated_tokens == reference.generated_tokens and r.result.cycles == reference.cycles
    # the conventions, from their definitions
    assert sum(r.vllm_per_position_acceptance) == pytest.approx(r.accept_length - 1)
    c = [x for x in r.result.per_step_acceptance]
    assert r.specforge_acc_len == pytest.approx(c[0] + c[0] * c[1] + c[0] * c[1] * c[2] + np.prod(c))
    assert r.mean_request_accept_length == pytest.approx(np.mean(reference.per_prompt_accept_length))
    out = r.to_json()
    json.dumps(out, allow_nan=False)
    assert out["dump"]["coverage"] == 1.0 and out["conventions"]["specforge_acc_len"]["printed_by"]


def test_without_masks_every_position_counts(trained, greedy):
    """Model-Optimizer stores no loss mask: prompt tokens then count too (and the note says so)."""
    _root, dirs = greedy
    r = measure_dump(trained.drafter("k2"), dirs["modelopt"], target_head=str(trained.target("k2")), steps=4,
                     progress=False)
    assert r.assistant_tokens > N_PROMPTS * NEW and "no loss mask" in " ".join(r.result.notes)


def test_temperature_uses_the_same_head(trained, greedy, prompts, k2, tmp_path):
    _root, dirs = greedy
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps({"input_ids": p}) + "\n" for p in prompts[:2]))
    ref = measure_acceptance(trained.drafter("k2"), target=k2, prompts=f, max_new_tokens=NEW, steps=3,
                             temperature=0.7, progress=False)
    r = measure_dump(trained.drafter("k2"), dirs["specforge"], target_head=str(trained.target("k2")), steps=3,
                     temperature=0.7, limit=2, progress=False)
    assert r.result.expected_acceptance == pytest.approx(ref.expected_acceptance, rel=1e-5)
    assert 0 < r.result.expected_acceptance[0] < 1
    # the sampled accept length on the greedy cycle basis comes through from dumps as from --target
    assert r.result.expected_accept_length == pytest.approx(ref.expected_accept_length, rel=1e-5)


def test_temperature_on_dataset_text_uses_the_same_requests(trained, tmp_path):
    """At temperature > 0 the expected accept length runs on the same requests as the greedy figure, each seen
    draft accepted with its expected acceptance, the unseen ones with the per-step expected acceptance."""
    dirs = write_training_dumps(trained.target("k2"), tmp_path / "d", prompts=[], texts=dataset_texts(4),
                                formats=("specforge",))
    kw = {"target_head": str(trained.target("k2")), "steps": 3, "progress": False}
    cold = measure_dump(trained.drafter("k2"), dirs["specforge"], temperature=1e-4, **kw)
    warm = measure_dump(trained.drafter("k2"), dirs["specforge"], temperature=1.5, **kw)
    assert cold.result.expected_accept_length == pytest.approx(cold.accept_length, rel=0.02)
    assert 1.0 < warm.result.expected_accept_length < cold.result.expected_accept_length


# -- dataset text: coverage drops, the figure follows the definition -----------------------------------------
def _slow_reference(trained, texts, steps):
    """The definition, step by step: the target's greedy token from its own logits; a cycle at base t drafts
    base by base (the engine's way, draft_loop) and accepts leading matches inside greedy-consistent assistant
    spans; the next cycle starts after the bonus token. A span that stops where the text departs from the
    target's choice counts only the cycles whose every draft has a token to compare with, with all the tokens
    they emit, and one that starts right after a departure leaves its first cycle out; the sample's own edges
    stay a request's (its first cycle counts, its last is capped at the sample's end)."""
    model = load_target_model(trained.target("k2")).model
    drafter = DraftModel.load(trained.drafter("k2"), embeddings=trained.target("k2"))
    gen = cyc = 0
    cond, acc = np.zeros(steps), np.zeros(steps)
    asst = ok_total = 0
    for seq, start in texts:
        x = torch.tensor([seq])
        with torch.no_grad():
            out = model(x, output_hidden_states=True, use_cache=False)
        tgt = out.logits[0].argmax(-1)
        T = len(seq)
        ok = [t >= start and seq[t] == int(tgt[t - 1]) for t in range(1, T)]
        asst += sum(1 for t in range(1, T) if t >= start)
        ok_total += sum(ok)
        aux = torch.stack([out.hidden_states[i][0] for i in (1, 2, 3)])
        h = drafter.project(aux)
        t = 1
        while t < T:
            if not ok[t - 1]:
                t += 1
                continue
            a = t
            while t < T and ok[t - 1]:
                t += 1
            b = t - 1
            if b - a < 1:
                continue
            drafts = drafter.draft_loop(h[:T - 1], x[0, 1:], steps, bases=torch.arange(a - 1, b - 1))
            m = []
            for col, base in enumerate(range(a - 1, b - 1)):
                n = 0
                for j in range(1, steps + 1):
                    if base + j > b - 1 or int(drafts[j - 1, col]) != int(tgt[base + j]):
                        break
                    n += 1
                m.append(n)
                for j in range(1, steps + 1):
                    if base + j <= b - 1 and n >= j - 1:
                        cond[j - 1] += 1
                        acc[j - 1] += n >= j
            i, G = 0, b - a
            open_start = a - 1 >= start          # right after an assistant token that departs from the target
            open_end = b + 1 < T                 # before one (the sample's end is its request's end)
            first = True
            while (i + steps <= G) if open_end else (i < G):
                emitted = (min(m[i], steps) if open_end else min(m[i], steps, G - i - 1)) + 1
                if not (first and open_start):
                    gen += emitted
                    cyc += 1
                first = False
                i += emitted
    return gen / cyc, cond, acc, ok_total / asst


def test_dataset_text_coverage_and_slow_reference(trained, tmp_path):
    texts = dataset_texts(4)
    dirs = write_training_dumps(trained.target("k2"), tmp_path / "d", prompts=[], texts=texts, formats=("specforge",))
    r = measure_dump(trained.drafter("k2"), dirs["specforge"], target_head=str(trained.target("k2")), steps=3,
                     progress=False)
    al, cond, acc, coverage = _slow_reference(trained, texts, 3)
    assert 0.3 < r.coverage < 1.0 and r.coverage == pytest.approx(coverage)
    assert r.result.per_step_acceptance == pytest.approx(tuple(acc / cond))
    assert r.spans > len(texts)
    # the accept length: --target's simulation over each sample, unseen drafts completed (span_estimate's tests)
    assert r.result.estimator == COMPLETED and r.accept_length_interval.has_interval
    assert r.result.prompts == len(texts) and abs(r.accept_length - al) < 0.3


def test_dataset_text_gives_the_greedy_figure_at_every_k(trained):
    """The demo's 48 held-out texts against the 48 greedy continuations of the measured pages' prompts, requests
    as long: at every K = 1..5 the dataset text's 95% interval holds the greedy figure (docs/acceptance.md's
    table). Round 4 gave 3.822 (3.756-3.881) against 3.936 at K = 3."""
    from eaglekit.demo.dumps import trained_dumps

    kw = {"target_head": str(trained.target("k2")), "steps": 5, "progress": False}
    g = measure_dump(trained.drafter("k2"), trained_dumps(trained)["specforge"], **kw)
    d = measure_dump(trained.drafter("k2"), trained_dumps(trained, greedy=False)["specforge"], **kw)
    assert g.coverage == 1.0 and 0.7 < d.coverage < 0.95 and d.spans > 2 * d.result.prompts
    assert g.result.estimator == CYCLES and d.result.estimator == COMPLETED
    for k in range(1, 6):
        gi, di = g.result.interval_at(k), d.result.interval_at(k)
        assert di.method == "bootstrap over 48 samples, 95%"
        assert di.low <= gi.value <= di.high, (k, gi, di)
        assert di.high - di.low < 0.2
    assert round(d.result.interval_at(3).value, 3) == 3.926 and round(g.result.interval_at(3).value, 3) == 3.936
    # requests are samples: 48, each with one prefill token, the prefill-included figure from the same cycles
    assert d.result.prompts == len(d.result.per_prompt_accept_length) == 48
    assert d.result.accept_length_prefill_included == pytest.approx(
        (d.result.generated_tokens + 48) / d.result.cycles)
    assert any("spans stop where the text departs" in n for n in d.result.notes)
    assert not any("spans stop" in n for n in g.result.notes)
    out = d.to_json()
    assert out["estimator"] == COMPLETED and out["accept_length_low"] < out["accept_length"] < out["accept_length_high"]
    assert "estimator" in str(d.result) and COMPLETED in d._repr_html_()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_closing_token_the_target_did_not_choose_keeps_the_target_figures(trained, reference, prompts, tmp_path, fmt):
    """SpecForge's loss mask holds the closing <|im_end|> its template appends (so does Model-Optimizer's 2026
    loss_mask; speculators' masks from its preprocessed dataset hold it too, given with --loss-masks): the target
    did not choose it, and the request ends before it, as --target's ends at
    --max-new-tokens. Round 4 counted it as a departure and dropped the cut last cycles (752 tokens in 188 cycles
    against 756 in 192)."""
    dirs = write_training_dumps(trained.target("k2"), tmp_path / "d", prompts=prompts, max_new_tokens=NEW,
                                formats=(fmt,), closing=True, modelopt_loss_mask=True)
    r = measure_dump(trained.drafter("k2"), dirs[fmt], target_head=str(trained.target("k2")), steps=4,
                     loss_masks=_masks(tmp_path / "d", fmt) if fmt == "speculators" else None, progress=False)
    assert r.coverage < 1.0 and r.masked_by == ("--loss-masks" if fmt == "speculators" else "loss_mask")
    assert r.result.generated_tokens == reference.generated_tokens and r.result.cycles == reference.cycles
    assert r.accept_length == reference.accept_length
    assert r.result.accept_length_by_steps == reference.accept_length_by_steps
    assert r.result.estimator == CYCLES and not any("spans stop" in n for n in r.result.notes)


def test_a_dump_of_low_coverage_still_gives_an_accept_length_with_an_interval(trained, k2, tmp_path):
    """Text whose spans are a few tokens long (coverage under 50%, as the writers' dataset-text dumps at 33-40%):
    round 4 counted no cycle (accept_length null) or 2-3; every K now has a figure with an interval, completed
    with the conditional acceptances, and it stays within a few percent of the greedy figure."""
    lines = trained.prompts("k2").read_text().splitlines()[:12]
    rng = np.random.default_rng(3)
    texts, greedy = [], []
    for line in lines:
        p = json.loads(line)["input_ids"]
        seq = k2.run(list(p), max_new_tokens=NEW, layers=[0]).input_ids.tolist()
        greedy.append(p)
        for t in range(len(p) + 1, len(seq)):
            if rng.random() < 0.45:
                seq[t] = int(rng.integers(0, 96))
        texts.append((seq, len(p)))
    dirs = write_training_dumps(trained.target("k2"), tmp_path / "d", prompts=[], texts=texts, formats=("specforge",))
    g = write_training_dumps(trained.target("k2"), tmp_path / "g", prompts=greedy, max_new_tokens=NEW,
                             formats=("specforge",))
    kw = {"target_head": str(trained.target("k2")), "steps": 4, "progress": False}
    r = measure_dump(trained.drafter("k2"), dirs["specforge"], **kw)
    ref = measure_dump(trained.drafter("k2"), g["specforge"], **kw)
    assert r.coverage < 0.5 and r.result.estimator == COMPLETED
    out = r.to_json()
    json.dumps(out, allow_nan=False)
    assert out["accept_length_low"] < out["accept_length"] < out["accept_length_high"]
    for k in range(1, 5):
        i = r.result.interval_at(k)
        assert i.has_interval and abs(i.value - ref.result.interval_at(k).value) < 0.06 * k + 0.05


# -- scale: sampling, Dask ------------------------------------------------------------------------------------
def test_sample_is_seeded_and_has_an_interval(trained, greedy):
    _root, dirs = greedy
    kw = {"target_head": str(trained.target("k2")), "steps": 4, "sample": 3, "seed": 5, "progress": False,
          "cache": False}  # both computed: the draw is seeded, not read back
    a = measure_dump(trained.drafter("k2"), dirs["specforge"], **kw)
    b = measure_dump(trained.drafter("k2"), dirs["specforge"], **kw)
    assert a.files_read == 3 and a.to_json() == b.to_json() and a.sampled
    lo, hi = a.interval
    assert lo <= a.accept_length <= hi and hi - lo > 0
    first = measure_dump(trained.drafter("k2"), dirs["specforge"], **{**kw, "sample": None, "limit": 2})
    assert first.files_read == 2 and not first.sampled and first.interval is None


def test_two_dask_workers_equal_one_process_even_when_a_worker_dies(trained, greedy, tmp_path):
    from distributed import Client, LocalCluster

    _root, dirs = greedy
    kw = {"target_head": str(trained.target("k2")), "steps": 4, "progress": False}
    single = measure_dump(trained.drafter("k2"), dirs["specforge"], **kw)
    marker = tmp_path / "killed-once"

    def kill_once(index: int) -> None:   # pickled by value to the workers
        import os

        if index == 3 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        spread = measure_dump(trained.drafter("k2"), dirs["specforge"], scheduler=client, hook=kill_once, **kw)
    assert marker.exists()                      # a worker did die mid-run
    a, b = single.to_json(), spread.to_json()
    assert a["dump"].pop("ran_on") == "this process" and b["dump"].pop("ran_on").startswith("a Dask cluster")
    assert a == b


def test_vocab_coverage_reads_training_dumps(trained, greedy, prompts, k2, capsys):
    """`vocab-coverage --hidden-states` on a training pipeline's dump: SpecForge's assistant tokens (its loss
    masks) are exactly the target's greedy continuations; the formats without masks count every token."""
    from eaglekit.analysis.acceptance.coverage import traffic_tokens, vocab_coverage
    from eaglekit.cli import main

    root, dirs = greedy
    ran = vocab_coverage(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=NEW,
                         steps=3, progress=False)
    spec = vocab_coverage(trained.drafter("k2"), hidden_states=dirs["specforge"], steps=3, progress=False)
    per_prompt = [len(s) for s in traffic_tokens(hidden_states=dirs["specforge"], progress=False)]
    assert per_prompt == [NEW] * N_PROMPTS and spec.tokens == NEW * N_PROMPTS
    first = traffic_tokens(target=k2, prompts=trained.prompts("k2"), max_new_tokens=NEW, progress=False)[:N_PROMPTS]
    assert [list(s) for s in traffic_tokens(hidden_states=dirs["specforge"], progress=False)] == \
        [list(s) for s in first]
    assert "specforge dump" in spec.traffic and "loss masks" in spec.traffic and ran.tokens >= spec.tokens
    for fmt in ("speculators", "modelopt"):
        every = vocab_coverage(trained.drafter("k2"), hidden_states=dirs[fmt], steps=3, progress=False)
        assert every.tokens == sum(len(p) + NEW for p in prompts) and "every token" in every.traffic
    assert main(["vocab-coverage", str(trained.drafter("k2")), "--hidden-states", str(dirs["modelopt"]), "--json"]) == 0
    assert '"coverage"' in capsys.readouterr().out
