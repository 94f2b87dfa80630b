"""Every speaker decision omni-deploy makes for a set of deploy files, as one JSON document, so
that a change meant to keep behaviour can be held against the commit before it.

    PYTHONPATH=$PWD python tools/speaker_decision_table.py FILE... > /tmp/new.json
    git worktree add /tmp/before REV
    PYTHONPATH=/tmp/before python tools/speaker_decision_table.py FILE... > /tmp/old.json
    cmp /tmp/old.json /tmp/new.json

The script is run by its path, so that PYTHONPATH picks the package it tables; run both from the
same folder: the decisions name files relative to it. Each file is taken with
every pipeline the decision tells apart, on every platform (and one that does not exist), for
hosts, environments and --spk-backend values that reach each rule; a case that raises is kept as
its exception.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.deployment.model import Deployment
from omni_deploy.speaker_backend import HostCaps, assumed_host, speaker_decision

PIPELINES = (None, "minicpmo_4_5", "ming_tts", "cosyvoice3", "glm_tts")
HOSTS = {
    "assumed": assumed_host("0.30.0"),
    "tensorrt": HostCaps(probed=True, tensorrt=True, onnxruntime_gpu=True, vllm_omni="0.30.0"),
    "bare": HostCaps(probed=True, torch=False, onnx=False, vllm_omni="0.30.0"),
    "reads-device-spk": HostCaps(probed=False, vllm_omni="main", vllm_omni_reads_device_spk=True),
}
ENVS: tuple[dict[str, str], ...] = (
    {},
    {"OMNI_DEPLOY_SPK_BACKEND": "cpu-onnxruntime"},
    {"MINICPMO_TOKEN2WAV_TRT": "1"},
    {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch", "OMNI_DEPLOY_SPK_TF32": "0"},
)
OVERRIDES = (None, "cpu-onnxruntime", "tensorrt", "cuda-torch")


def _decided(
    deployment: Deployment, platform: str, host: HostCaps, env: dict[str, str], override: Any
) -> str:
    try:
        return repr(speaker_decision(deployment, platform, env=dict(env), host=host, override=override))
    except Exception as exc:  # a refusal is part of the table
        return f"raises {type(exc).__name__}: {exc}"


def table(files: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in sorted(files):
        for pipeline in PIPELINES:
            try:
                deployment = Deployment.load(name, pipeline=pipeline)
            except Exception as exc:
                out[f"{name}|{pipeline}"] = f"raises {type(exc).__name__}: {exc}"
                continue
            for platform in (*PLATFORMS, "no-such-platform"):
                for host_name, host in HOSTS.items():
                    for i, env in enumerate(ENVS):
                        for override in OVERRIDES:
                            key = f"{name}|{pipeline}|{platform}|{host_name}|env{i}|{override}"
                            out[key] = _decided(deployment, platform, host, env, override)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    json.dump(table(argv), sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
