"""Run the ``eaglekit`` command in-process and read what it printed (``from clirun import run, one_line_error``)."""

from __future__ import annotations

from eaglekit.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    """``eaglekit ARGS``: its exit code, standard output and standard error."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, *args: str) -> str:
    """``eaglekit ARGS`` refused: exit 2, one line on standard error and no traceback; that line."""
    code, out, err = run(capsys, *args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
