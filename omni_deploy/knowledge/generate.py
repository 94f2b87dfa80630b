"""Regenerate everything omni-deploy knows of the vllm-omni releases, from their wheels.

    python -m omni_deploy.knowledge.generate              # regenerate every artifact below
    python -m omni_deploy.knowledge.generate --add 0.32.0 # add a release to RELEASES, then regenerate
    python -m omni_deploy.knowledge.generate --check      # exit 1 while any artifact is stale

Each wheel in `RELEASES` is downloaded once (`pip download --no-deps`, ~2-8 MB each) into the cache
folder (default `.cache/` at the repository root, or $OMNI_DEPLOY_TEST_CACHE) and unpacked there; its
code is read by `code_reader`, `facts` and `stage_fields` (AST and text, never imported).

The artifacts: knowledge/upstream_keys.json (what each release reads), knowledge/upstream_facts.json
(its behaviours and pipelines), config/stage_fields.json (its StageDeployConfig), and, from those
through the CLI in a fresh process, schemas/deploy.schema.json, docs/deploy-reference.md,
docs/findings.md, docs/releases.md and the README's release spans. The typed-config owners
(knowledge/typed_config_owners.json) need the release's own vLLM classes: the command names each
release whose owners are missing and what to run for it in a vllm tier. Then read the diff (new
keys need a meaning, bounds and hints in `knowledge/keys.py` where code cannot tell them) and run
the `upstream` test tier (`pytest -m upstream tests/knowledge tests/validate`), which also validates
the new release's own bundled deploy files at that release.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from omni_deploy.knowledge.code_reader import NO_DEFAULT, Read, legacy_stage_args, read_tree
from omni_deploy.knowledge.versions import RELEASES

DATA_FILE = Path(__file__).with_name("upstream_keys.json")
FACTS_FILE = Path(__file__).with_name("upstream_facts.json")
# The config layer mirrors upstream's stage parsing and may not import knowledge: its per-release
# stage schema is generated next to it.
STAGE_FIELDS_FILE = Path(__file__).resolve().parents[1] / "config" / "stage_fields.json"
REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("OMNI_DEPLOY_TEST_CACHE", REPO_ROOT / ".cache"))


def wheel_tree(version: str, cache: Path | None = None) -> Path:
    """The unpacked wheel of one release (downloaded and unpacked on first use)."""
    cache = cache or cache_dir()
    target = cache / f"vllm_omni-{version}"
    if (target / "vllm_omni" / "__init__.py").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"vllm_omni-{version}-*.whl"))
    if not wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(cache),
                f"vllm-omni=={version}",
            ],
            check=True,
        )
        wheels = sorted(cache.glob(f"vllm_omni-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as archive:
        archive.extractall(target, [m for m in archive.namelist() if m.startswith("vllm_omni/")])
    return target


def version_entry(reads: list[Read]) -> dict[str, dict[str, dict[str, Any]]]:
    """{place: {key: {"at": [file:line...], "default"?, "default_code"?, "refused"?}}} for one tree."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for read in sorted(reads, key=lambda r: (r.place, r.key, r.file, r.line)):
        entry = out.setdefault(read.place, {}).setdefault(read.key, {"at": []})
        if read.at not in entry["at"]:
            entry["at"].append(read.at)
        if read.refused:
            entry["refused"] = True
        defaults = entry.setdefault("defaults", [])
        if read.default is not NO_DEFAULT:
            if read.default not in defaults:
                defaults.append(read.default)
        elif read.default_code is not None:
            entry.setdefault("default_code", read.default_code)
    for keys in out.values():
        for entry in keys.values():
            _settle_default(entry)
    return out


def _settle_default(entry: dict[str, Any]) -> None:
    """One default where every reader states the same; else the readers' defaults, as code."""
    defaults = entry.pop("defaults", [])
    if len(defaults) == 1:
        entry["default"] = defaults[0]
        entry.pop("default_code", None)
    elif defaults:
        entry["default_code"] = " / ".join(json.dumps(d) for d in defaults) + " (differs by reader)"


def build(trees: dict[str, Path]) -> dict[str, Any]:
    """The data file's content from unpacked trees, oldest version first."""
    versions = list(trees)
    per_version = {v: version_entry(read_tree(root)) for v, root in trees.items()}
    keys: dict[str, dict[str, Any]] = {}
    for version in versions:
        for place, entries in per_version[version].items():
            for key, entry in entries.items():
                keys.setdefault(place, {}).setdefault(key, {"read_by": {}})["read_by"][version] = entry
    for entries in keys.values():
        for info in entries.values():
            read_by = [v for v in versions if v in info["read_by"]]
            info["since"] = read_by[0]
            after = versions[versions.index(read_by[-1]) + 1 :]
            info["until"] = after[0] if after else None
            info["gaps"] = [
                v
                for v in versions[versions.index(read_by[0]) :]
                if v not in read_by
                and (info["until"] is None or versions.index(v) < versions.index(info["until"]))
            ]
            if not info["gaps"]:
                del info["gaps"]
    ordered = {
        place: {key: _ordered(keys[place][key]) for key in sorted(keys[place])} for place in sorted(keys)
    }
    legacy = {v: at for v, root in trees.items() if (at := legacy_stage_args(root))}
    return {
        "generated_by": "python -m omni_deploy.knowledge.generate",
        "source": "the vllm-omni wheels on PyPI, read by AST (omni_deploy/knowledge/code_reader.py)",
        "versions": versions,
        "legacy_stage_args": legacy,
        "keys": ordered,
    }


def _ordered(info: dict[str, Any]) -> dict[str, Any]:
    head: dict[str, Any] = {k: info[k] for k in ("since", "until", "gaps") if k in info}
    return {**head, "read_by": info["read_by"]}


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def generate(cache: Path | None = None) -> str:
    return render(build({v: wheel_tree(v, cache) for v in RELEASES}))


def build_facts(trees: dict[str, Path]) -> dict[str, Any]:
    """upstream_facts.json's content: per release, the behaviours of knowledge/facts.py with the
    line that shows each, and the registry's pipelines with their stages."""
    from omni_deploy.knowledge.facts import FACTS, facts, pipelines

    return {
        "generated_by": "python -m omni_deploy.knowledge.generate",
        "source": "the vllm-omni wheels on PyPI, read as text and by AST (omni_deploy/knowledge/facts.py)",
        "meaning": {fact.name: fact.meaning for fact in FACTS},
        "versions": {v: {"facts": facts(root), "pipelines": pipelines(root)} for v, root in trees.items()},
    }


def generate_facts(cache: Path | None = None) -> str:
    return render(build_facts({v: wheel_tree(v, cache) for v in RELEASES}))


def build_stage_fields(trees: dict[str, Path]) -> dict[str, Any]:
    """config/stage_fields.json's content: each release's StageDeployConfig fields, wrapper keys and
    the digest of its typed-config ownership code (knowledge/stage_fields.py)."""
    from omni_deploy.knowledge.stage_fields import release_entry

    return {
        "generated_by": "python -m omni_deploy.knowledge.generate",
        "source": "the vllm-omni wheels on PyPI, read by AST (omni_deploy/knowledge/stage_fields.py)",
        "versions": {v: entry for v, root in trees.items() if (entry := release_entry(root))},
    }


def generate_stage_fields(cache: Path | None = None) -> str:
    return render(build_stage_fields({v: wheel_tree(v, cache) for v in RELEASES}))


def _artifacts(cache: Path | None) -> list[tuple[Path, str]]:
    return [
        (DATA_FILE, generate(cache)),
        (FACTS_FILE, generate_facts(cache)),
        (STAGE_FIELDS_FILE, generate_stage_fields(cache)),
    ]


# Written from the JSON above by a fresh process (the CLI's modules load the data once).
_DOCS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("schemas/deploy.schema.json", ("-m", "omni_deploy", "schema")),
    ("docs/deploy-reference.md", ("-m", "omni_deploy", "schema", "--reference")),
    ("docs/findings.md", ("-m", "omni_deploy", "rule", "--all")),
)
_RELEASES_DOC = "docs/releases.md"
_SPAN_FILES = ("README.md", "docs/validating.md")


def _run_here(*argv: str) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def _docs() -> list[tuple[Path, str]]:
    """The generated documents, computed in a fresh process from the JSON now on disk."""
    out = [(REPO_ROOT / name, _run_here(*argv)) for name, argv in _DOCS]
    script = (
        "import sys; from pathlib import Path; from omni_deploy.knowledge import releases_doc as r; "
        "sys.stdout.write(r.releases_markdown() if sys.argv[1] == '-' else r.rewrite(Path(sys.argv[1]).read_text()))"
    )
    out.append((REPO_ROOT / _RELEASES_DOC, _run_here("-c", script, "-")))
    out += [(REPO_ROOT / name, _run_here("-c", script, str(REPO_ROOT / name))) for name in _SPAN_FILES]
    return out


def missing_owners() -> list[str]:
    """Releases whose start-up builds the typed config but whose owners were never generated."""
    facts = json.loads(FACTS_FILE.read_text())["versions"]
    owners = json.loads((DATA_FILE.parent / "typed_config_owners.json").read_text())
    return [
        v
        for v in RELEASES
        if "typed_config_at_startup" in facts.get(v, {}).get("facts", {}) and v not in owners
    ]


def owners_instructions(version: str) -> str:
    minor = ".".join(version.split(".")[:2])
    return (
        f"vllm-omni {version} has no typed-config owners yet (E315 says they are unknown until then). In a "
        f"vllm tier for it (a venv as .ci/vllm-tier-requirements-0.32.txt builds one, with vllm=={minor}.* and "
        f"vllm-omni=={version}, both --no-deps), run from the repository root:\n"
        f"    PYTHONPATH=$PWD python -m tools.generate_owners\n"
        f"then rerun python -m omni_deploy.knowledge.generate (docs/releases.md lists the owners)."
    )


VERSIONS_FILE = Path(__file__).with_name("versions.py")
_RELEASES_TUPLE = re.compile(r"(RELEASES: tuple\[str, \.\.\.\] = \(\n)(?P<body>(?:    \"[^\"]+\",\n)+)(\))")


def add_release(version: str, cache: Path | None) -> str | None:
    """Put `version` into RELEASES in versions.py (PEP 440 order) once its wheel is on the index;
    None, or why not (versions.py is left as it was)."""
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(version)
    except InvalidVersion:
        return f"{version!r} is not a version"
    if str(wanted) != version:
        return f"write the version as the index does: {wanted}"
    if version in RELEASES:
        return None
    try:
        wheel_tree(version, cache)
    except (subprocess.CalledProcessError, OSError, zipfile.BadZipFile) as exc:
        return f"vllm-omni {version} could not be downloaded from the package index ({exc})"
    text = VERSIONS_FILE.read_text()
    match = _RELEASES_TUPLE.search(text)
    if match is None:
        return f"{VERSIONS_FILE}: the RELEASES tuple is not in the form this command edits"
    ordered = sorted([*RELEASES, version], key=Version)
    body = "".join(f'    "{v}",\n' for v in ordered)
    VERSIONS_FILE.write_text(text[: match.start("body")] + body + text[match.end("body") :])
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m omni_deploy.knowledge.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files instead of writing them"
    )
    parser.add_argument("--add", metavar="VERSION", help="add this vllm-omni release (from the index) first")
    parser.add_argument("--cache", type=Path, default=None, help="wheel cache folder (default: .cache/)")
    args = parser.parse_args(argv)
    if args.add:
        if args.check:
            parser.error("--add writes; --check only compares")
        why = add_release(args.add, args.cache)
        if why is not None:
            print(f"cannot add {args.add}: {why}", file=sys.stderr)
            return 1
        # RELEASES changed on disk: the rest runs in a fresh process that imports it anew.
        rest = ["-m", "omni_deploy.knowledge.generate", *(["--cache", str(args.cache)] if args.cache else [])]
        return subprocess.run([sys.executable, *rest], cwd=REPO_ROOT).returncode
    return _check(args.cache) if args.check else _write(args.cache)


def _check(cache: Path | None) -> int:
    stale = [p for p, text in _artifacts(cache) if (p.read_text() if p.is_file() else "") != text]
    if not stale:
        stale = [p for p, text in _docs() if (p.read_text() if p.is_file() else "") != text]
    for path in stale:
        print(f"{path} is out of date: run python -m omni_deploy.knowledge.generate", file=sys.stderr)
    if stale:
        return 1
    print(f"the release knowledge and its documents are up to date ({len(RELEASES)} releases)")
    return 0


def _write(cache: Path | None) -> int:
    for path, text in _artifacts(cache):
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO_ROOT)} ({len(RELEASES)} releases)")
    for path, text in _docs():
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    for version in missing_owners():
        print(owners_instructions(version))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
