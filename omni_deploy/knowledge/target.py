"""What the vllm-omni a file is checked against reads: from the committed data for a release, or
from the installed package's own source, read at run time, for a version the data does not know.

Never imported, never guessed: a target with no code to read (e.g. `main` with no main checkout
installed) is checked against the newest release's reads, and says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from omni_deploy.knowledge.versions import MAIN, RELEASES, is_final, order, parts

DATA_FILE = Path(__file__).with_name("upstream_keys.json")
FACTS_FILE = Path(__file__).with_name("upstream_facts.json")
OWNERS_FILE = Path(__file__).with_name("typed_config_owners.json")


@dataclass(frozen=True)
class KeyRead:
    """One key as one vllm-omni version reads it."""

    at: tuple[str, ...]  # file:line upstream (relative to site-packages)
    default: Any = None
    has_default: bool = False
    default_code: str | None = None
    refused: bool = False


@dataclass
class TargetReads:
    version: str  # what the user asked for (or the installed version)
    basis: str  # the version whose code answers: a release, or the installed version
    source: str  # in words, for messages: "vllm-omni 0.28.0 (committed data)", "installed vllm-omni ..."
    places: dict[str, dict[str, KeyRead]] = field(default_factory=dict)
    legacy_stage_args: str | None = None  # file:line where this version still accepts `stage_args` files
    exact: bool = True  # False: no code of `version` was available; `basis` stands in for it
    # knowledge/facts.py: behaviour -> the upstream file:line that shows it (absent: not in this code)
    facts: dict[str, str] = field(default_factory=dict)
    pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)  # registry name -> stages, ...
    # StageDeployConfig of this code (knowledge/stage_fields.py): "reserved", "fields", "at",
    # "owners_digest"; None where the release has none.
    stage_schema: dict[str, Any] | None = None
    read_from: Path | None = None  # the source tree read now, for a version the data does not know

    def fact(self, name: str) -> str | None:
        return self.facts.get(name)

    def owners(self) -> dict[str, Any] | None:
        """The typed config's owned stage keys, when this version's start-up builds it (0.30.0 on)
        and they are known for this code (see `owners_status`)."""
        return self.owners_status()[0]

    def owners_status(self) -> tuple[dict[str, Any] | None, str]:
        """(the owned stage keys, where they come from). Generated per release in that release's vllm
        tier; a tree read now borrows a release's entry only where its ownership code is the same
        (the digest of knowledge/stage_fields.py), never by version number. The owners are None with
        the reason when the start-up builds no typed config ("") or when they are unknown."""
        if not self.fact("typed_config_at_startup"):
            return None, ""
        if not self.exact:
            return None, (
                f"no code of vllm-omni {self.version} to compare with {self.basis}'s, so its typed-config "
                "owners are unknown (install it, or name its tree with --vllm-omni-source)"
            )
        entry = owners_data().get(self.basis)
        if isinstance(entry, dict) and self.read_from is None:
            return entry, f"vllm-omni {self.basis}'s typed-config owners"
        if self.read_from is None:
            return None, (
                f"the typed-config owners of vllm-omni {self.basis} are unknown: generate them in its vllm "
                "tier (python -m tools.generate_owners)"
            )
        digest = (self.stage_schema or {}).get("owners_digest")
        same = [v for v in RELEASES if digest and (stage_data().get(v) or {}).get("owners_digest") == digest]
        borrowed = [v for v in same if isinstance(owners_data().get(v), dict)]
        if borrowed:
            release = max(borrowed, key=order)
            return owners_data()[release], (
                f"vllm-omni {release}'s typed-config owners, borrowed: the ownership code of {self.read_from} "
                f"is the same as that release's (generated with vLLM {owners_data()[release]['generated_with']['vllm']})"
            )
        return None, (
            f"the typed-config owners of {self.read_from} are unknown: its ownership code matches no release "
            f"omni-deploy has owners for ({', '.join(owners_data())})"
        )

    def stage_reserved(self) -> frozenset[str] | None:
        """The stage wrapper keys this code keeps out of the typed config's checked mapping."""
        return frozenset(self.stage_schema["reserved"]) if self.stage_schema else None

    def reads(self, place: str, key: str) -> KeyRead | None:
        return self.places.get(place, {}).get(key)

    def keys(self, place: str) -> dict[str, KeyRead]:
        return self.places.get(place, {})


@cache
def data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return loaded


@cache
def facts_data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FACTS_FILE.read_text(encoding="utf-8"))
    return loaded


@cache
def stage_data() -> dict[str, Any]:
    """config/stage_fields.json's versions: each release's stage schema (generated)."""
    from omni_deploy.config.stage_schema import stage_fields_data

    return stage_fields_data()


@cache
def owners_data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(OWNERS_FILE.read_text(encoding="utf-8"))
    return loaded


def fact_meaning(name: str) -> str:
    return str(facts_data()["meaning"].get(name, name))


def _entry(raw: dict[str, Any]) -> KeyRead:
    return KeyRead(
        tuple(raw["at"]),
        raw.get("default"),
        "default" in raw,
        raw.get("default_code"),
        bool(raw.get("refused")),
    )


def release_reads(version: str) -> TargetReads:
    """The committed reads of one release in RELEASES."""
    places: dict[str, dict[str, KeyRead]] = {}
    for place, keys in data()["keys"].items():
        for key, info in keys.items():
            raw = info["read_by"].get(version)
            if raw is not None:
                places.setdefault(place, {})[key] = _entry(raw)
    legacy = data()["legacy_stage_args"].get(version)
    known = facts_data()["versions"].get(version, {})
    return TargetReads(
        version, version, f"vllm-omni {version}", places, legacy,
        facts=dict(known.get("facts", {})), pipelines=dict(known.get("pipelines", {})),
        stage_schema=stage_data().get(version),
    )  # fmt: skip


def versions_reading(place: str, key: str) -> list[str]:
    """Releases whose code reads `key` at `place`, oldest first."""
    info = data()["keys"].get(place, {}).get(key)
    return [v for v in data()["versions"] if info and v in info["read_by"]]


def describe_versions(versions: list[str]) -> str:
    """'0.26.0-0.30.0', '0.20.0, 0.24.0', or 'no release'."""
    if not versions:
        return "no release"
    everything = list(data()["versions"])
    first, last = everything.index(versions[0]), everything.index(versions[-1])
    if everything[first : last + 1] == versions:
        return versions[0] if first == last else f"{versions[0]}-{versions[-1]}"
    return ", ".join(versions)


def _release_for(version: str) -> str | None:
    """The release whose code `version` runs: exact, or, for a final patch release (0.28.1), the final
    release of its major.minor. A pre-release or dev build (0.31.0.dev5) and a final after a
    pre-release (0.32.0 after 0.32.0rc1) run other code: None, so their code is read instead."""
    if version in RELEASES:
        return version
    if not is_final(version):
        return None
    same = [r for r in RELEASES if is_final(r) and parts(r)[:2] == parts(version)[:2]]
    return same[-1] if same and order(same[-1]) < order(version) else None


def resolve_target(
    version: str, installed: str | None = None, installed_root: Path | None = None
) -> TargetReads:
    """What `version` reads. `installed`/`installed_root`: the installed vllm-omni, if any (the
    folder that holds the `vllm_omni` package)."""
    release = _release_for(version) if version != MAIN else None
    if release is not None:
        reads = release_reads(release)
        reads.version = version
        return reads
    if installed_root is not None and installed is not None and (version in (installed, MAIN)):
        return installed_reads(installed, installed_root)
    newest = RELEASES[-1]
    reads = release_reads(newest)
    reads.version, reads.exact = version, False
    older = version != MAIN and order(version) < order(RELEASES[0])
    why = "older than any release with deploy files" if older else "no code of it is installed"
    if version != MAIN and order(version) > order(newest):
        why = (
            f"not known yet, newer than {newest}; no code of it is installed. Add it once it is on the "
            f"index: python -m omni_deploy.knowledge.generate --add {version}"
        )
    reads.source = f"vllm-omni {newest} (standing in for {version}: {why})"
    return reads


def installed_reads(version: str, root: Path) -> TargetReads:
    """Read the installed package's source (cached by its files' hashes on disk, and once per
    process: validate asks for every file it checks)."""
    known = _tree_knowledge(root.resolve(), _cache_dir())
    places = {place: {key: _entry(raw) for key, raw in keys.items()} for place, keys in known.places.items()}
    source = f"vllm-omni {version} at {root / 'vllm_omni'} (its source, read now)"
    reads = TargetReads(
        version, version, source, places, known.legacy_stage_args,
        facts=dict(known.facts), pipelines=dict(known.pipelines),
        stage_schema=known.stage_schema, read_from=root,
    )  # fmt: skip
    return reads


@dataclass(frozen=True)
class _TreeKnowledge:
    places: dict[str, Any]
    legacy_stage_args: str | None
    facts: dict[str, str]
    pipelines: dict[str, dict[str, Any]]
    stage_schema: dict[str, Any] | None


@cache
def _tree_knowledge(root: Path, cache_dir: Path) -> _TreeKnowledge:
    """Once per process and cache folder (validate asks for every file it checks)."""
    from omni_deploy.knowledge.code_reader import legacy_stage_args, module_text, read_tree, tree_digest
    from omni_deploy.knowledge.facts import facts, pipelines
    from omni_deploy.knowledge.generate import version_entry
    from omni_deploy.knowledge.stage_fields import release_entry

    digest = tree_digest(root)
    cached = cache_dir / f"reads-{digest[:32]}.json"
    payload = _cached_payload(cached)
    if payload is None:
        payload = {"places": version_entry(read_tree(root)), "legacy_stage_args": legacy_stage_args(root)}
        _write_cache(cached, payload)
    return _TreeKnowledge(
        payload["places"],
        payload["legacy_stage_args"],
        facts(root, module_text),
        pipelines(root, module_text),
        release_entry(root, module_text),
    )


def _cached_payload(path: Path) -> dict[str, Any] | None:
    """A cache file's reads when it is one we wrote (the right shape); None: read the tree again.

    The cache is a convenience: a file cut short, edited, or replaced by a FIFO or a link to a
    device is never trusted and never blocks; it is rewritten from the tree."""
    from omni_deploy.common import guarded

    try:
        payload = json.loads(guarded.read_text(path, str(path), 16 * 1024 * 1024))
    except (guarded.Refused, ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("places"), dict):
        return None
    legacy = payload.get("legacy_stage_args")
    if legacy is not None and not isinstance(legacy, str):
        return None
    for keys in payload["places"].values():
        if not isinstance(keys, dict):
            return None
        for raw in keys.values():
            # `at` lists every file:line that reads the key: one, two or many (a cache check that
            # wanted exactly two threw most caches away, so every run read the tree again).
            at = raw.get("at") if isinstance(raw, dict) else None
            if not (isinstance(at, list) and at and all(isinstance(a, str) for a in at)):
                return None
    return payload


def _write_cache(path: Path, payload: dict[str, Any]) -> None:
    """Write the cache atomically: a new file renamed over the old entry (whatever that is, a link
    included); no fsync, since a lost cache is only re-read from the tree."""
    from omni_deploy.common.atomic_write import write_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(payload).encode("utf-8"), link="replace", mode=0o644, fsync=False)
    except OSError:
        pass  # a read-only home only costs the next run a re-read


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "omni-deploy"


def for_host(version: str) -> TargetReads:
    """What `version` reads, with the installed vllm-omni (if any) consulted for unreleased code."""
    from omni_deploy.common.bundled import installed_version, installed_vllm_omni_dir

    package = installed_vllm_omni_dir()
    return resolve_target(version, installed_version("vllm-omni"), package.parent if package else None)
