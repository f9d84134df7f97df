"""``make lab``: JupyterLab on a working copy of ``notebooks/`` with the demo workspace ready and widgets working.

``eaglekit lab --demo build/demo --port 8888`` builds the demo on first use, copies the committed notebooks
into ``build/lab/`` (:func:`working_copy`: outputs and autosaves land there, never in the checkout, and no
jupytext twin is paired there), then runs JupyterLab on that copy, bound to 127.0.0.1 with a fresh token,
and prints the URL to open (the only place the token is shown: Jupyter masks a token it did not generate)
once the server serves: :func:`wait_until_serving` waits for the server's ``jpserver-<pid>.json`` in a private
runtime folder, however slow the start.
The token never goes on a command line, which every local user can read in /proc/PID/cmdline: Jupyter
reads it from ``JUPYTER_TOKEN_FILE`` (jupyter_server's ``IdentityProvider``), a file only this user can
read, in a private folder removed when the server stops. The kernels see ``EAGLEKIT_DEMO`` (the demo, relative to the copy so outputs
hold no absolute path) and this checkout on ``PYTHONPATH``. Widgets need nothing more: ipywidgets'
JupyterLab extension, plotly's and anywidget's (for the calculator) ship inside the pip packages. The
server never calls home: no update check, no news feed, and no "Jupyter news" question (the announcements
plugin is disabled through a page config on ``JUPYTER_CONFIG_PATH``, beside the user's own configuration).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eaglekit.core.errors import InputError
from eaglekit.io.write import write_atomic
from eaglekit.cli.common import PORT


ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
WORKDIR = ROOT / "build" / "lab"
#: The JupyterLab plugin that asks "Would you like to get notified about official Jupyter news?"
#: (jupyterlab docs, user/announcements: "It can be disabled as any plugin").
ANNOUNCEMENTS = "@jupyterlab/apputils-extension:announcements"
_COPIED = ".eaglekit-copied.json"  # name -> sha256 of the copy as written: an unedited copy is refreshed


def working_copy(source: str | os.PathLike[str], into: str | os.PathLike[str]) -> list[str]:
    """Copy the notebooks of ``source`` into ``into`` for a lab session; returns what it did, one line each.

    A copy is written when missing, and rewritten when the committed notebook changed while the copy was
    left as written; a copy the user edited is kept (delete it to get the committed one back). The copies
    drop jupytext's pairing, so saving one writes no twin and nothing in the checkout changes. Each copy is in
    the form JupyterLab saves (:func:`lab_form`) and signed with Jupyter's notary, so it opens trusted and unchanged."""
    import hashlib
    import json

    import nbformat
    from nbformat.sign import NotebookNotary

    src, dst = Path(source), Path(into)
    dst.mkdir(parents=True, exist_ok=True)
    ledger_path = dst / _COPIED
    try:
        ledger = json.loads(ledger_path.read_text())
    except (OSError, ValueError):
        ledger = {}
    said = []
    notary = NotebookNotary()
    for nb in sorted(src.glob("*.ipynb")):
        node = lab_form(nb.read_text(encoding="utf-8"))
        text = nbformat.writes(node) + "\n"  # as jupyter_server saves it (nbformat.write)
        digest = hashlib.sha256(text.encode()).hexdigest()
        copy = dst / nb.name
        current = hashlib.sha256(copy.read_bytes()).hexdigest() if copy.exists() else None
        if current is not None and current not in (digest, ledger.get(nb.name)):  # the user's edits
            said.append(f"kept your edited {copy.name} (delete it to get the committed one)")
            continue
        if current != digest:
            write_atomic(copy, text, what="a lab notebook")
            ledger[nb.name] = digest
            said.append(f"copied {nb.name}")
        notary.sign(node)  # trusted: the checkout's own notebook, as committed
    write_atomic(ledger_path, json.dumps(ledger, indent=1) + "\n", what="the lab's ledger")
    return said


def lab_form(text: str):
    """A committed notebook (JSON ``text``) as JupyterLab holds it once opened, so that opening it changes nothing:
    jupytext's pairing dropped (no twin, no version lines), and the kernel's ``language_info`` filled in (JupyterLab
    writes it into a notebook that lacks it when the kernel starts, and the notebook opens with unsaved changes)."""
    import nbformat
    from ipykernel.ipkernel import IPythonKernel

    node = nbformat.reads(text, as_version=4)
    node.metadata.pop("jupytext", None)
    node.metadata.setdefault("language_info", nbformat.from_dict(IPythonKernel.language_info))
    return node


def lab_config_dir(into: str | os.PathLike[str]) -> Path:
    """A Jupyter config folder for ``JUPYTER_CONFIG_PATH`` whose page config disables the news question."""
    import json

    folder = Path(into) / ".jupyter-config"
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "labconfig" / "page_config.json",
                 json.dumps({"disabledExtensions": {ANNOUNCEMENTS: True}}, indent=1) + "\n", what="the lab's page config")
    return folder


def lab_url(port: int, token: str, *, path: str | None = None, host: str = "127.0.0.1") -> str:
    """The URL that opens JupyterLab (on ``path``, a notebook relative to the root folder, if given)."""
    where = f"lab/tree/{path}" if path else "lab"
    return f"http://{host}:{port}/{where}?token={token}"


def lab_command(*, root_dir: str | os.PathLike[str], port: int, host: str = "127.0.0.1") -> list[str]:
    """The command that serves JupyterLab on ``host:port`` over ``root_dir``, no browser. It holds no token:
    the server reads it from the file :func:`lab_env` names."""
    return [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        f"--ServerApp.ip={host}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # a busy port is an error, not a silently different URL
        f"--ServerApp.root_dir={Path(root_dir).resolve()}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",  # no PyPI queries from the extension manager
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),  # CI containers run as root
    ]


@contextmanager
def token_file(token: str) -> Iterator[Path]:
    """``token`` in a file only this user can read (mode 0600, in a fresh 0700 folder); both removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix="eaglekit-lab-"))
    try:
        path = folder / "token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)  # read whole by Jupyter: no newline
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def lab_env(*, demo: str | os.PathLike[str], root_dir: str | os.PathLike[str], base: dict[str, str] | None = None,
            config_dir: str | os.PathLike[str] | None = None,
            token: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The server's environment: ``EAGLEKIT_DEMO`` relative to ``root_dir``, this checkout on ``PYTHONPATH``,
    ``config_dir`` (:func:`lab_config_dir`) first on ``JUPYTER_CONFIG_PATH`` when given, and
    ``JUPYTER_TOKEN_FILE`` = ``token`` (a :func:`token_file`). An inherited ``JUPYTER_TOKEN`` is dropped: Jupyter
    would prefer it to the file, and the URL printed would not open."""
    env = dict(os.environ if base is None else base)
    env.pop("JUPYTER_TOKEN", None)
    env.pop("JUPYTER_TOKEN_FILE", None)
    if token is not None:
        env["JUPYTER_TOKEN_FILE"] = str(token)
    env["EAGLEKIT_DEMO"] = os.path.relpath(Path(demo).resolve(), Path(root_dir).resolve())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if config_dir is not None:
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(Path(config_dir).resolve()),
                                                                   env.get("JUPYTER_CONFIG_PATH")]))
    return env


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="open JupyterLab on the notebooks with the demo ready (make lab)",
                       description="Build the demo workspace when missing and serve JupyterLab on 127.0.0.1 with a "
                                   "token; prints the URL to open.")
    p.add_argument("--demo", default="build/demo", help="demo workspace (built when missing)")
    p.add_argument("--port", type=PORT, default=8888, help="port on 127.0.0.1 (default 8888)")
    p.add_argument("--notebooks", default=str(NOTEBOOKS), help="the notebooks to copy (default notebooks/)")
    p.add_argument("--workdir", default=str(WORKDIR),
                   help="where the working copy lives and JupyterLab opens (default build/lab/): the checkout's "
                        "notebooks are never written")
    p.set_defaults(func=run)


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """EaglekitError when ``host:port`` is taken, so no URL is printed for a server that cannot start."""
    import socket


    if not 0 < port < 65536:
        raise InputError(f"port {port} is not a TCP port: give 1 to 65535 (make lab PORT=8890)")
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise InputError(f"port {port} on {host} is already in use (another JupyterLab?): pick a free one, "
                             f"e.g. make lab PORT={port + 1} or eaglekit lab --port {port + 1}") from e


def run(args: argparse.Namespace) -> int:
    import secrets
    import signal
    import subprocess

    from eaglekit.demo.world import build_demo

    check_port_free(args.port)
    try:  # the working copy's folder first: a folder that cannot be written is one line, before the demo is built
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --workdir {args.workdir}: {e.strerror or e}; choose a writable folder.") from e
    build_demo(args.demo)
    try:
        said = working_copy(args.notebooks, args.workdir)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot copy the notebooks of {args.notebooks} into {args.workdir}: {e}") from e
    for line in said:
        if line.startswith("kept"):
            print(line)
    token = secrets.token_hex(24)
    command = lab_command(root_dir=args.workdir, port=args.port)
    with token_file(token) as secret:
        runtime = secret.parent / "runtime"   # private (0700 parent), removed with the token
        runtime.mkdir(mode=0o700)
        env = lab_env(demo=args.demo, root_dir=args.workdir, token=secret, config_dir=lab_config_dir(args.workdir))
        env["JUPYTER_RUNTIME_DIR"] = str(runtime)
        print(f"demo workspace ready at {args.demo}\nstarting JupyterLab on a working copy of {args.notebooks} in "
              f"{args.workdir} (the checkout stays as committed); the URL follows once it serves", flush=True)
        server = subprocess.Popen(command, env=env)
        signal.signal(signal.SIGTERM, lambda *_: server.terminate())  # stopping this process stops the server
        try:
            wait_until_serving(server, runtime, address=("127.0.0.1", args.port))
        except BaseException:   # Ctrl-C while it starts, or it exited: no server is left behind
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            raise
        print(f"JupyterLab is serving; open this URL (Ctrl-C stops the server):\n\n    {lab_url(args.port, token)}\n",
              flush=True)
        # Ctrl-C reaches the server too (same terminal): it asks to confirm, then stops its kernels and exits.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return server.wait()


def wait_until_serving(server, runtime: str | os.PathLike[str], *, poll_s: float = 0.1,
                       address: tuple[str, int] | None = None) -> None:
    """Return once the Jupyter server ``server`` (a Popen) serves: it writes ``jpserver-<pid>.json`` into its
    runtime folder after it has bound its port (jupyter_server ``ServerApp.start_app``), and, with ``address``,
    that address accepts a connection (a busy machine was seen to print the URL before the port answered). No
    deadline: a slow start on a busy machine is waited for as long as it takes (Ctrl-C stops it); a server that
    exits first is one :class:`InputError` (its own messages are above on the terminal)."""
    import socket
    import time

    def accepts() -> bool:
        if address is None:
            return True
        try:
            with socket.create_connection(address, timeout=5):
                return True
        except OSError:
            return False

    info = Path(runtime) / f"jpserver-{server.pid}.json"
    while not (info.exists() and accepts()):
        code = server.poll()
        if code is not None:
            raise InputError(f"JupyterLab exited (code {code}) before it served; its messages are above.")
        time.sleep(poll_s)
