"""One call from a file name to the effective config: chain, merge, and optionally a platform."""

from __future__ import annotations

from dataclasses import dataclass

from omni_deploy.config.chain import Resolved, locate_top_file, resolve_file
from omni_deploy.config.nodes import Map
from omni_deploy.config.platform import PlatformApplied, apply_platform


@dataclass
class Effective:
    resolved: Resolved
    applied: PlatformApplied | None

    @property
    def config(self) -> Map:
        return self.applied.config if self.applied is not None else self.resolved.config


def load_effective(name: str, platform: str | None = None, env: dict[str, str] | None = None) -> Effective:
    resolved = resolve_file(locate_top_file(name), env)
    applied = apply_platform(resolved.config, platform) if platform else None
    return Effective(resolved, applied)
