"""The launch spec of one deploy file on one platform: one function for serve, k8s and explain.

`launch_spec` takes the Deployment, the launch options (platform and overrides), the serving host's
snapshot and the environment of the process that starts the server (this shell's for serve, the
pod's for k8s) and gives the speaker decision, the rendered deploy file, the command and the run
record. serve, `serve --dry-run`, `k8s` and `explain` all take their answer from it, so none of them
can tell another backend than the others for the same file, platform, host and environment.

Pure: nothing is probed, started or written here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from omni_deploy.config.nodes import to_plain
from omni_deploy.config.stage_process import ray_stages
from omni_deploy.deployment.model import Deployment
from omni_deploy.launch.options import LaunchOptions, check_passthrough
from omni_deploy.launch.plan import LaunchPlan, build_plan
from omni_deploy.launch.render import RenderedConfig, render_deploy_config
from omni_deploy.speaker_backend import HostCaps, SpeakerDecision, speaker_decision


@dataclass
class LaunchSpec:
    deployment: Deployment
    options: LaunchOptions
    env: Mapping[str, str]
    decision: SpeakerDecision

    @property
    def platform(self) -> str:
        return self.options.platform

    @cached_property
    def rendered(self) -> RenderedConfig:
        """The file the server gets (raises ConfigError for a platform section that cannot apply)."""
        return render_deploy_config(self.deployment, self.platform, self.options.spk_backend)

    def stage_ids(self) -> set[int]:
        ids = {to_plain(s.get("stage_id")) for s in self.deployment.on(self.platform).stages}
        return {i for i in ids if isinstance(i, int) and not isinstance(i, bool)}

    def check_passthrough(self) -> None:
        """Raise PlanError for pass-through arguments that cannot be launched with this file."""
        check_passthrough(self.options.passthrough, self.stage_ids())

    def uses_ray(self) -> bool:
        """Whether a stage runs its model in Ray workers (the file, or a pass-through engine argument)."""
        args = self.options.passthrough
        passed = any(
            a == "--distributed-executor-backend=ray"
            or (a == "--distributed-executor-backend" and args[i + 1 : i + 2] == ("ray",))
            for i, a in enumerate(args)
        )
        return passed or bool(ray_stages(self.deployment.on_or_none(self.platform)))

    def plan(self, config_path: str, report_dir: str | None = None) -> LaunchPlan:
        """The command that runs the rendered file once it is at `config_path`; `report_dir` is where
        the server's processes write their speaker reports (serve reads them back)."""
        return build_plan(self.options, config_path, self.decision, self.env, report_dir, self.uses_ray())


def launch_spec(
    deployment: Deployment, options: LaunchOptions, *, host: HostCaps, env: Mapping[str, str]
) -> LaunchSpec:
    """Everything a launch of `deployment` with `options` needs, decided for `host` and `env`."""
    decision = speaker_decision(
        deployment, options.platform, env=dict(env), host=host, override=options.spk_backend
    )
    return LaunchSpec(deployment, options, env, _platform_from(decision, options.platform_origin))


def _platform_from(decision: SpeakerDecision, origin: str) -> SpeakerDecision:
    """The decision with its platform reason labelled by where the platform really came from (the
    rules only know the platform they were given, not whether an option, a probe or a default named it)."""
    reasons = [
        dataclasses.replace(r, origin=origin) if r.setting == "platform" and r.origin == "--platform" else r
        for r in decision.reasons
    ]
    return dataclasses.replace(decision, reasons=reasons)
