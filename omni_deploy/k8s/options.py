"""What `omni-deploy k8s` is asked for, checked before anything is built."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from omni_deploy import __version__
from omni_deploy.common import defaults
from omni_deploy.common.errors import UsageProblem

# A tag of this release, never `latest`: a pod restarted next month must get the same build.
# Nothing is published under this name; docs/kubernetes.md shows how to build and push it.
DEFAULT_IMAGE = f"ghcr.io/omni-deploy/omni-deploy:{__version__}"
DEFAULT_NAME = "minicpmo"
DEFAULT_PORT = defaults.PORT
MASTER_PORT = 29600
CONFIG_DIR = "/etc/omni-deploy"
# The root file system is read-only: HOME (vLLM's, Triton's and torch's compile caches), /tmp and
# the Hugging Face cache are volumes.
HOME = "/home/omni"
HF_HOME = "/var/cache/huggingface"
TOKEN_DIR = "/var/run/secrets/huggingface"  # the Secret, mounted as files (HF_TOKEN_PATH)
TOKEN_KEY = "HF_TOKEN"  # key inside the Secret named by --hf-token-secret
# A high UID of no user in the image: no clash with a host user, no write access to the image.
DEFAULT_UID = 10001
# serve's --ready-timeout: model load, graph capture and TensorRT builds before /health answers.
DEFAULT_STARTUP_TIMEOUT = defaults.READY_TIMEOUT_S
DEFAULT_CPU_PER_GPU = 8
DEFAULT_MEMORY_PER_GPU_GIB = 32
DEFAULT_EMPTY_CACHE_GIB = 64

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
# Hugging Face repo ids: an optional owner, a name; letters, digits, '-', '_', '.'; no '--' or '..'.
_HF_ID = re.compile(r"(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}")
_SIZE = re.compile(r"([1-9][0-9]{0,5})(Gi)?")
# name[:tag][@sha256:hex], the name lower-case path components with an optional registry host.
_IMAGE = re.compile(
    r"(?P<name>(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)


class K8sOptionError(UsageProblem):
    """An option value that cannot become a valid manifest (a usage error)."""


class PlatformRefused(UsageProblem):
    """A platform whose devices these manifests cannot request."""


@dataclass(frozen=True)
class ModelCache:
    kind: str  # pvc | host | empty | per-node
    source: str = ""  # claim name or host path
    size_gib: int = 0  # empty: the emptyDir's sizeLimit; per-node: each claim's size
    storage_class: str | None = None  # per-node claims; None: the cluster's default class


@dataclass(frozen=True)
class Sizing:
    """CPU and memory per GPU a pod requests (and is limited to: Guaranteed QoS)."""

    cpu_per_gpu: int = DEFAULT_CPU_PER_GPU
    memory_per_gpu_gib: int = DEFAULT_MEMORY_PER_GPU_GIB


@dataclass(frozen=True)
class Scheduling:
    """Where the pods may run and what the objects carry besides omni-deploy's own fields."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    affinity: dict[str, Any] | None = None
    topology_spread_constraints: tuple[dict[str, Any], ...] = ()
    runtime_class: str | None = None
    priority_class: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class K8sOptions:
    model: str
    image: str = DEFAULT_IMAGE
    name: str = DEFAULT_NAME
    namespace: str | None = None
    gpus_per_node: int = 8
    hf_token_secret: str | None = None
    model_cache: ModelCache = ModelCache("empty", size_gib=DEFAULT_EMPTY_CACHE_GIB)
    platform: str = "cuda"
    port: int = DEFAULT_PORT
    workload: str = "leaderworkerset"  # several nodes: leaderworkerset | statefulset
    served_model_name: str | None = None
    run_as_user: int = DEFAULT_UID  # 0: root (the image needs it)
    startup_timeout: int = DEFAULT_STARTUP_TIMEOUT  # seconds
    sizing: Sizing = field(default_factory=Sizing)
    scheduling: Scheduling = field(default_factory=Scheduling)
    disruption_budget: bool = True
    network_policy: bool = True
    service_monitor: bool = False


def check_dns_label(value: str, what: str, limit: int = 63) -> None:
    if len(value) > limit or not _DNS_LABEL.fullmatch(value):
        raise K8sOptionError(
            f"{what} {value!r} is not a DNS-1123 label: lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most {limit} characters"
        )


def check_dns_subdomain(value: str, what: str) -> None:
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise K8sOptionError(
            f"{what} {value!r} is not a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters"
        )


def check_model(model: str) -> None:
    if model.startswith("/"):
        return
    if _HF_ID.fullmatch(model) and "--" not in model and ".." not in model:
        return
    raise K8sOptionError(
        f"--model {model!r} is neither a Hugging Face id (owner/name) nor an absolute path inside the "
        "pod (a relative path means nothing there)"
    )


def _size_gib(text: str, what: str) -> int:
    match = _SIZE.fullmatch(text)
    if not match:
        raise K8sOptionError(f"{what} {text!r}: expected a size in GiB, such as 200 or 200Gi")
    return int(match.group(1))


_CACHE_FORMS = (
    "expected pvc:CLAIM, host:/absolute/path or empty[:SIZE] (one emptyDir per pod), "
    "or per-node:SIZE[:STORAGECLASS] (one claim per pod)"
)


def parse_model_cache(value: str) -> ModelCache:
    kind, sep, source = value.partition(":")
    if kind == "empty":
        size = _size_gib(source, "--model-cache empty:") if sep else DEFAULT_EMPTY_CACHE_GIB
        return ModelCache("empty", size_gib=size)
    if sep and kind == "pvc":
        check_dns_subdomain(source, "--model-cache pvc: claim name")
        return ModelCache("pvc", source)
    if sep and kind == "host" and source.startswith("/"):
        return ModelCache("host", source.rstrip("/") or "/")
    if sep and kind == "per-node":
        amount, _, storage_class = source.partition(":")
        if storage_class:
            check_dns_subdomain(storage_class, "--model-cache per-node: storage class")
        return ModelCache(
            "per-node",
            size_gib=_size_gib(amount, "--model-cache per-node:"),
            storage_class=storage_class or None,
        )
    raise K8sOptionError(f"--model-cache {value!r}: {_CACHE_FORMS}")


def service_variable_prefix(service: str) -> str:
    """The prefix of the variables Kubernetes derives from a Service name ({PREFIX}_SERVICE_HOST...)."""
    return service.upper().replace("-", "_")


def check_service_name(name: str) -> None:
    """Refuse names whose Service variables land in vLLM's own VLLM_* namespace.

    Every pod of the namespace that keeps service links (the default) gets {PREFIX}_SERVICE_HOST,
    {PREFIX}_PORT=tcp://IP:PORT and the like for every Service; vLLM reads VLLM_* variables as its
    own settings, and a Service named `vllm` sets VLLM_PORT to a URI, which vLLM refuses.
    """
    prefix = service_variable_prefix(name)
    if prefix == "VLLM" or prefix.startswith("VLLM_"):
        example = f"{prefix}_PORT=tcp://10.0.0.1:8091"
        raise K8sOptionError(
            f"--name {name!r}: Kubernetes gives every pod in the namespace that keeps service links "
            f"variables such as {example} for a Service of this name, and vLLM reads every VLLM_* "
            "variable as its own setting (VLLM_PORT set to a URI stops it); choose a name that does "
            "not start with 'vllm-'"
        )


def parse_image(image: str) -> tuple[str | None, str | None]:
    """(tag, digest) of an image reference; a K8sOptionError when it is not one."""
    match = _IMAGE.fullmatch(image)
    if not match or len(image) > 4096:
        raise K8sOptionError(
            f"--image {image!r} is not an image reference (REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:DIGEST)"
        )
    return match.group("tag"), match.group("digest")


def image_notes(image: str) -> list[str]:
    tag, digest = parse_image(image)
    if digest is None and tag in (None, "latest"):
        return [
            f"--image {image} names no fixed build (no tag, or `latest`): a restarted pod may pull "
            "another one; pass a version tag or @sha256:DIGEST"
        ]
    return []


# Top-level directories of the image: a volume mounted there would hide what the image holds.
_SYSTEM_DIRS = frozenset(
    ["/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/root",
     "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"]
)  # fmt: skip


def model_mount(model: str) -> str:
    """Where the volume that holds an absolute --model is mounted: the model's parent directory."""
    trimmed = model.rstrip("/") or "/"
    parent = posixpath.dirname(trimmed)
    return trimmed if parent == "/" else parent


def check_model_mount(options: K8sOptions) -> None:
    """The model's volume must not hide the image or land on, in or over the pod's own mounts."""
    model = options.model
    if posixpath.normpath(model) != (model.rstrip("/") or "/") or "//" in model:
        raise K8sOptionError(f"--model {model!r}: write the path without '.', '..' or '//' components")
    mount = model_mount(model)
    own = [CONFIG_DIR, "/dev/shm", HOME, "/tmp"] + ([TOKEN_DIR] if options.hf_token_secret else [])
    clash = next(
        (p for p in own if mount == p or p.startswith(mount + "/") or mount.startswith(p + "/")), None
    )
    if clash is not None:
        why = f"which overlaps the pod's own {clash}"
    elif mount in _SYSTEM_DIRS:
        why = f"which would hide the image's {mount}"
    else:
        return
    raise K8sOptionError(
        f"--model {model}: its volume would be mounted at {mount}, {why}; put the model one directory "
        "deeper, such as /models/NAME"
    )


def check_options(options: K8sOptions) -> None:
    if options.platform != "cuda":
        raise PlatformRefused(
            f"--platform {options.platform}: omni-deploy k8s renders NVIDIA GPU pods (nvidia.com/gpu) "
            f"only; {options.platform} devices are requested through another device plugin, which it "
            "does not know"
        )
    check_model(options.model)
    if options.served_model_name is not None and any(
        ord(c) < 32 or ord(c) == 127 for c in options.served_model_name
    ):
        raise K8sOptionError(f"--served-model-name {options.served_model_name!r} has control characters")
    # Object names get suffixes (-config, -node1, -nodes): keep room for them within 63.
    check_dns_label(options.name, "--name", 50)
    check_service_name(options.name)
    parse_image(options.image)
    if options.namespace is not None:
        check_dns_label(options.namespace, "--namespace")
    if options.hf_token_secret is not None:
        check_dns_subdomain(options.hf_token_secret, "--hf-token-secret")
    if options.model.startswith("/") and options.model_cache.kind in ("empty", "per-node"):
        raise K8sOptionError(
            f"--model {options.model} is a path in the pod, but --model-cache is {options.model_cache.kind}: "
            "put the model on a volume that holds it (--model-cache pvc:CLAIM or host:/path); it is "
            "mounted at the model's parent directory"
        )
    if options.model.startswith("/"):
        check_model_mount(options)
