"""eaglekit.render: aligned text tables, escaped HTML tables, colour only where it belongs."""

import io

import pytest

from eaglekit.core.render import (Html, ansi, format_value, html_badge, html_table, strip_ansi, text_table, truncate,
                             use_colour)


def test_text_table_aligns_columns_and_right_aligns_on_request():
    out = text_table(["name", "n"], [("a", 1), ("longer", 12345)], align=["left", "right"])
    lines = out.splitlines()
    assert lines[0] == "name        n"
    assert lines[1] == "------  -----"
    assert lines[2] == "a           1"
    assert lines[3] == "longer  12345"


def test_text_table_measures_width_without_ansi_escapes():
    red = ansi("shape", "red")
    out = text_table(["class", "x"], [(red, "1"), ("metadata", "2")])
    first, second = out.splitlines()[2:]
    assert strip_ansi(first).index("1") == strip_ansi(second).index("2") == len("metadata") + 2


def test_text_table_truncates_plain_cells_and_keeps_a_title():
    out = text_table(["v"], [("x" * 50,)], max_width=10, title="T")
    assert out.splitlines()[0] == "T"
    assert out.splitlines()[-1] == "xxxxxxxxx…"


def test_text_table_refuses_ragged_rows():
    with pytest.raises(ValueError, match="a row has 1 cells for 2 columns"):
        text_table(["a", "b"], [("only",)])


def test_html_table_escapes_cells_and_caption_but_not_html_cells():
    out = html_table(["k", "v"], [("<script>", Html("<b>ok</b>"))], caption="a & b", row_styles=["color:red"])
    assert "&lt;script&gt;" in out and "<script>" not in out
    assert "<b>ok</b>" in out
    assert "a &amp; b" in out
    assert '<tr style="color:red">' in out


def test_html_badge_escapes_its_text():
    assert "&lt;x&gt;" in html_badge("<x>", "red")


def test_format_value_uses_json_spelling_for_non_strings():
    assert format_value("bfloat16") == "bfloat16"
    assert format_value(None) == "null"
    assert format_value(True) == "true"
    assert format_value([2, 30, 58]) == "[2, 30, 58]"
    assert truncate("abcdef", 4) == "abc…"


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_colour_only_on_a_tty_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert use_colour(_Tty()) is True
    assert use_colour(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_colour(_Tty()) is False
    assert ansi("x", "red", enabled=False) == "x"
    assert ansi("x", "red") == "\x1b[31mx\x1b[0m"
