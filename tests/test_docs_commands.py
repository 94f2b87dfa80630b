"""Every command shown in README.md and docs/ runs as shown (those that need a GPU, a model or a
running server are listed with the reason and skipped), and every install line works from a
checkout of this repository.

Commands are lines of code blocks (indented or fenced) that start with `omni-deploy` or pipe into
it; a trailing `\\` joins the next line. A command whose documented exit is not 0 says so in a
trailing comment (`# exit 1: ...`). They run through bash in a scratch directory that links the
repository's deploy/, tests/ and schemas/, so nothing is written into the checkout.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Commands that cannot run on a CI machine: (pattern, reason). Matched with re.search.
NEEDS = [
    (r"omni-deploy serve (?!.*--dry-run)", "starts vllm serve: needs a GPU, vllm and the model"),
    (r"omni-deploy bench (run|ab) (?!.*--dry-run)", "needs a running server and the Seed-TTS data"),
    (r"bench inputs --from ~/", "needs a Seed-TTS evaluation checkout (the stand-in one's line runs)"),
    (r"omni-deploy spk (parity|bench)", "needs the model's campplus.onnx and, for its figures, a GPU"),
    (r"\$MODEL_PATH|/models/", "needs the model on disk"),
    (r"bench report results/", "needs the results of a bench run"),
    (r"^vllm ", "vLLM itself"),
]


def _blocks(text: str) -> list[list[str]]:
    """Code blocks of a Markdown page: fenced ones (not yaml/json/text) and indented ones."""
    blocks: list[list[str]] = []
    lines = text.splitlines()
    i = 0
    previous_blank = True
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(```+)\s*(\S*)", line)
        if fence:
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1))), len(lines)
            )
            if fence.group(2) in ("", "sh", "bash", "console", "shell"):
                blocks.append(lines[i + 1 : end])
            i, previous_blank = end + 1, False
            continue
        if previous_blank and line.startswith("    ") and line.strip():
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i][4:])
                i += 1
            blocks.append(block)
            previous_blank = False
            continue
        previous_blank = not line.strip()
        i += 1
    return blocks


def _commands(block: list[str]) -> list[str]:
    joined: list[str] = []
    current = ""
    for line in block:
        if current:
            current += " " + line.strip()
        elif re.match(r"^\$?\s*(omni-deploy |pip |cat .*\| *omni-deploy )", line.strip()):
            current = line.strip().removeprefix("$ ")
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        joined.append(current)
        current = ""
    return joined


def _all_commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for block in _blocks(page.read_text()):
            found += [(page.relative_to(ROOT).as_posix(), c) for c in _commands(block)]
    return found


def _is_command(command: str) -> bool:
    """An omni-deploy command line, not a log line that starts with the tool's name."""
    from omni_deploy.cli.app import COMMANDS as NAMES

    words = command.split("omni-deploy ", 1)[1].split()
    return bool(words) and (words[0] in NAMES or words[0].startswith("-"))


COMMANDS = _all_commands()
RUNNABLE = [
    (p, c) for p, c in COMMANDS if "omni-deploy " in c and not c.startswith("pip ") and _is_command(c)
]
INSTALLS = [(p, c) for p, c in COMMANDS if "pip install" in c]


def test_the_docs_show_commands() -> None:
    assert len(RUNNABLE) >= 10 and INSTALLS


def _expected_exit(command: str) -> tuple[str, int]:
    body, _, comment = command.partition("  #")
    found = re.search(r"exit (\d+)", comment)
    return body.strip(), int(found.group(1)) if found else 0


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("docs")
    for name in ("deploy", "tests", "schemas", "docs"):
        (work / name).symlink_to(ROOT / name)
    bin_dir = work / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "omni-deploy"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m omni_deploy "$@"\n')
    shim.chmod(0o755)
    return work


@pytest.mark.parametrize(("page", "command"), RUNNABLE, ids=[f"{p}: {c[:60]}" for p, c in RUNNABLE])
def test_documented_command_runs(page: str, command: str, scratch: Path) -> None:
    for pattern, reason in NEEDS:
        if re.search(pattern, command):
            pytest.skip(reason)
    body, expected = _expected_exit(command)
    env = {
        **os.environ,
        "PATH": f"{scratch / '.bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", body],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == expected, (
        f"{page}: {body}\nexit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )


def _extras() -> set[str]:
    # tomllib is Python 3.11+; the extras are plain `name = [` lines of one table.
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+) = \[", table, re.M))


@pytest.mark.parametrize(("page", "command"), INSTALLS, ids=[f"{p}: {c[:60]}" for p, c in INSTALLS])
def test_install_lines_work_from_a_checkout(page: str, command: str) -> None:
    """omni-deploy is not on a package index: installs name the checkout (`.`) with real extras."""
    extras = _extras()
    for install in re.findall(r"pip install ([^&;#]*)", command):
        for word in shlex.split(install):
            if word.startswith("-"):
                continue
            assert not word.startswith("omni-deploy"), f"{page}: {command!r} asks an index for omni-deploy"
            local = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", word)
            if local and local.group(1):
                unknown = set(local.group(1).split(",")) - extras
                assert not unknown, f"{page}: extras {unknown} are not in pyproject.toml"
