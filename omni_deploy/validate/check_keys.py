"""Unknown keys (with "did you mean") and keys the target vllm-omni version does not read."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

from omni_deploy import codes, jsonpath
from omni_deploy.codes import Code
from omni_deploy.config.nodes import Map, Node, Origin, Seq, child_path
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.knowledge.keys import (
    CODE2WAV,
    CONNECTOR_EXTRA,
    NPU_GRAPH_KEYS,
    UNREAD,
    Key,
    by_place,
)
from omni_deploy.knowledge.versions import MAIN, RELEASED, reads
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at

TOP, STAGE, DUPLEX = by_place("top"), by_place("stage"), by_place("duplex_session")
CONNECTOR, PLATFORM = by_place("connector"), by_place("platform")
CODE2WAV_KEYS = {k.name: k for k in [*CODE2WAV, *CONNECTOR_EXTRA]}
_PLACE_WORDS = {
    "top": "the top level",
    "stage": "a stage entry",
    "duplex_session": "duplex_session",
    "connector": "a connector",
    "code2wav": "the Code2Wav connector's extra",
    "platform": "a platform section",
}


def _suggest(name: str, candidates: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return f"did you mean '{close[0]}'?" if close else None


def _elsewhere(name: str, here: str) -> str | None:
    for place, table in (("top", TOP), ("stage", STAGE), ("code2wav", CODE2WAV_KEYS)):
        if place != here and name in table:
            return f"'{name}' belongs in {_PLACE_WORDS[place]}"
    return None


class _KeyWalker:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.findings: list[Finding] = []

    def add(self, origin: Origin | None, code: Code, path: str, message: str, hint: str | None) -> None:
        self.findings.append(at(origin, self.ctx.file, code, path, message, hint))

    def mapping(
        self,
        node: Node | None,
        path: str,
        table: dict[str, Key],
        unknown: Callable[[str, str, Origin], None],
    ) -> None:
        if not isinstance(node, Map):
            return
        for key, entry in node.entries.items():
            name = str(key)
            key_path = child_path(path, key)
            known = table.get(name)
            if known is None:
                unknown(name, key_path, entry.key_origin)
            else:
                self.version(known, key_path, entry.key_origin)

    def version(self, key: Key, path: str, origin: Origin) -> None:
        target = self.ctx.options.target_version
        if key.error_if_present:
            self.add(origin, codes.E311, path, key.error_if_present, None)
        elif not reads(key.since, target, key.until):
            who = f"vllm-omni main (after {RELEASED})" if key.since == MAIN else f"vllm-omni >= {key.since}"
            self.add(
                origin,
                codes.W310,
                path,
                f"'{key.name}' is read by {who} only; vllm-omni {target} ignores it",
                "keep it for newer servers, or drop it",
            )


def check_keys(ctx: Context) -> list[Finding]:
    walker = _KeyWalker(ctx)
    root = ctx.deployment.config

    def top_unknown(name: str, path: str, origin: Origin) -> None:
        hint = _elsewhere(name, "top") or _suggest(name, TOP)
        walker.add(origin, codes.W301, path, f"unknown top-level key '{name}': vllm-omni ignores it", hint)

    walker.mapping(root, "$", TOP, top_unknown)

    def duplex_unknown(name: str, path: str, origin: Origin) -> None:
        walker.add(
            origin,
            codes.E304,
            path,
            f"unknown duplex_session key '{name}': vllm-omni refuses to start",
            _suggest(name, DUPLEX),
        )

    walker.mapping(root.get("duplex_session"), "$.duplex_session", DUPLEX, duplex_unknown)

    for path, stage in _stage_entries(root):
        _check_stage(walker, stage, path)

    connectors = ctx.deployment.connectors()
    for name, connector in connectors.items() if connectors else []:
        base = child_path("$.connectors", name)

        def connector_unknown(key: str, path: str, origin: Origin) -> None:
            walker.add(origin, codes.W306, path, f"unknown connector key '{key}'", _suggest(key, CONNECTOR))

        walker.mapping(connector, base, CONNECTOR, connector_unknown)

    found = ctx.deployment.code2wav_connector()
    if found is not None:
        name, connector = found
        extra_path = jsonpath.connector_extra(name)

        def extra_unknown(key: str, path: str, origin: Origin) -> None:
            if key in NPU_GRAPH_KEYS:
                return  # check_platform_rules says where it belongs
            walker.add(
                origin,
                codes.W303,
                path,
                f"'{key}' is not a MiniCPM-o Code2Wav option: the connector extra never reads it",
                _elsewhere(key, "code2wav") or _suggest(key, CODE2WAV_KEYS),
            )

        walker.mapping(connector.get("extra"), extra_path, CODE2WAV_KEYS, extra_unknown)

    platforms = ctx.deployment.platform_sections()
    for plat, entry in platforms.entries.items() if platforms else []:
        section = entry.node
        plat_path = child_path("$.platforms", plat)
        if plat not in PLATFORMS:
            walker.add(
                entry.key_origin,
                codes.W305,
                plat_path,
                f"unknown platform '{plat}': vllm-omni applies only {', '.join(PLATFORMS)}",
                _suggest(str(plat), PLATFORMS),
            )

        def platform_unknown(key: str, path: str, origin: Origin) -> None:
            reason = UNREAD.get(("platform", key))
            message = (
                f"'{key}' in a platform section: {reason}"
                if reason
                else f"unknown platform key '{key}': ignored"
            )
            walker.add(origin, codes.W305, path, message, None if reason else _suggest(key, PLATFORM))

        walker.mapping(section, plat_path, PLATFORM, platform_unknown)
    return walker.findings


def _stage_entries(root: Map) -> Iterable[tuple[str, Map]]:
    stages = root.get("stages")
    if isinstance(stages, Seq):
        for i, stage in enumerate(stages.items):
            if isinstance(stage, Map):
                yield f"$.stages[{i}]", stage
    platforms = root.get("platforms")
    if isinstance(platforms, Map):
        for plat, section in platforms.items():
            entries = section.get("stages") if isinstance(section, Map) else None
            if isinstance(entries, Seq):
                for i, stage in enumerate(entries.items):
                    if isinstance(stage, Map):
                        yield f"{child_path('$.platforms', plat)}.stages[{i}]", stage


def _check_stage(walker: _KeyWalker, stage: Map, path: str) -> None:
    def stage_unknown(name: str, key_path: str, origin: Origin) -> None:
        hint = _elsewhere(name, "stage") or _suggest(name, STAGE)
        walker.add(
            origin,
            codes.W302,
            key_path,
            f"'{name}' is neither a vllm-omni stage field nor a known vLLM engine argument; vllm-omni passes "
            "it to vLLM through engine_extras, which may reject or ignore it",
            hint,
        )

    walker.mapping(stage, path, STAGE, stage_unknown)
    walker.mapping(stage.get("engine_args"), f"{path}.engine_args", STAGE, stage_unknown)
    runtime = stage.get("runtime")
    if isinstance(runtime, Map):
        for key, entry in runtime.entries.items():
            if key not in ("devices", "num_replicas", "env"):
                walker.add(
                    entry.key_origin,
                    codes.W302,
                    child_path(f"{path}.runtime", key),
                    f"'{key}' is not read from runtime (devices, num_replicas, env)",
                    None,
                )
