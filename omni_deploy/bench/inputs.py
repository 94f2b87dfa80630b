"""The benchmark's Seed-TTS inputs: laid out from a Seed-TTS evaluation checkout, and checked before a sweep.

`vllm bench serve --dataset-name seed-tts --dataset-path DIR` reads `DIR/<locale>/meta.lst` (lines
`id|reference transcript|reference WAV, relative to meta.lst|text to synthesize`, vllm-omni's
`benchmarks/data_modules/seed_tts_dataset.py`) and the WAVs it names. `lay_out` copies a checkout's
rows into the protocol's two folders, `warmup/` and `evaluation/`, disjoint and in meta.lst order (the
same checkout gives the same folders, byte for byte), and writes `manifest.json` into each: every
file's SHA-256. `check_folder` is what `bench run` and `bench ab` ask before anything runs: meta.lst
present, every WAV it names present, and every file as its manifest says where there is one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from omni_deploy.bench import dataset_paths
from omni_deploy.bench.dataset_paths import InputsError
from omni_deploy.common import guarded

META = "meta.lst"
MANIFEST = "manifest.json"
SUBSETS = ("warmup", "evaluation")
MAX_META_BYTES = 64 * 1024 * 1024  # seed-tts-eval's en/meta.lst is about 200 KiB
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_LISTED = 100_000  # files one manifest may list
SHOWN = 5  # problems listed before "and N more"

__all__ = ["InputsError", "Plan", "Row", "check_folder", "lay_out", "plan_layout"]


@dataclass(frozen=True)
class Row:
    """One meta.lst line, kept verbatim (the copy must be the line vllm bench reads)."""

    id: str
    wav: str  # relative to meta.lst's folder, as written
    line: str


def _rows(meta: Path) -> list[Row]:
    """The rows of a meta.lst as vllm-omni's loader takes them: 4 or more `|` fields, non-empty target."""
    try:
        text = guarded.read_text(meta, str(meta), MAX_META_BYTES)
    except guarded.Refused as refused:
        raise InputsError(str(refused)) from None
    rows = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split("|")
        if len(parts) < 4 or not parts[3].strip():
            continue  # vllm-omni skips these too (a warning in its log)
        rows.append(Row(parts[0].strip(), parts[2].strip(), raw))
    return rows


def _wav(meta: Path, root: Path, wav: str) -> Path:
    """A row's WAV: inside meta.lst's folder and inside `root` (links followed), and not meta.lst."""
    where = f"{meta}: the row's WAV"
    rel = dataset_paths.spelt_inside(wav, where)
    if rel == PurePosixPath(META):
        raise InputsError(f"{where} {wav!r} is {META} itself; a WAV cannot take meta.lst's name")
    path = dataset_paths.inside(meta.parent, wav, where)
    dataset_paths.inside(root, str(path.relative_to(root)), where)
    return path


def _missing(meta: Path, root: Path, rows: list[Row]) -> list[str]:
    """The rows' WAVs that are not regular files, each with why (after the path checks)."""
    found = []
    for row in rows:
        why = dataset_paths.problem(_wav(meta, root, row.wav))
        if why is not None:
            found.append(row.wav if why == "missing" else f"{row.wav} ({why})")
    return found


def _meta_in(root: Path, rel: str) -> Path | None:
    """root/rel when something is there (checked inside root), None when nothing is."""
    path = root / rel
    if not os.path.lexists(path):
        return None
    return dataset_paths.inside(root, rel, str(root))


def locale_dir(checkout: Path, locale: str) -> Path:
    """The folder holding meta.lst: CHECKOUT/<locale>/ (seed-tts-eval's layout), or CHECKOUT itself."""
    for rel in (f"{locale}/{META}", META):
        found = _meta_in(checkout, rel)
        if found is not None and dataset_paths.problem(found) is None:
            return found.parent
    raise InputsError(
        f"{checkout}: no {locale}/{META} (nor {META}): not a Seed-TTS evaluation checkout "
        "(seed-tts-eval's layout: en/meta.lst and the WAVs it names)"
    )


@dataclass(frozen=True)
class Plan:
    """What `lay_out` will write, decided (and checked) before anything is written."""

    source: Path  # the folder of the checkout's meta.lst
    locale: str
    subsets: dict[str, list[Row]]


def plan_layout(checkout: Path, locale: str, warmup: int, evaluation: int) -> Plan:
    """The rows of each folder: the first `evaluation` usable rows, then the next `warmup` (disjoint).

    Refuses, before anything is written, a checkout with too few rows, a duplicated id, a WAV path
    that leaves the checkout (by its spelling or through a symlink), a WAV named meta.lst, or a WAV
    that is missing or not a regular file.
    """
    source = locale_dir(checkout, locale)
    rows = _rows(source / META)
    seen: set[str] = set()
    for row in rows:
        if row.id in seen:
            raise InputsError(f"{source / META}: id {row.id!r} appears twice; ids name the requests")
        seen.add(row.id)
    if len(rows) < evaluation + warmup:
        raise InputsError(
            f"{source / META} has {len(rows)} usable row(s); {evaluation} evaluation and {warmup} warm-up "
            "rows (disjoint) need more (--evaluation N, --warmup N take fewer)"
        )
    chosen = {"evaluation": rows[:evaluation], "warmup": rows[evaluation : evaluation + warmup]}
    missing = _missing(source / META, checkout, [row for subset in chosen.values() for row in subset])
    if missing:
        raise InputsError(f"{source}: the WAVs of {len(missing)} row(s) are missing: {_few(missing)}")
    return Plan(source, locale, {name: chosen[name] for name in SUBSETS if chosen[name]})


def _few(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def manifest_of(folder: Path, locale: str, rows: list[Row], source: str) -> dict[str, Any]:
    files = [f"{locale}/{META}", *sorted({f"{locale}/{PurePosixPath(r.wav)}" for r in rows})]
    return {
        "schema_version": 1,
        "made_by": "omni-deploy bench inputs",
        "source": source,
        "locale": locale,
        "ids": [r.id for r in rows],
        "files": {name: dataset_paths.sha256(folder / name, name) for name in files},
    }


def _write_subset(target: Path, plan: Plan, rows: list[Row]) -> None:
    """One folder, built under a temporary name beside `target` and renamed into place when whole."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        locale = staging / plan.locale
        locale.mkdir()
        (locale / META).write_text("".join(r.line + "\n" for r in rows), encoding="utf-8")
        (locale / META).chmod(stat.S_IMODE(os.stat(plan.source / META).st_mode) & 0o666)  # never wider
        for row in rows:
            wav = locale / PurePosixPath(row.wav)
            wav.parent.mkdir(parents=True, exist_ok=True)
            # Checked again as it is copied: the checkout may have changed since the plan.
            source = _wav(plan.source / META, plan.source, row.wav)
            dataset_paths.copy(source, wav, f"{plan.source / META}: the row's WAV {row.wav!r}")
        manifest = manifest_of(staging, plan.locale, rows, str(plan.source))
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the inputs from a server run as another user
        os.rename(staging, target)  # a folder that appeared there meanwhile, with files in it, refuses
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _new_folders(out: Path) -> list[Path]:
    """The folders `out.mkdir(parents=True)` would create, deepest first."""
    missing: list[Path] = []
    for folder in (out, *out.parents):
        if folder.exists() or folder.is_symlink():
            break
        missing.append(folder)
    return missing


def lay_out(plan: Plan, out: Path) -> dict[str, Path]:
    """Write each subset of `plan` into OUT/<subset>/ (refused if one exists: nothing is overwritten)."""
    targets = {name: out / name for name in plan.subsets}
    taken = [str(t) for t in targets.values() if t.exists() or t.is_symlink()]
    if taken:
        raise InputsError(f"{', '.join(taken)} exist(s); never overwritten (name another --out)")
    made: list[Path] = []
    created = _new_folders(out)  # a refusal leaves no folder behind that we made
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, target in targets.items():
            _write_subset(target, plan, plan.subsets[name])
            made.append(target)
    except (OSError, InputsError) as exc:
        for target in made:  # all or nothing: a half-made pair would pass for a whole one
            shutil.rmtree(target, ignore_errors=True)
        for folder in created:  # deepest first; only if still empty (never another's files)
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, InputsError):
            raise
        raise InputsError(f"cannot write the inputs under {out}: {exc.strerror or exc}") from None
    return targets


def check_folder(folder: Path, locale: str = "en", option: str = "--dataset-path") -> str:
    """Refuse a folder a sweep cannot run on; return a one-line description of what it holds.

    meta.lst must be there with at least one usable row and every WAV it names; where a manifest
    lies beside it (`bench inputs` writes one), every file it lists must have its SHA-256.
    """
    meta = _meta_in(folder, f"{locale}/{META}") or folder / locale / META
    if dataset_paths.problem(meta) is not None:
        raise InputsError(
            f"{option} {folder}: no {locale}/{META}, so vllm bench serve has no requests to send "
            "(`omni-deploy bench inputs --from SEED_TTS_CHECKOUT --out DIR` lays the inputs out)"
        )
    rows = _rows(meta)
    if not rows:
        raise InputsError(f"{option} {folder}: {locale}/{META} has no usable row (id|text|wav|target)")
    missing = _missing(meta, folder, rows)
    if missing:
        raise InputsError(
            f"{option} {folder}: {len(missing)} WAV(s) named in {META} are missing: {_few(missing)}"
        )
    manifest = folder / MANIFEST
    if not manifest.exists():
        return f"{len(rows)} request(s), no {MANIFEST} to check them against"
    changed = _mismatches(folder, _read_manifest(manifest, option))
    if changed:
        raise InputsError(
            f"{option} {folder}: {len(changed)} file(s) differ from {MANIFEST}: {_few(changed)} "
            "(lay the inputs out again, or remove the manifest if the change is meant)"
        )
    return f"{len(rows)} request(s), every file as {MANIFEST} says"


def _read_manifest(path: Path, option: str) -> dict[str, str]:
    try:
        data = json.loads(guarded.read_text(path, str(path), MAX_MANIFEST_BYTES))
    except guarded.Refused as refused:
        raise InputsError(f"{option}: {refused}") from None
    except ValueError as exc:
        raise InputsError(f"{option}: {path} is not JSON ({exc})") from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise InputsError(f"{option}: {path} nests too deeply to be a manifest") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise InputsError(f'{option}: {path} has no "files" object of name: sha256')
    if len(files) > MAX_LISTED:
        raise InputsError(f"{option}: {path} lists {len(files)} files; the limit is {MAX_LISTED}")
    return files


def _mismatches(folder: Path, files: dict[str, str]) -> list[str]:
    changed = []
    budget = dataset_paths.HashBudget()  # the whole check's hashing is bounded, not only each file's
    for name, digest in sorted(files.items()):
        path = dataset_paths.inside(folder, name, f"{folder / MANIFEST}: the file")
        why = dataset_paths.problem(path)
        if why is not None:
            changed.append(f"{name} ({why})")
        elif dataset_paths.sha256(path, name, budget) != digest:
            changed.append(name)
    return changed
