"""Hostile prompts files (issue 23): a FIFO, /dev/zero, a folder, a 1 GiB file, a 5 MiB line, JSON nested
100,000 deep, a 5,000-digit id, an id past 2^31. Each is one line (InputError / exit 2), read in bounded
memory and time; nothing is read from a file that is not a regular one."""

from __future__ import annotations

import os
import threading

import pytest
from bounded_cli import run_limited

from eaglekit.analysis.acceptance.target import read_prompts
from eaglekit.core.errors import EaglekitError, InputError
from eaglekit.core.acceptance.prompts import MAX_FILE_BYTES, MAX_LINE_BYTES, parse_prompts


def _refused(path, match: str) -> None:
    with pytest.raises(EaglekitError, match=match):
        read_prompts(path)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "prompts.jsonl"
    os.mkfifo(fifo)
    done = threading.Event()
    errors = []

    def read():
        try:
            read_prompts(fifo)
        except EaglekitError as e:
            errors.append(str(e))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(30):  # a blocked open would never return: free it, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("reading a FIFO blocked")
    assert errors and "is a FIFO, not a regular file" in errors[0]


def test_devices_folders_and_missing_files(tmp_path):
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    _refused(link, "is a device or socket, not a regular file")
    _refused(tmp_path, "is a folder")
    _refused(tmp_path / "absent.jsonl", "no such file")
    _refused(tmp_path / "nofolder" / "p.jsonl", "no such folder")


def test_a_huge_file_is_refused_by_its_size_unread(tmp_path):
    big = tmp_path / "prompts.jsonl"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB that takes no disk and would take 1 GiB to read
    _refused(big, f"is 1,073,741,824 bytes; eaglekit reads prompts files of at most {MAX_FILE_BYTES:,}")


@pytest.mark.parametrize("line,match", [
    ("[" * 100_000 + "]" * 100_000, "nests arrays or objects too deeply"),
    ('{"input_ids": [' + "9" * 5000 + "]}", "line 1 is not usable JSON: Exceeds the limit"),
    ('{"input_ids": [' + str(1 << 31) + "]}", "integers from 0 to 2147483647"),
    ('{"text": "' + "x" * (MAX_LINE_BYTES + 1) + '"}', "a prompt line may hold at most"),
    ('{"messages": ' + '{"a":' * 70 + "1" + "}" * 70 + "}", "more than 64 levels deep"),
])
def test_lines_that_break_parsers_are_one_error(line, match):
    with pytest.raises(InputError, match=match):
        parse_prompts(line + "\n", source="p.jsonl")


def test_cli_cases_are_one_line_within_1_gib(tmp_path):
    """Through the command, under RLIMIT_AS 1 GiB: a 1 GiB sparse file and a 100,000-deep line, refused
    before any target is loaded."""
    big, deep = tmp_path / "big.jsonl", tmp_path / "deep.jsonl"
    with open(big, "wb") as f:
        f.truncate(1 << 30)
    deep.write_text('{"input_ids": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    target = tmp_path / "target"
    target.mkdir()
    for prompts, message in ((big, "eaglekit reads prompts files of at most"), (deep, "nests arrays or objects")):
        r = run_limited("dump-hidden", "--target", str(target), "--prompts", str(prompts), "--out",
                        str(tmp_path / "out"), tmp=tmp_path)
        assert r.rc == 2 and len(r.error_lines) == 1 and message in r.stderr, r.stderr
