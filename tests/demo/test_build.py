"""Demo folders are built once and whole, however many processes build them at the same time."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from eaglekit.core.errors import InputError
from eaglekit.demo.build import STAMP, built_once, stamp_of

FILES = 40  # files a build writes, one at a time: a reader of a half-built folder would see fewer


def _slow_build(folder: Path, log: Path, arrived) -> None:
    """A build that cannot finish before both processes have asked for the folder."""
    for event in arrived:
        event.wait()
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\n")
    (folder / "templates").mkdir(parents=True, exist_ok=True)   # the folder the token demo tripped over
    for i in range(FILES):
        (folder / "templates" / f"{i}.txt").write_text(str(i))
    (folder / "manifest.json").write_text(json.dumps({"files": FILES}))


def _builder(path: Path, log: Path, arrived, mine, start, out) -> None:
    start.wait()                      # both processes start together
    mine.set()                        # about to ask for the folder
    built_once(path, 1, lambda folder: _slow_build(folder, log, arrived))
    names = sorted(p.name for p in (path / "templates").iterdir())
    out.put((stamp_of(path), len(names), json.loads((path / "manifest.json").read_text())))


def test_two_processes_build_one_folder_at_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    path, log = tmp_path / "world", tmp_path / "builds.log"
    start, out = ctx.Barrier(2), ctx.Queue()
    arrived = [ctx.Event(), ctx.Event()]
    procs = [ctx.Process(target=_builder, args=(path, log, arrived, arrived[i], start, out)) for i in range(2)]
    for p in procs:
        p.start()
    seen = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(log.read_text().split()) == 1                       # one build; the other process waited for it
    assert seen[0] == seen[1] and seen[0][0]["version"] == 1        # the same complete folder, the same build
    assert seen[0][1:] == (FILES, {"files": FILES})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".world.lock", "builds.log", "world"]  # no temp left


def _crashing_build(folder: Path) -> None:
    (folder / "templates").mkdir()
    (folder / "templates" / "half.txt").write_text("half")
    os.kill(os.getpid(), signal.SIGKILL)   # the process dies mid-build, holding the lock


def test_a_crashed_build_blocks_nothing(tmp_path):
    ctx = multiprocessing.get_context("fork")
    path = tmp_path / "world"
    crashed = ctx.Process(target=built_once, args=(path, 1, _crashing_build))
    crashed.start()
    crashed.join(timeout=300)
    assert crashed.exitcode == -signal.SIGKILL
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert not path.exists() and any(n.startswith(".world.building-") for n in leftovers) and ".world.lock" in leftovers

    built_once(path, 1, lambda folder: (folder / "ok").write_text("ok"))
    assert (path / "ok").read_text() == "ok" and stamp_of(path)["version"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".world.lock", "world"]   # the half-built sibling swept


def test_a_failed_build_leaves_nothing_and_raises(tmp_path):
    def broken(folder: Path) -> None:
        (folder / "half").write_text("x")
        raise RuntimeError("out of disk")

    with pytest.raises(RuntimeError):
        built_once(tmp_path / "w", 1, broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".w.lock"]


def test_versions_rebuild_and_foreign_folders_are_refused(tmp_path):
    path = tmp_path / "w"
    built_once(path, 1, lambda f: (f / "v").write_text("1"))
    first = stamp_of(path)
    built_once(path, 1, lambda f: (f / "v").write_text("again"))        # current: kept
    assert (path / "v").read_text() == "1" and stamp_of(path) == first
    built_once(path, 2, lambda f: (f / "v").write_text("2"))            # another version: rebuilt whole
    assert (path / "v").read_text() == "2" and stamp_of(path)["version"] == 2
    built_once(path, 2, lambda f: (f / "v").write_text("forced"), force=True)
    assert (path / "v").read_text() == "forced"

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep me")
    with pytest.raises(InputError, match="is not an eaglekit demo folder"):
        built_once(foreign, 1, lambda f: None)
    assert (foreign / "thesis.tex").read_text() == "keep me"
    older = tmp_path / "older"       # an older eaglekit's build (no stamp) that the builder knows as its own
    older.mkdir()
    (older / "manifest.json").write_text("{}")
    built_once(older, 1, lambda f: (f / "new").write_text("n"), ours=lambda f: (f / "manifest.json").is_file())
    assert sorted(p.name for p in older.iterdir()) == [STAMP, "new"]


BUILD_TOKENS = """
import json, sys
from transformers.utils import logging as hf_logging
from eaglekit.demo.build import stamp_of
from eaglekit.demo.tokens import build_token_demo
from eaglekit.demo.trained import build_trained_demo

hf_logging.enable_progress_bar()          # a user's setting: eaglekit's own loads must still show no bar
world = build_token_demo(build_trained_demo(sys.argv[1]), path=sys.argv[2], progress=False)
files = sorted(str(p.relative_to(world.root)) for p in world.root.rglob("*"))
print(json.dumps({"stamp": stamp_of(world.root), "files": files, "markers": world.manifest["markers"]}))
"""


def test_two_processes_build_the_token_demo_at_once(trained, tmp_path):
    """What failed a fresh clone's CI: pytest and notebook 09's kernel building the token demo together
    (FileExistsError on templates/). Two real processes, started together, build one token demo."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-c", BUILD_TOKENS, str(trained.root), str(tmp_path / "tokens")]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in results]
    seen = [json.loads(out.strip().splitlines()[-1]) for out, _ in results]
    assert seen[0] == seen[1]                                         # one build, seen whole by both
    assert {"manifest.json", "templates/k25.jinja", "templates/k25-think.jinja", STAMP} <= set(seen[0]["files"])
    assert not any("Loading weights" in err for _, err in results)     # transformers' bar stays out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tokens.lock", "tokens"]


def test_a_built_folder_has_the_usual_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        built_once(tmp_path / "w", 1, lambda f: (f / "x").write_text("x"))
    finally:
        os.umask(mask)
    assert (tmp_path / "w").stat().st_mode & 0o777 == 0o755       # not mkdtemp's private 0700


def test_a_workspace_rebuilt_keeps_its_trained_world_and_a_failed_rebuild_loses_nothing(trained, tmp_path, monkeypatch):
    import eaglekit.demo.world as world

    ws = world.build_demo(tmp_path / "ws", trained=trained.root)
    first = stamp_of(ws.root)
    monkeypatch.setattr(world, "DEMO_VERSION", world.DEMO_VERSION + 100)

    def fails(*args, **kwargs):
        raise RuntimeError("disk full")

    with monkeypatch.context() as m:
        m.setattr(world, "_build_into", fails)
        with pytest.raises(RuntimeError):
            world.build_demo(ws.root)
    assert stamp_of(ws.root) == first and (ws.root / "trained").resolve() == trained.root.resolve()
    again = world.build_demo(ws.root)                       # the new version: rebuilt whole, trained/ kept
    assert stamp_of(again.root)["version"] == {"demo": world.DEMO_VERSION}
    assert (again.root / "trained").is_symlink() and again.trained.manifest["build"] == trained.manifest["build"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ws.lock", "ws"]


def test_a_folder_holding_only_a_trained_world_is_taken_for_the_workspace(tmp_path):
    """A notebook run on the default DEMO before `eaglekit demo` leaves DEMO/trained (stamped) and its lock: the
    workspace build takes that folder (and keeps the world); anything else beside it keeps the folder foreign."""
    import json

    from eaglekit.demo.build import STAMP
    from eaglekit.demo.world import _only_a_trained_world

    folder = tmp_path / "demo"
    (folder / "trained").mkdir(parents=True)
    (folder / ".trained.lock").write_text("")
    assert not _only_a_trained_world(folder)            # no stamp: not a complete eaglekit build
    (folder / "trained" / STAMP).write_text(json.dumps({"version": {"trained": 6}}))
    assert _only_a_trained_world(folder)
    (folder / "notes.txt").write_text("mine")
    assert not _only_a_trained_world(folder)
