"""`omni-deploy k8s`: Kubernetes manifests that run a deploy file, on one node or several."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from omni_deploy.cli_params import PlatformType, TargetVersionType, output_option
from omni_deploy.k8s.options import DEFAULT_IMAGE, DEFAULT_NAME

if TYPE_CHECKING:
    from omni_deploy.deployment import Deployment
    from omni_deploy.k8s.options import K8sOptions


@click.command()
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--model", required=True, help="Hugging Face id, or an absolute path inside the pod.")
@click.option(
    "--image", default=None, help="Container image with vllm-omni and omni-deploy (docs/kubernetes.md)."
)
@click.option("--name", default=None, help="Name of the objects (a DNS-1123 label; default: minicpmo).")
@click.option(
    "--namespace", default=None, help="Namespace to put into the objects (default: none, kubectl's)."
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1),
    default=8,
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
    metavar="pvc:NAME|host:/path|empty",
    help="Volume for the Hugging Face cache, or that holds an absolute --model path.",
)
@click.option(
    "--platform",
    type=PlatformType(),
    default="cuda",
    show_default=True,
    help="Platform whose section of the file applies; only cuda (NVIDIA GPUs) is rendered.",
)
@click.option(
    "--workload",
    type=click.Choice(("leaderworkerset", "statefulset")),
    default="leaderworkerset",
    show_default=True,
    help="Several nodes: a LeaderWorkerSet (needs the LWS CRD), or StatefulSets and a headless Service.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8091,
    show_default=True,
    help="API port of the master and the Service.",
)
@click.option(
    "--served-model-name", default=None, help="Name the API serves the model under (vllm serve's option)."
)
@click.option(
    "--shm-size-gib",
    type=click.IntRange(min=1),
    default=None,
    help="Size of /dev/shm per pod (default: 1 GiB plus 1 GiB per shared-memory connector in the pod).",
)
@click.option(
    "--target-version",
    type=TargetVersionType(),
    default=None,
    help="vllm-omni version to validate against (default: the installed one, else the latest release).",
)
@output_option(("yaml", "json"), help="yaml: multi-document, for kubectl apply -f -; json: a v1 List.")
def k8s(
    file: str | None,
    model: str,
    image: str | None,
    name: str | None,
    namespace: str | None,
    gpus_per_node: int,
    hf_token_secret: str | None,
    model_cache: str,
    platform: str,
    workload: str,
    port: int,
    served_model_name: str | None,
    shm_size_gib: int | None,
    target_version: str | None,
    fmt: str,
) -> int:
    """Print Kubernetes manifests that serve FILE (default: the bundled MiniCPM-o 4.5 turn profile).

    A ConfigMap with the deploy file exactly as `omni-deploy serve` renders it, a Deployment when
    every stage fits one node (--gpus-per-node), else a LeaderWorkerSet (or StatefulSets) with the
    master and headless stages, and a Service for the API.
    """
    from omni_deploy.k8s.build import build
    from omni_deploy.k8s.options import K8sOptionError, K8sOptions, check_options, parse_model_cache
    from omni_deploy.k8s.output import to_json, to_yaml
    from omni_deploy.knowledge.versions import default_target_version

    try:
        options = K8sOptions(
            model=model, image=image or DEFAULT_IMAGE, name=name or DEFAULT_NAME, namespace=namespace,
            gpus_per_node=gpus_per_node, hf_token_secret=hf_token_secret, platform=platform, port=port,
            model_cache=parse_model_cache(model_cache), workload=workload, served_model_name=served_model_name,
        )  # fmt: skip
        check_options(options)
    except K8sOptionError as error:
        raise click.UsageError(str(error)) from None
    target = target_version or default_target_version()
    deployment = _validated(file, options, target)
    if deployment is None:
        click.echo("omni-deploy: no manifests: the deploy file does not pass validation", err=True)
        return 1
    objects = build(deployment, options, target, shm_size_gib)
    click.echo(to_json(objects) if fmt == "json" else to_yaml(objects), nl=False)
    return 0


def _validated(file: str | None, options: K8sOptions, target: str) -> Deployment | None:
    """The file checked for the platform and node size the manifests use (findings worth showing
    go to stderr); None when an error stops the build."""
    from omni_deploy.bundled import deploy_file_name
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.report import text as report_text
    from omni_deploy.validate.runner import validate_file

    report = validate_file(
        deploy_file_name(file),
        Options(platforms=(options.platform,), target_version=target, gpus_per_node=options.gpus_per_node),
    )
    if any(f.severity != "info" for f in report.findings):
        click.echo(report_text([report]), err=True)
    return report.deployment if report.valid else None
