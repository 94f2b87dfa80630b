"""The linear-time glob matcher (omni_deploy/common/patterns.py)."""

from __future__ import annotations

import time

import pytest

from omni_deploy.common.patterns import MAX_PATTERNS, BadPattern, check, matches


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("deploy/**/*.yaml", "deploy/a.yaml", True),
        ("deploy/**/*.yaml", "deploy/x/y/a.yaml", True),
        ("deploy/**/*.yaml", "deploy/x/a.yml", False),
        ("**", "a/b/c", True),
        ("deploy/old/**", "deploy/old/x/y.yaml", True),
        ("deploy/*.yaml", "deploy/x/a.yaml", False),  # `*` stays in one folder
        ("deploy/?.yaml", "deploy/a.yaml", True),
        ("deploy/v[0-9].yaml", "deploy/v7.yaml", True),
        ("deploy/v[!0-9].yaml", "deploy/v7.yaml", False),
        ("deploy/v[!0-9].yaml", "deploy/vx.yaml", True),
        ("a[]]b", "a]b", True),  # a `]` right after `[` is a member
    ],
)
def test_globs_match_as_documented(pattern: str, name: str, expected: bool) -> None:
    assert matches(pattern, name) is expected


def test_star_does_not_span_folders_within_one_name() -> None:
    assert matches("*.yaml", "a.yaml", across=False)
    assert not matches("a**b", "a/b", across=False)


@pytest.mark.parametrize(
    ("pattern", "said"), [("[z-a]", "reversed"), ("deploy/[!]", "never closed"), ("[ab", "never closed")]
)
def test_malformed_patterns_are_refused_with_a_reason(pattern: str, said: str) -> None:
    with pytest.raises(BadPattern, match=said):
        matches(pattern, "x")


def test_many_stars_against_a_long_name_stay_fast() -> None:
    started = time.monotonic()
    assert not matches("**q" * 40 + "z", "q" * 5000)
    assert not matches("*a" * 60 + "b", "a" * 3000, across=False)
    assert time.monotonic() - started < 5  # backtracking regexes take minutes here


def test_pattern_lists_are_bounded() -> None:
    with pytest.raises(BadPattern, match=f"at most {MAX_PATTERNS}"):
        check([f"deploy/{i}.yaml" for i in range(MAX_PATTERNS + 1)], "files")
