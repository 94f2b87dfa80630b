"""`omni-deploy k8s` and its image: --image in the first lines of help, and a note on stderr when the
manifests name the default image, which nobody publishes (the operator builds docker/Dockerfile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.k8s.options import DEFAULT_IMAGE
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]
BENCH = str(ROOT / "deploy" / "turn-bench.yaml")


def test_help_names_image_first(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_cli(capsys, "k8s", "--help")
    head = done.out.splitlines()[:8]
    assert any("--image" in line for line in head), head
    assert "docker/Dockerfile" in "\n".join(head)


def test_the_default_image_is_said_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_cli(capsys, "k8s", BENCH, "--model", "m/x")
    assert done.code == 0, done.err
    assert f"image: {DEFAULT_IMAGE}" in done.out  # the manifests are still printed
    assert f"omni-deploy: note: --image is the default {DEFAULT_IMAGE}, which nobody publishes" in done.err
    assert "docker/Dockerfile" in done.err


def test_a_named_image_gets_no_such_note(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_cli(
        capsys, "k8s", BENCH, "--model", "m/x", "--image", "registry.example.com/omni-deploy:0.1.0"
    )
    assert done.code == 0, done.err
    assert "image: registry.example.com/omni-deploy:0.1.0" in done.out
    assert "nobody publishes" not in done.err
