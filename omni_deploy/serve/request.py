"""What `omni-deploy serve` is asked for: its options as given (ServeArgs, their one declaration)
and parsed (ServeRequest).

Import-light (the command module reads its option defaults from here).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omni_deploy.common import cli_fields as cf
from omni_deploy.common import defaults
from omni_deploy.common.cli_fields import option, shared_option
from omni_deploy.integrations.speaker_rules import BACKENDS
from omni_deploy.launch.options import LaunchOptions


@dataclass
class ServeRequest:
    """What the serve command was asked for, options parsed (platform chosen, target version known)."""

    file: str
    platform: str
    target_version: str
    launch: LaunchOptions
    run_dir: Path | None = None
    dry_run: bool = False
    skip_preflight: bool = False
    no_wait: bool = False
    ready_timeout: float = defaults.READY_TIMEOUT_S
    stop_grace: float = defaults.STOP_GRACE_S
    fmt: str = "text"
    ignore: frozenset[str] = frozenset()  # the project's settings, as validate applies them
    strict: bool = False
    target_from: str = ""  # where target_version came from (an option, a variable, a file, a default)


@dataclass(frozen=True)
class ServeArgs:
    """The options of `omni-deploy serve` as given, declared once: each field is its option
    (omni_deploy/common/cli_fields.py); the command turns them into a ServeRequest."""

    model: str | None = option(
        "--model", default=None, help=f"Model path or hub id (default: {LaunchOptions.model})."
    )
    platform: str = option(
        "--platform",
        type=cf.platform("auto"),
        default="auto",
        show_default=True,
        help="Platform to render for and start on, any case; auto: this host's accelerator (a dry run on a host without one assumes cuda and says so).",
    )
    host: str = option(
        "--host", default=LaunchOptions.host, show_default=True, help="Address the server listens on."
    )
    port: int = option(
        "--port",
        type=cf.PORT,
        default=LaunchOptions.port,
        show_default=True,
        help="Port the server listens on.",
    )
    served_model_name: str | None = option(
        "--served-model-name",
        default=None,
        help="Model name the API answers to (default: vllm's, the model path).",
    )
    spk_backend: str = option(
        "--spk-backend",
        type=cf.choice("auto", *BACKENDS),
        default="auto",
        show_default=True,
        help="CAM++ backend; auto: what the deploy file says (cuda-torch on CUDA by default).",
    )
    run_dir: Path | None = option(
        "--run-dir",
        default=None,
        type=cf.path(file_okay=False),
        help="Empty or new directory for this run's rendered config, launch record and log "
        "(default: a fresh one under ~/.cache/omni-deploy/runs; a dry run writes one only when given).",
    )
    ready_timeout: float = option(
        "--ready-timeout",
        type=cf.seconds(low_open=True),
        default=ServeRequest.ready_timeout,
        show_default=True,
        help="Seconds to wait for /health (start-up takes minutes).",
    )
    stop_grace: float = option(
        "--stop-grace",
        type=cf.seconds(),
        default=ServeRequest.stop_grace,
        show_default=True,
        help="Seconds between TERM and KILL when stopping the server.",
    )
    no_wait: bool = option(
        "--no-wait",
        default=False,
        is_flag=True,
        help="Replace this process with the server (no supervision).",
    )
    dry_run: bool = option(
        "--dry-run",
        default=False,
        is_flag=True,
        help="Print the command, environment changes and decision; start nothing, write nothing (unless --run-dir).",
    )
    skip_preflight: bool = option(
        "--skip-preflight",
        default=False,
        is_flag=True,
        help="Skip the host checks (GPU, versions, model assets).",
    )
    env_pairs: tuple[str, ...] = option(
        "--env", default=(), multiple=True, metavar="KEY=VALUE", help="Extra environment for the server."
    )
    target_version: str | None = shared_option("target_version", "validate against")
    fmt: str = shared_option(
        "output",
        ("text", "json"),
        default="text",
        help="With --dry-run: text, or json (docs/json-output.md). A running server's output is its log.",
    )
