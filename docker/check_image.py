"""Build-time check of the serving image (docker/Dockerfile): the pinned vllm and vllm-omni are
installed, and omni-deploy's vLLM plugin is registered and importable where vLLM will look for it.

    python3 docker/check_image.py --vllm 0.30.0 --vllm-omni 0.30.0

Exit 0 when all hold; otherwise each problem on stderr and exit 1 (the build stops). Nothing is
called that needs a GPU: the plugin's module is imported, its register() is not run.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, entry_points, version

GROUP, NAME = "vllm.general_plugins", "omni_deploy_campplus"


def problems(wanted: dict[str, str]) -> list[str]:
    found = []
    for package, pinned in wanted.items():
        try:
            have = version(package)
        except PackageNotFoundError:
            found.append(f"{package} is not installed (the image needs {package}=={pinned})")
            continue
        if have != pinned:
            found.append(f"{package} {have} is installed; the image pins {pinned}")
    plugins = [e for e in entry_points(group=GROUP) if e.name == NAME]
    if not plugins:
        return [*found, f"no entry point {NAME} in {GROUP}: omni-deploy's vLLM plugin is not registered"]
    try:
        register = plugins[0].load()
    except Exception as exc:  # any import failure of the plugin's module stops the build
        return [*found, f"{NAME} ({plugins[0].value}) does not import: {type(exc).__name__}: {exc}"]
    if not callable(register):
        found.append(f"{NAME} ({plugins[0].value}) is not callable")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm", required=True, help="the vllm release the image pins")
    parser.add_argument("--vllm-omni", required=True, help="the vllm-omni release the image pins")
    args = parser.parse_args(argv)
    found = problems({"vllm": args.vllm, "vllm-omni": args.vllm_omni})
    for problem in found:
        print(f"check_image: {problem}", file=sys.stderr)
    if not found:
        print(
            f"check_image: vllm {args.vllm}, vllm-omni {args.vllm_omni}, plugin {NAME} registered and importable"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
