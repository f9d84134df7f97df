"""The MLA drafter's rotary base: engines build its YaRN table on rope_theta, TorchSpec on 10000.

TorchSpec's MLA drafter (lightseekorg/TorchSpec ``torchspec/models/draft/deepseek_eagle.py``,
``DeepSeekMLAAttention._init_rope``) builds ``LlamaYarnRotaryEmbedding`` without ``base=``, so the class default
``base=10000`` of ``torchspec/models/draft/llama3_eagle.py`` applies whatever rope_theta says; vLLM
(``vllm/model_executor/models/deepseek_v2.py``: ``get_rope(..., rope_parameters=config.rope_parameters)``) and
transformers build it on rope_theta. ``rotary_base="torchspec"`` measures as TorchSpec trains: exactly the drafter
whose config says rope_theta 10000; ``"config"`` as the engines serve; the two are different cache entries and the
result says which base it used and names the other."""

from __future__ import annotations

import json

import pytest
import torch

from dflashfixtures import make_target
from eaglekit.analysis.acceptance.measure import measure_acceptance
from eaglekit.analysis.draft import DraftModel
from eaglekit.core.configs.config import normalize_config
from eaglekit.core.configs.rotary import bases_differ, torchspec_base
from eaglekit.core.errors import InputError
from mlafixtures import H, mla_config, write_drafter

YARN = {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}


def _config(**kw):
    return mla_config(draft_vocab=96, rope_scaling=YARN, eagle_config={"eagle_aux_hidden_state_layer_ids": [0, 1, 2]},
                      **kw)


def _features(seed=4, T=12):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, T, H, generator=g), torch.randint(0, 96, (T,), generator=g)


def test_which_base_each_reader_uses():
    cfg = normalize_config(_config())
    assert cfg.rope_theta == 50000.0 and torchspec_base("mla", cfg.rope_theta, cfg.rope_scaling) == 10000.0
    assert bases_differ("mla", cfg.rope_theta, cfg.rope_scaling)
    plain = normalize_config(mla_config())           # no YaRN: TorchSpec passes base=rope_theta
    assert not bases_differ("mla", plain.rope_theta, plain.rope_scaling)
    assert torchspec_base("llama", 50000.0, YARN) == 50000.0   # llama3_eagle.py passes rope_theta to YaRN


def test_torchspec_base_drafts_as_the_drafter_written_on_base_10000(tmp_path):
    folder = write_drafter(tmp_path / "d", _config())
    same = write_drafter(tmp_path / "d10k", _config(rope_theta=10000.0))
    aux, ids = _features()
    e = torch.randn(96, H, generator=torch.Generator().manual_seed(2))     # the target's embedding, shared
    with DraftModel.load(folder, embed=e) as engines, DraftModel.load(folder, embed=e, rotary_base="torchspec") \
            as torchspec, DraftModel.load(same, embed=e) as written:
        a = engines.draft(engines.project(aux), ids, 3, return_logits=True).logits
        b = torchspec.draft(torchspec.project(aux), ids, 3, return_logits=True).logits
        c = written.draft(written.project(aux), ids, 3, return_logits=True).logits
    assert all(torch.equal(x, y) for x, y in zip(b, c))               # exactly the base-10000 drafter
    assert not torch.allclose(a[0], b[0])                             # and not the engines' table
    with pytest.raises(InputError, match="rotary base must be"):
        DraftModel.load(folder, embed=e, rotary_base=-3.0)


def test_acceptance_measures_under_either_base_and_says_which(tmp_path):
    target = make_target(tmp_path / "target")
    folder = write_drafter(tmp_path / "d", _config())
    g = torch.Generator().manual_seed(0)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"input_ids": torch.randint(1, 90, (6,), generator=g).tolist()}) + "\n"
                               for _ in range(2)))
    kw = dict(target=str(target), prompts=str(prompts), max_new_tokens=8, steps=2, progress=False,
              cache_dir=tmp_path / "cache")
    engines = measure_acceptance(str(folder), **kw)
    torchspec = measure_acceptance(str(folder), rotary_base="torchspec", **kw)
    assert torchspec.cached is None                                   # its own cache entry, not the engines' figure
    assert measure_acceptance(str(folder), rotary_base="torchspec", **kw).cached is not None
    assert any("measured on base 50000 (--rotary-base config)" in n and "--rotary-base torchspec" in n
               for n in engines.notes)
    assert any("measured on base 10000 (--rotary-base torchspec)" in n for n in torchspec.notes)


def test_the_cli_option(tmp_path):
    """``eaglekit acceptance --rotary-base torchspec``: the figure's note names the base it used; ``both``: the
    engines' figure with TorchSpec's in a note; a base that is not a positive number is refused (exit 2)."""
    import subprocess
    import sys

    target = make_target(tmp_path / "target")
    folder = write_drafter(tmp_path / "d", _config())
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [3, 4, 5, 6, 7]}) + "\n")
    base = [sys.executable, "-m", "eaglekit", "acceptance", str(folder), "--target", str(target), "--prompts",
            str(prompts), "--max-new-tokens", "6", "--steps", "2", "--no-cache", "--json"]
    r = subprocess.run(base + ["--rotary-base", "torchspec"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert any("measured on base 10000 (--rotary-base torchspec)" in n for n in json.loads(r.stdout)["notes"])
    r = subprocess.run(base + ["--rotary-base", "both"], capture_output=True, text=True, timeout=600)
    notes = json.loads(r.stdout)["notes"]
    assert r.returncode == 0 and any("measured on base 50000" in n for n in notes)
    assert any(n.startswith("rotary base torchspec (as TorchSpec trains): accept length ") and "K=2" in n
               for n in notes)
    r = subprocess.run(base + ["--rotary-base", "-5"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "expected config, torchspec or a positive number" in r.stderr
