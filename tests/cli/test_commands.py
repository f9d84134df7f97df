"""The CLI is built from one list of commands and one set of shared options."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eaglekit.cli import COMMANDS, build_parser, main
from eaglekit.cli.common import engine_spec

CLI = Path(__file__).resolve().parents[2] / "eaglekit" / "cli"


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


def test_every_subcommand_module_is_listed_once():
    defined = {p.stem for p in CLI.glob("*.py")
               if any(isinstance(n, ast.FunctionDef) and n.name == "add_parser" for n in ast.parse(p.read_text()).body)}
    assert sorted(COMMANDS) == sorted(defined) and len(set(COMMANDS)) == len(COMMANDS)


def test_shared_options_mean_the_same_everywhere():
    for name, sub in _subparsers().items():
        opts = {o: a for a in sub._actions for o in a.option_strings}
        if "--engine" in opts:
            assert opts["--engine"].type is engine_spec, name
        if "--endpoint" in opts:
            assert "--timeout" in opts, name
        if "--json" in opts:
            assert opts["--json"].nargs == 0, name


@pytest.mark.parametrize("command", ["check", "export"])
def test_engine_is_checked_at_parse_time(command, capsys):
    args = [command, "some/drafter", "--engine", "tgi"] + (["--out", "x"] if command == "export" else [])
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Unknown engine 'tgi'" in err[0]
