"""The one loaded, resolved deploy file every command starts from.

API (issue 11; render, validate, explain, serve, bench and k8s start here):

    from omni_deploy.deployment.model import Deployment

    d = Deployment.load(name, pipeline=None, env=None)  # raises ConfigError (exit 1)
    d.name                # the file as the user named it (findings fall back to it)
    d.top, d.chain        # the file found, and its base_config chain (top first)
    d.resolved            # config.chain.Resolved: merged Map, per-file documents, merge report
    d.config              # the merged mapping, exactly what vllm-omni's resolve_deploy_yaml returns
    d.pipeline            # knowledge.pipelines.PipelineInfo (name, known pipeline, how we know)
    d.stages(), d.stage(2), d.connectors(), d.platform_sections()
    d.code2wav_connector()  # (name, Map) of the connector MiniCPM-o's Code2Wav reads, or None
    d.code2wav_wiring()     # (path parts, Map): the named or inline connector of the 1->2 edge that wins
    d.code2wav_extra(), d.code2wav_extra_path   # its `extra` Map, and "$.connectors.NAME.extra"
    d.on("cuda")          # config.platform.PlatformApplied: the view a server on that platform
                          # runs (cached; raises ConfigError for a bad platform section)
    d.on_or_none("cuda")  # ... or None where the platform section cannot apply
    d.code2wav_extra_on("cuda")  # the Code2Wav extra inside that view
    d.code2wav_extra_in(config)  # ... inside a copy of a view (the launch spec renders an edited copy)
    d.section_platforms() # platforms the file has a section for; d.default_platforms(): cuda + those
    d.locate(["stages", 0, "devices"], platform=None)  # (node, origin of its key) or (None, ...)
    d.connector_extra(1, "output")  # (extra Map or None, its path): a stage's connector on that side

A stage's value as its engine reads it (typed field, else engine_extras) is
`config/stage_process.py` `stage_value(stage, name)`.

Every value is a positioned node (`config.nodes`): `node.origin` is its file:line:col and layer
(base, overlay, platform:cuda, ...); `to_plain(node)` gives the plain Python value.

Neighbours of this module, also from issue 11:
- validate: `validate_file(name, Options)` or `validate_deployment(d, Options)` -> `FileReport`
  (`.findings`, `.valid`, `.deployment`); a check is `def check(ctx: Context) -> list[Finding]`
  with `ctx.deployment`, `ctx.options`, `ctx.applied` (platform -> view) and `ctx.file`,
- launch: `launch/spec.py` `launch_spec(d, LaunchOptions(...), host=, env=)` -> `LaunchSpec`
  (`.decision`, `.rendered`, `.plan(config_path)` -> `LaunchPlan`: argv, env changes, `.record()`): the one
  answer serve, `serve --dry-run`, k8s and explain take; the speaker decision behind it is
  `speaker_backend` `speaker_decision(d, platform, env=, host=, override=)`,
- serve: `serve/prepare.py` (check -> prepare: launch spec, run directory, run record),
  `serve/start.py` (exec or supervise), `serve/session.py` (the command's flow); explain:
  `explain/explanation.py`; k8s: `k8s/build.py` (launch spec + `deployment/topology/` placement -> objects),
- finding codes: `omni_deploy/common/codes.py` (one line per code); each check declares the codes it
  reports (`@emits`, `validate/rules.py`) and documents them in its docstring (`omni-deploy rule`),
- exit codes: `omni_deploy/cli/app.py` (`EXIT_*`, one map from error type to exit code),
- vocabulary: backend names, speaker keys and environment variables in `omni_deploy/integrations/speaker_rules.py`
  (`Backend`, `BACKENDS`, `ENV_*`), shared defaults (model, port, timeouts) in `omni_deploy/common/defaults.py`,
  `knowledge/versions.py` (`RELEASED`, `default_target_version`), `speaker_backend/host.py` (`detect_platform`),
  finding paths in `omni_deploy/common/jsonpath.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path

from omni_deploy.common.errors import OmniDeployError
from omni_deploy.config.chain import Resolved, locate_top_file, resolve_file
from omni_deploy.config.nodes import Map, Node, Origin, Scalar, Seq, locate, path_string
from omni_deploy.config.platform import PlatformApplied, apply_platform
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.knowledge.pipelines import PipelineInfo, identify


@dataclass
class Deployment:
    name: str
    resolved: Resolved
    pipeline: PipelineInfo
    _views: dict[str, PlatformApplied] = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls,
        name: str,
        *,
        pipeline: str | None = None,
        env: dict[str, str] | None = None,
        text: str | bytes | None = None,
        named: bool = True,
        rebase: Callable[[Path], Path] | None = None,
    ) -> Deployment:
        """Find the file, resolve its base_config chain and tell its pipeline (raises ConfigError).

        With `text` (stdin) nothing is looked up: `name` names it, and a relative base_config is
        resolved from `name`'s folder.
        """
        top = Path(name) if text is not None else locate_top_file(name)
        resolved = resolve_file(top, env, text, named=named, rebase=rebase)
        return cls(name, resolved, identify(resolved.config, resolved.chain, pipeline))

    @property
    def top(self) -> Path:
        return self.resolved.top

    @property
    def chain(self) -> list[Path]:
        return self.resolved.chain

    @property
    def config(self) -> Map:
        return self.resolved.config

    def stages(self) -> list[Map]:
        node = self.config.get("stages")
        return [s for s in node.items if isinstance(s, Map)] if isinstance(node, Seq) else []

    def stage(self, stage_id: int) -> Map | None:
        """The stage with this id (the last one, as vllm-omni keeps the last of duplicates)."""
        found = None
        for stage in self.stages():
            if _is_int(stage.get("stage_id"), stage_id):
                found = stage
        return found

    def connectors(self) -> Map | None:
        node = self.config.get("connectors")
        return node if isinstance(node, Map) else None

    def platform_sections(self) -> Map | None:
        node = self.config.get("platforms")
        return node if isinstance(node, Map) else None

    def section_platforms(self) -> tuple[str, ...]:
        sections = self.platform_sections()
        return tuple(p for p in PLATFORMS if sections is not None and p in sections)

    def default_platforms(self) -> tuple[str, ...]:
        """cuda plus every platform the file has a section for."""
        return ("cuda", *(p for p in self.section_platforms() if p != "cuda"))

    def code2wav_wiring(self) -> tuple[list[Hashable], Map] | None:
        """For MiniCPM-o 4.5: where the connector Code2Wav reads is defined, as path parts
        (["connectors", NAME], or an inline {name, extra} entry ["stages", i, FIELD, KEY]), and it.

        vllm-omni's connector set-up walks the stages in order, each one's input_connectors then its
        output_connectors, and the first connector registered for an edge wins (a later one is only
        compared by name: omni_connectors/utils/initialization.py). With the stages in order, the
        Talker's output_connectors.to_stage_2 is that first one, before stage 2's input_connectors.
        """
        known = self.pipeline.known
        if known is None or known.code2wav_stage is None:
            return None
        receiver, sender = str(known.code2wav_stage), str(known.code2wav_stage - 1)
        for index, stage in enumerate(self.stages()):
            sid = stage.get("stage_id")
            here = str(sid.value) if isinstance(sid, Scalar) else None
            for wire, key, wanted in (
                ("input_connectors", f"from_stage_{sender}", receiver),
                ("output_connectors", f"to_stage_{receiver}", sender),
            ):
                wiring = stage.get(wire)
                ref = wiring.get(key) if isinstance(wiring, Map) and here == wanted else None
                if isinstance(ref, Map):
                    return ["stages", index, wire, key], ref
                if isinstance(ref, Scalar):
                    connectors = self.connectors()
                    connector = connectors.get(ref.value) if connectors is not None else None
                    if isinstance(connector, Map):
                        return ["connectors", str(ref.value)], connector
                    # An undefined name fails the whole set-up (E330 says so); the next wiring of
                    # the edge is what the file meant.
        return None

    def code2wav_connector(self) -> tuple[str, Map] | None:
        """For MiniCPM-o 4.5: the named connector (under `connectors`) whose extra Code2Wav reads;
        None where none is, or where the edge's winning connector is written inline."""
        found = self.code2wav_wiring()
        if found is None or found[0][0] != "connectors":
            return None
        return str(found[0][1]), found[1]

    def code2wav_extra(self) -> Map | None:
        found = self.code2wav_wiring()
        return _extra_of(("", found[1]) if found else None)

    @property
    def code2wav_extra_path(self) -> str:
        """Where the Code2Wav options live, as a path for messages."""
        found = self.code2wav_wiring()
        if found is None:
            return "$.connectors.<stage 2 input>.extra"
        return path_string([*found[0], "extra"], self.config)

    def connector_extra(self, stage_id: int | None, side: str | None) -> tuple[Map | None, str]:
        """The extra of the connector the stage uses on its `side` ("output", else input) edge, and
        its path for messages (a placeholder path where the stage names no defined connector)."""
        stage = self.stage(stage_id) if stage_id is not None else None
        key = "output_connectors" if side == "output" else "input_connectors"
        wiring = stage.get(key) if stage is not None else None
        connectors = self.connectors()
        if isinstance(wiring, Map) and connectors is not None:
            for _, entry in wiring.entries.items():
                if isinstance(entry.node, Scalar) and isinstance(connectors.get(entry.node.value), Map):
                    name = str(entry.node.value)
                    connector = connectors.get(name)
                    extra = connector.get("extra") if isinstance(connector, Map) else None
                    return (extra if isinstance(extra, Map) else None), f"$.connectors.{name}.extra"
        return None, f"$.connectors.<stage {stage_id} {side}>.extra"

    def on(self, platform: str) -> PlatformApplied:
        """The config a server on `platform` runs (raises ConfigError); computed once per platform."""
        if platform not in self._views:
            self._views[platform] = apply_platform(self.config, platform)
        return self._views[platform]

    def on_or_none(self, platform: str) -> PlatformApplied | None:
        """`on(platform)`, or None where the file cannot apply on `platform` (validate says why)."""
        try:
            return self.on(platform)
        except OmniDeployError:
            return None

    def locate(self, path: list[Hashable], platform: str | None = None) -> tuple[Node | None, Origin | None]:
        """The value at `path` in the merged file (or a platform's view) and the origin of its key."""
        return locate(self.on(platform).config if platform else self.config, path)

    def code2wav_extra_on(self, platform: str) -> Map | None:
        """The Code2Wav extra inside the platform view (the connector found in the merged file)."""
        return self.code2wav_extra_in(self.on(platform).config)

    def code2wav_extra_in(self, config: Map) -> Map | None:
        """The Code2Wav extra inside `config`, a view or a copy of this file (launch edits a copy)."""
        found = self.code2wav_wiring()
        if found is None:
            return None
        connector, _ = locate(config, found[0])
        return _extra_of(("", connector)) if isinstance(connector, Map) else None


def _is_int(node: Node | None, value: int) -> bool:
    return isinstance(node, Scalar) and not isinstance(node.value, bool) and node.value == value


def _extra_of(found: tuple[str, Map] | None) -> Map | None:
    extra = found[1].get("extra") if found is not None else None
    return extra if isinstance(extra, Map) else None
