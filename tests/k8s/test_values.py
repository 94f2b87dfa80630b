"""`--values FILE` and the scheduling options: the files under tests/data/k8s/values/, each bad one
refused at its line and column with a usage error and nothing on stdout, the good ones rendered
into every pod (kubernetes-validate strict) with the command line on top."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from omni_deploy.k8s.values import load_values, parse_toleration
from tests.k8s.kube import ROOT, pod_specs, validate_object
from tests.support.cli import run_cli

VALUES = ROOT / "tests" / "data" / "k8s" / "values"
TWO_NODES = str(ROOT / "tests" / "data" / "k8s" / "two_nodes.yaml")

BAD = {
    "unknown_key.yaml": ("2:1", "toleration: unknown key 'toleration'; did you mean 'tolerations'?"),
    "bad_effect.yaml": ("2:5", "tolerations[0]: effect 'NoSchedul' is not one of NoSchedule"),
    "exists_with_value.yaml": ("2:5", "operator Exists takes no value"),
    "unquoted_bool.yaml": ("2:8", "nodeSelector.gpu: expected a string (quote numbers and booleans"),
    "own_label.yaml": (
        "2:3",
        "label 'app.kubernetes.io/instance': omni-deploy sets the app.kubernetes.io/ labels",
    ),
    "own_annotation.yaml": (
        "2:3",
        "annotation 'checksum/config': omni-deploy sets the checksum/ annotations",
    ),
    "bad_label_value.yaml": ("2:3", "label team value 'speech team'"),
    "affinity_typo.yaml": ("2:3", "unknown key 'nodeAfinity'; did you mean 'nodeAffinity'?"),
    "bad_secret.yaml": ("2:5", "'Registry_Secret' is not a DNS-1123 subdomain"),
    "bad_namespace.yaml": ("1:12", "namespace 'Speech' is not a DNS-1123 label"),
    "not_a_list.yaml": ("2:3", "tolerations: expected a list"),
    "top_level_list.yaml": ("1:1", "the top level of a values file must be a mapping"),
    "duplicate_key.yaml": ("2:1", "duplicate key"),
    "toleration_seconds.yaml": ("2:5", "tolerationSeconds is a whole number, for effect NoExecute only"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_values_file(capsys: pytest.CaptureFixture[str], name: str) -> None:
    where, message = BAD[name]
    result = run_cli(capsys, "k8s", "--model", "m/x", "--values", str(VALUES / name))
    assert result.code == 2 and result.out == ""
    assert message in result.err and "Traceback" not in result.err
    assert f"{name}:{where}:" in result.err


def test_every_bad_file_has_a_case() -> None:
    assert {p.name for p in VALUES.glob("*.yaml")} - set(BAD) == {"full.yaml"}


def render(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    result = run_cli(capsys, "k8s", *args)
    assert result.code == 0, result.err
    return [o for o in yaml.safe_load_all(result.out) if o is not None]


def test_full_values_file_reaches_every_pod(capsys: pytest.CaptureFixture[str]) -> None:
    values = load_values(VALUES / "full.yaml")
    objects = render(capsys, TWO_NODES, "--gpus-per-node", "2", "--model", "m/x", "--workload", "statefulset",
                     "--values", str(VALUES / "full.yaml"))  # fmt: skip
    for obj in objects:
        validate_object(obj)
        assert obj["metadata"]["namespace"] == "speech"
        assert obj["metadata"]["labels"]["team"] == "speech"
        assert obj["metadata"]["annotations"]["owner"] == "speech-platform@example.com"
    specs = pod_specs(objects)
    assert len(specs) == 2
    for spec in specs:
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
        assert spec["tolerations"] == [dict(t) for t in values.scheduling.tolerations]
        assert spec["affinity"] == values.scheduling.affinity
        assert spec["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
        assert spec["runtimeClassName"] == "nvidia" and spec["priorityClassName"] == "inference-critical"
        assert spec["imagePullSecrets"] == [{"name": "registry-a"}, {"name": "registry-b"}]


def test_options_win_over_and_add_to_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    objects = render(capsys, "--model", "m/x", "--values", str(VALUES / "full.yaml"), "--namespace", "other",
                     "--node-selector", "nvidia.com/gpu.product=NVIDIA-B200", "--node-selector", "pool=speech",
                     "--toleration", "dedicated=speech:NoSchedule", "--runtime-class", "nvidia-cdi",
                     "--image-pull-secret", "registry-a", "--image-pull-secret", "registry-c",
                     "--label", "team=voice", "--annotation", "owner=me")  # fmt: skip
    (spec,) = pod_specs(objects)
    assert {o["metadata"]["namespace"] for o in objects} == {"other"}
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-B200", "pool": "speech"}
    assert spec["tolerations"][-1] == {
        "key": "dedicated",
        "operator": "Equal",
        "value": "speech",
        "effect": "NoSchedule",
    }
    assert len(spec["tolerations"]) == 4
    assert spec["runtimeClassName"] == "nvidia-cdi" and spec["priorityClassName"] == "inference-critical"
    assert spec["imagePullSecrets"] == [{"name": n} for n in ("registry-a", "registry-b", "registry-c")]
    assert all(o["metadata"]["labels"]["team"] == "voice" for o in objects)
    assert all(o["metadata"]["annotations"]["owner"] == "me" for o in objects)


@pytest.mark.parametrize(
    ("text", "toleration"),
    [
        ("nvidia.com/gpu:NoSchedule", {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
        ("nvidia.com/gpu=present:NoSchedule",
         {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}),
        ("dedicated", {"key": "dedicated", "operator": "Exists"}),
        ("dedicated=speech", {"key": "dedicated", "operator": "Equal", "value": "speech"}),
    ],
)  # fmt: skip
def test_toleration_option(text: str, toleration: dict[str, str]) -> None:
    assert parse_toleration(text) == toleration


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--toleration", "nvidia.com/gpu:Never"], "effect 'Never' is not one of"),
        (["--node-selector", "pool"], "--node-selector 'pool': expected KEY=VALUE"),
        (["--label", "app.kubernetes.io/name=x"], "omni-deploy sets the app.kubernetes.io/ labels itself"),
        (["--label", "llm-d.ai/role=decode"], "omni-deploy sets the llm-d.ai/ labels itself"),
        (["--annotation", "prometheus.io/port=9"], "omni-deploy sets the prometheus.io/ annotations itself"),
        (["--label", "Bad Key=x"], "the name part must be"),
        (["--runtime-class", "Nvidia"], "not a DNS-1123 subdomain"),
        (["--image-pull-secret", "a_b"], "not a DNS-1123 subdomain"),
        (["--values", "/nonexistent/values.yaml"], "no such file"),
    ],
)
def test_option_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    result = run_cli(capsys, "k8s", "--model", "m/x", *args)
    assert result.code == 2 and result.out == ""
    assert message in result.err and "Traceback" not in result.err


def test_values_file_is_not_a_deploy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The docs' example is read as values, and a directory is refused like any unreadable file."""
    objects = render(
        capsys, "--model", "m/x", "--values", str(ROOT / "docs/examples/k8s-production-values.yaml")
    )
    assert {o["metadata"]["namespace"] for o in objects} == {"speech"}
    result = run_cli(capsys, "k8s", "--model", "m/x", "--values", str(tmp_path))
    assert result.code == 2 and result.out == "" and "Traceback" not in result.err
