"""eaglekit.lab: the JupyterLab command binds loopback with a token and calls nobody; the kernels get the
demo as a relative path. The live session itself is driven in test_browser.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from eaglekit.cli import main
from eaglekit.cli.lab import ANNOUNCEMENTS, ROOT, lab_command, lab_config_dir, lab_env, lab_url, working_copy


def test_command_serves_loopback_without_a_token_on_it_and_no_browser(tmp_path):
    command = lab_command(root_dir=tmp_path, port=8899)
    assert command[:3] == [sys.executable, "-m", "jupyterlab"]
    assert {"--no-browser", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=8899", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={tmp_path.resolve()}"} <= set(command)
    assert not any("token" in arg.lower() for arg in command)  # argv is readable by every local user
    # no update check, no news feed, no PyPI queries from the extension manager
    assert {"--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url=None",
            "--LabApp.extension_manager=readonly"} <= set(command)


def test_env_gives_the_demo_relative_to_the_notebooks_and_this_checkout(tmp_path):
    (tmp_path / "nbs").mkdir()
    env = lab_env(demo=tmp_path / "build" / "demo", root_dir=tmp_path / "nbs", base={"PYTHONPATH": "/x"})
    assert env["EAGLEKIT_DEMO"] == os.path.join("..", "build", "demo")
    assert env["PYTHONPATH"] == os.pathsep.join([str(ROOT), "/x"])
    assert "PYTHONPATH" in lab_env(demo="d", root_dir=".", base={})


def test_url_opens_lab_or_a_notebook():
    assert lab_url(8888, "abc") == "http://127.0.0.1:8888/lab?token=abc"
    assert lab_url(9, "t", path="05_accept_length.ipynb") == "http://127.0.0.1:9/lab/tree/05_accept_length.ipynb?token=t"


def test_main_says_in_one_line_when_the_demo_folder_is_not_a_demo(tmp_path, capsys):
    stray = Path(tmp_path / "stray")
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    assert main(["lab", "--demo", str(stray), "--port", "8899"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eaglekit lab: error: ") and "not an eaglekit demo workspace" in err and err.count("\n") == 1


def test_a_taken_port_fails_before_any_url_is_printed(tmp_path, capsys):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["lab", "--demo", str(tmp_path / "demo"), "--port", str(port)])
    out, err = capsys.readouterr()
    assert code == 2 and "token=" not in out and out == ""
    assert f"port {port} on 127.0.0.1 is already in use" in err and f"make lab PORT={port + 1}" in err
    assert not (tmp_path / "demo").exists()  # nothing built either


def _digests(folder: Path) -> dict[str, str]:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def notary(tmp_path, monkeypatch):
    """Jupyter's data folder (the notary's secret and signatures) in ``tmp_path``, not the user's."""
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))


def test_the_lab_works_on_a_copy_and_never_writes_the_checkout(tmp_path, notary):
    """Issue 24: one lab session saved outputs into the committed notebooks and jupytext version lines into
    their twins (git status dirty)."""
    import json

    committed = _digests(ROOT / "notebooks")
    work = tmp_path / "lab"
    said = working_copy(ROOT / "notebooks", work)
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert said == [f"copied {n}" for n in names]
    assert sorted(p.name for p in work.glob("*.ipynb")) == names and not list(work.glob("*.py"))
    copy = json.loads((work / names[0]).read_text())
    assert "jupytext" not in copy["metadata"]  # unpaired: saving the copy writes no twin
    # the session saves outputs into a copy: kept on the next start, the checkout untouched
    copy["cells"][0]["metadata"]["edited"] = True
    (work / names[0]).write_text(json.dumps(copy))
    assert working_copy(ROOT / "notebooks", work) == [f"kept your edited {names[0]} (delete it to get the committed one)"]
    assert _digests(ROOT / "notebooks") == committed


def test_an_unedited_copy_follows_the_committed_notebook(tmp_path, notary):
    import json
    import shutil

    src, work = tmp_path / "nbs", tmp_path / "lab"
    src.mkdir()
    shutil.copy(ROOT / "notebooks" / "05_accept_length.ipynb", src)
    assert working_copy(src, work) == ["copied 05_accept_length.ipynb"]
    assert working_copy(src, work) == []  # up to date: nothing written
    nb = json.loads((src / "05_accept_length.ipynb").read_text())
    nb["cells"][0]["source"] = ["# changed upstream"]
    (src / "05_accept_length.ipynb").write_text(json.dumps(nb))
    assert working_copy(src, work) == ["copied 05_accept_length.ipynb"]
    assert json.loads((work / "05_accept_length.ipynb").read_text())["cells"][0]["source"] == ["# changed upstream"]


def test_a_copy_opens_trusted_and_as_jupyterlab_would_save_it(tmp_path, monkeypatch):
    """Issue 49: notebook 00 opened in the lab "not trusted" and with unsaved changes: the copy was unsigned, and
    the kernel's language_info, missing from it, was written in when the kernel started."""
    import io

    import nbformat
    from ipykernel.ipkernel import IPythonKernel
    from nbformat.sign import NotebookNotary

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    committed = nbformat.read(ROOT / "notebooks" / "00_investigation.ipynb", as_version=4)
    assert not NotebookNotary().check_signature(committed)  # unsigned, a notebook opens "not trusted"
    working_copy(ROOT / "notebooks", tmp_path / "lab")
    copies = sorted((tmp_path / "lab").glob("*.ipynb"))
    assert [p.name for p in copies] == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    for path in copies:
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
        saved = io.StringIO()
        nbformat.write(nb, saved)
        assert saved.getvalue() == text, path.name  # saving it unchanged rewrites nothing
        assert nb.metadata.language_info == IPythonKernel.language_info, path.name  # what the kernel would write
        assert NotebookNotary().check_signature(nb), path.name
    # a copy written before (by an older eaglekit, or under another Jupyter data folder) is signed on the next start
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "other-data"))
    assert working_copy(ROOT / "notebooks", tmp_path / "lab") == []
    assert NotebookNotary().check_signature(nbformat.read(copies[0], as_version=4))


def test_no_news_question_jupyterlab_reads_the_page_config(tmp_path):
    """The "Would you like to get notified about official Jupyter news?" prompt: its plugin is disabled in a page
    config that JupyterLab's own reader finds on JUPYTER_CONFIG_PATH."""
    import json
    import subprocess

    folder = lab_config_dir(tmp_path)
    env = lab_env(demo=tmp_path / "demo", root_dir=tmp_path, config_dir=folder, base={"JUPYTER_CONFIG_PATH": "/mine"})
    assert env["JUPYTER_CONFIG_PATH"] == os.pathsep.join([str(folder.resolve()), "/mine"])  # the user's kept
    code = ("import json; from jupyterlab_server.config import get_page_config; "
            "print(json.dumps(get_page_config([], None)['disabledExtensions']))")
    env = {**os.environ, "JUPYTER_CONFIG_PATH": env["JUPYTER_CONFIG_PATH"], "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert ANNOUNCEMENTS in json.loads(out.stdout)


SLOW_SERVER = """
import os, sys, pathlib
go, runtime = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
fd = os.open(go, os.O_RDONLY)          # a FIFO: blocks until the test opens it for writing, however long that takes
os.read(fd, 1)
(runtime / f"jpserver-{os.getpid()}.json").write_text("{}")
sys.stdin.read()                       # serves until the test closes its stdin
"""


def test_the_lab_waits_for_a_slow_server_as_long_as_it_takes(tmp_path):
    """A start slowed at will (the fake server writes its jpserver-<pid>.json only when the test says go): the
    wait returns after that, not before, and a server that exits first is one line."""
    import os
    import subprocess
    import sys
    import threading

    from eaglekit.cli.lab import wait_until_serving
    from eaglekit.core.errors import InputError

    go = tmp_path / "go"
    os.mkfifo(go)
    server = subprocess.Popen([sys.executable, "-c", SLOW_SERVER, str(go), str(tmp_path)], stdin=subprocess.PIPE)
    try:
        done = threading.Event()
        waiter = threading.Thread(target=lambda: (wait_until_serving(server, tmp_path, poll_s=0.01), done.set()))
        waiter.start()
        assert not done.is_set() and not (tmp_path / f"jpserver-{server.pid}.json").exists()
        with open(go, "w") as f:                                     # now the server may come up
            f.write("x")
        waiter.join(600)
        assert done.is_set() and (tmp_path / f"jpserver-{server.pid}.json").exists()
    finally:
        server.stdin.close()
        server.wait(60)
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(InputError, match=r"JupyterLab exited \(code 3\) before it served"):
        wait_until_serving(dead, tmp_path, poll_s=0.01)
