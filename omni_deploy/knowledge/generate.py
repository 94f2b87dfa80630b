"""Regenerate `upstream_keys.json`: what each released vllm-omni wheel reads from a deploy file.

    python -m omni_deploy.knowledge.generate            # write omni_deploy/knowledge/upstream_keys.json
    python -m omni_deploy.knowledge.generate --check    # exit 1 when the committed file differs

Each wheel in `RELEASES` is downloaded once (`pip download --no-deps`, ~2-8 MB each) into the cache
folder (default `.cache/` at the repository root, or $OMNI_DEPLOY_TEST_CACHE) and unpacked there; its
code is read by `code_reader` (AST, never imported).

Adding the next release (say 0.32.0): append it to `RELEASES` in `omni_deploy/knowledge/versions.py`,
run this module, read the diff of upstream_keys.json (new keys need a meaning, bounds and hints in
`knowledge/keys.py` where code cannot tell them), regenerate docs/deploy-reference.md with
`omni-deploy schema --reference > docs/deploy-reference.md` and schemas/ with `omni-deploy schema`,
and run the `upstream` test tier (`pytest -m upstream`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from omni_deploy.knowledge.code_reader import NO_DEFAULT, Read, legacy_stage_args, read_tree
from omni_deploy.knowledge.versions import RELEASES

DATA_FILE = Path(__file__).with_name("upstream_keys.json")
FACTS_FILE = Path(__file__).with_name("upstream_facts.json")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m omni_deploy.knowledge.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed file instead of writing it"
    )
    parser.add_argument("--cache", type=Path, default=None, help="wheel cache folder (default: .cache/)")
    parser.add_argument("--output", type=Path, default=DATA_FILE)
    parser.add_argument("--facts-output", type=Path, default=FACTS_FILE)
    args = parser.parse_args(argv)
    outputs = ((args.output, generate(args.cache)), (args.facts_output, generate_facts(args.cache)))
    if args.check:
        stale = [path for path, text in outputs if (path.read_text() if path.is_file() else "") != text]
        for path in stale:
            print(f"{path} is out of date: run python -m omni_deploy.knowledge.generate", file=sys.stderr)
        if stale:
            return 1
        print(f"{args.output} and {args.facts_output} are up to date ({len(RELEASES)} releases)")
        return 0
    for path, text in outputs:
        path.write_text(text)
        print(f"wrote {path} ({len(RELEASES)} releases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
