"""Keys: unknown (a near miss of a known key is an error with "did you mean"), refused, or not read
by the target vllm-omni, as its own code says (knowledge/readers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from omni_deploy.common import codes, jsonpath
from omni_deploy.common.codes import Code
from omni_deploy.config.nodes import Entry, Map, Node, Origin, Seq, child_path, stage_path
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.knowledge.keys import NPU_GRAPH_KEYS
from omni_deploy.knowledge.readers import (
    BY_PLUGIN,
    LEGACY,
    NOT_READ,
    REFUSED,
    UNKNOWN,
    known_names,
    status,
    table,
)
from omni_deploy.knowledge.target import TargetReads
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at, renaming
from omni_deploy.validate.rules import emits
from omni_deploy.validate.typos import near_miss

_PLACE_WORDS = {
    "top": "the top level",
    "stage": "a stage entry",
    "platform_stage": "a platform stage entry",
    "duplex_session": "duplex_session",
    "speech_cache": "speech_cache",
    "connector": "a connector",
    "code2wav": "the Code2Wav connector's extra",
    "platform": "a platform section",
}


def _elsewhere(name: str, here: str, code2wav_at: str | None = None) -> str | None:
    for place in ("top", "stage", "code2wav"):
        if place != here and name in table(place):
            if place == "code2wav" and code2wav_at is not None:
                return f"'{name}' belongs in {_PLACE_WORDS[place]}, {code2wav_at}: only there is it read"
            return f"'{name}' belongs in {_PLACE_WORDS[place]}"
    return None


# What an unknown key is at each place when it is no near miss: code and message.
UnknownReport = Callable[[str], tuple[Code, str]]


# Did-you-mean is looked for on this many unknown keys per file; a file with more (a generated or
# hostile one) gets plain unknown-key findings for the rest, so its cost stays bounded.
MAX_SUGGESTIONS = 1000


class _KeyWalker:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.reads: TargetReads = ctx.target_reads
        self.findings: list[Finding] = []
        self.suggestions_left = MAX_SUGGESTIONS

    def add(
        self, origin: Origin | None, code: Code, path: str, message: str, hint: str | None = None
    ) -> None:
        self.findings.append(at(origin, self.ctx.file, code, path, message, hint))

    def add_fixed(
        self, origin: Origin, code: Code, path: str, message: str, hint: str, fix: tuple[Any, str] | None
    ) -> None:
        self.findings.append(at(origin, self.ctx.file, code, path, message, hint, fix))

    def mapping(self, node: Node | None, path: str, place: str, unknown: UnknownReport) -> None:
        if not isinstance(node, Map):
            return
        for key, entry in node.entries.items():
            self.key(str(key), child_path(path, key), entry.key_origin, place, unknown, node)

    def key(
        self,
        name: str,
        path: str,
        origin: Origin,
        place: str,
        unknown: UnknownReport,
        parent: Map | None = None,
    ) -> bool:
        """Report one key; True when the target reads it (its contents are worth checking).

        `parent`: the mapping that holds it; a typo is fixable (a rename) unless that mapping
        already has the right key, where renaming would make a duplicate.
        """
        found = status(place, name, self.reads)
        if found.kind == REFUSED:
            self.add(origin, codes.E311, path, found.message)
        elif found.kind == LEGACY:
            self.add(origin, codes.I312, path, found.message)
        elif found.kind == BY_PLUGIN:
            self.add(
                origin, codes.I313, path, found.message, "serve through `omni-deploy serve` (the plugin)"
            )
        elif found.kind == NOT_READ:
            self._not_read(origin, path, place, name, found.message)
        elif found.kind == UNKNOWN and not self._typed_owned(name, place):
            close = None
            if self.suggestions_left > 0:
                self.suggestions_left -= 1
                close = near_miss(name, known_names(place, self.reads))
            if close is not None:
                self.add_fixed(
                    origin,
                    codes.E307,
                    path,
                    f"unknown key '{name}' in {_PLACE_WORDS.get(place, place)}, one slip from '{close}' "
                    f"(known there for {self.reads.source}): as written it is ignored",
                    f"did you mean '{close}'?",
                    renaming(name, close) if not _would_duplicate(parent, close, origin) else None,
                )
            else:
                code, message = unknown(name)
                self.add(origin, code, path, message, _elsewhere(name, place, self._code2wav_at()))
        return found.kind not in (NOT_READ, REFUSED, LEGACY, UNKNOWN)

    def _not_read(self, origin: Origin, path: str, place: str, name: str, said: str) -> None:
        """A key the target does not read: refused where the target builds a strict config of the
        mapping (duplex_session, speech_cache), else ignored (W310)."""
        if place == "duplex_session" and self.reads.fact("duplex_session_splat"):
            self.add(origin, codes.E304, path, self._splatted(name, said))
        elif place == "speech_cache":
            self.add(origin, codes.E309, path, _speech_cache_said(name, self.reads.version, said))
        else:
            hint = "keep it for the versions that read it, or drop it"
            if place in ("stage", "platform_stage"):
                hint = "this version passes it to vLLM as an engine argument"
            self.add(origin, codes.W310, path, said, hint)

    def _typed_owned(self, name: str, place: str) -> bool:
        """A stage key the target's typed config owns for every stage kind (knowledge/
        typed_config_owners.json): vllm-omni reads it, whatever the engine-argument table says
        (0.30.0: use_v2_model_runner, data_parallel_size)."""
        if place not in ("stage", "platform_stage"):
            return False
        owners = self.reads.owners()
        owned = owners.get("owned", {}) if owners is not None else {}
        return bool(owned) and all(name in keys for keys in owned.values())

    def _code2wav_at(self) -> str | None:
        """Where MiniCPM-o's Code2Wav reads its options in this file (the extra of the edge's first
        registered connector), for hints on a Code2Wav option written elsewhere."""
        if not self.ctx.deployment.pipeline.is_minicpmo:
            return None
        return self.ctx.deployment.code2wav_extra_path

    def _splatted(self, name: str, said: str) -> str:
        where = self.reads.fact("duplex_session_splat")
        return (
            f"vllm-omni {self.reads.version} builds DuplexSessionRuntimeConfig(**duplex_session) ({where}): "
            f"'{name}' is an unexpected keyword argument there, a TypeError at start-up ({said.split(';')[0]})"
        )


def _would_duplicate(parent: Map | None, name: str, origin: Origin) -> bool:
    """Whether the file that spells the typo already has `name` beside it (renaming would make
    a duplicate key); the same key from a base file is what the rename means to override."""
    if parent is None or name not in parent.entries:
        return False
    return parent.entries[name].key_origin.file == origin.file


def _runtime_read(walker: _KeyWalker, root: Map) -> bool:
    """Top-level `runtime`: read by the connector set-up (connectors, edges) where the target has it."""
    at = walker.reads.fact("runtime_connectors")
    if at is None:
        return False
    runtime = root.get("runtime")
    for key, entry in runtime.entries.items() if isinstance(runtime, Map) else []:
        if key not in ("connectors", "edges"):
            walker.add(entry.key_origin, codes.W301, child_path("$.runtime", key),
                       f"'{key}' under the top-level runtime: the connector set-up ({at}) reads only "
                       "connectors and edges there")  # fmt: skip
    return True


@emits(
    codes.W301,
    codes.W302,
    codes.W303,
    codes.E304,
    codes.W305,
    codes.W306,
    codes.E307,
    codes.E309,
    codes.W310,
    codes.E311,
    codes.I312,
    codes.I313,
    codes.I314,
)
def check_keys(ctx: Context) -> list[Finding]:
    """Keys: unknown (a near miss of a known key is an error with "did you mean"), refused, or not read
    by the target vllm-omni, as its own code says (knowledge/readers.py).

    W301:
        What it does: reports a top-level key that no vllm-omni release reads, and that is no slip of
            one that is read.
        Why: vllm-omni ignores it: whatever it was meant to set stays at its default.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            operator_notes: tuned for the bench
        Passes:
            # operator notes: tuned for the bench
            base_config: minicpmo_4_5_turn.yaml
    W302:
        What it does: reports a stage key (or a key under engine_args or runtime) that is neither a
            vllm-omni stage field nor a known vLLM engine argument.
        Why: vllm-omni passes unknown stage keys to vLLM as engine arguments, which may reject them at
            start-up or ignore them.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                my_custom_knob: 8
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seqs: 8
    W303:
        What it does: reports a key in the Code2Wav connector's extra that MiniCPM-o's Code2Wav never
            reads.
        Why: the extra is a free-form mapping: nothing refuses an unknown key, and nothing reads it.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  vocoder_warp: 2
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  codec_chunk_frames: 25
    E304:
        What it does: reports an unknown key under duplex_session.
        Why: vllm-omni builds its duplex session settings from these keys and refuses to start on one
            it does not know.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            duplex_session:
              max_listeners: 4
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            duplex_session:
              max_sessions: 4
    E309:
        What it does: reports a key under speech_cache that the target's SpeechCacheConfig does not
            have (0.31 on; read from the release's own class).
        Why: SpeechCacheConfig is a strict pydantic config (extra="forbid"): start-up refuses the file.
        Fails:
            # options: --target-version 0.32.0rc1
            base_config: minicpmo_4_5_turn.yaml
            speech_cache:
              resolve_max_gigabytes: 4
        Passes:
            # options: --target-version 0.32.0rc1
            base_config: minicpmo_4_5_turn.yaml
            speech_cache:
              resolve_max_entries: 1024
    W305:
        What it does: reports a platform section for a platform vllm-omni does not know (cuda, rocm,
            npu, xpu, musa), or an unknown key in a platform section.
        Why: vllm-omni applies only the section of the platform it runs on; another name is never
            applied, and an unknown key in a section is ignored.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              gaudi:
                stages: []
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              npu:
                stages: []
    W306:
        What it does: reports an unknown key in a connector's definition (besides name and extra).
        Why: vllm-omni builds the connector from its name and extra; other keys are ignored.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                labels: {}
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                name: SharedMemoryConnector
    E307:
        What it does: reports an unknown key one slip (two from 8 characters) from a key the target
            reads at that place, or a platform name one slip from a known one, with "did you mean".
        Why: a typo is read as an unknown key and ignored: the setting it was meant to change keeps its
            default, which is the hardest kind of mistake to see.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seq: 8
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seqs: 8
    W310:
        What it does: reports a key that the target vllm-omni's own code does not read (another
            version reads it, or none does), from the keys each release reads (`--target-version`).
        Why: the key is silently ignored by the version that will run the file.
        Fails:
            # options: --target-version 0.28.0
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  ref_audio_max_seconds: 4.0
        Passes:
            # options: --target-version 0.30.0
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  ref_audio_max_seconds: 4.0
    E311:
        What it does: reports a key the target vllm-omni refuses, such as the removed stage_args.
        Why: the target stops at start-up on it.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stage_args: []
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    I312:
        What it does: notes a stage_args file that the target still loads through its legacy loader.
        Why: a note: releases from 0.28.0 on refuse such files (E311); `stages:` works with every
            release.
        Fails:
            # options: --target-version 0.22.0
            stage_args:
              - stage_id: 0
        Passes:
            # options: --target-version 0.22.0
            stages:
              - stage_id: 0
    I313:
        What it does: notes a key that omni-deploy's vLLM plugin reads and the target vllm-omni does
            not (token2wav_device_spk, token2wav_allow_tf32, token2wav_device_prepare).
        Why: the key acts only where the plugin is installed and allowed (`omni-deploy serve` sees to
            it); a plain vllm-omni ignores it.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  token2wav_device_spk: false
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    I314:
        What it does: notes that the target version has no code to read here (`main` without a main
            checkout installed): another version's reads stand in.
        Why: a note: the keys are checked against the newest release, which may lack keys main reads
            (or read some main no longer does).
        Fails:
            # options: --target-version main
            base_config: minicpmo_4_5_turn.yaml
        Passes:
            # options: --target-version 0.30.0
            base_config: minicpmo_4_5_turn.yaml
    """
    walker = _KeyWalker(ctx)
    root = ctx.deployment.config
    if not walker.reads.exact:
        walker.add(None, codes.I314, "$", f"keys are checked against {walker.reads.source}")
    reads_top = {
        str(key): walker.key(str(key), child_path("$", key), entry.key_origin, "top", _top_unknown, root)
        for key, entry in root.entries.items()
        if not (key == "runtime" and _runtime_read(walker, root))
    }
    if reads_top.get("duplex_session"):
        walker.mapping(root.get("duplex_session"), "$.duplex_session", "duplex_session", _duplex_unknown)
    if reads_top.get("speech_cache") and walker.reads.keys("speech_cache"):
        walker.mapping(root.get("speech_cache"), "$.speech_cache", "speech_cache", _speech_cache_unknown)
    for path, stage, place in _stage_entries(root):
        _check_stage(walker, stage, path, place)
    connectors = ctx.deployment.connectors()
    for name, connector in connectors.items() if connectors else []:
        walker.mapping(connector, child_path("$.connectors", name), "connector", _connector_unknown)
    found = ctx.deployment.code2wav_connector()
    if found is not None:
        _check_code2wav_extra(walker, *found)
    platforms = ctx.deployment.platform_sections()
    for plat, entry in platforms.entries.items() if platforms else []:
        _check_platform(walker, str(plat), entry, platforms)
    return walker.findings


def _top_unknown(name: str) -> tuple[Code, str]:
    return codes.W301, f"unknown top-level key '{name}': vllm-omni ignores it"


def _speech_cache_said(name: str, version: str, said: str) -> str:
    return (
        f"vllm-omni {version} builds SpeechCacheConfig(**speech_cache), which forbids extra keys: "
        f"'{name}' is refused at start-up ({said.split(';')[0]})"
    )


def _speech_cache_unknown(name: str) -> tuple[Code, str]:
    return (
        codes.E309,
        f"unknown speech_cache key '{name}': SpeechCacheConfig forbids extra keys, vllm-omni refuses to start",
    )


def _duplex_unknown(name: str) -> tuple[Code, str]:
    return codes.E304, f"unknown duplex_session key '{name}': vllm-omni refuses to start"


def _connector_unknown(name: str) -> tuple[Code, str]:
    return codes.W306, f"unknown connector key '{name}'"


def _extra_unknown(key: str) -> tuple[Code, str]:
    return codes.W303, f"'{key}' is not a MiniCPM-o Code2Wav option: the connector extra never reads it"


def _platform_unknown(key: str) -> tuple[Code, str]:
    return codes.W305, f"unknown platform key '{key}': ignored"


def _check_code2wav_extra(walker: _KeyWalker, name: str, connector: Map) -> None:
    extra = connector.get("extra")
    for key, entry in extra.entries.items() if isinstance(extra, Map) else []:
        if str(key) in NPU_GRAPH_KEYS:
            continue  # check_platform_rules says where it belongs
        walker.key(str(key), child_path(jsonpath.connector_extra(name), key), entry.key_origin, "code2wav",
                   _extra_unknown, extra if isinstance(extra, Map) else None)  # fmt: skip


def _check_platform(walker: _KeyWalker, plat: str, entry: Entry, platforms: Map | None) -> None:
    plat_path = child_path("$.platforms", plat)
    if plat not in PLATFORMS:
        close = near_miss(plat, PLATFORMS)
        if close is not None:
            fix = renaming(plat, close) if not _would_duplicate(platforms, close, entry.key_origin) else None
            walker.add_fixed(entry.key_origin, codes.E307, plat_path,
                             f"unknown platform '{plat}', one slip from '{close}': its section is never applied",
                             f"did you mean '{close}'?", fix)  # fmt: skip
        else:
            walker.add(entry.key_origin, codes.W305, plat_path,
                       f"unknown platform '{plat}': vllm-omni applies only {', '.join(PLATFORMS)}")  # fmt: skip
    walker.mapping(entry.node, plat_path, "platform", _platform_unknown)


def _stage_entries(root: Map) -> Iterable[tuple[str, Map, str]]:
    stages = root.get("stages")
    if isinstance(stages, Seq):
        for i, stage in enumerate(stages.items):
            if isinstance(stage, Map):
                yield stage_path("$.stages", i, stage), stage, "stage"
    platforms = root.get("platforms")
    if isinstance(platforms, Map):
        for plat, section in platforms.items():
            entries = section.get("stages") if isinstance(section, Map) else None
            if isinstance(entries, Seq):
                for i, stage in enumerate(entries.items):
                    if isinstance(stage, Map):
                        yield (
                            stage_path(f"{child_path('$.platforms', plat)}.stages", i, stage),
                            stage,
                            "platform_stage",
                        )


def _check_stage(walker: _KeyWalker, stage: Map, path: str, place: str) -> None:
    def stage_unknown(name: str) -> tuple[Code, str]:
        return codes.W302, (
            f"'{name}' is neither a vllm-omni stage field nor a known vLLM engine argument; vllm-omni passes "
            "it to vLLM through engine_extras, which may reject or ignore it"
        )

    walker.mapping(stage, path, place, stage_unknown)
    walker.mapping(stage.get("engine_args"), f"{path}.engine_args", place, stage_unknown)
    runtime = stage.get("runtime")
    if isinstance(runtime, Map):
        for key, entry in runtime.entries.items():
            if key not in ("devices", "num_replicas", "env"):
                walker.add(
                    entry.key_origin,
                    codes.W302,
                    child_path(f"{path}.runtime", key),
                    f"'{key}' is not read from runtime (devices, num_replicas, env)",
                )
