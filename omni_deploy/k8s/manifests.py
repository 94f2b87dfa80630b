"""The Kubernetes objects, as plain dicts: ConfigMap, Service, and a Deployment (one node), a
LeaderWorkerSet or StatefulSets (several nodes).

Multi-node follows vllm-omni 0.30.0's distributed mode (entrypoints/cli/serve.py,
engine/stage_runtime.py): the master is `vllm serve ... --stage-id S --omni-master-address A
--omni-master-port P` and runs stage S only; every other stage is a `--headless --stage-id N`
process that registers with the master. A pod that runs several stages runs one process each.
Device ids are renumbered per pod with `--stage-overrides` (read into runtime devices by
config/stage_config.py:1273), so the ConfigMap keeps the very file `serve` would run.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from omni_deploy.k8s.options import (
    CONFIG_DIR,
    HF_HOME,
    MASTER_PORT,
    TOKEN_KEY,
    K8sOptionError,
    K8sOptions,
)
from omni_deploy.topology.crossnode import SHARED_MEMORY, Edge
from omni_deploy.topology.placement import NodeGroup, StageUse

GPU = "nvidia.com/gpu"
GIB = 1024**3
Obj = dict[str, Any]


@dataclass(frozen=True)
class Inputs:
    """What the objects are made of, computed by the caller (see commands/k8s.py)."""

    options: K8sOptions
    config_text: str  # the rendered deploy file, byte for byte what serve writes
    record: dict[str, Any]  # the launch record (launch.json)
    server_argv: list[str]  # serve's command with --deploy-config in CONFIG_DIR, --host 0.0.0.0
    env: dict[str, str]  # serve's environment changes (speaker decision, spawn)
    groups: list[NodeGroup]
    edges: list[Edge]
    shm_gib: int | None = None  # None: sized from the pod's shared-memory edges


def labels(options: K8sOptions, component: str | None = None) -> dict[str, str]:
    out = {
        "app.kubernetes.io/name": "omni-deploy",
        "app.kubernetes.io/instance": options.name,
        "app.kubernetes.io/managed-by": "omni-deploy",
    }
    if component:
        out["app.kubernetes.io/component"] = component
    return out


def _meta(options: K8sOptions, name: str, component: str | None = None) -> Obj:
    meta: Obj = {"name": name}
    if options.namespace:
        meta["namespace"] = options.namespace
    meta["labels"] = labels(options, component)
    return meta


def config_map(inputs: Inputs) -> Obj:
    options = inputs.options
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(options, f"{options.name}-config"),
        "data": {
            "deploy.yaml": inputs.config_text,
            "launch.json": json.dumps(inputs.record, indent=2, default=str) + "\n",
        },
    }


def api_service(options: K8sOptions) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(options, options.name, "api"),
        "spec": {
            "type": "ClusterIP",
            "selector": labels(options, "master"),
            "ports": [{"name": "http", "port": options.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _stage_overrides(group: NodeGroup, stages: tuple[StageUse, ...]) -> list[str]:
    renumbered = {str(s.stage_id): {"devices": d} for s in stages if (d := group.pod_devices(s))}
    return ["--stage-overrides", json.dumps(renumbered, separators=(",", ":"))] if renumbered else []


def _base_argv(server_argv: list[str]) -> list[str]:
    """`vllm serve MODEL --omni --deploy-config FILE`: serve's command before its server options."""
    return server_argv[: server_argv.index("--host")]


def _headless_argv(inputs: Inputs, group: NodeGroup, use: StageUse, master: str) -> list[str]:
    argv = [
        *_base_argv(inputs.server_argv),
        "--headless",
        "--stage-id",
        str(use.stage_id),
        "--omni-master-address",
        master,
        "--omni-master-port",
        str(MASTER_PORT),
    ]
    if use.replicas > 1:
        argv += ["--omni-dp-size-local", str(use.replicas)]
    return argv + _stage_overrides(group, (use,))


def pod_processes(inputs: Inputs, group: NodeGroup, master: str) -> list[list[str]]:
    """The vllm processes of one pod: the master (group 0) first, then one headless per stage."""
    if len(inputs.groups) == 1:
        return [inputs.server_argv + _stage_overrides(group, group.stages)]
    processes = []
    stages = list(group.stages)
    if group.index == 0:
        first = stages.pop(0)
        processes.append(
            [
                *inputs.server_argv,
                "--stage-id",
                str(first.stage_id),
                "--omni-master-address",
                "$(POD_IP)",
                "--omni-master-port",
                str(MASTER_PORT),
                *_stage_overrides(group, (first,)),
            ]
        )
        master = "$(POD_IP)"  # stages beside the master reach it in its own pod
    processes += [_headless_argv(inputs, group, use, master) for use in stages]
    return processes


def shell_script(processes: list[list[str]]) -> str:
    """One process: exec it. Several: start all, and end the container when the first one ends."""
    if len(processes) == 1:
        return "exec " + shlex.join(processes[0])
    return "\n".join([shlex.join(p) + " &" for p in processes] + ["wait -n", "exit $?"])


def shm_size_gib(inputs: Inputs, group: NodeGroup) -> int:
    """/dev/shm: 1 GiB for vLLM's own queues, plus 1 GiB per shared-memory edge inside the pod."""
    if inputs.shm_gib is not None:
        return inputs.shm_gib
    local = {s.stage_id for s in group.stages}
    edges = [e for e in inputs.edges if e.kind == SHARED_MEMORY and {e.source, e.target} <= local]
    return 1 + len(edges)


def _model_volume(options: K8sOptions) -> tuple[Obj, Obj]:
    if options.model.startswith("/"):
        parent = posixpath.dirname(options.model.rstrip("/"))
        mount = {
            "name": "model-cache",
            "mountPath": parent if parent != "/" else options.model,
            "readOnly": True,
        }
    else:
        mount = {"name": "model-cache", "mountPath": HF_HOME}
    cache = options.model_cache
    if cache.kind == "pvc":
        volume: Obj = {"name": "model-cache", "persistentVolumeClaim": {"claimName": cache.source}}
    elif cache.kind == "host":
        volume = {"name": "model-cache", "hostPath": {"path": cache.source, "type": "Directory"}}
    else:
        volume = {"name": "model-cache", "emptyDir": {}}
    return volume, mount


def _probe(path: str, period: int, failures: int) -> Obj:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def container(
    inputs: Inputs,
    command: list[str],
    gpus: int,
    *,
    serves_http: bool,
    master: bool,
) -> Obj:
    options = inputs.options
    env: list[Obj] = [{"name": k, "value": v} for k, v in inputs.env.items()]
    if not options.model.startswith("/"):
        env.append({"name": "HF_HOME", "value": HF_HOME})
    if options.hf_token_secret:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": options.hf_token_secret, "key": TOKEN_KEY}},
            }
        )
    if len(inputs.groups) > 1:
        env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    _, model_mount = _model_volume(options)
    spec: Obj = {
        "name": "vllm",
        "image": options.image,
        "command": command,
        "env": env,
        "resources": {"limits": {GPU: gpus}},
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            model_mount,
        ],
    }
    ports = []
    if serves_http:
        ports.append({"name": "http", "containerPort": options.port, "protocol": "TCP"})
    if master:
        ports.append({"name": "omni-master", "containerPort": MASTER_PORT, "protocol": "TCP"})
    if ports:
        spec["ports"] = ports
    if serves_http:
        # Model load, graph capture and TensorRT builds take minutes: 30 minutes before liveness
        # counts, as serve's --ready-timeout; /health answers 503 until every stage is up.
        spec["startupProbe"] = _probe("/health", 10, 180)
        spec["readinessProbe"] = _probe("/health", 10, 3)
        spec["livenessProbe"] = _probe("/health", 30, 4)
    return spec


def pod_template(
    inputs: Inputs,
    component: str,
    container_spec: Obj,
    shm_gib: int,
    extra_labels: dict[str, str] | None = None,
) -> Obj:
    options = inputs.options
    volume, _ = _model_volume(options)
    return {
        "metadata": {"labels": {**labels(options, component), **(extra_labels or {})}},
        "spec": {
            "containers": [container_spec],
            "volumes": [
                {"name": "config", "configMap": {"name": f"{options.name}-config"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib}Gi"}},
                volume,
            ],
        },
    }


def _command(processes: list[list[str]]) -> list[str]:
    return processes[0] if len(processes) == 1 else ["bash", "-c", shell_script(processes)]


def single_node(inputs: Inputs) -> list[Obj]:
    options = inputs.options
    (group,) = inputs.groups
    command = _command(pod_processes(inputs, group, ""))
    template = pod_template(
        inputs,
        "master",
        container(inputs, command, group.gpus, serves_http=True, master=False),
        shm_size_gib(inputs, group),
    )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(options, options.name, "master"),
        "spec": {
            "replicas": 1,
            # A rolling update would need a second set of GPUs while the old pod still holds them.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels(options, "master")},
            "template": template,
        },
    }
    return [config_map(inputs), deployment, api_service(options)]


def _leader(inputs: Inputs) -> Obj:
    group = inputs.groups[0]
    command = _command(pod_processes(inputs, group, ""))
    return pod_template(
        inputs,
        "master",
        container(inputs, command, group.gpus, serves_http=True, master=True),
        shm_size_gib(inputs, group),
    )


def leader_worker_set(inputs: Inputs) -> list[Obj]:
    options = inputs.options
    workers = inputs.groups[1:]
    sizes = {g.gpus for g in workers}
    if len(sizes) > 1:
        raise K8sOptionError(
            "a LeaderWorkerSet gives every worker the same pod template, but the worker nodes need "
            f"{', '.join(str(g.gpus) for g in workers)} GPUs; use --workload statefulset"
        )
    cases = [
        f"  {g.index})\n"
        + "\n".join(
            "    " + line
            for line in shell_script(pod_processes(inputs, g, "$(LWS_LEADER_ADDRESS)")).splitlines()
        )
        + "\n    ;;"
        for g in workers
    ]
    script = (
        'case "$LWS_WORKER_INDEX" in\n'
        + "\n".join(cases)
        + '\n  *)\n    echo "omni-deploy: no stages for worker $LWS_WORKER_INDEX" >&2\n    exit 1\n    ;;\nesac'
    )
    worker = pod_template(
        inputs,
        "worker",
        container(inputs, ["bash", "-c", script], sizes.pop(), serves_http=False, master=False),
        max(shm_size_gib(inputs, g) for g in workers),
    )
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _meta(options, options.name, "stages"),
        "spec": {
            "replicas": 1,
            # The master answers /health only once every headless stage has registered, so the
            # workers must start with the leader, not after it is ready.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": len(inputs.groups),
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _leader(inputs),
                "workerTemplate": worker,
            },
        },
    }
    return [config_map(inputs), lws, api_service(options)]


def stateful_sets(inputs: Inputs) -> list[Obj]:
    options = inputs.options
    nodes = f"{options.name}-nodes"
    master = f"{options.name}-node0-0.{nodes}"
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(options, nodes, "stages"),
        "spec": {
            "clusterIP": "None",
            # Stages register with the master before it is ready: its name must resolve at once.
            "publishNotReadyAddresses": True,
            "selector": labels(options),
            "ports": [
                {"name": "omni-master", "port": MASTER_PORT, "targetPort": MASTER_PORT, "protocol": "TCP"}
            ],
        },
    }
    objects: list[Obj] = [config_map(inputs), headless]
    for group in inputs.groups:
        first = group.index == 0
        node_label = {"omni-deploy/node": str(group.index)}
        command = _command(pod_processes(inputs, group, master))
        template = pod_template(
            inputs,
            "master" if first else "worker",
            container(inputs, command, group.gpus, serves_http=first, master=first),
            shm_size_gib(inputs, group),
            node_label,
        )
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": _meta(
                    options, f"{options.name}-node{group.index}", "master" if first else "worker"
                ),
                "spec": {
                    "replicas": 1,
                    "serviceName": nodes,
                    "podManagementPolicy": "Parallel",
                    "selector": {
                        "matchLabels": {**labels(options, "master" if first else "worker"), **node_label}
                    },
                    "template": template,
                },
            }
        )
    objects.append(api_service(options))
    return objects


def build_manifests(inputs: Inputs) -> list[Obj]:
    if len(inputs.groups) == 1:
        return single_node(inputs)
    if inputs.options.workload == "statefulset":
        return stateful_sets(inputs)
    return leader_worker_set(inputs)
