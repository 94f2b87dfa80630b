"""The pods' Hugging Face token is a file of the Secret named by HF_TOKEN_PATH (no HF_TOKEN variable):
the huggingface_hub that vllm 0.30.0 installs reads it. Run in a child process with the golden's
environment, the Secret's mount point moved under a temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("huggingface_hub")

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]


def test_huggingface_hub_reads_the_mounted_token(tmp_path: Path) -> None:
    objects = yaml.safe_load_all((ROOT / "tests/data/k8s/golden/one_node.yaml").read_text())
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "hf-token"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "hf-token"]
    (item,) = volume["secret"]["items"]
    secret_dir = tmp_path / mount["mountPath"].lstrip("/")
    secret_dir.mkdir(parents=True)
    (secret_dir / item["path"]).write_text("hf_from_the_secret_file\n")  # kubectl create secret --from-file
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    for entry in container["env"]:
        if "value" in entry:
            env[entry["name"]] = entry["value"].replace(mount["mountPath"], str(secret_dir))
    env["HF_HOME"] = str(tmp_path / "hf-home")
    env["HOME"] = str(tmp_path / "home")
    code = "import huggingface_hub; print(huggingface_hub.get_token())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hf_from_the_secret_file"
