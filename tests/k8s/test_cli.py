"""Bad input to `omni-deploy k8s`: a clear message, a non-zero exit, no traceback, no output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.k8s.kube import ROOT, gpu_total, validate_object
from tests.support.cli import run_cli

TWO_NODES = str(ROOT / "tests" / "data" / "k8s" / "two_nodes.yaml")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "models/../x"], "neither a Hugging Face id"),
        (["--model", "./MiniCPM-o-4_5"], "neither a Hugging Face id"),
        (["--model", "owner/name/extra"], "neither a Hugging Face id"),
        (["--model", "/models/m"], "--model-cache is empty"),
        (["--model", "m/x", "--name", "MiniCPM"], "not a DNS-1123 label"),
        (["--model", "m/x", "--namespace", "speech_team"], "not a DNS-1123 label"),
        (["--model", "m/x", "--namespace", "-speech"], "not a DNS-1123 label"),
        (["--model", "m/x", "--model-cache", "nfs:/x"], "expected pvc:CLAIM, host:/absolute/path or empty"),
        (["--model", "m/x", "--model-cache", "host:relative"], "expected pvc:CLAIM"),
        (["--model", "m/x", "--gpus-per-node", "0"], "--gpus-per-node"),
        (["--model", "m/x", "--name", "vllm"], "VLLM_PORT=tcp://10.0.0.1:8091"),
        (["--model", "m/x", "--name", "vllm-omni"], "VLLM_OMNI_PORT=tcp://"),
        (["--model", "m/x", "--name", "minicpmo\n"], "not a DNS-1123 label"),
        (["--model", "m/x", "--image", "Registry.example.com/Omni Deploy:1"], "not an image reference"),
        (["--model", "m/x", "--image", "omni-deploy:1@sha256:abc"], "not an image reference"),
        (["--model", "m/x", "--startup-timeout", "10"], "--startup-timeout"),
        (["--model", "m/x", "--cpu-per-gpu", "0"], "--cpu-per-gpu"),
        (["--model", "m/x", "--run-as-user", "-1"], "--run-as-user"),
        (
            ["--model", "/tmp/m", "--model-cache", "host:/d"],
            "mounted at /tmp, which overlaps the pod's own /tmp",
        ),
        (["--model", "/home/omni/m", "--model-cache", "host:/d"], "overlaps the pod's own /home/omni"),
        (
            ["--model", "/etc/omni-deploy/m", "--model-cache", "pvc:c"],
            "overlaps the pod's own /etc/omni-deploy",
        ),
        (
            ["--model", "/var/run/secrets/m", "--model-cache", "pvc:c", "--hf-token-secret", "t"],
            "overlaps the pod's own /var/run/secrets/huggingface",
        ),
        (["--model", "/opt/m", "--model-cache", "host:/d"], "would hide the image's /opt"),
        (["--model", "/", "--model-cache", "host:/d"], "would hide the image's /"),
        (["--model", "/models/../etc/m", "--model-cache", "host:/d"], "without '.', '..' or '//'"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    result = run_cli(capsys, "k8s", *args)
    assert result.code == 2
    assert message in result.err and "Traceback" not in result.err
    assert result.out == ""


def test_placement_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "k8s", TWO_NODES, "--model", "m/x", "--gpus-per-node", "1")
    assert result.code == 1 and result.out == ""
    assert "error[E391]" in result.err and "stage 0 (Thinker) uses 2 GPUs" in result.err


def test_unequal_workers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Three nodes of 2, 2 and 1 GPUs: one LWS worker template cannot fit both; StatefulSets can."""
    three = tmp_path / "three.yaml"
    three.write_text(
        f"base_config: {TWO_NODES}\n"
        "connectors:\n  talker_to_code2wav:\n    name: NixlConnector\n"
        "stages:\n  - stage_id: 1\n    devices: '2,3'\n    tensor_parallel_size: 2\n"
        "    output_connectors: {to_stage_2: talker_to_code2wav}\n"
        "  - stage_id: 2\n    devices: '4'\n    input_connectors: {from_stage_1: talker_to_code2wav}\n"
    )
    refused = run_cli(capsys, "k8s", str(three), "--model", "m/x", "--gpus-per-node", "2")
    assert refused.code == 2 and "--workload statefulset" in refused.err and refused.out == ""
    done = run_cli(capsys, "k8s", str(three), "--model", "m/x", "--gpus-per-node", "2",
                   "--workload", "statefulset", "-o", "json")  # fmt: skip
    assert done.code == 0, done.err
    listing = json.loads(done.out)
    assert listing["kind"] == "List"
    for obj in listing["items"]:
        validate_object(obj)
    assert gpu_total(listing["items"]) == 5
    assert [o["metadata"]["name"] for o in listing["items"] if o["kind"] == "StatefulSet"] == [
        "minicpmo-node0",
        "minicpmo-node1",
        "minicpmo-node2",
    ]


@pytest.mark.parametrize("name", ["vllmx", "my-vllm", "minicpmo"])
def test_names_outside_vllms_variables(capsys: pytest.CaptureFixture[str], name: str) -> None:
    result = run_cli(capsys, "k8s", "--model", "m/x", "--name", name)
    assert result.code == 0, result.err


@pytest.mark.parametrize(
    "image", ["registry.example.com/omni-deploy", "registry.example.com/omni-deploy:latest"]
)
def test_image_without_a_fixed_build_is_said(capsys: pytest.CaptureFixture[str], image: str) -> None:
    result = run_cli(capsys, "k8s", "--model", "m/x", "--image", image)
    assert result.code == 0, result.err
    assert f"omni-deploy: note: --image {image} names no fixed build" in result.err
    # The default image has a fixed tag (its only note is that nobody publishes it: issue 33).
    default = run_cli(capsys, "k8s", "--model", "m/x").err
    assert "names no fixed build" not in default and "nobody publishes" in default
