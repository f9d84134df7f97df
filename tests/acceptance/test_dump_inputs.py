"""Hostile and broken dump folders: each refused with one line and exit 2 (nothing in a file runs, nothing
hangs, nothing outside the folder is read), or measured with the skipped samples counted."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest
import torch

from eaglekit.cli import main
from eaglekit.io.dumps.detect import open_training_dump

H, V = 64, 96   # the trained world's target


def _sample(T=20, *, h=H, n_aux=3, vocab=V, nan=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = {"input_ids": torch.randint(0, vocab, (T,), generator=g), "loss_mask": torch.ones(T, dtype=torch.int64),
         "hidden_state": torch.randn(1, T, h, generator=g), "aux_hidden_state": torch.randn(1, T, n_aux * h, generator=g)}
    if nan:
        d["aux_hidden_state"][0, 3, 5] = float("nan")
    return d


def _dump(root, *samples):
    folder = root / "rows_0-2000"
    folder.mkdir(parents=True)
    for i, s in enumerate(samples):
        torch.save(s, folder / f"data_{i}.ckpt")
    return root


def _run(capsys, trained, folder, *extra):
    code = main(["acceptance", str(trained.drafter("k2")), "--hidden-states", str(folder),
                 "--target-head", str(trained.target("k2")), "--steps", "3", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _error(capsys, trained, folder, *extra) -> str:
    code, out, err = _run(capsys, trained, folder, *extra)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    return lines[0]


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_with_objects_is_refused_unrun(trained, tmp_path, capsys):
    marker = tmp_path / "ran"
    s = _sample()
    s["extra"] = _Evil(marker)
    err = _error(capsys, trained, _dump(tmp_path / "d", s))
    assert "weights_only" in err and "not run" in err
    assert not marker.exists()


@pytest.mark.parametrize("case, expect", [
    ("not-a-dict", "not a SpecForge sample"),
    ("aux-width", "inconsistent with the drafter"),
    ("hidden-size", "another target"),
    ("token-ids", "outside the target's vocabulary"),
    ("all-nan", "NaN/Inf"),
])
def test_bad_samples(trained, tmp_path, capsys, case, expect):
    sample = {"not-a-dict": [torch.zeros(3)], "aux-width": _sample(n_aux=2), "hidden-size": _sample(h=32),
              "token-ids": _sample(vocab=500, seed=3), "all-nan": _sample(nan=True)}[case]
    assert expect in _error(capsys, trained, _dump(tmp_path / "d", sample))


@pytest.fixture(scope="module")
def good(trained, tmp_path_factory):
    """A real sample: the target's greedy continuation of a prompt, in SpecForge's layout."""
    from eaglekit.demo.dumps import write_training_dumps

    prompt = json.loads(trained.prompts("k2").read_text().splitlines()[0])["input_ids"]
    dirs = write_training_dumps(trained.target("k2"), tmp_path_factory.mktemp("good") / "d", prompts=[prompt],
                                max_new_tokens=16, formats=("specforge",))
    return torch.load(dirs["specforge"] / "rows_0-2000" / "data_0.ckpt", weights_only=True)


def test_nan_samples_are_skipped_and_counted(trained, tmp_path, capsys, good):
    bad = {k: v.clone() for k, v in good.items()}
    bad["hidden_state"][0, 4, 7] = float("inf")
    code, out, err = _run(capsys, trained, _dump(tmp_path / "d", good, bad), "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["dump"]["files_skipped"] == 1 and res["dump"]["nonfinite_positions"] == 1
    assert any("NaN/Inf" in n for n in res["notes"])


def test_a_head_of_another_vocabulary(trained, tmp_path, capsys):
    from safetensors.torch import save_file

    head = tmp_path / "head"
    head.mkdir()
    save_file({"lm_head.weight": torch.zeros(200, H), "model.norm.weight": torch.ones(H),
               "model.embed_tokens.weight": torch.zeros(200, H)}, str(head / "model.safetensors"))
    (head / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": H, "vocab_size": 200,
                                                  "num_hidden_layers": 4}))
    folder = _dump(tmp_path / "d", _sample())
    code = main(["acceptance", str(trained.drafter("k2")), "--hidden-states", str(folder), "--target-head", str(head)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "vocabulary mismatch" in err[0]


def test_empty_folder_fifo_and_links_out(trained, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert "no hidden-state dump files" in _error(capsys, trained, tmp_path / "empty")
    fifo = tmp_path / "fifo" / "rows_0-2000"
    fifo.mkdir(parents=True)
    os.mkfifo(fifo / "data_0.ckpt")
    assert "FIFO" in _error(capsys, trained, tmp_path / "fifo")        # refused unread, never waited on
    secret = tmp_path / "secret.ckpt"
    torch.save(_sample(), secret)
    link = tmp_path / "link" / "rows_0-2000"
    link.mkdir(parents=True)
    (link / "data_0.ckpt").symlink_to(secret)
    assert "outside" in _error(capsys, trained, tmp_path / "link")


def test_gzip_samples_read_like_plain_ones(trained, tmp_path, capsys, good):
    plain = _dump(tmp_path / "plain", good)
    gz = tmp_path / "gz" / "rows_0-2000"
    gz.mkdir(parents=True)
    (gz / "data_0.ckpt.gz").write_bytes(gzip.compress((plain / "rows_0-2000" / "data_0.ckpt").read_bytes()))
    a = _run(capsys, trained, plain, "--json")
    b = _run(capsys, trained, tmp_path / "gz", "--json")
    assert a[0] == b[0] == 0, (a, b)
    ja, jb = json.loads(a[1]), json.loads(b[1])
    assert ja["accept_length"] == jb["accept_length"] > 1 and ja["dump"]["coverage"] == 1.0


def test_speculators_header_declaring_two_million_positions(trained, tmp_path, capsys):
    from eaglekit.core.checkpoint.header import encode_header

    folder = tmp_path / "spec"
    folder.mkdir()
    header, _ = encode_header({"hidden_states": ("BF16", (2_000_000, 4, H)), "token_ids": ("I64", (2_000_000,))})
    (folder / "hs_0.safetensors").write_bytes(header + b"\0" * 64)
    assert "hs_0.safetensors" in _error(capsys, trained, folder)


def test_native_dump_hostile_manifests(trained, tmp_path, capsys):
    from eaglekit.analysis.acceptance.target import dump_hidden_states

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(trained.prompts("k2").read_text().splitlines()[0] + "\n")
    dump = dump_hidden_states(str(trained.target("k2")), prompts, tmp_path / "native", max_new_tokens=8,
                              dtype="float32", progress=False)
    manifest = json.loads((dump.path / "manifest.json").read_text())
    manifest["target"] = "\x1b]52;c;ZXZpbA==\x07\x1b[2J" + str(trained.target("k2"))
    (dump.path / "manifest.json").write_text(json.dumps(manifest))
    code = main(["acceptance", str(trained.drafter("k2")), "--hidden-states", str(dump.path), "--steps", "2",
                 "--embeddings", str(trained.target("k2"))])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "\x1b" not in out and "\\x1b]52" in out                      # shown, never obeyed
    zero = tmp_path / "zero"
    shutil.copytree(dump.path, zero)
    (zero / "manifest.json").write_text(json.dumps({**manifest, "samples": 0}))
    assert "0 samples" in _error(capsys, trained, zero)
    fifo = tmp_path / "fifo-manifest"
    fifo.mkdir()
    os.mkfifo(fifo / "manifest.json")
    assert "FIFO" in _error(capsys, trained, fifo)
    zero_link = tmp_path / "zero-link"
    zero_link.mkdir()
    (zero_link / "manifest.json").symlink_to("/dev/zero")
    assert "outside" in _error(capsys, trained, zero_link)
    huge = tmp_path / "huge"
    shutil.copytree(dump.path, huge)
    with open(huge / "manifest.json", "r+b") as f:
        f.truncate(3 * 1024 ** 3)                                    # sparse: 3 GiB declared, nothing read
    assert "larger than" in _error(capsys, trained, huge)
    private = tmp_path / "private.bin"
    private.write_bytes(b"SECRET42" * 8)
    linked = tmp_path / "linked"
    shutil.copytree(dump.path, linked)
    (linked / "sample-000000.safetensors").unlink()
    (linked / "sample-000000.safetensors").symlink_to(private)
    line = _error(capsys, trained, linked, "--embeddings", str(trained.target("k2")))
    assert "outside" in line and "SECRET" not in line and str(int.from_bytes(b"SECRET42", "little")) not in line


def test_a_training_dump_needs_the_target_head(trained, tmp_path, capsys):
    folder = _dump(tmp_path / "d", _sample())
    code = main(["acceptance", str(trained.drafter("k2")), "--hidden-states", str(folder)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--target-head" in err[0]


def test_target_head_in_a_multimodal_wrapper(trained, tmp_path):
    """Kimi-K2.5 style: language_model.* names, text_config; the head and norm found, the same tokens."""
    from safetensors.torch import load_file, save_file

    from eaglekit.analysis.acceptance.head import read_target_head

    src = load_file(str(trained.target("k2") / "model.safetensors"))
    wrapped = tmp_path / "wrapped"
    wrapped.mkdir()
    save_file({"language_model.lm_head.weight": src["lm_head.weight"],
               "language_model.model.norm.weight": src["model.norm.weight"],
               "vision_tower.blocks.0.norm.weight": torch.ones(8)}, str(wrapped / "model.safetensors"))
    cfg = json.loads((trained.target("k2") / "config.json").read_text())
    (wrapped / "config.json").write_text(json.dumps({"model_type": "kimi_k25", "text_config": cfg}))
    plain, wrap = read_target_head(str(trained.target("k2"))), read_target_head(str(wrapped))
    assert wrap.names == ("language_model.lm_head.weight", "language_model.model.norm.weight")
    assert wrap.num_hidden_layers == plain.num_hidden_layers == 4
    x = torch.randn(5, H)
    assert torch.equal(wrap.next_tokens(x, normed=False)[0], plain.next_tokens(x, normed=False)[0])


def test_an_ambiguous_folder_needs_dump_format(trained, tmp_path, capsys):
    from eaglekit.demo.dumps import write_training_dumps

    prompt = json.loads(trained.prompts("k2").read_text().splitlines()[1])["input_ids"]
    dirs = write_training_dumps(trained.target("k2"), tmp_path / "w", prompts=[prompt], max_new_tokens=12,
                                formats=("speculators", "modelopt"))
    mixed = tmp_path / "mixed"
    shutil.copytree(dirs["modelopt"], mixed)
    shutil.copy(dirs["speculators"] / "hidden_states" / "hs_0.safetensors", mixed)
    assert "--dump-format" in _error(capsys, trained, mixed)
    code, out, err = _run(capsys, trained, mixed, "--dump-format", "modelopt", "--json")
    assert code == 0, err
    assert json.loads(out)["dump"]["format"] == "modelopt"


@pytest.mark.parametrize("line, says", [
    ({"file": "x", "assistant_start": 0, "length": 10**12}, "assistant_start"),  # would allocate a terabyte list
    ({"file": "x", "assistant_start": -5, "length": 10}, "assistant_start"),
    ({"file": "x", "assistant_start": True, "length": 10}, "assistant_start"),
])
def test_loss_masks_declaring_absurd_spans_are_refused_unbuilt(trained, tmp_path, capsys, line, says):
    folder = _dump(tmp_path / "d", _sample())
    masks = tmp_path / "masks.jsonl"
    masks.write_text(json.dumps(line) + "\n")
    assert says in _error(capsys, trained, folder, "--loss-masks", str(masks))


@pytest.mark.parametrize("extra, flag", [(["--compare-templates", "raw", "raw"], "--compare-templates"),
                                         (["--aux-convention", "inputs"], "--aux-convention")])
def test_options_a_training_dump_cannot_honour_are_refused(trained, tmp_path, capsys, extra, flag):
    folder = _dump(tmp_path / "d", _sample())
    assert f"{flag} does nothing here" in _error(capsys, trained, folder, *extra)


def test_dump_options_with_a_target_are_refused(trained, capsys):
    code = main(["acceptance", str(trained.drafter("k2")), "--target", str(trained.target("k2")),
                 "--prompts", str(trained.prompts("k2")), "--limit", "3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--limit does nothing here" in err[0]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_final_norm_is_applied_as_the_target_applies_it(arch, tmp_path):
    """A dump's pre-norm final state goes through the target's own final norm: LayerNorm with its bias for
    GPT-2-style targets (``layer_norm_epsilon``, ``ln_f.bias``), RMSNorm for Llama-style ones; the logits equal
    the target's own."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from eaglekit.analysis.acceptance.head import read_target_head

    torch.manual_seed(0)
    if arch == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                           tie_word_embeddings=False))
        final = model.transformer.ln_f
    else:
        model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=False))
        final = model.model.norm
    with torch.no_grad():
        final.weight.mul_(1.5).add_(0.1)                       # a norm weight that is not all ones
        if getattr(final, "bias", None) is not None:
            final.bias.add_(0.3)                               # and a bias that matters
    model.eval().save_pretrained(str(tmp_path / arch))
    seen = {}
    final.register_forward_hook(lambda mod, args, out: seen.update(pre=args[0].detach()))  # None: output kept
    ids = torch.randint(0, 50, (1, 12))
    with torch.no_grad():
        want = model(ids).logits[0]
    head = read_target_head(str(tmp_path / arch))
    assert head.layer_norm == (arch == "gpt2") and (head.norm_bias is not None) == (arch == "gpt2")
    got = head.logits(seen["pre"][0], normed=False)
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


@pytest.mark.parametrize("eps", ["abc", float("nan"), -1.0, True])
def test_a_final_norm_epsilon_that_is_not_a_small_number_is_refused(eps, tmp_path, trained):
    """A target's config.json naming a string, NaN or negative epsilon ends in one ConfigError, not a traceback
    or NaN logits."""
    import json
    import shutil

    from eaglekit.analysis.acceptance.head import read_target_head
    from eaglekit.core.errors import ConfigError

    folder = tmp_path / "target"
    shutil.copytree(trained.target("k2"), folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "rms_norm_eps": eps}))
    with pytest.raises(ConfigError, match="epsilon"):
        read_target_head(str(folder))


# -- dump folders as the pipelines leave them (issue 30): each recognised by what its writer writes (file names,
# saved keys), two layouts refused with the files that point to each, and a Model-Optimizer dump of another
# layer count refused with the writer's rule, the layers it stored and the ones the drafter needs ----------------
@pytest.fixture(scope="module")
def layout_prompts(trained):
    return [json.loads(line)["input_ids"] for line in trained.prompts("k2").read_text().splitlines()[:2]]


@pytest.fixture(scope="module")
def written(trained, layout_prompts, tmp_path_factory):
    from eaglekit.demo.dumps import write_training_dumps

    root = tmp_path_factory.mktemp("layouts") / "d"
    return write_training_dumps(trained.target("k2"), root, prompts=layout_prompts, max_new_tokens=12,
                                formats=("speculators", "modelopt"))


def test_speculators_folder_as_prepare_data_leaves_it(trained, written, tmp_path, capsys):
    """prepare_data.py writes token_freq.pt (a dict of token counts), the Arrow dataset and its json files beside
    the data generation's hidden_states/: a .pt file that is not a Model-Optimizer sample."""
    folder = tmp_path / "output"
    shutil.copytree(written["speculators"], folder)
    torch.save({5: 10, 7: 3}, folder / "token_freq.pt")
    (folder / "dataset_info.json").write_text("{}")
    (folder / "state.json").write_text("{}")
    (folder / "data-00000-of-00001.arrow").write_bytes(b"\0" * 16)
    assert open_training_dump(folder).format == "speculators"
    code, out, err = _run(capsys, trained, folder, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["dump"]["format"] == "speculators" and res["dump"]["files"] == 2


def test_a_modelopt_folder_with_a_stray_pt_file(trained, written, tmp_path):
    """Model-Optimizer names its samples by conversation id: they are recognised by their keys."""
    folder = tmp_path / "mo"
    shutil.copytree(written["modelopt"], folder)
    torch.save({5: 10}, folder / "token_freq.pt")
    dump = open_training_dump(folder)
    assert dump.format == "modelopt" and "token_freq.pt" not in dump.files and len(dump) == 2


def test_two_layouts_name_the_files_of_each(trained, written, tmp_path, capsys):
    folder = tmp_path / "mixed"
    shutil.copytree(written["modelopt"], folder)
    shutil.copy(written["speculators"] / "hidden_states" / "hs_0.safetensors", folder)
    err = _error(capsys, trained, folder)
    assert "--dump-format" in err
    assert "speculators" in err and "hs_0.safetensors" in err
    assert "modelopt" in err and "conv-0000.pt" in err


def test_pt_files_of_no_known_writer_are_not_a_dump(trained, tmp_path, capsys):
    folder = tmp_path / "other"
    folder.mkdir()
    torch.save({"weights": torch.zeros(3)}, folder / "model.pt")
    err = _error(capsys, trained, folder)
    assert "no hidden-state dump files" in err and "aux_hidden_states" in err


def test_modelopt_layers_of_a_four_layer_target(trained, layout_prompts, tmp_path, capsys):
    """Model-Optimizer's writer (compute_hidden_states_hf.py) on the demo's 4-layer target: sorted({2, 2, 1})
    = two layers; the demo drafter reads three."""
    from eaglekit.analysis.acceptance.target import load_target_model

    model = load_target_model(trained.target("k2")).model
    folder = tmp_path / "modelopt"
    folder.mkdir()
    L = model.config.num_hidden_layers
    ids = torch.tensor([layout_prompts[0]])
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    layers = sorted({2, max(0, L // 2), max(1, L - 3)})
    torch.save({"input_ids": ids.squeeze(0), "hidden_states": out.hidden_states[-1].squeeze(0),
                "aux_hidden_states": torch.cat([out.hidden_states[i].squeeze(0) for i in layers], dim=-1),
                "conversation_id": "c0"}, folder / "c0.pt")
    err = _error(capsys, trained, folder)
    assert L == 4 and layers == [1, 2]
    assert "sorted({2, L//2, L-3})" in err and "[1, 2] (2 layers)" in err and "[1, 2, 3]" in err


def test_specforge_padded_batch_rows_read_like_unpadded_ones(trained, tmp_path, capsys, good):
    """SpecForge's writer saves each row of a padded batch: input_ids and loss_mask padded on the right to the
    batch's longest row, the hidden states cut to the sample's own length (gzip too)."""
    padded = dict(good)
    T = good["input_ids"].shape[0]
    padded["input_ids"] = torch.cat([good["input_ids"], torch.zeros(7, dtype=good["input_ids"].dtype)])
    padded["loss_mask"] = torch.cat([good["loss_mask"], torch.zeros(7, dtype=good["loss_mask"].dtype)])
    plain = _dump(tmp_path / "plain", good)
    folder = tmp_path / "padded" / "rows_0-2000"
    folder.mkdir(parents=True)
    buf = tmp_path / "row.ckpt"
    torch.save(padded, buf)
    (folder / "data_0.ckpt.gz").write_bytes(gzip.compress(buf.read_bytes()))
    a = _run(capsys, trained, plain, "--json")
    b = _run(capsys, trained, tmp_path / "padded", "--json")
    assert a[0] == b[0] == 0, (a, b)
    ja, jb = json.loads(a[1]), json.loads(b[1])
    assert padded["input_ids"].shape[0] == T + 7
    for key in ("accept_length", "per_step_acceptance", "generated_tokens", "cycles"):
        assert ja[key] == jb[key]
    assert jb["dump"]["coverage"] == 1.0


def _modelopt_2026(model, ids, lids, mask):
    """Model-Optimizer's compute_hidden_states_hf.py since April 2026 (NVIDIA/Model-Optimizer 1ec931c2c), its save
    code: aux = hidden_states[lid + 1] for the 0-based layer ids --aux-layers resolved, hidden_states[-1], and
    the loss_mask of tokenize_with_loss_mask (long, [T])."""
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    hidden_states = out.hidden_states
    return {"input_ids": ids.squeeze(0).cpu(),
            "hidden_states": hidden_states[-1].squeeze(0).cpu(),
            "aux_hidden_states": torch.cat([hidden_states[lid + 1].squeeze(0).cpu() for lid in lids], dim=-1),
            "loss_mask": mask,
            "conversation_id": "c0"}


def test_modelopt_2026_layout_is_read_and_labelled(trained, layout_prompts, tmp_path, capsys):
    """The 2026 writer stores a loss_mask and picks its layers through modelopt (default_eagle_aux_layer_ids:
    sorted({1, L//2 - 1, L - 4}), 0-based): read, its mask used, and the version named; with the default layers a
    4-layer target gives two, refused with that rule."""
    from eaglekit.analysis.acceptance.target import load_target_model

    model = load_target_model(trained.target("k2")).model
    L = model.config.num_hidden_layers
    ids = torch.tensor([layout_prompts[0]])
    T = ids.shape[1]
    mask = torch.zeros(T, dtype=torch.long)
    mask[5:] = 1                                     # --answer-only-loss: the assistant tokens
    explicit = tmp_path / "explicit"                 # --aux-layers 0,1,2: the layers the demo drafter reads
    explicit.mkdir()
    torch.save(_modelopt_2026(model, ids, [0, 1, 2], mask), explicit / "c0.pt")
    dump = open_training_dump(explicit)
    assert dump.format == "modelopt" and dump.version == "2026" and dump.has_loss_mask
    code, out, err = _run(capsys, trained, explicit, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert "since April 2026" in res["dump"]["writer"] and res["dump"]["assistant_tokens_from"] == "loss_mask"
    assert res["dump"]["assistant_tokens"] == T - 5 and res["accept_length"] > 1
    assert not any("store no loss mask" in n for n in res["notes"])
    default = tmp_path / "default"
    default.mkdir()
    lids = sorted({1, max(0, L // 2 - 1), max(0, L - 4)})
    torch.save(_modelopt_2026(model, ids, lids, mask), default / "c0.pt")
    err = _error(capsys, trained, default)
    assert lids == [0, 1] and "2026 layout" in err and "default_eagle_aux_layer_ids" in err
    assert "[1, 2] (2 layers)" in err and "[1, 2, 3]" in err


def test_modelopt_2025_layout_is_labelled(trained, written):
    dump = open_training_dump(written["modelopt"])
    assert dump.version == "2025" and not dump.has_loss_mask and "no loss_mask" in dump.writer
