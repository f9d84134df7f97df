"""The README and docs/ a newcomer follows: one throughput account, the system packages, how to run the
command, the demo Hub folder, PORT=, and no pointer outside the repository (items 1, 14, 15, 16)."""

from __future__ import annotations

import re
from pathlib import Path

from eaglekit.core.serving.account import Account

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOMAIN = ROOT / "docs" / "domain.md"


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_domain_notes_tell_the_same_account_as_the_library():
    """The account with its numbers moved from the README's first screen to docs/domain.md (issue 49)."""
    a = Account.seed()
    readme = _flat(DOMAIN.read_text(encoding="utf-8"))
    assert f"{a.cycle_ms:.1f} ms cycle (the {a.verify_ms:g} ms verify plus {a.steps} draft steps of {a.draft_ms:.2f} ms)" \
        in readme
    assert f"only above accept length {a.break_even:.2f}" in readme and f"said {a.verify_only_break_even:.2f}" in readme
    assert f"at most {a.steps + 1} tokens ({a.ceiling_tps:.0f} tok/s)" in readme
    (t150, _) = a.targets
    assert f"150 tok/s takes at least {t150.min_steps} steps" in readme
    (p32, _) = a.projections
    assert f"3.2 would give {p32.tokens_per_s:.0f} tok/s, {p32.speedup - 1:.0%} faster" in readme
    k25 = a.growing[0]  # the same targets with a verify that grows with k (K2.5's INT4 experts)
    assert f"{k25.verify_ms[2]:.1f} ms for k = 3 and {k25.verify_ms[4]:.1f} ms for k = 5" in readme
    assert k25.steps_for(150) is None and f"({max(k25.ceiling_tps(k) for k in range(1, 9)):.0f} tok/s at most)" in readme
    assert f"3.2 would give {k25.tokens_per_s(3.2, 3):.0f} tok/s, {1 - k25.tokens_per_s(3.2, 3) / a.baseline_tps:.0%} " \
           "slower" in readme
    # the other reading of the same verify: a cost per verify forward, not per verified token
    f = a.fork
    fwd = f.per_forward
    assert f"k = 3 verify is {fwd.verify_ms[2]:.1f} ms and 3.2 gives {fwd.tokens_per_s(3.2, 3):.0f} tok/s, " \
           f"{fwd.tokens_per_s(3.2, 3) / a.baseline_tps - 1:.0%} faster: GO" in readme
    assert f.rows()[0]["verdict"] == "TOO CLOSE TO CALL" and "TOO CLOSE TO CALL until one measurement" in readme
    assert f"(break-even {f.per_token.break_even(3):.2f} at k = 3)" in readme
    assert f"Per forward, break-even at k = 3 is {f.per_forward.break_even(3):.2f}" in readme
    assert "without CUDA graphs" in readme and "--verify-grows-for kimi-k25-int4 --tp 8" in readme


def test_domain_notes_hold_the_seed_figures_and_the_difference():
    text = _flat(DOMAIN.read_text(encoding="utf-8"))
    a = Account.seed()
    for figure in ("82-83 tok/s", "59-61 tok/s", "2 draft steps", "2.46", "**4.5**", "**6.0**", "3.2-3.5",
                   f"**{a.cycle_ms:.1f} ms**", f"**{a.draft_ms:.2f} ms**", f"**{a.break_even:.2f}**",
                   f"**k = {a.targets[0].min_steps}**", f"**k = {a.targets[1].min_steps}**",
                   f"**{a.projections[0].tokens_per_s:.0f} tok/s**"):
        assert figure in text, figure
    for section in ("## The vocabulary map", "## Checkpoint layout", "## Auxiliary hidden-state layer ids",
                    "## The throughput account"):
        assert section in text


def test_quick_start_states_system_packages_and_how_to_run_the_command():
    assert "apt-get install -y openssh-server chromium" in README
    assert ".venv/bin/eaglekit" in README and "source .venv/bin/activate" in README
    assert "make lab PORT=8890" in README and "PORT   ?= 8888" in (ROOT / "Makefile").read_text()
    assert "eaglekit serve-hub build/demo/hub" in README


def test_serve_hub_folder_named_in_the_readme_is_the_demo_hub(demo):
    assert demo.hub_root == demo.root / "hub"


def test_nothing_points_outside_the_repository():
    bad = re.compile(r"\.\./shared|" + "DOMAIN" + r"\.md")
    files = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("eaglekit/**/*.py"), *ROOT.glob("tests/*.py"),
             *ROOT.glob("notebooks/*.py"), *ROOT.glob("benchmarks/*")]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.is_file()
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if bad.search(line)]
    assert hits == []


def test_readme_and_pyproject_agree_on_python_and_say_how_torch_and_make_test_go():
    """Issue 24: README said 3.11+ while pyproject said 3.10; nothing said how long `make test` takes or how
    the CPU torch build is chosen."""
    import re
    import tomllib

    readme = (ROOT / "README.md").read_text()
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    low = re.fullmatch(r">=(\d+\.\d+)", requires).group(1)
    assert f"Python {low} or newer" in readme
    assert "`make test` takes" in readme and "minutes from a fresh clone" in readme
    assert 'TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"' in readme
    assert "$(TORCH_PIP_ARGS) torch==" in (ROOT / "Makefile").read_text()


def test_domain_notes_hold_both_readings_of_the_verify():
    text = _flat(DOMAIN.read_text(encoding="utf-8"))
    f = Account.seed().fork
    w, t = f.per_forward, f.per_token
    assert (f"the k = 3 verify takes {w.verify_ms[2]:.1f} ms and 3.2 gives **{w.tokens_per_s(3.2, 3):.0f} tok/s**, "
            f"{w.tokens_per_s(3.2, 3) / 82 - 1:.0%} faster (break-even {w.break_even(3):.2f} at k = 3, against "
            f"{t.break_even(3):.2f} per token)") in text
    assert "**TOO CLOSE TO CALL**" in text and f.rows()[0]["verdict"] == "TOO CLOSE TO CALL"


def test_readme_pictures_are_committed_and_small():
    """Issue 49: the first screen shows one picture of a rendered page (test_browser.py writes them with
    EAGLEKIT_SCREENSHOTS=1)."""
    pictures = re.findall(r"!\[[^\]]+\]\((docs/[^)]+\.png)\)", README)
    assert pictures[0] == "docs/report-plan.png" and README.index(pictures[0]) < README.index("## Try it on the demo")
    for picture in pictures:
        size = (ROOT / picture).stat().st_size
        assert 0 < size < 300_000, (picture, size)
