"""One pod: its container (command, environment, resources, probes, security) and its template
(volumes, scheduling, the config checksum).

Sizing. A pod asks for CPU and memory per GPU (`--cpu-per-gpu`, `--memory-per-gpu-gib`) plus its
memory-backed /dev/shm, with requests equal to limits: Guaranteed QoS, the last class the kubelet
evicts under memory pressure, which a model load of many GiB would otherwise invite. Ephemeral
storage covers the writable volumes (HOME, /tmp, an `empty` model cache) and the logs.

Security. The root file system is read-only and the container runs as a non-root UID (the
image's files stay readable, nothing of it writable); HOME, /tmp and the Hugging Face cache are
volumes. No privilege escalation, every capability dropped, seccomp RuntimeDefault, no
service-account token (nothing in the pod talks to the API server). The Hugging Face token is a
file from the Secret (HF_TOKEN_PATH), not an environment variable a crash dump or `env` shows.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from omni_deploy.k8s.entrypoint import master_health_command
from omni_deploy.k8s.options import (
    CONFIG_DIR,
    HF_HOME,
    HOME,
    MASTER_PORT,
    TOKEN_DIR,
    TOKEN_KEY,
    K8sOptions,
    model_mount,
    parse_image,
)

GPU = "nvidia.com/gpu"
Obj = dict[str, Any]

HOME_GIB = 16  # vLLM's torch.compile cache, Triton and FlashInfer JIT caches, CUDA's
TMP_GIB = 4
LOG_GIB = 2  # the container's log files, which count against its ephemeral storage
PROBE_PERIOD = 10
PROBE_TIMEOUT = 5
LIVENESS_PERIOD = 30
LIVENESS_FAILURES = 4
READINESS_FAILURES = 3
# Signal to SIGKILL: the servers' own shutdown (engine processes, CUDA contexts) takes seconds.
TERMINATION_GRACE = 60


def model_mount_path(options: K8sOptions) -> str:
    """Where the model cache volume is mounted: the parent of a model path, else HF_HOME."""
    return model_mount(options.model) if options.model.startswith("/") else HF_HOME


def model_volume(options: K8sOptions) -> Obj:
    cache = options.model_cache
    if cache.kind == "pvc":
        return {"name": "model-cache", "persistentVolumeClaim": {"claimName": cache.source}}
    if cache.kind == "per-node":  # one node: the claim the manifests create (see manifests.py)
        return {"name": "model-cache", "persistentVolumeClaim": {"claimName": f"{options.name}-model-cache"}}
    if cache.kind == "host":
        return {"name": "model-cache", "hostPath": {"path": cache.source, "type": "Directory"}}
    return {"name": "model-cache", "emptyDir": {"sizeLimit": f"{cache.size_gib}Gi"}}


def claim_spec(options: K8sOptions) -> Obj:
    """The claim of a per-node cache: one node's own, so ReadWriteOnce."""
    cache = options.model_cache
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{cache.size_gib}Gi"}},
    }
    if cache.storage_class:
        spec["storageClassName"] = cache.storage_class
    return spec


def ephemeral_gib(options: K8sOptions) -> int:
    cache = options.model_cache.size_gib if options.model_cache.kind == "empty" else 0
    return HOME_GIB + TMP_GIB + LOG_GIB + cache


def resources(options: K8sOptions, gpus: int, shm_gib: int) -> Obj:
    sizing = options.sizing
    amounts = {
        "cpu": str(sizing.cpu_per_gpu * gpus),
        "memory": f"{sizing.memory_per_gpu_gib * gpus + shm_gib}Gi",
        "ephemeral-storage": f"{ephemeral_gib(options)}Gi",
        GPU: gpus,
    }
    return {"requests": dict(amounts), "limits": dict(amounts)}


def startup_failures(options: K8sOptions) -> int:
    return math.ceil(options.startup_timeout / PROBE_PERIOD)


def _probe(action: Obj, period: int, failures: int) -> Obj:
    return {
        **copy.deepcopy(action),
        "periodSeconds": period,
        "timeoutSeconds": PROBE_TIMEOUT,
        "failureThreshold": failures,
    }


def probes(options: K8sOptions, master_address: str | None) -> Obj:
    """The master: /health over HTTP. A headless worker (`master_address`): its master's /health,
    so it is ready when the whole group serves, and restarted when its master is gone for
    LIVENESS_PERIOD * LIVENESS_FAILURES seconds (it would never register with a new one)."""
    if master_address is None:
        action: Obj = {"httpGet": {"path": "/health", "port": "http"}}
    else:
        command = master_health_command(master_address, options.port, PROBE_TIMEOUT - 1)
        action = {"exec": {"command": command}}
    # Model load, graph capture and TensorRT builds take minutes: liveness counts only after the
    # startup probe passed, within --startup-timeout (serve's --ready-timeout).
    return {
        "startupProbe": _probe(action, PROBE_PERIOD, startup_failures(options)),
        "readinessProbe": _probe(action, PROBE_PERIOD, READINESS_FAILURES),
        "livenessProbe": _probe(action, LIVENESS_PERIOD, LIVENESS_FAILURES),
    }


def _env(options: K8sOptions, serve_env: dict[str, str], several_nodes: bool) -> list[Obj]:
    env: list[Obj] = [{"name": k, "value": v} for k, v in serve_env.items()]
    # HOME is a volume; USER keeps getpass.getuser() (torch's compile cache directory) from asking
    # the passwd file for a UID the image does not list.
    env += [{"name": "HOME", "value": HOME}, {"name": "USER", "value": "omni"}]
    if not options.model.startswith("/"):
        env.append({"name": "HF_HOME", "value": HF_HOME})
    if options.hf_token_secret:
        env.append({"name": "HF_TOKEN_PATH", "value": f"{TOKEN_DIR}/{TOKEN_KEY}"})
    if several_nodes:
        env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    return env


def _mounts(options: K8sOptions) -> list[Obj]:
    mounts: list[Obj] = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "home", "mountPath": HOME},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    model: Obj = {"name": "model-cache", "mountPath": model_mount_path(options)}
    if options.model.startswith("/"):
        model["readOnly"] = True
    mounts.append(model)
    if options.hf_token_secret:
        mounts.append({"name": "hf-token", "mountPath": TOKEN_DIR, "readOnly": True})
    return mounts


def container_security(options: K8sOptions) -> Obj:
    context: Obj = {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    if options.run_as_user:
        context["runAsNonRoot"] = True
    return context


def pod_security(options: K8sOptions) -> Obj:
    uid = options.run_as_user
    context: Obj = {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid}
    if uid:
        context["runAsNonRoot"] = True
    # The group of a volume's files is set at mount only when the root's differs: a cache of many
    # GiB is not walked at every start.
    context["fsGroupChangePolicy"] = "OnRootMismatch"
    context["seccompProfile"] = {"type": "RuntimeDefault"}
    return context


@dataclass(frozen=True)
class ContainerSpec:
    command: list[str]
    gpus: int
    shm_gib: int
    serves_http: bool  # the master: the API port and HTTP probes
    master_port: bool  # the master of several nodes: the port headless stages register on
    master_address: str | None = None  # a headless worker: where its master answers /health


def pull_policy(options: K8sOptions) -> str:
    """A digest names one build: the node's copy will do. A tag is resolved at the registry at every
    start (only the manifest; layers already on the node are kept), so every node runs the build
    the tag names now and the pull secret is checked."""
    return "IfNotPresent" if parse_image(options.image)[1] else "Always"


def container(
    options: K8sOptions, serve_env: dict[str, str], several_nodes: bool, spec: ContainerSpec
) -> Obj:
    out: Obj = {
        "name": "vllm",
        "image": options.image,
        "imagePullPolicy": pull_policy(options),
        "command": spec.command,
        "env": _env(options, serve_env, several_nodes),
        "resources": resources(options, spec.gpus, spec.shm_gib),
        "securityContext": container_security(options),
        "volumeMounts": _mounts(options),
    }
    ports = []
    if spec.serves_http:
        ports.append({"name": "http", "containerPort": options.port, "protocol": "TCP"})
    if spec.master_port:
        ports.append({"name": "omni-master", "containerPort": MASTER_PORT, "protocol": "TCP"})
    if ports:
        out["ports"] = ports
    out.update(probes(options, None if spec.serves_http else spec.master_address))
    return out


def volumes(options: K8sOptions, shm_gib: int) -> list[Obj]:
    out: list[Obj] = [
        {"name": "config", "configMap": {"name": f"{options.name}-config"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib}Gi"}},
        {"name": "home", "emptyDir": {"sizeLimit": f"{HOME_GIB}Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": f"{TMP_GIB}Gi"}},
        model_volume(options),
    ]
    if options.hf_token_secret:
        out.append(
            {
                "name": "hf-token",
                "secret": {
                    "secretName": options.hf_token_secret,
                    "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}],
                    "defaultMode": 0o440,  # owner root, group fsGroup: the server's UID reads it
                },
            }
        )
    return out


def scheduling(options: K8sOptions) -> Obj:
    s = options.scheduling
    out: Obj = {}
    if s.node_selector:
        out["nodeSelector"] = dict(s.node_selector)
    if s.tolerations:
        out["tolerations"] = [dict(t) for t in s.tolerations]
    if s.affinity:
        out["affinity"] = dict(s.affinity)
    if s.topology_spread_constraints:
        out["topologySpreadConstraints"] = [dict(t) for t in s.topology_spread_constraints]
    if s.runtime_class:
        out["runtimeClassName"] = s.runtime_class
    if s.priority_class:
        out["priorityClassName"] = s.priority_class
    if s.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": n} for n in s.image_pull_secrets]
    return out


def pod_spec(options: K8sOptions, container_spec: Obj, shm_gib: int, claim_template: bool) -> Obj:
    vols = volumes(options, shm_gib)
    if claim_template:
        vols = [v for v in vols if v["name"] != "model-cache"]
    return {
        "automountServiceAccountToken": False,
        # Service links would put NAME_PORT=tcp://... of every Service of the namespace into the
        # environment, where vLLM reads VLLM_* names as its own settings.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": TERMINATION_GRACE,
        "securityContext": pod_security(options),
        **scheduling(options),
        "containers": [container_spec],
        "volumes": vols,
    }
