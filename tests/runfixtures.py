"""The test run's shared folder and the pages executed once in it (conftest.py's fixtures and reportfixtures.py
use these; a module of its own, since every test folder's conftest is a module named ``conftest``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: One folder for the whole ``make test`` run, shared by every xdist worker, every notebook kernel and both pytest
#: sessions (the Makefile names it; a lone ``pytest`` makes one): the result cache, the shared demo the pages
#: run on, each page executed once, and the report rendered from those pages.
RUN_ENV = "EAGLEKIT_TEST_RUN"


def run_folder() -> Path:
    """The run's shared folder (see :data:`RUN_ENV`)."""
    return Path(os.environ[RUN_ENV])


#: Each cell's bound while the suite executes a page: far above any cell's time on a loaded 2-core machine (the
#: slowest measured about 60 s quiet, README), so only a kernel that is stuck trips it; the error names the cell.
CELL_TIMEOUT = 1800


def executed_page(name: str, demo_root: Path):
    """The executed notebook ``name`` of this run (see :func:`executed_notebook`)."""
    import nbformat
    from filelock import FileLock

    from eaglekit.view.report import execute_notebook

    folder = run_folder() / "executed"
    folder.mkdir(exist_ok=True)
    done = folder / f"{name}.ipynb"
    with FileLock(str(folder / f"{name}.lock")):
        if not done.exists():
            source = Path(__file__).resolve().parent.parent / "notebooks" / f"{name}.ipynb"
            with pytest.MonkeyPatch.context() as mp:  # the kernels import this checkout's eaglekit
                mp.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent), prepend=os.pathsep)
                nb = execute_notebook(source, demo=demo_root, timeout=CELL_TIMEOUT)
            partial = folder / f".{name}.{os.getpid()}.partial.ipynb"
            nbformat.write(nb, str(partial))
            os.replace(partial, done)
    return nbformat.read(str(done), as_version=4)
