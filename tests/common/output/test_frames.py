"""Code frames: the caret under the token, whatever the line holds."""

from __future__ import annotations

import pytest

from omni_deploy.common.output.frames import frame, token_length, visible


@pytest.mark.parametrize(
    ("line", "start", "length"),
    [
        ("    max_num_seq: 8", 4, 11),  # a key, to its colon
        ("    x: 1073741824  # 1 GiB", 7, 10),  # a plain value, to its comment
        ('    x: "false"  # quoted', 7, 7),  # a quoted scalar, quotes included
        ("    x: 'it''s'", 7, 7),  # '' inside single quotes
        ('    x: "a\\"b"', 7, 6),
        ("    x: {a: 1, b: 2}", 15, 1),  # inside a flow mapping: to the comma or brace
        ("    x: [1, 20]", 11, 2),
        ("    x: http://h:1/p", 7, 12),  # a colon without a space is part of the value
        ("    x:", 99, 1),
    ],
)
def test_token_length(line: str, start: int, length: int) -> None:
    assert token_length(line, start) == length


def test_frame_puts_the_caret_under_the_column_with_a_label() -> None:
    lines = ["a:", "  max_num_seq: 8"]
    assert frame(lines, 2, 3, "did you mean 'max_num_seqs'?") == [
        "  |",
        "2 |   max_num_seq: 8",
        "  |   ^^^^^^^^^^^ did you mean 'max_num_seqs'?",
    ]
    assert frame(lines, 3, 1) == []  # a line the file does not have: no frame


def test_wide_characters_and_controls_keep_the_caret_aligned() -> None:
    # Two CJK characters take two columns each; a tab is shown as \x09 (four columns).
    drawn = frame(["名前:\tx: 1"], 1, 5)
    assert drawn[1] == "1 | 名前:\\x09x: 1"
    assert drawn[2] == "  | " + " " * 9 + "^"


def test_visible_escapes_what_a_terminal_would_act_on() -> None:
    assert visible("plain text, ünïcode 名前") == "plain text, ünïcode 名前"
    assert visible("a\x1b[31mred\x07") == "a\\x1b[31mred\\x07"
    assert visible("abc\u202edef") == "abc\\u202edef"  # a bidirectional override
    assert visible("x\ny") == "x\\x0ay"
