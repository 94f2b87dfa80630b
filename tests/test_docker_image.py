"""The image recipe (docker/Dockerfile) agrees with the package: vLLM's own OpenAI-server image at the
release the `serve` extra pins, that vllm-omni, the speaker extra, every file it copies present and
not left out of the build context, and the build-time check run. (The build itself needs Docker and
the network; the check script is run for real in the vllm tier: tests/integration/test_image_check.py.)"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def _arg(name: str) -> str:
    (value,) = re.findall(rf"^ARG {name}=(\S+)$", DOCKERFILE, re.M)
    return value


def test_the_base_and_the_pins_are_the_serve_extras() -> None:
    serve = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["serve"]
    assert sorted(serve) == sorted(
        [f"vllm=={_arg('VLLM_VERSION')}", f"vllm-omni=={_arg('VLLM_OMNI_VERSION')}"]
    )
    assert re.search(r"^FROM vllm/vllm-openai:v\$\{VLLM_VERSION\}$", DOCKERFILE, re.M)
    assert '"/opt/omni-deploy[speaker,serve]"' in DOCKERFILE
    assert 'docker/check_image.py --vllm "${VLLM_VERSION}" --vllm-omni "${VLLM_OMNI_VERSION}"' in DOCKERFILE


def test_every_copied_file_is_in_the_build_context() -> None:
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = [word for line in re.findall(r"^COPY (.+)$", DOCKERFILE, re.M) for word in line.split()[:-1]]
    assert "omni_deploy" in sources and "pyproject.toml" in sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not any(
            fnmatch.fnmatch(source, pattern) or source.startswith(pattern + "/") for pattern in ignored
        ), source


def test_the_check_stops_a_build_without_vllm() -> None:
    # This environment has no vllm: the check must say so and fail, as it would in a broken image.
    done = subprocess.run([sys.executable, str(ROOT / "docker" / "check_image.py"), "--vllm", "0.30.0",
                           "--vllm-omni", "0.30.0"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1
    assert "vllm is not installed (the image needs vllm==0.30.0)" in done.stderr
