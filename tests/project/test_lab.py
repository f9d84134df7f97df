"""eaglekit.lab: the JupyterLab command binds loopback with a token and calls nobody; the kernels get the
demo as a relative path. The live session itself is driven in test_browser.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from eaglekit.cli import main
from eaglekit.cli.lab import ROOT, lab_command, lab_env, lab_url


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
