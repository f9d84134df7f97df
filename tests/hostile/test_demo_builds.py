"""Hostile demo builds (issue 40): a build deletes only what it can prove it made (its marker inside), never a
user's folder whose name looks like a leftover; a lock path planted as a link or a FIFO is refused, never
followed or opened for writing; a build killed with SIGKILL, at a point reached deterministically, leaves the
complete folder (and the workspace's trained world) that was there before it; ``dump-hidden --out`` and
``demo DIR`` on a dangling link or a link loop are one line, exit 2, and nothing is written through the link."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
from pathlib import Path

import pytest
from bounded_cli import run_limited

import eaglekit.demo.build as build
from eaglekit.core.errors import InputError
from eaglekit.demo.build import MARKER, SIGNATURE, built_once, stamp_of


def _plant(folder: Path, text: str = "my notes") -> Path:
    folder.mkdir()
    (folder / "notes.txt").write_text(text)
    return folder


def _crash(folder: Path) -> None:
    (folder / "half").write_text("half")
    os.kill(os.getpid(), signal.SIGKILL)


def _run_and_die(target, *args) -> int:
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=target, args=args)
    p.start()
    p.join(timeout=300)
    return p.exitcode


def test_look_alike_folders_beside_a_build_survive_it(tmp_path):
    path = tmp_path / "ws1"
    mine = [_plant(tmp_path / ".ws1.old-notes"), _plant(tmp_path / ".ws1.building-draft"),
            _plant(tmp_path / ".ws1.old-abc123")]
    forged = _plant(tmp_path / ".ws1.building-forged")             # a marker, but not eaglekit's content
    (forged / MARKER).write_text("not eaglekit's signature\nws1\n")
    other = _plant(tmp_path / ".ws1.building-other")               # eaglekit's signature for another folder
    (other / MARKER).write_text(f"{SIGNATURE}\nws2\n")
    linked = tmp_path / ".ws1.building-link"                        # a link to a user's folder, marker and all
    target = _plant(tmp_path / "elsewhere")
    (target / MARKER).write_text(f"{SIGNATURE}\nws1\n")
    linked.symlink_to(target, target_is_directory=True)

    assert _run_and_die(built_once, path, 1, _crash) == -signal.SIGKILL   # leaves a real, marked leftover
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".ws1.building-") and (p / "half").exists()
                 and not p.is_symlink()]
    assert len(leftovers) == 1 and (leftovers[0] / MARKER).read_text().startswith(SIGNATURE)

    built_once(path, 1, lambda f: (f / "ok").write_text("ok"))
    built_once(path, 2, lambda f: (f / "ok").write_text("v2"))   # a rebuild: the old folder moved aside, removed
    assert (path / "ok").read_text() == "v2" and not (path / MARKER).exists()
    assert not leftovers[0].exists()                               # eaglekit's own leftover: swept
    for folder in mine + [forged, other, target]:
        assert (folder / "notes.txt").read_text() == "my notes", folder
    assert linked.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".ws1.lock", "ws1", "elsewhere", ".ws1.building-link"] + [f.name for f in mine + [forged, other]])


def test_a_demo_workspace_build_keeps_look_alike_folders(tmp_path, monkeypatch):
    """Through `eaglekit demo`'s own entry point (the workspace's build itself stubbed to a refusal after the
    sweep ran): the user's `.ws7.building-draft` and `.ws7.old-notes` are still there."""
    import eaglekit.demo.world as world

    mine = [_plant(tmp_path / ".ws7.building-draft"), _plant(tmp_path / ".ws7.old-notes")]
    swept = []
    real = build.sweep
    monkeypatch.setattr(build, "sweep", lambda p: (swept.append(Path(p).name), real(p)))

    def stop(*args, **kwargs):
        raise InputError("stopped after the sweep")

    monkeypatch.setattr(world, "_build_into", stop)
    with pytest.raises(InputError, match="stopped after the sweep"):
        world.build_demo(tmp_path / "ws7")
    assert "ws7" in swept
    for folder in mine:
        assert (folder / "notes.txt").read_text() == "my notes"


@pytest.mark.parametrize("planted", ["link-to-new-file", "link-to-fifo", "fifo", "dangling-link-loop"])
def test_a_planted_lock_is_refused_not_followed(tmp_path, planted):
    outside = tmp_path / "outside"
    outside.mkdir()
    lock = tmp_path / ".w.lock"
    if planted == "link-to-new-file":
        lock.symlink_to(outside / "created-through-the-link")
    elif planted == "link-to-fifo":
        os.mkfifo(outside / "fifo")
        lock.symlink_to(outside / "fifo")
    elif planted == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(lock)
    with pytest.raises(InputError, match=r"\.w\.lock (is a symbolic link|is not a regular file)"):
        built_once(tmp_path / "w", 1, lambda f: (f / "x").write_text("x"))
    assert sorted(p.name for p in outside.iterdir()) == ([] if planted == "link-to-new-file" else
                                                          [] if planted != "link-to-fifo" else ["fifo"])
    assert not (tmp_path / "w").exists()


def _die_between_renames(path: Path) -> None:
    real = os.rename
    calls = []

    def rename(src, dst):
        real(src, dst)
        calls.append(dst)
        if Path(dst).name == path.name and ".w.old-" in str(dst):   # the old folder moved aside, the new not in
            os.kill(os.getpid(), signal.SIGKILL)

    build.os.rename = rename
    built_once(path, 2, lambda f: (f / "v").write_text("2"))


def test_a_build_killed_between_its_renames_leaves_the_earlier_folder(tmp_path):
    path = tmp_path / "w"
    built_once(path, 1, lambda f: (f / "v").write_text("1"))
    first = stamp_of(path)
    assert _run_and_die(_die_between_renames, path) == -signal.SIGKILL
    assert not path.exists()                                       # killed with the old folder aside
    calls = []
    built_once(path, 1, lambda f: calls.append(f))                 # the earlier build comes back, reused
    assert calls == [] and stamp_of(path) == first and (path / "v").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".w.lock", "w"]


def _kill_workspace_rebuild(root: Path) -> None:
    import eaglekit.demo.world as world

    world.DEMO_VERSION += 100

    def killed(folder: Path, **kwargs) -> None:
        assert (folder / "trained" / "manifest.json").is_file()    # the trained world is in the new folder...
        os.kill(os.getpid(), signal.SIGKILL)                      # ...when the build dies

    world._build_into = killed
    world.build_demo(root)


def test_a_killed_workspace_build_keeps_the_trained_world(trained, tmp_path, monkeypatch):
    import eaglekit.demo.trained as trained_mod
    import eaglekit.demo.world as world

    ws = world.build_demo(tmp_path / "ws", trained=trained.root)
    (ws.root / "trained").unlink()                                  # a trained world of its own, as `demo DIR` makes
    shutil.copytree(trained.root, ws.root / "trained", copy_function=os.link)
    before = {p.relative_to(ws.root / "trained"): p.stat().st_ino for p in (ws.root / "trained").rglob("*")}
    stamp = stamp_of(ws.root / "trained")

    assert _run_and_die(_kill_workspace_rebuild, ws.root) == -signal.SIGKILL
    kept = ws.root / "trained"
    assert not kept.is_symlink() and stamp_of(kept) == stamp
    assert {p.relative_to(kept): p.stat().st_ino for p in kept.rglob("*")} == before   # every file, untouched

    def no_training(*args, **kwargs):
        raise AssertionError("the trained world was trained again")

    monkeypatch.setattr(trained_mod, "_build", no_training)
    monkeypatch.setattr(world, "DEMO_VERSION", world.DEMO_VERSION + 100)
    again = world.build_demo(ws.root)                               # rebuilt whole, the trained world reused
    assert stamp_of(again.root)["version"] == {"demo": world.DEMO_VERSION}
    assert stamp_of(again.root / "trained") == stamp
    assert json.loads((again.root / "manifest.json").read_text())["trained"]["build"] == trained.manifest["build"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ws.lock", "ws"]   # the killed build's folder swept


@pytest.mark.parametrize("kind", ["dangling", "loop", "to-empty-folder"])
def test_dump_hidden_onto_a_link_is_one_line(tmp_path, kind):
    out = tmp_path / "out"
    if kind == "dangling":
        out.symlink_to(tmp_path / "nowhere" )
    elif kind == "loop":
        out.symlink_to(out)
    else:
        (tmp_path / "empty").mkdir()
        out.symlink_to(tmp_path / "empty", target_is_directory=True)
    (tmp_path / "p.jsonl").write_text('{"prompt": "hi"}\n')
    r = run_limited("dump-hidden", "--target", str(tmp_path / "no-target"), "--prompts", str(tmp_path / "p.jsonl"),
                    "--out", str(out), tmp=tmp_path, limit_s=120)
    assert r.rc == 2 and len(r.error_lines) == 1 and "Traceback" not in r.stderr, r
    assert "symbolic link" in r.stderr
    assert not (tmp_path / "nowhere").exists() and out.is_symlink()
    if kind == "to-empty-folder":
        assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_demo_on_a_broken_link_is_one_line(tmp_path, kind):
    ws = tmp_path / "ws"
    ws.symlink_to(ws if kind == "loop" else tmp_path / "nowhere", target_is_directory=True)
    r = run_limited("demo", str(ws), tmp=tmp_path, limit_s=120)
    assert r.rc == 2 and len(r.error_lines) == 1 and "Traceback" not in r.stderr, r
    assert "symbolic link that leads nowhere" in r.stderr
    assert not (tmp_path / "nowhere").exists() and ws.is_symlink()
