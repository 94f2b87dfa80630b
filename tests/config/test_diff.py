"""The effective difference of two merged configs."""

from __future__ import annotations

from omni_deploy.config.diff import ADDED, CHANGED, REMOVED, diff_configs
from omni_deploy.config.yaml_loader import parse_text


def _diff(a: str, b: str) -> list[tuple[str, str, object, object]]:
    from omni_deploy.config.nodes import to_plain

    changes = diff_configs(parse_text(a, "a.yaml"), parse_text(b, "b.yaml"))
    return [(c.path, c.kind, to_plain(c.a), to_plain(c.b)) for c in changes]


def test_identical_configs_have_no_changes() -> None:
    text = "stages:\n  - stage_id: 0\n    max_num_seqs: 4\n"
    assert _diff(text, text) == []


def test_stages_are_matched_by_stage_id_not_position() -> None:
    a = "stages:\n  - stage_id: 0\n    max_num_seqs: 4\n  - stage_id: 1\n    max_num_seqs: 2\n"
    b = "stages:\n  - stage_id: 1\n    max_num_seqs: 2\n  - stage_id: 0\n    max_num_seqs: 8\n"
    assert _diff(a, b) == [("$.stages[?@.stage_id==0].max_num_seqs", CHANGED, 4, 8)]


def test_added_removed_and_whole_lists_of_scalars() -> None:
    a = "x: 1\ndevices: [0, 1]\nnested: {keep: 1, gone: 2}\n"
    b = "devices: [0]\nnested: {keep: 1}\nnew: {deep: true}\n"
    assert _diff(a, b) == [
        ("$.x", REMOVED, 1, None),
        ("$.devices", CHANGED, [0, 1], [0]),
        ("$.nested.gone", REMOVED, 2, None),
        ("$.new.deep", ADDED, None, True),
    ]


def test_type_changes_count_even_when_python_calls_them_equal() -> None:
    # 1 == True in Python, but vllm-omni reads an int and a bool differently.
    assert _diff("flag: 1\n", "flag: true\n") == [("$.flag", CHANGED, 1, True)]
    assert _diff("m: {a: 1}\n", "m: 3\n") == [("$.m", CHANGED, {"a": 1}, 3)]


def test_each_side_keeps_its_origin() -> None:
    changes = diff_configs(parse_text("k: 1\n", "a.yaml"), parse_text("\nk: 2\n", "b.yaml"))
    data = changes[0].as_dict()
    assert data["a"]["origin"] == {"file": "a.yaml", "line": 1, "column": 4, "layer": "file"}
    assert data["b"]["origin"]["line"] == 2
