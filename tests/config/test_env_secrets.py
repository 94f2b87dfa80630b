"""`${oc.env:...}` values never reach output or messages: the expression stands in for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli

SECRET = "sk-canary-7f3a91"


@pytest.fixture
def env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CI_SECRET_TOKEN", SECRET)
    path = tmp_path / "deploy.yaml"
    path.write_text(
        "stages:\n"
        "  - stage_id: 0\n"
        "    gpu_memory_utilization: ${oc.env:CI_SECRET_TOKEN}\n"
        "note: 'Bearer ${oc.env:CI_SECRET_TOKEN} for ${other}'\n"
        "other: x\n"
        "copy: ${note}\n"
    )
    return path


def test_validate_messages_show_the_expression(env_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in ("text", "json"):
        result = run_cli(capsys, "validate", "-o", fmt, str(env_file))
        assert result.code == 1
        assert SECRET not in result.out + result.err
        assert "${oc.env:CI_SECRET_TOKEN}" in result.out


@pytest.mark.parametrize("args", [(), ("-o", "json"), ("--show-origin",)])
def test_render_writes_the_expression(
    args: tuple[str, ...], env_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "render", *args, str(env_file))
    assert result.code == 0, result.err
    assert SECRET not in result.out + result.err
    assert "${oc.env:CI_SECRET_TOKEN}" in result.out
    if args == ("-o", "json"):
        assert json.loads(result.out)["config"]["copy"] == "Bearer ${oc.env:CI_SECRET_TOKEN} for x"


def test_rendered_yaml_resolves_to_the_same_values(
    env_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The expression is what vllm-omni resolves itself at start: reloading gives the same config."""
    from omni_deploy.config.chain import resolve_file
    from omni_deploy.config.nodes import to_plain

    result = run_cli(capsys, "render", str(env_file))
    again = env_file.with_name("again.yaml")
    again.write_text(result.out)
    assert to_plain(resolve_file(again).config) == to_plain(resolve_file(env_file).config)
