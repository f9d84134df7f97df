"""Output files and template diffs (issue 33): a link planted at the old predictable ``.map.pt.partial``
name, a destination that is a link, an --html path that is a link, a writer that fails half way; two
templates adding a 400,000-character word, two 1 MiB templates; NaN and Inf FP8 scales in drift."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from bounded_cli import REPO_ROOT

from eaglekit.analysis.acceptance.coverage import write_vocab_map
from eaglekit.cli import main
from eaglekit.core.errors import InputError
from eaglekit.core.tokens.textdiff import added_text, unified_lines
from eaglekit.io.write import write_atomic

D2T, T2D = np.zeros(4, np.int64), np.array([True] * 4 + [False] * 6)


@pytest.mark.parametrize("name", ["map.pt", "map.safetensors"])
def test_a_link_at_the_old_partial_name_is_never_followed(tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / f".{name}.partial").symlink_to(victim)
    out = write_vocab_map(tmp_path / name, D2T, T2D)
    assert victim.read_text() == "precious"
    assert out.is_file() and not out.is_symlink() and out.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f".{name}.partial", name, "victim.txt"])


def test_a_destination_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "page.html"
    link.symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        write_atomic(link, "<html>")
    assert victim.read_text() == "precious" and link.is_symlink()


def test_a_dangling_link_is_refused_too(tmp_path):
    link = tmp_path / "out.pt"
    link.symlink_to(tmp_path / "elsewhere" / "x")
    with pytest.raises(InputError):
        write_vocab_map(link, D2T, T2D)
    assert not (tmp_path / "elsewhere").exists()


def test_a_writer_that_fails_leaves_nothing_behind_and_the_old_file_whole(tmp_path):
    out = tmp_path / "page.html"
    out.write_text("old")

    def half(f):
        f.write(b"new and")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        write_atomic(out, half)
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_new_file_gets_the_usual_permissions_and_whole_contents(tmp_path):
    out = write_atomic(tmp_path / "a.txt", "hello")
    mask = os.umask(0)
    os.umask(mask)
    assert out.read_text() == "hello" and (out.stat().st_mode & 0o777) == (0o666 & ~mask)


@pytest.mark.parametrize("command", ["drift", "similarity"])
def test_an_html_path_that_is_a_link_is_refused_before_any_work(tmp_path, capsys, command):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out.html"
    link.symlink_to(victim)
    code = main([command, str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(link)])
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link" in err and err.count("\n") == 1, err
    assert victim.read_text() == "precious"


def test_a_page_written_through_write_page_refuses_a_link(tmp_path):
    from eaglekit.view.page import write_page

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "p.html").symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        write_page("<html></html>", tmp_path / "p.html")
    assert victim.read_text() == "precious"


# -- template diffs -----------------------------------------------------------------------------------------
def _bounded(code: str, limit_s: float = 60) -> str:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=limit_s, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_two_renderings_adding_a_400k_character_word_are_compared_in_bounded_time():
    out = _bounded("""
        from eaglekit.analysis.acceptance.templates import _added_text
        word = "x" * 400_000
        a, b = _added_text("<|im_start|>user " + word + " hi", "<|im_start|>user " + word + "y hi<think>")
        print(len(a), len(b), max(len(t) for t in b))
    """, limit_s=60)
    n_a, n_b, longest = map(int, out.split())
    assert n_b >= 1 and longest < 400


def test_a_huge_added_word_is_shown_cut():
    a, b = added_text("start ", "start " + "z" * 400_000 + " end")
    assert len(b) == 1 and b[0].endswith("characters)") and len(b[0]) < 300


def test_two_one_mib_templates_stream_their_diff_and_stop_at_200_lines():
    out = _bounded("""
        from eaglekit.core.tokens.diff import SHOWN_LINES, _template_lines
        a = "\\n".join(f"{{% set x{i} = {i} %}}" for i in range(60_000))
        b = "\\n".join(f"{{% set y{i} = {i} %}}" for i in range(60_000))
        lines = _template_lines(a, b, "default")
        print(len(a) > 1 << 20, len(lines), lines[-1])
    """, limit_s=60)
    big, n, *last = out.split()
    assert big == "True" and int(n) == 201 and " ".join(last).endswith("more diff lines")


def test_a_small_template_diff_is_difflibs_own():
    import difflib

    a = "\n".join(["{% for m in messages %}", "{{ m.content }}", "{% endfor %}", "x"])
    b = "\n".join(["{% for m in messages %}", "<think>", "{{ m.content }}", "{% endfor %}", "y"])
    want = tuple(difflib.unified_diff(a.splitlines(), b.splitlines(), fromfile="A t", tofile="B t", lineterm="", n=1))
    assert unified_lines(a, b, fromfile="A t", tofile="B t", limit=200) == want


def test_a_one_mib_line_is_shown_cut():
    lines = unified_lines("a\n" + "x" * (1 << 20), "a\n" + "y" * (1 << 20), fromfile="A", tofile="B", limit=200)
    assert max(len(ln) for ln in lines) < 1100


# -- drift: scales that are not numbers ------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_fp8_scales_are_refused_not_compared(tmp_path, capsys, bad):
    import json

    from safetensors.torch import save_file

    w = torch.randn(256, 128, generator=torch.Generator().manual_seed(0)).to(torch.float8_e4m3fn)
    for name, scales in (("a", [1.0, 1.0]), ("b", [bad, 1.0])):
        folder = Path(tmp_path / name)
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": "llama", "quantization_config": {
            "quant_method": "fp8", "weight_block_size": [128, 128]}}))
        save_file({"model.layers.0.mlp.up_proj.weight": w,
                   "model.layers.0.mlp.up_proj.weight_scale_inv": torch.tensor(scales).reshape(2, 1)},
                  str(folder / "model.safetensors"))
    code = main(["drift", str(tmp_path / "a"), str(tmp_path / "b"), "--full", "--scheduler", "inline"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "NaN or Inf scale" in err and "weight_scale_inv" in err, err


def test_report_assets_refuse_a_planted_link(tmp_path):
    from eaglekit.view.report import copy_assets

    victim = tmp_path / "victim.js"
    victim.write_text("precious")
    (tmp_path / "out" / "assets").mkdir(parents=True)
    (tmp_path / "out" / "assets" / "embed.js").symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        copy_assets(tmp_path / "out")
    assert victim.read_text() == "precious"
