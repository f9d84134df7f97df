"""SGLang's decode log, hostile (issue 47): impossible timestamps and counts are one line each, long lines cost
linear time, and the bootstrap's memory does not grow with the log."""

from __future__ import annotations

import pytest
from eaglekit.core.errors import InputError
from eaglekit.core.serving.sglanglog import (MAX_LINE_CHARS, MAX_UNITS, bootstrap_bytes, parse_sglang_log,
                                             pooled_blocks)

GOOD = ("[2025-06-18 10:00:04 TP0] Decode batch, #running-req: 2, #token: 300, token usage: 0.01, accept len: 3.00, "
        "accept rate: 0.67, cuda graph: True, gen throughput (token/s): 150.00, #queue-req: 0, ")


@pytest.mark.parametrize("edit, says", [
    (lambda l: l.replace("2025-06-18", "2025-13-18"), "is not a real time"),
    (lambda l: l.replace("2025-06-18", "2025-02-30"), "is not a real time"),
    (lambda l: l.replace("2025-06-18", "0000-06-18"), "is not a real time"),
    (lambda l: l.replace("10:00:04", "25:61:61"), "is not a real time"),
    (lambda l: l.replace("2025-06-18", "٢٠٢٥-٠٦-١٨"), "ASCII digits"),
    (lambda l: l.replace("#running-req: 2", "#running-req: " + "9" * 100), "more than nine digits"),
])
def test_an_impossible_decode_line_is_one_line_naming_it(edit, says):
    """Each of these raised a bare ValueError (strptime, int) before; the reading refuses the log instead, since
    a corrupt line in it leaves its window and weights unknown."""
    with pytest.raises(InputError, match=f"line 2: .*{says}"):
        parse_sglang_log(GOOD + "\n" + edit(GOOD) + "\n")


def test_a_decode_line_without_a_timestamp_is_read():
    r = parse_sglang_log("[TP0] " + GOOD.split("] ", 1)[1] + "\n")
    assert r.accept_length.value == 3.0 and r.window_s is None


@pytest.mark.parametrize("size", [50_000, 680_000])
def test_a_long_decode_line_is_skipped_and_counted(size):
    """The old pattern ('Decode batch[^\\n]*?#running-req ...') backtracked on a long line without its fields;
    a line past MAX_LINE_CHARS is now skipped (and counted) before any pattern runs, and the patterns that do run
    have bounded repetitions."""
    long = "[2025-06-18 10:00:05 TP0] Decode batch, " + "#running-req: 1" * (size // 15)
    r = parse_sglang_log(GOOD + "\n" + long + "\n" + GOOD.replace("10:00:04", "10:00:08") + "\n")
    assert r.accept_length.value == 3.0 and r.window_s == 4.0
    assert any(f"longer than {MAX_LINE_CHARS:,} characters were skipped" in n for n in r.notes)
    five_thousand = GOOD.replace("#running-req: 2", "#running-req: " + "9" * 5000)  # past the line bound: skipped
    assert "1 'Decode batch' lines longer" in " ".join(parse_sglang_log(GOOD + "\n" + five_thousand + "\n").notes)


def test_a_long_line_without_its_fields_is_linear():
    """A decode line just under the bound, of the shape that made the old lazy pattern quadratic."""
    line = "Decode batch" + " #running-req: 1 accept" * ((MAX_LINE_CHARS - 20) // 23)
    assert len(line) <= MAX_LINE_CHARS
    with pytest.raises(InputError, match="no 'Decode batch"):
        parse_sglang_log(line + "\n")


def test_a_three_day_log_is_bootstrapped_over_bounded_blocks():
    """200,000 decode lines: pooled into MAX_UNITS consecutive blocks, so the bootstrap holds resamples x 1000
    entries (about 48 MB), not resamples x 200,000 (past 4 GiB)."""
    nums = [float(i % 7 + 1) for i in range(200_000)]
    dens = [1.0] * 200_000
    bn, bd = pooled_blocks(nums, dens)
    assert len(bn) == len(bd) == MAX_UNITS and sum(bn) == sum(nums) and sum(bd) == sum(dens)
    assert bootstrap_bytes(len(bn)) <= 64 << 20 < bootstrap_bytes(200_000)
    assert pooled_blocks(nums[:10], dens[:10]) == (nums[:10], dens[:10])
    log = "".join(GOOD.replace("accept len: 3.00", f"accept len: {1 + (i % 7) / 3:.2f}") + "\n" for i in range(3000))
    r = parse_sglang_log(log)
    assert f"bootstrap over {MAX_UNITS} blocks of consecutive log lines (3,000 lines)" in r.accept_length.method
    assert r.accept_length.low < r.accept_length.value < r.accept_length.high


def test_the_cli_says_a_corrupt_log_line_in_one_line(tmp_path, capsys):
    from eaglekit.cli import main

    log = tmp_path / "server.log"
    log.write_text(GOOD + "\n" + GOOD.replace("2025-06-18", "2025-02-30") + "\n")
    assert main(["live", "--log", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 2: timestamp '2025-02-30 10:00:04' is not a real time" in err[0]
