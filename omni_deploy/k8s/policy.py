"""The policy checks (checkov's Kubernetes framework) the manifests do not pass, and why, written into
the objects themselves as `checkov.io/skipN: CHECK=reason` annotations.

Every other check of checkov 3.3.30 passes on every output; tests/k8s/test_checkov.py runs it
on the goldens and on fresh output, and docs/kubernetes.md lists each skip below.
"""

from __future__ import annotations

from omni_deploy.k8s.options import K8sOptions, parse_image

# checkov's id -> what it asks, for the docs and messages.
DEFAULT_NAMESPACE = "CKV_K8S_21"  # "The default namespace should not be used"
IMAGE_DIGEST = "CKV_K8S_43"  # "Image should use digest"

SKIPPABLE = {
    DEFAULT_NAMESPACE: "The default namespace should not be used",
    IMAGE_DIGEST: "Image should use digest",
}


def skips(options: K8sOptions, has_pods: bool) -> dict[str, str]:
    """check id -> reason, for one object (`has_pods`: a workload with a pod template)."""
    out = {}
    if options.namespace is None:
        # checkov reads an object without metadata.namespace as one in `default`.
        out[DEFAULT_NAMESPACE] = (
            "no --namespace was given: the objects go to the namespace kubectl apply is given with -n"
        )
    if has_pods and parse_image(options.image)[1] is None:
        out[IMAGE_DIGEST] = (
            f"the image is named by its tag ({options.image}); pass --image NAME@sha256:DIGEST to pin "
            "the build"
        )
    return out


def skip_annotations(options: K8sOptions, has_pods: bool) -> dict[str, str]:
    # checkov splits the value at '=': the reason may not hold another one.
    return {
        f"checkov.io/skip{i}": f"{check}={reason.replace('=', ' ')}"
        for i, (check, reason) in enumerate(skips(options, has_pods).items(), start=1)
    }
