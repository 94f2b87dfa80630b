"""A snapshot of this host's speaker-embedding capabilities, taken without importing anything heavy.

`find_spec` locates torch, onnx, onnxruntime and tensorrt without running them; versions come from
package metadata; GPUs from `nvidia-smi` (CUDA is never initialised in this process); whether the
installed vllm-omni runs CAM++ on CUDA itself is read from its source.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omni_deploy.common import guarded
from omni_deploy.common.bundled import installed_version, installed_version_problem, installed_vllm_omni_dir
from omni_deploy.common.install_hint import install_hint
from omni_deploy.integrations.speaker_rules import (
    CODE2WAV_MODULE,
    ENV_REPORT_DIR,
    ENV_VERIFIED_ONLY,
    KEY_ALLOW_TF32,
    KEY_DEVICE_SPK,
    PLUGIN_GROUP,
    PLUGIN_NAME,
    PLUGINS_ALLOWLIST_ENV,
    VERIFIED_VLLM_OMNI,
    Model,
    allowlist_drops_plugin,
    allowlist_fix,
    allowlist_near_miss,
    reads_device_spk,
    report_line_logged,
    version_verdict,
)
from omni_deploy.knowledge.versions import major_minor

MAX_GPUS = 64  # more lines than any node has GPUs: the rest is noise
MAX_MODULE_BYTES = 8 * 1024 * 1024  # vllm-omni's largest module is under 200 KiB


@dataclass
class HostCaps:
    probed: bool
    torch: bool = True
    onnx: bool = True
    onnxruntime: bool = True
    tensorrt: bool = False
    onnxruntime_gpu: bool = False  # the onnxruntime-gpu build (its CUDA provider) is installed
    vllm: str | None = None
    vllm_omni: str | None = None
    # An installed distribution whose metadata's version was set aside (bundled.installed_version
    # gives None for it): why, by distribution name.
    version_problems: dict[str, str] = field(default_factory=dict)
    vllm_omni_reads_device_spk: bool = False
    # Whether that vllm-omni's Code2Wav reads token2wav_allow_tf32 itself (0.31 on): then the key is
    # its policy for the whole stage, not only for the plugin's CAM++.
    vllm_omni_reads_tf32: bool = False
    plugin_registered: bool = True
    plugins_allowlist: str | None = None  # VLLM_PLUGINS as set here; None: unset (all plugins load)
    vllm_on_path: str | None = None  # the `vllm` executable first on PATH
    vllm_on_path_python: str | None = None  # the interpreter it runs with, from its #! line
    gpus: list[str] = field(default_factory=list)
    gpu_query: str = "not probed"
    # Per model the plugin patches: the code shapes its patch relies on that the installed
    # vllm-omni lacks (integrations.targets, read from its source; empty: all there, or not probed).
    plugin_shapes: dict[str, list[str]] = field(default_factory=dict)
    # Per model the layout of that code the patch would work on (targets.Layout; the report's layout=).
    plugin_layouts: dict[str, str] = field(default_factory=dict)
    # What the last server reported (its report files), and where they were read.
    server_reports: list[dict[str, Any]] = field(default_factory=list)
    server_reports_from: str | None = None
    # Whether the plugin's INFO report line reaches a server's log started from this environment.
    report_line_logged: bool | None = True
    report_line_why: str = "not probed"
    verified_only: bool = False  # OMNI_DEPLOY_SPK_VERIFIED_ONLY=1 here

    @property
    def plugin_allowed(self) -> bool:
        return not allowlist_drops_plugin(self.plugins_allowlist)

    @property
    def vllm_omni_verified(self) -> bool | None:
        """Whether the plugin is verified against this vllm-omni (None: not installed / not known)."""
        return None if self.vllm_omni is None else self.vllm_omni in VERIFIED_VLLM_OMNI

    @property
    def vllm_elsewhere(self) -> bool:
        """The `vllm` first on PATH runs in another environment than this one (omni-deploy's)."""
        return (
            self.probed
            and self.vllm_on_path_python is not None
            and not same_environment(self.vllm_on_path_python)
        )

    @property
    def versions_match(self) -> bool | None:
        if not self.vllm or not self.vllm_omni:
            return None
        return major_minor(self.vllm) == major_minor(self.vllm_omni)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["versions_match"] = self.versions_match
        out["plugin_allowed"] = self.plugin_allowed
        out["vllm_elsewhere"] = self.vllm_elsewhere
        out["vllm_omni_verified"] = self.vllm_omni_verified
        return out


def assumed_host(target_version: str) -> HostCaps:
    """The serving host `omni-deploy serve` expects: omni-deploy[speaker] and its plugin installed."""
    from omni_deploy.knowledge.target import for_host

    # Only code says a version reads the key: a release's committed reads, or an installed
    # unreleased vllm-omni's source. `main` without a main checkout installed claims nothing.
    known = for_host(target_version)
    reads = known.reads("code2wav", KEY_DEVICE_SPK) is not None
    return HostCaps(
        probed=False,
        vllm_omni=target_version,
        vllm_omni_reads_device_spk=reads,
        vllm_omni_reads_tf32=known.reads("code2wav", KEY_ALLOW_TF32) is not None,
    )


def reads_tf32(version: str | None) -> bool:
    """Whether vllm-omni `version`'s Code2Wav reads token2wav_allow_tf32 (its committed reads)."""
    if not version:
        return False
    from omni_deploy.knowledge.target import for_host

    try:
        return for_host(version).reads("code2wav", KEY_ALLOW_TF32) is not None
    except Exception:  # a version the knowledge cannot place claims nothing
        return False


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def vllm_omni_reads_device_spk() -> bool:
    """Whether the installed vllm-omni's Code2Wav reads token2wav_device_spk itself: its file, read
    (not imported) by the rule the plugin applies to the imported module, through the guarded
    reader (an installed tree is no more trusted than a named one)."""
    root = installed_vllm_omni_dir()
    if root is None:
        return False
    path = root.parent.joinpath(*CODE2WAV_MODULE.split(".")).with_suffix(".py")
    try:
        return reads_device_spk(guarded.read_text(path, str(path), MAX_MODULE_BYTES))
    except guarded.Refused:
        return False  # an installed file we cannot read claims nothing


def plugin_registered() -> bool:
    try:
        entries = importlib.metadata.entry_points(group=PLUGIN_GROUP)
    except Exception:  # broken metadata of some unrelated distribution
        return False
    return any(e.name == PLUGIN_NAME for e in entries)


def vllm_executable() -> tuple[str | None, str | None]:
    """(path of the `vllm` first on PATH, the interpreter its #! line names), without running it."""
    path = shutil.which("vllm")
    if path is None:
        return None, None
    line = guarded.first_line(path)  # None for a FIFO or a device: never opened
    if line is None:
        return path, None
    first = line.decode("utf-8", "replace").strip()
    if not first.startswith("#!"):
        return path, None  # a compiled launcher: cannot tell
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        return path, shutil.which(words[-1])
    return path, words[0] if words else None


def same_environment(python: str) -> bool:
    """Whether `python` is this process's environment (where omni-deploy and its plugin are)."""
    try:
        there = os.path.realpath(os.path.dirname(python))
        here = os.path.realpath(os.path.join(sys.prefix, "bin"))
        return there == here or os.path.samefile(python, sys.executable)
    except OSError:
        return False


def query_gpus() -> tuple[list[str], str]:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return [], "nvidia-smi not found: no NVIDIA GPU visible"
    try:  # its output is bounded and so is its time: a broken driver can hang or flood
        done = guarded.capture(
            [tool, "--query-gpu=name", "--format=csv,noheader"], timeout=10, limit=64 * 1024
        )
    except OSError as exc:
        return [], f"nvidia-smi failed: {exc}"
    if done.why_stopped is not None:
        return [], f"nvidia-smi {done.why_stopped}; stopped it"
    if done.returncode != 0:
        return [], f"nvidia-smi exited {done.returncode}: {done.stderr.strip()[:200]}"
    names = [line.strip()[:200] for line in done.stdout.splitlines() if line.strip()][:MAX_GPUS]
    return names, f"nvidia-smi: {len(names)} GPU(s)"


# Each accelerator platform's vendor tool, in the order they are looked for on PATH.
VENDOR_TOOLS = {"cuda": "nvidia-smi", "rocm": "rocm-smi", "npu": "npu-smi", "xpu": "xpu-smi"}


def detect_platform() -> str | None:
    """The accelerator platform of this host, from the vendor tool on PATH (None: none found)."""
    for platform, tool in VENDOR_TOOLS.items():
        if shutil.which(tool):
            return platform
    return None


def installed_code() -> tuple[dict[str, list[str]], dict[str, str]]:
    """`integrations.targets`' recognition over the installed vllm-omni's source (nothing imported):
    per model, what its patch would lack (empty: nothing), and the layout it would work on
    ("unrecognised" where none); ({}, {}) without an installed vllm-omni."""
    from omni_deploy.integrations.targets import TARGETS, recognise

    root = installed_vllm_omni_dir()
    if root is None:
        return {}, {}

    def read(module: str) -> str | None:
        return guarded.installed_text(root.parent / (module.replace(".", "/") + ".py"), MAX_MODULE_BYTES)

    found = {t.model.pipeline: recognise(t, read) for t in TARGETS}
    return (
        {name: r.problems for name, r in found.items()},
        {name: r.layout or "unrecognised" for name, r in found.items()},
    )


def last_server_reports(
    runs_root: Path, env: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The report files of the last server on this host: in OMNI_DEPLOY_SPK_REPORT_DIR when set, else
    in the newest run directory under `runs_root` (`omni-deploy serve`'s) that has any."""
    from omni_deploy.integrations.report import read_files

    environ = os.environ if env is None else env
    if environ.get(ENV_REPORT_DIR):
        directory = environ[ENV_REPORT_DIR]
        return (read_files(directory)[0] if os.path.isdir(directory) else []), directory
    try:
        runs = sorted((p for p in runs_root.iterdir() if (p / "speaker").is_dir()), reverse=True)
    except OSError:
        return [], None
    for run in runs:
        records = read_files(run / "speaker")[0]
        if records:
            return records, str(run / "speaker")
    return [], None


def _version_problems(distributions: tuple[str, ...]) -> dict[str, str]:
    found = {name: installed_version_problem(name) for name in distributions}
    return {name: problem for name, problem in found.items() if problem is not None}


def probe_host() -> HostCaps:
    gpus, how = query_gpus()
    shapes, layouts = installed_code()
    vllm_path, vllm_python = vllm_executable()
    logged, why = report_line_logged(os.environ)
    return HostCaps(
        probed=True,
        torch=_importable("torch"),
        onnx=_importable("onnx"),
        onnxruntime=_importable("onnxruntime"),
        tensorrt=_importable("tensorrt"),
        onnxruntime_gpu=installed_version("onnxruntime-gpu") is not None,
        vllm=installed_version("vllm"),
        vllm_omni=installed_version("vllm-omni"),
        version_problems=_version_problems(("vllm", "vllm-omni")),
        vllm_omni_reads_device_spk=vllm_omni_reads_device_spk(),
        vllm_omni_reads_tf32=reads_tf32(installed_version("vllm-omni")),
        plugin_registered=plugin_registered(),
        plugins_allowlist=os.environ.get(PLUGINS_ALLOWLIST_ENV),
        vllm_on_path=vllm_path,
        vllm_on_path_python=vllm_python,
        gpus=gpus,
        gpu_query=how,
        plugin_shapes=shapes,
        plugin_layouts=layouts,
        report_line_logged=logged,
        report_line_why=why,
        verified_only=os.environ.get(ENV_VERIFIED_ONLY) == "1",
    )


def plugin_cannot_act(host: HostCaps, model: Model, env: Mapping[str, str], warnings: list[str]) -> list[str]:
    """What keeps omni-deploy's plugin from giving `model` the CUDA path on `host` (empty: nothing);
    a version the plugin is not verified against, but will patch, adds a warning."""
    missing = [name for name, ok in (("torch", host.torch), ("onnx", host.onnx)) if not ok]
    if not host.plugin_registered:
        missing.append(f"omni-deploy's vLLM plugin ({install_hint('speaker')})")
    if not host.plugin_allowed:
        near = allowlist_near_miss(host.plugins_allowlist)
        missing.append(
            f"omni-deploy's vLLM plugin in {PLUGINS_ALLOWLIST_ENV}={host.plugins_allowlist} (an allowlist"
            + (f"; vLLM compares {near!r}, it strips nothing" if near else "")
            + f": {PLUGINS_ALLOWLIST_ENV}={allowlist_fix(host.plugins_allowlist or '')})"
        )
    if host.vllm_elsewhere:
        missing.append(
            f"omni-deploy in the environment of the `vllm` first on PATH ({host.vllm_on_path}, run by "
            f"{host.vllm_on_path_python}): the plugin registered here is not visible to that server"
        )
    allowed, note = version_verdict(host.vllm_omni, env)
    if not allowed and note:
        missing.append(note)
    elif note and host.vllm_omni:
        warnings.append(note)
    problems = host.plugin_shapes.get(model.pipeline, [])
    if problems:
        missing.append(f"a vllm-omni the plugin can patch for {model.title} ({'; '.join(problems)})")
    return missing
