"""Applying fixes to text: exact spans only, stale or overlapping fixes left out."""

from __future__ import annotations

from omni_deploy.validate.findings import Fix, renaming
from omni_deploy.validate.fixes import apply


def _rename(line: int, column: int, old: str, new: str) -> Fix:
    choices, about = renaming(old, new)
    return Fix("f.yaml", line, column, choices, about)


def test_renames_at_their_positions_and_nothing_else() -> None:
    text = "a:\n  max_num_seq: 1  # max_num_seq here stays\n  'cdua': {}\n"
    edited = apply(text, [_rename(2, 3, "max_num_seq", "max_num_seqs"), _rename(3, 3, "cdua", "cuda")])
    assert edited.text == "a:\n  max_num_seqs: 1  # max_num_seq here stays\n  'cuda': {}\n"
    assert len(edited.applied) == 2 and not edited.skipped


def test_a_stale_fix_is_skipped_not_guessed() -> None:
    text = "max_num_seqs: 1\n"  # already fixed, or changed since it was checked
    edited = apply(text, [_rename(1, 1, "max_num_seq", "max_num_seqs"), _rename(9, 1, "x", "y")])
    assert edited.text == text and not edited.applied
    assert [why for _, why in edited.skipped] == [
        "the text at line 1, column 1 changed",
        "line 9 is not in the file",
    ]


def test_the_same_fix_twice_is_one_edit_and_overlaps_are_refused() -> None:
    text = "session_mod: turn\n"
    fix = _rename(1, 1, "session_mod", "session_mode")
    other = Fix("f.yaml", 1, 3, (("ssion_mod", "SSION_MOD"),), "overlapping")
    edited = apply(text, [fix, fix, other])
    assert edited.text == "session_mode: turn\n"
    assert [why for _, why in edited.skipped] == ["it overlaps another fix"]


def test_line_breaks_are_counted_as_yaml_counts_them() -> None:
    text = "a: 1\r\nb: 2\rcdua: 3\n"
    edited = apply(text, [_rename(3, 1, "cdua", "cuda")])
    assert edited.text == "a: 1\r\nb: 2\rcuda: 3\n"
