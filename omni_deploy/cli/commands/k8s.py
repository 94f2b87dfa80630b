"""`omni-deploy k8s`: Kubernetes manifests that run a deploy file, on one node or several."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from omni_deploy.cli.file_options import file_argument
from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.k8s.cli_options import K8sArgs
from omni_deploy.k8s.options import DEFAULT_IMAGE, K8sOptions

if TYPE_CHECKING:
    from omni_deploy.cli.settings import Settings
    from omni_deploy.deployment.model import Deployment


@click.command(short_help="Kubernetes manifests that serve a deploy file.")
@file_argument()
@options_from(K8sArgs)
def k8s(file: str | None, **kwargs: Any) -> int:
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
    from omni_deploy.k8s.cli_options import options_from_args
    from omni_deploy.k8s.manifests import notes
    from omni_deploy.k8s.options import K8sOptionError, PlatformRefused
    from omni_deploy.k8s.output import to_json, to_yaml

    args = K8sArgs(**picked(K8sArgs, kwargs))
    try:
        options = options_from_args(args)
    except (K8sOptionError, PlatformRefused) as error:
        raise click.UsageError(str(error)) from None
    settings = resolve(args.target_version)
    target = settings.target_version
    deployment = _validated(file, options, settings)
    if deployment is None:
        click.echo("omni-deploy: no manifests: the deploy file does not pass validation", err=True)
        return 1
    objects = build(deployment, options, target, args.shm_size_gib)
    for note in [*_default_image_note(options.image), *notes(options, objects)]:
        click.echo(f"omni-deploy: note: {note}", err=True)
    click.echo(to_json(objects) if args.fmt == "json" else to_yaml(objects), nl=False)
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
