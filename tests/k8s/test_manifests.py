"""`omni-deploy k8s` over the bundled files, the benchmark overlay and upstream's multi-GPU profiles:
every object valid for Kubernetes 1.33 (strict), GPUs equal to the config's distinct devices, the
ConfigMap equal to serve's rendered file, and no token in the output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s.kube import ROOT, containers, gpu_total, pod_specs, validate_object
from tests.support import upstream
from tests.support.profiles import DEPLOY, profiles, release_of

DATA = ROOT / "tests" / "data" / "k8s"
SECRET_VALUE = "hf_k8s_test_token_value"
# The profiles for 0.30.0 (each profile's first line names its release: tests/support/profiles.py);
# the 0.32.0rc1 one is rendered for its own release below.
BUNDLED = [p for p in profiles() if release_of(p) == "0.30.0"]
FOR_032 = [pytest.param(p, id=p.name) for p in profiles() if release_of(p) == "0.32.0rc1"]
OPERATIONS = ["PodDisruptionBudget", "NetworkPolicy"]  # after the workload and its Service


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The CLI as a process, with a token in its environment that must never reach the output."""
    env = {k: v for k, v in os.environ.items() if k != "MINICPMO_TOKEN2WAV_TRT"}
    env.update(PYTHONPATH=str(ROOT), HF_TOKEN=SECRET_VALUE)
    return subprocess.run(
        [sys.executable, "-m", "omni_deploy", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def render(file: Path, *args: str) -> list[dict[str, Any]]:
    release = release_of(file) if file.is_relative_to(DEPLOY) else "0.30.0"
    done = run("k8s", str(file), "--model", "openbmb/MiniCPM-o-4_5", "--hf-token-secret", "hf-token",
               "--target-version", release, *args)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SECRET_VALUE not in done.stdout + done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o is not None]


def distinct_devices(deploy_yaml: str) -> set[int]:
    """The GPUs a rendered deploy file asks for (pool or per-replica template `devices`)."""
    used: set[int] = set()
    for stage in yaml.safe_load(deploy_yaml)["stages"]:
        per_replica = int(stage.get("tensor_parallel_size") or 1)
        replicas = int(stage.get("num_replicas") or 1)
        listed = [
            int(d) for d in str(stage.get("devices", ",".join(map(str, range(per_replica))))).split(",")
        ]
        if replicas > 1 and len(listed) == per_replica:
            listed = [r * per_replica + d for r in range(replicas) for d in listed]
        used |= set(listed)
    return used


def config_map(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == "ConfigMap"]
    return found


def check(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        validate_object(obj)
    devices = distinct_devices(config_map(objects)["data"]["deploy.yaml"])
    assert gpu_total(objects) == len(devices)
    for spec in pod_specs(objects):
        # The token is a file of the Secret that huggingface_hub reads through HF_TOKEN_PATH, never
        # an environment variable (tests/integration checks that huggingface_hub reads it).
        (volume,) = [v for v in spec["volumes"] if v["name"] == "hf-token"]
        assert volume["secret"] == {
            "secretName": "hf-token",
            "items": [{"key": "HF_TOKEN", "path": "HF_TOKEN"}],
            "defaultMode": 0o440,
        }
        for container in spec["containers"]:
            env = {e["name"]: e for e in container["env"]}
            assert "HF_TOKEN" not in env
            assert env["HF_TOKEN_PATH"] == {
                "name": "HF_TOKEN_PATH",
                "value": "/var/run/secrets/huggingface/HF_TOKEN",
            }
            mounts = [m for m in container["volumeMounts"] if m["name"] == "hf-token"]
            assert mounts == [
                {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True}
            ]
            assert all("value" not in e or SECRET_VALUE not in e["value"] for e in container["env"])


def two_node_overlay(tmp_path: Path, base: Path) -> Path:
    """An upstream profile whose Thinker -> Talker edge can cross nodes (a Mooncake store)."""
    overlay = tmp_path / f"two-nodes-{base.name}"
    overlay.write_text(
        f"base_config: {base}\n"
        "connectors:\n  thinker_to_talker:\n    name: MooncakeStoreConnector\n"
        "stages:\n  - stage_id: 0\n    output_connectors: {to_stage_1: thinker_to_talker}\n"
        "  - stage_id: 1\n    input_connectors: {from_stage_0: thinker_to_talker}\n"
    )
    return overlay


@pytest.mark.parametrize("file", [*BUNDLED, DATA / "two_nodes.yaml", *FOR_032], ids=lambda p: p.name)
@pytest.mark.parametrize("gpus_per_node", [8, 2])
def test_bundled_files(file: Path, gpus_per_node: int) -> None:
    objects = render(file, "--gpus-per-node", str(gpus_per_node))
    check(objects)
    kinds = [o["kind"] for o in objects]
    if file.name == "two_nodes.yaml" and gpus_per_node == 2:
        assert kinds == ["ConfigMap", "LeaderWorkerSet", "Service", *OPERATIONS]
    else:
        assert kinds == ["ConfigMap", "Deployment", "Service", *OPERATIONS]


@pytest.mark.upstream
@pytest.mark.parametrize("name", ["minicpmo_4_5_8x4090.yaml", "minicpmo_4_5_8x4090_stage1_replicas.yaml"])
@pytest.mark.parametrize("workload", ["leaderworkerset", "statefulset"])
def test_upstream_profiles(name: str, workload: str, tmp_path: Path) -> None:
    base = upstream.deploy_dir() / name
    if "replicas" in name:
        # As released it over-subscribes GPU 5 (E350, see tests/validate/test_upstream_files.py),
        # and k8s refuses it as serve does; with stage 2's share lowered it fits.
        refused = run("k8s", str(base), "--model", "m/x")
        assert refused.returncode == 1 and "error[E350]" in refused.stderr and refused.stdout == ""
        base = tmp_path / "fitted.yaml"
        base.write_text(f"base_config: {upstream.deploy_dir() / name}\nstages:\n  - stage_id: 2\n"
                        "    gpu_memory_utilization: 0.15\n")  # fmt: skip
    one = render(base, "--workload", workload)
    check(one)
    assert [o["kind"] for o in one] == ["ConfigMap", "Deployment", "Service", *OPERATIONS]
    two = render(two_node_overlay(tmp_path, base), "--gpus-per-node", "4", "--workload", workload)
    check(two)
    workloads = [o["kind"] for o in two if o["kind"] in ("LeaderWorkerSet", "StatefulSet")]
    assert workloads == (["LeaderWorkerSet"] if workload == "leaderworkerset" else ["StatefulSet"] * 2)


@pytest.mark.upstream
@pytest.mark.parametrize("name", ["minicpmo_4_5_8x4090.yaml", "minicpmo_4_5_8x4090_stage1_replicas.yaml"])
def test_upstream_profiles_refused_across_nodes(name: str) -> None:
    """Their Thinker -> Talker edge is the automatic shared-memory connector: not across nodes."""
    file = str(upstream.deploy_dir() / name)
    for command in (["k8s", file, "--model", "openbmb/MiniCPM-o-4_5"], ["validate", file]):
        done = run(*command, "--gpus-per-node", "4")
        assert done.returncode == 1
        assert "error[E390]" in done.stdout + done.stderr
        text = done.stdout + done.stderr
        assert "stage 0 (Thinker) on node 0 and stage 1 (Talker) on node 1" in text
        assert "MooncakeStoreConnector" in text and "NixlConnector" in text
        assert "Traceback" not in text
    assert run("k8s", file, "--model", "m/x", "--gpus-per-node", "4").stdout == ""


@pytest.mark.upstream
def test_npu_profile_refused() -> None:
    done = run(
        "k8s", str(upstream.deploy_dir() / "moss_tts_local_2npu.yaml"), "--model", "m/x", "--platform", "npu"
    )
    assert done.returncode == 2 and done.stdout == ""  # a usage error: k8s renders NVIDIA pods only
    assert "nvidia.com/gpu" in done.stderr and "Traceback" not in done.stderr


def test_config_map_is_serves_file(tmp_path: Path) -> None:
    """The round trip: the ConfigMap's deploy.yaml parsed back equals serve's run-directory file."""
    for file in [*BUNDLED, DATA / "two_nodes.yaml"]:
        run_dir = tmp_path / file.stem
        done = run("serve", str(file), "--dry-run", "--platform", "cuda", "--run-dir", str(run_dir))
        assert done.returncode == 0, done.stderr
        served = (run_dir / "deploy.yaml").read_text()
        shipped = config_map(render(file, "--gpus-per-node", "2"))["data"]["deploy.yaml"]
        assert shipped == served
        assert yaml.safe_load(shipped) == yaml.safe_load(served)


def test_explain_agrees(tmp_path: Path) -> None:
    """The speaker backend the pods are told is the one `explain --backend` reports for the file."""
    import json

    for file in [*BUNDLED, DATA / "two_nodes.yaml"]:
        done = run("explain", str(file), "--backend", "--platform", "cuda", "-o", "json")
        assert done.returncode == 0, done.stderr
        backend = json.loads(done.stdout)["platforms"]["cuda"]["speaker_backend"]
        objects = render(file, "--gpus-per-node", "2")
        for container in containers(objects):
            env = {e["name"]: e.get("value") for e in container["env"]}
            # The pods read the backend from the rendered deploy file (the plugin applies it in the
            # Code2Wav stage); no environment variable stands in for it.
            assert "OMNI_DEPLOY_SPK_BACKEND" not in env
        record = yaml.safe_load(config_map(objects)["data"]["launch.json"])
        assert record["speaker"]["speaker_backend"] == backend
