"""The hostile suite: every row of tests/hostile/cases/*.yaml run as a real omni-deploy process.

One parametrised test; each case has its own wall-clock limit (`limit`, default 30 s) and
address-space limit (`memory_mib`, default 1024), and the checks every case must pass are in
tests/hostile/harness.py's docstring.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from pathlib import Path

import pytest

from tests.hostile import harness
from tests.hostile.harness import Case, Scratch

CASES = harness.load_cases()


def _allowed(row: dict) -> set[int]:  # type: ignore[type-arg]
    wanted = row.get("exit", 1)
    return set(wanted) if isinstance(wanted, list) else {wanted}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_case(case: Case, tmp_path: Path) -> None:
    row = case.row
    if row.get("needs") == "root":
        if os.geteuid() != 0:
            pytest.skip("needs root (to make a file another user owns)")
    elif row.get("needs"):
        pytest.importorskip(row["needs"])
    scratch = Scratch(tmp_path, str(row.get("secret", harness.SECRET)))
    try:
        _run_case(case, scratch)
    finally:
        for entry in row.get("setup") or []:  # deep trees: never left for pytest's recursive clean-up
            if "deep" in entry:
                harness.remove_tree(scratch.path(entry["deep"]))


def _run_case(case: Case, scratch: Scratch) -> None:
    row = case.row
    outcomes, left = _outcomes(row, scratch)
    problems = [f"process(es) outlived the case (killed now): {left}"] if left else []
    for outcome in outcomes:
        problems += _outcome_problems(row, scratch, outcome)
    everything = "".join(o.out + o.err for o in outcomes)  # parallel runs: said by one of them
    for text in row.get("says") or []:
        if scratch.fill(text) not in everything:
            problems.append(f"did not say {text!r}")
            problems.append(f"output: {everything[-3000:]!r}")
    problems += _secret_leaks(scratch)
    problems += _damaged(scratch)
    problems += [
        f"{path} was created" for path in row.get("absent") or [] if os.path.lexists(scratch.path(path))
    ]
    assert not problems, f"{case.id}: {row['why']}\n" + "\n".join(problems)


def _outcomes(row: dict, scratch: Scratch) -> tuple[list[harness.Outcome], list[tuple[int, str]]]:  # type: ignore[type-arg]
    """Build the case, run it (`parallel` times at once), and what outlived it (killed then)."""
    harness.build(scratch, row.get("setup") or [])
    marker = uuid.uuid4().hex
    env = harness.environment(scratch, row, marker)
    for argv in row.get("prepare") or []:
        prepare = {
            "run": argv,
            "memory_mib": row.get("memory_mib", 1024),
        }  # a model built in it imports torch
        harness.wait(*harness.run(scratch, prepare, env, index=99), {"limit": 60}, time.monotonic())
    harness.mutate(scratch, row.get("mutate") or [])
    outcomes = []
    helpers = harness.start_helpers(scratch, row)
    try:
        started = time.monotonic()
        procs = [harness.run(scratch, row, env, index=i) for i in range(int(row.get("parallel", 1)))]
        outcomes = [harness.wait(*p, row, started) for p in procs]
    finally:
        left = harness.wait_for_no_survivors(marker, float((row.get("signal") or {}).get("settle", 10)))
        harness.stop_helpers(helpers)
    return outcomes, left


def _outcome_problems(row: dict, scratch: Scratch, outcome: harness.Outcome) -> list[str]:  # type: ignore[type-arg]
    """What every run must hold (no hang, the exit code, no traceback), and the row's checks."""
    said = outcome.out + outcome.err
    problems = []
    if outcome.code is None:
        problems.append(f"no exit within {row.get('limit', 30)} s (a hang or unbounded work)")
    elif outcome.code not in _allowed(row):
        problems.append(f"exit {outcome.code}, expected {sorted(_allowed(row))}")
    if "Traceback (most recent call last)" in said or "internal error" in said:
        problems.append("a traceback or an internal error was printed")
    if "MemoryError" in said or "RecursionError" in said:
        problems.append("MemoryError/RecursionError reached the output")
    problems += [f"said {text!r}" for text in row.get("never_says") or [] if scratch.fill(text) in said]
    problems += [
        failed for check in row.get("checks") or [] if (failed := harness.check_stdout(check, outcome))
    ]
    if problems:
        problems.append(f"stdout: {outcome.out[-1500:]!r}\nstderr: {outcome.err[-1500:]!r}")
    return problems


def _secret_leaks(scratch: Scratch) -> list[str]:
    needles = {harness.SECRET.encode(), scratch.secret.encode()}
    leaks = []
    for path in harness.files_below(scratch.tmp):
        if path in scratch.written or path.name.startswith(".stdin") or path.name in harness.SERVER_FILES:
            continue
        for needle in needles:
            if harness.contains(path, needle):
                leaks.append(f"the secret {needle.decode()!r} is in {path.relative_to(scratch.tmp)}")
    return leaks


def _damaged(scratch: Scratch) -> list[str]:
    problems = []
    for path, (content, mode, uid, gid) in scratch.kept.items():
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            problems.append(f"{path.name} was removed")
            continue
        if info.st_mode != mode:
            problems.append(f"{path.name} changed mode {oct(mode)} -> {oct(info.st_mode)}")
        elif (info.st_uid, info.st_gid) != (uid, gid):
            problems.append(f"{path.name} changed owner {uid}:{gid} -> {info.st_uid}:{info.st_gid}")
        elif stat.S_ISREG(mode) and path.read_bytes() != content:
            problems.append(f"{path.name} was overwritten")
    return problems
