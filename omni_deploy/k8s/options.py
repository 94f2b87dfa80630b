"""What `omni-deploy k8s` is asked for, checked before anything is built."""

from __future__ import annotations

import re
from dataclasses import dataclass

from omni_deploy.errors import OmniDeployError

DEFAULT_IMAGE = "ghcr.io/omni-deploy/omni-deploy:latest"  # docs/kubernetes.md shows how to build it
DEFAULT_NAME = "minicpmo"
DEFAULT_PORT = 8091
MASTER_PORT = 29600
CONFIG_DIR = "/etc/omni-deploy"
HF_HOME = "/root/.cache/huggingface"
TOKEN_KEY = "HF_TOKEN"  # key inside the Secret named by --hf-token-secret

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Hugging Face repo ids: an optional owner, a name; letters, digits, '-', '_', '.'; no '--' or '..'.
_HF_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


class K8sOptionError(OmniDeployError):
    """An option value that cannot become a valid manifest (a usage error)."""


class PlatformRefused(OmniDeployError):
    """A platform whose devices these manifests cannot request."""


@dataclass(frozen=True)
class ModelCache:
    kind: str  # pvc | host | empty
    source: str = ""  # claim name or host path


@dataclass(frozen=True)
class K8sOptions:
    model: str
    image: str = DEFAULT_IMAGE
    name: str = DEFAULT_NAME
    namespace: str | None = None
    gpus_per_node: int = 8
    hf_token_secret: str | None = None
    model_cache: ModelCache = ModelCache("empty")
    platform: str = "cuda"
    port: int = DEFAULT_PORT
    workload: str = "leaderworkerset"  # several nodes: leaderworkerset | statefulset
    served_model_name: str | None = None


def check_dns_label(value: str, what: str, limit: int = 63) -> None:
    if len(value) > limit or not _DNS_LABEL.match(value):
        raise K8sOptionError(
            f"{what} {value!r} is not a DNS-1123 label: lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most {limit} characters"
        )


def check_model(model: str) -> None:
    if model.startswith("/"):
        return
    if _HF_ID.match(model) and "--" not in model and ".." not in model:
        return
    raise K8sOptionError(
        f"--model {model!r} is neither a Hugging Face id (owner/name) nor an absolute path inside the "
        "pod (a relative path means nothing there)"
    )


def parse_model_cache(value: str) -> ModelCache:
    kind, sep, source = value.partition(":")
    if value == "empty":
        return ModelCache("empty")
    if sep and kind == "pvc":
        check_dns_label(source, "--model-cache pvc: claim name", 253)
        return ModelCache("pvc", source)
    if sep and kind == "host" and source.startswith("/"):
        return ModelCache("host", source.rstrip("/") or "/")
    raise K8sOptionError(f"--model-cache {value!r}: expected pvc:CLAIM, host:/absolute/path or empty")


def check_options(options: K8sOptions) -> None:
    if options.platform != "cuda":
        raise PlatformRefused(
            f"--platform {options.platform}: omni-deploy k8s renders NVIDIA GPU pods (nvidia.com/gpu) "
            f"only; {options.platform} devices are requested through another device plugin, which it "
            "does not know"
        )
    check_model(options.model)
    # Object names get suffixes (-config, -node1, -nodes): keep room for them within 63.
    check_dns_label(options.name, "--name", 50)
    if options.namespace is not None:
        check_dns_label(options.namespace, "--namespace")
    if options.hf_token_secret is not None:
        check_dns_label(options.hf_token_secret, "--hf-token-secret", 253)
    if options.model.startswith("/") and options.model_cache.kind == "empty":
        raise K8sOptionError(
            f"--model {options.model} is a path in the pod, but --model-cache is empty: put the model "
            "on a volume (--model-cache pvc:CLAIM or host:/path); it is mounted at the model's parent "
            "directory"
        )
