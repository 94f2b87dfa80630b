"""The start-up cases (tests/data/startup/, at least 40, over several releases): the static path gives
each the verdict its upstream line decides. tests/integration/test_server_check.py runs vllm-omni's
own start-up code on the 0.30.0 ones and requires the same verdict at the same line."""

from __future__ import annotations

import pytest

from tests.support.examples import run_example
from tests.support.startup_cases import STARTUP_CODES, Case, cases, lines_of

CASES = cases()


def test_enough_cases_over_several_releases() -> None:
    assert len(CASES) >= 40
    assert len({c.target or "0.30.0" for c in CASES}) >= 5
    assert sum(c.refused for c in CASES) >= 15 and sum(not c.refused for c in CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c.path.name for c in CASES])
def test_static_verdict(case: Case) -> None:
    report = run_example(case.path)
    refused_at = lines_of(report, STARTUP_CODES, case.path.name)
    shown = "\n".join(f.text() for f in report.findings)
    if case.refused:
        assert refused_at == {case.line or 0}, shown
    else:
        assert not refused_at, shown
    for code in case.absent:
        assert code not in {f.code for f in report.findings}, shown
