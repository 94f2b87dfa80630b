"""What every pod gets: resources sized from its GPUs (Guaranteed QoS), a security context that
passes the policy check with the caches on writable volumes, no service links, the llm-d labels and
scrape annotations on the pod that serves the API, probes on every pod, and the model cache forms
(a claim shared by several nodes, or one per node)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from omni_deploy.k8s.options import HF_HOME, HOME
from tests.k8s.kube import ROOT, pod_specs, pod_templates, validate_object
from tests.support.cli import Result, run_cli

TWO_NODES = str(ROOT / "tests" / "data" / "k8s" / "two_nodes.yaml")
MODEL = ["--model", "openbmb/MiniCPM-o-4_5"]


def render(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[list[dict[str, Any]], Result]:
    result = run_cli(capsys, "k8s", *args)
    assert result.code == 0, result.err
    objects = [o for o in yaml.safe_load_all(result.out) if o is not None]
    for obj in objects:
        validate_object(obj)
    return objects, result


def shm_gib(spec: dict[str, Any]) -> int:
    (dshm,) = [v for v in spec["volumes"] if v["name"] == "dshm"]
    return int(dshm["emptyDir"]["sizeLimit"].removesuffix("Gi"))


@pytest.mark.parametrize("workload", ["leaderworkerset", "statefulset"])
def test_resources_per_gpu(capsys: pytest.CaptureFixture[str], workload: str) -> None:
    objects, _ = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", workload,
                        "--cpu-per-gpu", "6", "--memory-per-gpu-gib", "40")  # fmt: skip
    gpus = []
    for spec in pod_specs(objects):
        (container,) = spec["containers"]
        resources = container["resources"]
        assert resources["requests"] == resources["limits"]  # Guaranteed QoS
        n = resources["limits"]["nvidia.com/gpu"]
        gpus.append(n)
        assert resources["limits"]["cpu"] == str(6 * n)
        assert resources["limits"]["memory"] == f"{40 * n + shm_gib(spec)}Gi"
        # HOME 16 + /tmp 4 + logs 2 + the empty model cache's 64
        assert resources["limits"]["ephemeral-storage"] == "86Gi"
    assert gpus == [2, 1]


def test_ephemeral_storage_without_an_empty_cache(capsys: pytest.CaptureFixture[str]) -> None:
    objects, _ = render(capsys, *MODEL, "--model-cache", "pvc:hf-cache")
    (spec,) = pod_specs(objects)
    assert spec["containers"][0]["resources"]["limits"]["ephemeral-storage"] == "22Gi"
    sized, _ = render(capsys, *MODEL, "--model-cache", "empty:120Gi")
    (volume,) = [v for v in pod_specs(sized)[0]["volumes"] if v["name"] == "model-cache"]
    assert volume == {"name": "model-cache", "emptyDir": {"sizeLimit": "120Gi"}}
    assert pod_specs(sized)[0]["containers"][0]["resources"]["limits"]["ephemeral-storage"] == "142Gi"


@pytest.mark.parametrize("workload", ["leaderworkerset", "statefulset"])
def test_security_context_and_writable_volumes(capsys: pytest.CaptureFixture[str], workload: str) -> None:
    objects, _ = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", workload)
    for spec in pod_specs(objects):
        assert spec["automountServiceAccountToken"] is False
        assert spec["enableServiceLinks"] is False
        assert spec["securityContext"] == {
            "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001, "runAsNonRoot": True,
            "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"},
        }  # fmt: skip
        (container,) = spec["containers"]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
        }  # fmt: skip
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["HOME"] == HOME and env["HF_HOME"] == HF_HOME and env["USER"] == "omni"
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        # Every place the servers write is a volume: the root file system is read-only.
        for path in (HOME, "/tmp", HF_HOME, "/dev/shm"):
            assert "emptyDir" in volumes[mounts[path]]
        assert container["imagePullPolicy"] == "Always"  # a tag: resolved at every start


def test_root_and_digest(capsys: pytest.CaptureFixture[str]) -> None:
    digest = "registry.example.com/omni-deploy@sha256:" + "ab" * 32
    objects, _ = render(capsys, *MODEL, "--run-as-user", "0", "--image", digest)
    (spec,) = pod_specs(objects)
    assert spec["securityContext"]["runAsUser"] == 0 and "runAsNonRoot" not in spec["securityContext"]
    (container,) = spec["containers"]
    assert "runAsNonRoot" not in container["securityContext"]
    assert container["image"] == digest and container["imagePullPolicy"] == "IfNotPresent"
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    skips = [v for k, v in deployment["metadata"]["annotations"].items() if k.startswith("checkov.io/skip")]
    assert [s.split("=")[0] for s in skips] == ["CKV_K8S_21"]  # no digest skip with a digest


@pytest.mark.parametrize("workload", ["leaderworkerset", "statefulset"])
def test_api_pod_labels_and_metrics(capsys: pytest.CaptureFixture[str], workload: str) -> None:
    objects, _ = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", workload)
    templates = [t for o in objects for t, _ in pod_templates(o)]
    serving = [
        t
        for t in templates
        if any(p.get("name") == "http" for p in t["spec"]["containers"][0].get("ports", []))
    ]
    assert len(serving) == 1 and len(templates) == 2
    for template in templates:
        labels, annotations = template["metadata"]["labels"], template["metadata"]["annotations"]
        if template is serving[0]:
            assert {k: labels[k] for k in labels if k.startswith("llm-d.ai/")} == {
                "llm-d.ai/inferenceServing": "true", "llm-d.ai/model": "minicpmo", "llm-d.ai/role": "both"
            }  # fmt: skip
            assert annotations["prometheus.io/scrape"] == "true"
            assert (
                annotations["prometheus.io/port"] == "8091"
                and annotations["prometheus.io/path"] == "/metrics"
            )
        else:  # a headless worker serves nothing: not an inference endpoint, nothing to scrape
            assert not any(k.startswith("llm-d.ai/") for k in labels)
            assert not any(k.startswith("prometheus.io/") for k in annotations)
        container = template["spec"]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert probe in container


def test_worker_probes_ask_the_master(capsys: pytest.CaptureFixture[str]) -> None:
    objects, _ = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", "statefulset")
    (worker,) = [o for o in objects if o["metadata"]["name"] == "minicpmo-node1"]
    container = worker["spec"]["template"]["spec"]["containers"][0]
    command = container["readinessProbe"]["exec"]["command"]
    assert command[0] == "python3" and command[3:] == ["minicpmo-node0-0.minicpmo-nodes", "8091", "4"]
    assert container["startupProbe"]["failureThreshold"] == 180
    (lws_objects, _) = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL)
    (lws,) = [o for o in lws_objects if o["kind"] == "LeaderWorkerSet"]
    worker_container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert worker_container["livenessProbe"]["exec"]["command"][3] == "$LWS_LEADER_ADDRESS"


@pytest.mark.parametrize("workload", ["leaderworkerset", "statefulset"])
def test_per_node_cache_on_several_nodes(capsys: pytest.CaptureFixture[str], workload: str) -> None:
    objects, result = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", workload,
                             "--model-cache", "per-node:300:fast-ssd")  # fmt: skip
    assert "ReadWriteMany" not in result.err
    claim_spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "300Gi"}},
                  "storageClassName": "fast-ssd"}  # fmt: skip
    for obj in objects:
        if obj["kind"] == "StatefulSet":
            assert [c["spec"] for c in obj["spec"]["volumeClaimTemplates"]] == [claim_spec]
        if obj["kind"] == "LeaderWorkerSet":
            claims = obj["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"]
            assert [c["spec"] for c in claims] == [claim_spec] and claims[0]["metadata"][
                "name"
            ] == "model-cache"
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    for spec in pod_specs(objects):
        # The claim template provides the volume: the pod must not name one of its own.
        assert "model-cache" not in {v["name"] for v in spec["volumes"]}
        assert "model-cache" in {m["name"] for m in spec["containers"][0]["volumeMounts"]}
        assert spec["containers"][0]["resources"]["limits"]["ephemeral-storage"] == "22Gi"


def test_per_node_cache_on_one_node(capsys: pytest.CaptureFixture[str]) -> None:
    objects, _ = render(capsys, *MODEL, "--model-cache", "per-node:200Gi")
    (claim,) = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "minicpmo-model-cache"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "200Gi"}},
    }
    (spec,) = pod_specs(objects)
    (volume,) = [v for v in spec["volumes"] if v["name"] == "model-cache"]
    assert volume["persistentVolumeClaim"] == {"claimName": "minicpmo-model-cache"}


@pytest.mark.parametrize(("model", "access"), [(MODEL, "ReadWriteMany"),
                                               (["--model", "/models/m"], "ReadOnlyMany or ReadWriteMany")])  # fmt: skip
def test_shared_claim_on_several_nodes_is_said(
    capsys: pytest.CaptureFixture[str], model: list[str], access: str
) -> None:
    _, result = render(capsys, TWO_NODES, "--gpus-per-node", "2", *model, "--model-cache", "pvc:hf-cache")
    assert (
        f"--model-cache pvc:hf-cache is mounted by 2 pods on different nodes: the claim must be {access}"
        in result.err
    )
    _, one = render(capsys, *model, "--model-cache", "pvc:hf-cache")
    assert "ReadWriteMany" not in one.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-cache", "per-node:0"], "expected a size in GiB"),
        (["--model-cache", "per-node:big"], "expected a size in GiB"),
        (["--model-cache", "per-node:100:Fast_SSD"], "storage class 'Fast_SSD' is not a DNS-1123 subdomain"),
        (["--model-cache", "empty:-1"], "expected a size in GiB"),
        (["--model", "/models/m", "--model-cache", "per-node:100"], "--model-cache is per-node"),
    ],
)
def test_cache_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    full = args if "--model" in args else [*MODEL, *args]
    result = run_cli(capsys, "k8s", *full)
    assert result.code == 2 and result.out == "" and message in result.err
