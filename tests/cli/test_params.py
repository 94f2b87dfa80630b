"""The shared option types: one platform vocabulary, pipelines and versions checked."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from omni_deploy.cli.params import PipelineType, PlatformType, TargetVersionType


@click.command()
@click.option("--platform", type=PlatformType("all"))
@click.option("--pipeline", type=PipelineType())
@click.option("--target-version", type=TargetVersionType())
def probe(platform: str | None, pipeline: str | None, target_version: str | None) -> None:
    click.echo(f"{platform} {pipeline} {target_version}")


def _run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(probe, list(args))


@pytest.mark.parametrize(("given", "expected"), [("CUDA", "cuda"), ("Rocm", "rocm"), ("ALL", "all")])
def test_platforms_are_case_insensitive(given: str, expected: str) -> None:
    assert _run("--platform", given).output.split()[0] == expected


def test_special_platform_words_are_explained_where_they_do_not_apply() -> None:
    result = _run("--platform", "none")
    assert result.exit_code == 2 and "no platform section applied" in result.output
    assert "did you mean 'cuda'" in _run("--platform", "cdua").output


def test_pipelines_are_checked_with_a_suggestion() -> None:
    assert _run("--pipeline", "MiniCPMO_4_5").output.split()[1] == "minicpmo_4_5"
    wrong = _run("--pipeline", "minicpmo")
    assert wrong.exit_code == 2 and "did you mean 'minicpmo_4_5'" in wrong.output


@pytest.mark.parametrize(("given", "expected"), [("0.30.0", "0.30.0"), ("0.30", "0.30.0"), ("MAIN", "main")])
def test_known_versions(given: str, expected: str) -> None:
    assert _run("--target-version", given).output.split()[2] == expected


@pytest.mark.parametrize("given", ["0.30.0xyz", "banana", "0.31.0", "9.9"])
def test_unknown_versions_are_refused(given: str) -> None:
    result = _run("--target-version", given)
    assert result.exit_code == 2 and "0.30.0" in result.output


@pytest.mark.parametrize("given", ["0.31.0rc1", "0.32.0rc1"])
def test_pre_releases_are_taken_exactly(given: str) -> None:
    assert _run("--target-version", given).output.split()[2] == given


def test_a_newer_release_says_it_is_not_known_yet_and_how_it_would_be_judged() -> None:
    result = _run("--target-version", "0.32.0")
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    for part in ("vllm-omni 0.32.0 is not known yet", "--vllm-omni-source", "0.32.0rc1's typed-config rules",
                 "python -m omni_deploy.knowledge.generate --add 0.32.0"):  # fmt: skip
        assert part in said, said


def test_installed_newer_release_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    import omni_deploy.common.bundled as bundled

    monkeypatch.setattr(bundled, "installed_version", lambda name: "0.32.0")
    assert _run("--target-version", "0.32.0").output.split()[2] == "0.32.0"


def test_installed_version(monkeypatch: pytest.MonkeyPatch) -> None:
    import omni_deploy.common.bundled as bundled

    monkeypatch.setattr(bundled, "installed_version", lambda name: "0.31.0.dev3")
    assert _run("--target-version", "installed").output.split()[2] == "0.31.0.dev3"
    monkeypatch.setattr(bundled, "installed_version", lambda name: None)
    assert "not installed" in _run("--target-version", "installed").output
