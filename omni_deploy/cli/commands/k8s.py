"""`omni-deploy k8s`: Kubernetes manifests that run a deploy file, on one node or several."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from omni_deploy.cli.file_options import file_argument
from omni_deploy.cli.params import MAX_GPUS_PER_NODE, PORT, Count, PlatformType, output_option
from omni_deploy.cli.settings import target_version_option
from omni_deploy.k8s.options import DEFAULT_IMAGE, K8sOptions, Sizing

if TYPE_CHECKING:
    from omni_deploy.cli.settings import Settings
    from omni_deploy.deployment.model import Deployment


@click.command(short_help="Kubernetes manifests that serve a deploy file.")
@file_argument()
@click.option("--model", required=True, help="Hugging Face id, or an absolute path inside the pod.")
@click.option(
    "--image",
    default=DEFAULT_IMAGE,
    show_default=True,
    help="Container image with vllm, vllm-omni and omni-deploy: build and push docker/Dockerfile "
    "(docs/kubernetes.md); the default is not published anywhere.",
)
@click.option(
    "--name", default=None, help=f"Name of the objects (a DNS-1123 label; default: {K8sOptions.name})."
)
@click.option(
    "--namespace", default=None, help="Namespace to put into the objects (default: none, kubectl's)."
)
@click.option(
    "--gpus-per-node",
    type=Count(1, MAX_GPUS_PER_NODE),
    default=K8sOptions.gpus_per_node,
    show_default=True,
    help="GPUs a node offers; stages that need more are spread over several nodes.",
)
@click.option(
    "--hf-token-secret", default=None, help="Secret whose key HF_TOKEN holds the Hugging Face token."
)
@click.option(
    "--model-cache",
    default="empty",
    show_default=True,
    metavar="pvc:NAME|host:/path|per-node:SIZE[:CLASS]|empty[:SIZE]",
    help="Volume for the Hugging Face cache, or that holds an absolute --model path; SIZE in GiB.",
)
@click.option(
    "--platform",
    type=PlatformType(),
    default=K8sOptions.platform,
    show_default=True,
    help="Platform whose section of the file applies; only cuda (NVIDIA GPUs) is rendered.",
)
@click.option(
    "--workload",
    type=click.Choice(("leaderworkerset", "statefulset")),
    default=K8sOptions.workload,
    show_default=True,
    help="Several nodes: a LeaderWorkerSet (needs the LWS CRD), or StatefulSets and a headless Service.",
)
@click.option(
    "--port",
    type=PORT,
    default=K8sOptions.port,
    show_default=True,
    help="API port of the master and the Service.",
)
@click.option(
    "--served-model-name", default=None, help="Name the API serves the model under (vllm serve's option)."
)
@click.option(
    "--shm-size-gib",
    type=Count(1, 65536),
    default=None,
    help="Size of /dev/shm per pod (default: 1 GiB plus 1 GiB per shared-memory connector in the pod).",
)
@click.option(
    "--startup-timeout",
    type=Count(60, 86400),
    default=K8sOptions.startup_timeout,
    show_default=True,
    metavar="SECONDS",
    help="Time the startup probe allows for model load and graph capture; the rollout deadline adds 10 minutes.",
)
@click.option(
    "--cpu-per-gpu",
    type=Count(1, 1024),
    default=Sizing.cpu_per_gpu,
    show_default=True,
    help="CPUs a pod requests (and is limited to) per GPU it holds.",
)
@click.option(
    "--memory-per-gpu-gib",
    type=Count(1, 4096),
    default=Sizing.memory_per_gpu_gib,
    show_default=True,
    help="Memory (GiB) a pod requests (and is limited to) per GPU it holds; /dev/shm is added.",
)
@click.option(
    "--run-as-user",
    type=Count(0, 2**31 - 1),
    default=K8sOptions.run_as_user,
    show_default=True,
    metavar="UID",
    help="UID (and GID) of the server; 0 runs it as root, for an image that needs it.",
)
@click.option(
    "--values",
    "values_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="YAML with namespace, nodeSelector, tolerations, affinity, topologySpreadConstraints, "
    "runtimeClassName, priorityClassName, imagePullSecrets, labels, annotations (docs/kubernetes.md).",
)
@click.option(
    "--node-selector", multiple=True, metavar="KEY=VALUE", help="Node label the pods need (repeatable)."
)
@click.option(
    "--toleration",
    multiple=True,
    metavar="KEY[=VALUE][:EFFECT]",
    help="Taint the pods tolerate (repeatable).",
)
@click.option("--runtime-class", default=None, help="runtimeClassName of the pods (e.g. nvidia).")
@click.option("--priority-class", default=None, help="priorityClassName of the pods.")
@click.option(
    "--image-pull-secret", multiple=True, metavar="NAME", help="Secret to pull the image with (repeatable)."
)
@click.option(
    "--label", multiple=True, metavar="KEY=VALUE", help="Label on every object and pod (repeatable)."
)
@click.option(
    "--annotation",
    multiple=True,
    metavar="KEY=VALUE",
    help="Annotation on every object and pod (repeatable).",
)
@click.option(
    "--pdb/--no-pdb",
    default=True,
    show_default=True,
    help="A PodDisruptionBudget that keeps drains and autoscalers from evicting a serving pod.",
)
@click.option(
    "--network-policy/--no-network-policy",
    default=True,
    show_default=True,
    help="A NetworkPolicy: the API port from anywhere, everything between the instance's pods.",
)
@click.option(
    "--service-monitor",
    is_flag=True,
    default=False,
    help="A Prometheus Operator ServiceMonitor for /metrics.",
)
@target_version_option("validate against")
@output_option(("yaml", "json"), help="yaml: multi-document, for kubectl apply -f -; json: a v1 List.")
def k8s(
    file: str | None, shm_size_gib: int | None, target_version: str | None, fmt: str, **params: Any
) -> int:
    """Print Kubernetes manifests that serve FILE, in the image --image names.

    Build that image first and push it to your registry: docker/Dockerfile (docs/kubernetes.md);
    nothing is published under the default name, so pods given it cannot pull.

    FILE defaults to the project's deploy file (see `validate`; with several, name one), else the
    bundled MiniCPM-o 4.5 turn profile. A ConfigMap with the deploy file exactly as `omni-deploy serve` renders it, a Deployment when
    every stage fits one node (--gpus-per-node), else a LeaderWorkerSet (or StatefulSets) with the
    master and headless stages, a Service for the API, a PodDisruptionBudget and a NetworkPolicy.
    """
    from omni_deploy.cli.settings import resolve
    from omni_deploy.k8s.build import build
    from omni_deploy.k8s.cli_options import options_from_cli
    from omni_deploy.k8s.manifests import notes
    from omni_deploy.k8s.options import K8sOptionError, PlatformRefused
    from omni_deploy.k8s.output import to_json, to_yaml

    try:
        options = options_from_cli(params)
    except (K8sOptionError, PlatformRefused) as error:
        raise click.UsageError(str(error)) from None
    settings = resolve(target_version)
    target = settings.target_version
    deployment = _validated(file, options, settings)
    if deployment is None:
        click.echo("omni-deploy: no manifests: the deploy file does not pass validation", err=True)
        return 1
    objects = build(deployment, options, target, shm_size_gib)
    for note in [*_default_image_note(options.image), *notes(options, objects)]:
        click.echo(f"omni-deploy: note: {note}", err=True)
    click.echo(to_json(objects) if fmt == "json" else to_yaml(objects), nl=False)
    return 0


def _default_image_note(image: str) -> list[str]:
    """The default image is a name, not a published build: say so where the operator looks first."""
    if image != DEFAULT_IMAGE:
        return []
    return [
        f"--image is the default {DEFAULT_IMAGE}, which nobody publishes: the pods cannot pull it. "
        "Build and push docker/Dockerfile (docs/kubernetes.md), then pass --image REGISTRY/NAME:TAG"
    ]


def _validated(file: str | None, options: K8sOptions, settings: Settings) -> Deployment | None:
    """The file (FILE, else the project's) checked for the platform and node size the manifests
    use, with the project's ignore and strict (findings worth showing go to stderr); None when an
    error stops the build."""
    from omni_deploy.cli.file_options import one_file_name
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.reporters.text import text as report_text
    from omni_deploy.validate.runner import validate_file

    checks = Options(
        platforms=(options.platform,), target_version=settings.target_version,
        gpus_per_node=options.gpus_per_node, ignore=settings.ignore, strict=settings.strict,
    )  # fmt: skip
    report = validate_file(one_file_name(file), checks)
    if any(f.severity != "info" for f in report.findings):
        click.echo(report_text([report]), err=True)
    return report.deployment if report.valid else None
