"""From the values `omni-deploy k8s` was given on its command line (and in --values) to checked
K8sOptions; any K8sOptionError is a usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def _scheduling(params: dict[str, Any]) -> Scheduling:
    return Scheduling(
        node_selector=dict(parse_pair(p, "--node-selector") for p in params["node_selector"]),
        tolerations=tuple(parse_toleration(t) for t in params["toleration"]),
        runtime_class=params["runtime_class"],
        priority_class=params["priority_class"],
        image_pull_secrets=tuple(params["image_pull_secret"]),
        labels=dict(parse_pair(p, "--label") for p in params["label"]),
        annotations=dict(parse_pair(p, "--annotation") for p in params["annotation"]),
    )


def options_from_cli(params: dict[str, Any]) -> K8sOptions:
    values_file: Path | None = params["values_file"]
    values = load_values(values_file) if values_file is not None else Values()
    namespace, scheduling = merged(values, _scheduling(params), params["namespace"])
    options = K8sOptions(
        model=params["model"],
        image=params["image"] or DEFAULT_IMAGE,
        name=params["name"] or DEFAULT_NAME,
        namespace=namespace,
        gpus_per_node=params["gpus_per_node"],
        hf_token_secret=params["hf_token_secret"],
        model_cache=parse_model_cache(params["model_cache"]),
        platform=params["platform"],
        port=params["port"],
        workload=params["workload"],
        served_model_name=params["served_model_name"],
        run_as_user=params["run_as_user"],
        startup_timeout=params["startup_timeout"],
        sizing=Sizing(params["cpu_per_gpu"], params["memory_per_gpu_gib"]),
        scheduling=scheduling,
        disruption_budget=params["pdb"],
        network_policy=params["network_policy"],
        service_monitor=params["service_monitor"],
    )
    check_options(options)
    return options
