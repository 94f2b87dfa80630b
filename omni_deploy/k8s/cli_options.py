"""What `omni-deploy k8s` was given on its command line, declared once (K8sArgs: each field is
its option, omni_deploy/common/cli_fields.py), and from it and --values the checked K8sOptions;
any K8sOptionError is a usage error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option, shared_option
from omni_deploy.common.defaults import MAX_GPUS_PER_NODE
from omni_deploy.k8s.options import (
    DEFAULT_IMAGE,
    DEFAULT_NAME,
    K8sOptions,
    Scheduling,
    Sizing,
    check_options,
    parse_model_cache,
)
from omni_deploy.k8s.values import Values, load_values, merged, parse_pair, parse_toleration


@dataclass(frozen=True)
class K8sArgs:
    model: str = option("--model", required=True, help="Hugging Face id, or an absolute path inside the pod.")
    image: str = option(
        "--image",
        default=DEFAULT_IMAGE,
        show_default=True,
        help="Container image with vllm, vllm-omni and omni-deploy: build and push docker/Dockerfile "
        "(docs/kubernetes.md); the default is not published anywhere.",
    )
    name: str | None = option(
        "--name", default=None, help=f"Name of the objects (a DNS-1123 label; default: {K8sOptions.name})."
    )
    namespace: str | None = option(
        "--namespace", default=None, help="Namespace to put into the objects (default: none, kubectl's)."
    )
    gpus_per_node: int = option(
        "--gpus-per-node",
        type=cf.count(1, MAX_GPUS_PER_NODE),
        default=K8sOptions.gpus_per_node,
        show_default=True,
        help="GPUs a node offers; stages that need more are spread over several nodes.",
    )
    hf_token_secret: str | None = option(
        "--hf-token-secret", default=None, help="Secret whose key HF_TOKEN holds the Hugging Face token."
    )
    model_cache: str = option(
        "--model-cache",
        default="empty",
        show_default=True,
        metavar="pvc:NAME|host:/path|per-node:SIZE[:CLASS]|empty[:SIZE]",
        help="Volume for the Hugging Face cache, or that holds an absolute --model path; SIZE in GiB.",
    )
    platform: str = option(
        "--platform",
        type=cf.platform(),
        default=K8sOptions.platform,
        show_default=True,
        help="Platform whose section of the file applies; only cuda (NVIDIA GPUs) is rendered.",
    )
    workload: str = option(
        "--workload",
        type=cf.choice("leaderworkerset", "statefulset"),
        default=K8sOptions.workload,
        show_default=True,
        help="Several nodes: a LeaderWorkerSet (needs the LWS CRD), or StatefulSets and a headless Service.",
    )
    port: int = option(
        "--port",
        type=cf.PORT,
        default=K8sOptions.port,
        show_default=True,
        help="API port of the master and the Service.",
    )
    served_model_name: str | None = option(
        "--served-model-name", default=None, help="Name the API serves the model under (vllm serve's option)."
    )
    shm_size_gib: int | None = option(
        "--shm-size-gib",
        type=cf.count(1, 65536),
        default=None,
        help="Size of /dev/shm per pod (default: 1 GiB plus 1 GiB per shared-memory connector in the pod).",
    )
    startup_timeout: int = option(
        "--startup-timeout",
        type=cf.count(60, 86400),
        default=K8sOptions.startup_timeout,
        show_default=True,
        metavar="SECONDS",
        help="Time the startup probe allows for model load and graph capture; the rollout deadline adds 10 minutes.",
    )
    cpu_per_gpu: int = option(
        "--cpu-per-gpu",
        type=cf.count(1, 1024),
        default=Sizing.cpu_per_gpu,
        show_default=True,
        help="CPUs a pod requests (and is limited to) per GPU it holds.",
    )
    memory_per_gpu_gib: int = option(
        "--memory-per-gpu-gib",
        type=cf.count(1, 4096),
        default=Sizing.memory_per_gpu_gib,
        show_default=True,
        help="Memory (GiB) a pod requests (and is limited to) per GPU it holds; /dev/shm is added.",
    )
    run_as_user: int = option(
        "--run-as-user",
        type=cf.count(0, 2**31 - 1),
        default=K8sOptions.run_as_user,
        show_default=True,
        metavar="UID",
        help="UID (and GID) of the server; 0 runs it as root, for an image that needs it.",
    )
    values_file: Path | None = option(
        "--values",
        type=cf.path(dir_okay=False),
        default=None,
        help="YAML with namespace, nodeSelector, tolerations, affinity, topologySpreadConstraints, "
        "runtimeClassName, priorityClassName, imagePullSecrets, labels, annotations (docs/kubernetes.md).",
    )
    node_selector: tuple[str, ...] = option(
        "--node-selector",
        default=(),
        multiple=True,
        metavar="KEY=VALUE",
        help="Node label the pods need (repeatable).",
    )
    toleration: tuple[str, ...] = option(
        "--toleration",
        default=(),
        multiple=True,
        metavar="KEY[=VALUE][:EFFECT]",
        help="Taint the pods tolerate (repeatable).",
    )
    runtime_class: str | None = option(
        "--runtime-class", default=None, help="runtimeClassName of the pods (e.g. nvidia)."
    )
    priority_class: str | None = option(
        "--priority-class", default=None, help="priorityClassName of the pods."
    )
    image_pull_secret: tuple[str, ...] = option(
        "--image-pull-secret",
        default=(),
        multiple=True,
        metavar="NAME",
        help="Secret to pull the image with (repeatable).",
    )
    label: tuple[str, ...] = option(
        "--label",
        default=(),
        multiple=True,
        metavar="KEY=VALUE",
        help="Label on every object and pod (repeatable).",
    )
    annotation: tuple[str, ...] = option(
        "--annotation",
        default=(),
        multiple=True,
        metavar="KEY=VALUE",
        help="Annotation on every object and pod (repeatable).",
    )
    pdb: bool = option(
        "--pdb/--no-pdb",
        default=True,
        show_default=True,
        help="A PodDisruptionBudget that keeps drains and autoscalers from evicting a serving pod.",
    )
    network_policy: bool = option(
        "--network-policy/--no-network-policy",
        default=True,
        show_default=True,
        help="A NetworkPolicy: the API port from anywhere, everything between the instance's pods.",
    )
    service_monitor: bool = option(
        "--service-monitor",
        default=False,
        is_flag=True,
        help="A Prometheus Operator ServiceMonitor for /metrics.",
    )
    target_version: str | None = shared_option("target_version", "validate against")
    fmt: str = shared_option(
        "output",
        ("yaml", "json"),
        default="yaml",
        help="yaml: multi-document, for kubectl apply -f -; json: a v1 List.",
    )


def _scheduling(args: K8sArgs) -> Scheduling:
    return Scheduling(
        node_selector=dict(parse_pair(p, "--node-selector") for p in args.node_selector),
        tolerations=tuple(parse_toleration(t) for t in args.toleration),
        runtime_class=args.runtime_class,
        priority_class=args.priority_class,
        image_pull_secrets=tuple(args.image_pull_secret),
        labels=dict(parse_pair(p, "--label") for p in args.label),
        annotations=dict(parse_pair(p, "--annotation") for p in args.annotation),
    )


def options_from_args(args: K8sArgs) -> K8sOptions:
    values = load_values(args.values_file) if args.values_file is not None else Values()
    namespace, scheduling = merged(values, _scheduling(args), args.namespace)
    options = K8sOptions(
        model=args.model,
        image=args.image or DEFAULT_IMAGE,
        name=args.name or DEFAULT_NAME,
        namespace=namespace,
        gpus_per_node=args.gpus_per_node,
        hf_token_secret=args.hf_token_secret,
        model_cache=parse_model_cache(args.model_cache),
        platform=args.platform,
        port=args.port,
        workload=args.workload,
        served_model_name=args.served_model_name,
        run_as_user=args.run_as_user,
        startup_timeout=args.startup_timeout,
        sizing=Sizing(cpu_per_gpu=args.cpu_per_gpu, memory_per_gpu_gib=args.memory_per_gpu_gib),
        scheduling=scheduling,
        disruption_budget=args.pdb,
        network_policy=args.network_policy,
        service_monitor=args.service_monitor,
    )
    check_options(options)
    return options
