"""Hostile target folders (issue 23): a folder's own Python (auto_map) never runs without
--trust-remote-code, not even when stdin answers "y"; configs sized to exhaust memory are refused before
transformers allocates; a pickled pytorch_model.bin is one line. Each CLI case runs under a 1 GiB
address-space limit."""

from __future__ import annotations

import ast
import io
import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from bounded_cli import run_limited

from eaglekit.analysis.acceptance.target import load_target_model
from eaglekit.core.errors import ConfigError, InputError, LocationError
from eaglekit.core.configs.loadable import check_fits, parameter_count, remote_code

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
         "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 16,
         "max_position_embeddings": 64}
#: Python that leaves a folder behind when imported: proof that the folder's code ran.
EVIL = "import os\nos.makedirs({marker!r}, exist_ok=True)\nfrom transformers import LlamaConfig as EvilConfig\n"


def _folder(root: Path, *, config: dict, tokenizer_config: dict | None = None, marker: Path | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    if tokenizer_config is not None:
        (root / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    if marker is not None:
        for module in ("configuration_evil.py", "modeling_evil.py", "tokenization_evil.py"):
            (root / module).write_text(EVIL.format(marker=str(marker)))
    return root


def _dump_hidden(target: Path, tmp: Path, *extra: str, stdin: str | None = None):
    prompts = tmp / "prompts.jsonl"
    prompts.write_text('{"input_ids": [1, 2, 3]}\n')
    return run_limited("dump-hidden", "--target", str(target), "--prompts", str(prompts), "--out", str(tmp / "out"),
                       *extra, tmp=tmp, stdin=stdin)


AUTO_MAP = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.EvilModel"}


def test_a_folder_with_its_own_code_is_refused_even_when_stdin_says_yes(tmp_path):
    marker = tmp_path / "ran"
    target = _folder(tmp_path / "target", config={**LLAMA, "model_type": "evil", "auto_map": AUTO_MAP}, marker=marker)
    r = _dump_hidden(target, tmp_path, stdin="y\ny\ny\n")
    assert r.rc == 2 and len(r.error_lines) == 1, r.stderr
    assert "ships its own Python code (auto_map in config.json)" in r.stderr and "--trust-remote-code" in r.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_a_tokenizer_with_its_own_code_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    tok = {"auto_map": {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}}
    target = _folder(tmp_path / "target", config=LLAMA, tokenizer_config=tok, marker=marker)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    with pytest.raises(InputError, match=r"ships its own Python code \(auto_map in tokenizer_config.json\)"):
        load_target_model(target)
    assert not marker.exists()


def test_the_flag_is_what_lets_that_code_run(tmp_path):
    """--trust-remote-code hands the choice to transformers (the code runs: here it then fails to be a model)."""
    marker = tmp_path / "ran"
    target = _folder(tmp_path / "target", config={**LLAMA, "model_type": "evil", "auto_map": AUTO_MAP},
                     marker=marker)
    r = _dump_hidden(target, tmp_path, "--trust-remote-code")
    assert marker.exists(), r.stderr
    assert r.rc == 2 and r.error_lines[-1].startswith("eaglekit dump-hidden: error: ") and "Traceback" not in r.stderr


def test_a_config_that_would_exhaust_memory_is_one_line_within_1_gib(tmp_path):
    target = _folder(tmp_path / "target", config={**LLAMA, "intermediate_size": 50_000_000})
    r = _dump_hidden(target, tmp_path)
    assert r.rc == 2 and len(r.error_lines) == 1, r.stderr
    assert "describes a model of about" in r.stderr and "refusing to load it" in r.stderr, r.stderr


@pytest.mark.parametrize("sizes", [{"hidden_size": 1_000_000_000}, {"num_hidden_layers": 100_000, "hidden_size": 4096},
                                   {"num_local_experts": 1_000_000, "intermediate_size": 4096}])
def test_other_configs_that_would_exhaust_memory_are_refused_before_transformers(tmp_path, sizes, monkeypatch):
    import transformers

    def never(*args, **kwargs):
        raise AssertionError("transformers was asked to build the model")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", never)
    target = _folder(tmp_path / "target", config={**LLAMA, **sizes})
    with pytest.raises(ConfigError, match="describes a model of about .* refusing to load it"):
        load_target_model(target)


def test_a_pickled_pytorch_model_bin_is_one_error_and_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    target = _folder(tmp_path / "target", config=LLAMA)

    class Evil:
        def __reduce__(self):
            return (os.makedirs, (str(marker),))

    torch.save({"model.embed_tokens.weight": Evil()}, str(target / "pytorch_model.bin"))
    with pytest.raises(LocationError, match="holds more than tensors .*os.makedirs") as e:
        load_target_model(target)
    assert "\n" not in str(e.value) and "weights_only=False" not in str(e.value)
    assert not marker.exists()


def test_a_normal_folder_still_loads(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(**{k: v for k, v in LLAMA.items() if k != "architectures"})).save_pretrained(
        tmp_path / "tiny")
    model = load_target_model(tmp_path / "tiny")
    assert model.num_hidden_layers == 1 and model.hidden_size == 8


def test_checks_in_the_library():
    with pytest.raises(InputError, match="ships its own Python code"):
        remote_code({"config.json": {"auto_map": {"AutoModel": "m.M"}}}, name="t", trust_remote_code=False)
    remote_code({"config.json": {"auto_map": {"AutoModel": "m.M"}}}, name="t", trust_remote_code=True)
    remote_code({"config.json": LLAMA}, name="t", trust_remote_code=False)
    # 16x8 embedding and lm_head, q/k/v/o 4x(8x8), gate/up/down 3x(8x16): what LlamaForCausalLM holds, less norms
    assert parameter_count(LLAMA, what="t") == 2 * 16 * 8 + 4 * 8 * 8 + 3 * 8 * 16
    with pytest.raises(ConfigError, match="hidden_size must be a non-negative integer"):
        parameter_count({**LLAMA, "hidden_size": "8"}, what="t")
    with pytest.raises(ConfigError, match="more than the 1.0 GiB"):
        check_fits({**LLAMA, "intermediate_size": 50_000_000}, what="t", dtype="float32", available=1 << 30)


def test_every_from_pretrained_in_eaglekit_says_trust_remote_code():
    """transformers asks on stdin when trust_remote_code is left out: every call must pass it."""
    root = Path(__file__).resolve().parents[2] / "eaglekit"
    calls = []
    for file in root.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "from_pretrained":
                calls.append((file.name, node.lineno, {k.arg for k in node.keywords}))
    assert calls and all("trust_remote_code" in kw for _, _, kw in calls), calls


def test_pickle_is_still_what_torch_refuses():
    """The refusal the CLI reports comes from torch's weights_only unpickler (an UnpicklingError)."""
    import io

    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())

    buf = io.BytesIO()
    torch.save({"x": Evil()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL"):
        torch.load(buf, weights_only=True)
