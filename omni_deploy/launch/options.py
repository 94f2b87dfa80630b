"""What a launch is asked for (model, platform, address, speaker override, pass-through arguments),
and the pass-through arguments that cannot be launched."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from omni_deploy.common import defaults
from omni_deploy.common.errors import UsageProblem
from omni_deploy.common.numbers import MAX_DIGITS
from omni_deploy.integrations.speaker_rules import Backend


class PlanError(UsageProblem):
    """The options ask for something that cannot be launched (a usage error: exit 2)."""


@dataclass
class LaunchOptions:
    model: str = defaults.MODEL
    platform: str = "cuda"
    host: str = "127.0.0.1"
    port: int = defaults.PORT
    served_model_name: str | None = None
    spk_backend: Backend | None = None  # None: what the file says
    extra_env: dict[str, str] = field(default_factory=dict)
    passthrough: tuple[str, ...] = ()
    # Where `platform` came from, as explain and the dry run label it: "--platform", "detected: ...",
    # "assumed: ..." (the speaker decision's platform reason says it).
    platform_origin: str = "--platform"


def _flag_value(args: tuple[str, ...], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def check_passthrough(args: tuple[str, ...], stage_ids: set[int]) -> None:
    """Checks the multi-node flags need before anything starts."""
    for managed in ("--omni", "--deploy-config", "--host", "--port"):
        if any(a == managed or a.startswith(managed + "=") for a in args):
            raise PlanError(
                f"{managed} is set by omni-deploy serve; use its own option instead of passing it through"
            )
    if "--headless" in args:
        if _flag_value(args, "--omni-master-address") is None:
            raise PlanError("--headless needs --omni-master-address (where the master stage runs)")
        stage = _flag_value(args, "--stage-id")
        if stage is None:
            raise PlanError("--headless needs --stage-id N (the stage this node runs)")
    stage = _flag_value(args, "--stage-id")
    # ASCII digits, at most 18: str.isdigit() takes '²' (int() then raises) and 5,000 digits raise too
    if stage is not None and (
        not re.fullmatch(f"[0-9]{{1,{MAX_DIGITS}}}", stage) or int(stage) not in stage_ids
    ):
        shown = stage if len(stage) <= 24 else stage[:21] + "..."
        raise PlanError(f"--stage-id {shown}: the deploy config has stages {sorted(stage_ids)}")
    if _flag_value(args, "--worker-backend") == "ray" and _flag_value(args, "--ray-address") is None:
        raise PlanError("--worker-backend ray needs --ray-address")
