"""The Kubernetes objects, as plain dicts: ConfigMap, Service, and a Deployment (one node), a
LeaderWorkerSet or StatefulSets (several nodes); beside them a PodDisruptionBudget, a
NetworkPolicy, a ServiceMonitor on request, and the cache claim of a per-node cache on one node.
One pod's insides are pod.py's; what checkov may skip and why, policy.py's.

Multi-node follows vllm-omni 0.30.0's distributed mode (entrypoints/cli/serve.py,
engine/stage_runtime.py): the master is `vllm serve ... --stage-id S --omni-master-address A
--omni-master-port P` and runs stage S only; every other stage is a `--headless --stage-id N`
process that registers with the master. A pod that runs several stages runs one process each.
Device ids are renumbered per pod with `--stage-overrides` (read into runtime devices by
config/stage_config.py:1273), so the ConfigMap keeps the very file `serve` would run.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from omni_deploy.deployment.topology.crossnode import SHARED_MEMORY, Edge
from omni_deploy.deployment.topology.placement import NodeGroup, StageUse
from omni_deploy.k8s.entrypoint import container_command, supervisor_script
from omni_deploy.k8s.options import (
    MASTER_PORT,
    K8sOptionError,
    K8sOptions,
    image_notes,
)
from omni_deploy.k8s.pod import (
    PROBE_PERIOD,
    ContainerSpec,
    claim_spec,
    container,
    pod_spec,
    startup_failures,
)
from omni_deploy.k8s.policy import skip_annotations

Obj = dict[str, Any]
ROLLOUT_ANNOTATION = "omni-deploy/rollout-timeout"
PULL_MARGIN = 600  # scheduling, and the pull of an image of many GiB, before the startup probe runs


@dataclass(frozen=True)
class Inputs:
    """What the objects are made of, computed by the caller (see cli/commands/k8s.py)."""

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


def _meta(options: K8sOptions, name: str, component: str | None = None, *, has_pods: bool = False) -> Obj:
    meta: Obj = {"name": name}
    if options.namespace:
        meta["namespace"] = options.namespace
    meta["labels"] = {**labels(options, component), **options.scheduling.labels}
    annotations = {**options.scheduling.annotations, **skip_annotations(options, has_pods)}
    if annotations:
        meta["annotations"] = annotations
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


def shm_size_gib(inputs: Inputs, group: NodeGroup) -> int:
    """/dev/shm: 1 GiB for vLLM's own queues, plus 1 GiB per shared-memory edge inside the pod."""
    if inputs.shm_gib is not None:
        return inputs.shm_gib
    local = {s.stage_id for s in group.stages}
    edges = [e for e in inputs.edges if e.kind == SHARED_MEMORY and {e.source, e.target} <= local]
    return 1 + len(edges)


def config_checksum(config: Obj) -> str:
    """On every pod template: a changed ConfigMap changes the template, so the pods are replaced."""
    data = json.dumps(config["data"], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def rollout_deadline(options: K8sOptions) -> int:
    """Seconds a rollout may take: the startup probe's whole budget plus scheduling and the pull of
    an image of many GiB. The Deployment's progressDeadlineSeconds; `kubectl rollout status
    --timeout` for every workload (the omni-deploy/rollout-timeout annotation)."""
    return PROBE_PERIOD * startup_failures(options) + PULL_MARGIN


def rollout_timeout(options: K8sOptions) -> str:
    return f"{math.ceil(rollout_deadline(options) / 60)}m"


def _workload_meta(options: K8sOptions, name: str, component: str) -> Obj:
    meta = _meta(options, name, component, has_pods=True)
    meta["annotations"] = {ROLLOUT_ANNOTATION: rollout_timeout(options), **meta.get("annotations", {})}
    return meta


def _template(
    inputs: Inputs,
    component: str,
    spec: ContainerSpec,
    checksum: str,
    extra_labels: dict[str, str] | None = None,
    claim_template: bool = False,
) -> Obj:
    options = inputs.options
    pod_labels = {**labels(options, component), **(extra_labels or {})}
    annotations = {"checksum/config": checksum}
    if spec.serves_http:
        # The pod that serves the API: what an llm-d InferencePool selects, and what Prometheus
        # scrapes (vLLM's /metrics on the API port).
        pod_labels.update(
            {"llm-d.ai/inferenceServing": "true", "llm-d.ai/model": options.name, "llm-d.ai/role": "both"}
        )
        annotations.update(
            {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(options.port),
                "prometheus.io/path": "/metrics",
            }
        )
    pod_labels.update(options.scheduling.labels)
    annotations.update(options.scheduling.annotations)
    several = len(inputs.groups) > 1
    return {
        "metadata": {"labels": pod_labels, "annotations": annotations},
        "spec": pod_spec(
            options, container(options, inputs.env, several, spec), spec.shm_gib, claim_template
        ),
    }


def claim_template(options: K8sOptions) -> Obj:
    return {
        "metadata": {"name": "model-cache", "labels": labels(options, "cache")},
        "spec": claim_spec(options),
    }


def _node_claim(options: K8sOptions) -> Obj:
    """A per-node cache on one node: a claim of its own, kept (not owned by the Deployment)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(options, f"{options.name}-model-cache", "cache"),
        "spec": claim_spec(options),
    }


def single_node(inputs: Inputs) -> list[Obj]:
    options = inputs.options
    (group,) = inputs.groups
    config = config_map(inputs)
    command = container_command(pod_processes(inputs, group, ""))
    spec = ContainerSpec(
        command, group.gpus, shm_size_gib(inputs, group), serves_http=True, master_port=False
    )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _workload_meta(options, options.name, "master"),
        "spec": {
            "replicas": 1,
            # Without it a rollout counts as failed after 600 s, while the startup probe allows
            # --startup-timeout (30 minutes) for the model load.
            "progressDeadlineSeconds": rollout_deadline(options),
            # A rolling update would need a second set of GPUs while the old pod still holds them.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels(options, "master")},
            "template": _template(inputs, "master", spec, config_checksum(config)),
        },
    }
    claims = [_node_claim(options)] if options.model_cache.kind == "per-node" else []
    return [config, *claims, deployment, api_service(options), *operations(inputs)]


def _leader(inputs: Inputs, checksum: str) -> Obj:
    group = inputs.groups[0]
    command = container_command(pod_processes(inputs, group, ""))
    spec = ContainerSpec(command, group.gpus, shm_size_gib(inputs, group), serves_http=True, master_port=True)
    return _template(
        inputs, "master", spec, checksum, claim_template=inputs.options.model_cache.kind == "per-node"
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
            for line in supervisor_script(pod_processes(inputs, g, "$(LWS_LEADER_ADDRESS)")).splitlines()
        )
        + "\n    ;;"
        for g in workers
    ]
    script = (
        'case "$LWS_WORKER_INDEX" in\n'
        + "\n".join(cases)
        + '\n  *)\n    echo "omni-deploy: no stages for worker $LWS_WORKER_INDEX" >&2\n    exit 1\n    ;;\nesac'
    )
    config = config_map(inputs)
    checksum = config_checksum(config)
    per_node = options.model_cache.kind == "per-node"
    worker_spec = ContainerSpec(
        ["bash", "-c", script],
        sizes.pop(),
        max(shm_size_gib(inputs, g) for g in workers),
        serves_http=False,
        master_port=False,
        master_address="$LWS_LEADER_ADDRESS",
    )
    template: Obj = {
        "size": len(inputs.groups),
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": _leader(inputs, checksum),
        "workerTemplate": _template(inputs, "worker", worker_spec, checksum, claim_template=per_node),
    }
    if per_node:
        template["volumeClaimTemplates"] = [claim_template(options)]
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _workload_meta(options, options.name, "stages"),
        "spec": {
            "replicas": 1,
            # The master answers /health only once every headless stage has registered, so the
            # workers must start with the leader, not after it is ready.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": template,
        },
    }
    return [config, lws, api_service(options), *operations(inputs)]


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
    config = config_map(inputs)
    checksum = config_checksum(config)
    per_node = options.model_cache.kind == "per-node"
    objects: list[Obj] = [config, headless]
    for group in inputs.groups:
        first = group.index == 0
        component = "master" if first else "worker"
        node_label = {"omni-deploy/node": str(group.index)}
        command = container_command(pod_processes(inputs, group, master))
        spec = ContainerSpec(
            command,
            group.gpus,
            shm_size_gib(inputs, group),
            serves_http=first,
            master_port=first,
            master_address=None if first else master,
        )
        sts_spec: Obj = {
            "replicas": 1,
            "serviceName": nodes,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {**labels(options, component), **node_label}},
            "template": _template(inputs, component, spec, checksum, node_label, claim_template=per_node),
        }
        if per_node:
            sts_spec["volumeClaimTemplates"] = [claim_template(options)]
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": _workload_meta(options, f"{options.name}-node{group.index}", component),
                "spec": sts_spec,
            }
        )
    objects.append(api_service(options))
    return objects + operations(inputs)


def disruption_budget(options: K8sOptions) -> Obj:
    """No voluntary eviction (drain, autoscaler, node upgrade) of a healthy pod: a restart costs a
    model load of up to --startup-timeout. Pods that are not ready (loading, crash-looping) may
    still be evicted, so a broken server never blocks a drain."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(options, options.name),
        "spec": {
            "maxUnavailable": 0,
            "selector": {"matchLabels": labels(options)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def network_policy(inputs: Inputs) -> Obj:
    """Ingress to the API port (clients, Prometheus, an llm-d gateway) from anywhere, and between
    the pods of this instance (headless stages register on the master's port; connectors and
    vllm-omni's ZMQ sockets use ports of their own choosing). Egress stays open: the model download."""
    options = inputs.options
    rules: list[Obj] = [{"ports": [{"protocol": "TCP", "port": options.port}]}]
    if len(inputs.groups) > 1:
        rules.append({"from": [{"podSelector": {"matchLabels": labels(options)}}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(options, options.name),
        "spec": {
            "podSelector": {"matchLabels": labels(options)},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }


def service_monitor(options: K8sOptions) -> Obj:
    """For the Prometheus Operator: vLLM's /metrics through the API Service."""
    spec: Obj = {
        "selector": {"matchLabels": labels(options, "api")},
        "endpoints": [{"port": "http", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}],
    }
    if options.namespace:
        spec["namespaceSelector"] = {"matchNames": [options.namespace]}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta(options, options.name, "metrics"),
        "spec": spec,
    }


def operations(inputs: Inputs) -> list[Obj]:
    options = inputs.options
    out = []
    if options.disruption_budget:
        out.append(disruption_budget(options))
    if options.network_policy:
        out.append(network_policy(inputs))
    if options.service_monitor:
        out.append(service_monitor(options))
    return out


def build_manifests(inputs: Inputs) -> list[Obj]:
    if len(inputs.groups) == 1:
        return single_node(inputs)
    if inputs.options.workload == "statefulset":
        return stateful_sets(inputs)
    return leader_worker_set(inputs)


def notes(options: K8sOptions, objects: list[Obj]) -> list[str]:
    """What the manifests cannot check and the operator must know (printed to stderr)."""
    out = image_notes(options.image)
    workloads = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet", "LeaderWorkerSet")]
    pods = sum(
        1 if o["kind"] != "LeaderWorkerSet" else o["spec"]["leaderWorkerTemplate"]["size"] for o in workloads
    )
    if options.model_cache.kind == "pvc" and pods > 1:
        access = "ReadOnlyMany or ReadWriteMany" if options.model.startswith("/") else "ReadWriteMany"
        out.append(
            f"--model-cache pvc:{options.model_cache.source} is mounted by {pods} pods on different "
            f"nodes: the claim must be {access} (a ReadWriteOnce claim leaves all but one pod Pending); "
            "or give each pod its own cache with --model-cache per-node:SIZE[:STORAGECLASS]"
        )
    return out
