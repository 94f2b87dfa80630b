"""Follow `base_config` chains and merge them as vllm-omni does.

vllm-omni resolves a relative `base_config` against the directory of the file that names it
(never the cwd, never its bundled folder) and has no cycle detection. We follow the same rule,
detect cycles, and say where a missing base was looked for. A chain longer than MAX_CHAIN is
refused: the bundled files chain two or three deep, and a long chain only costs time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from omni_deploy.common import codes
from omni_deploy.common.bundled import bundled_candidates
from omni_deploy.common.errors import ConfigError, Location
from omni_deploy.config.merge import MergeReport, merge_documents
from omni_deploy.config.nodes import Map, Scalar, retag, shown
from omni_deploy.config.yaml_loader import display_path, load_file

MAX_CHAIN = 32


@dataclass
class Resolved:
    """A merged deploy config and how it was made."""

    top: Path
    config: Map
    chain: list[Path] = field(default_factory=list)  # top file first, deepest base last
    report: MergeReport = field(default_factory=MergeReport)
    documents: dict[Path, Map] = field(default_factory=dict)  # each file as written


def locate_top_file(name: str) -> Path:
    """The file a user named: as given, else (a bare name) the project's or vllm-omni's bundle."""
    path = Path(name).expanduser()
    try:
        if path.exists():
            return path
    except (OSError, ValueError) as exc:
        raise ConfigError(f"unusable file name {name!r}: {exc}", Location(name), code=codes.E107) from None
    if os.sep not in name and "/" not in name:
        candidates = bundled_candidates(name)
        if candidates:
            return candidates[0]
    raise ConfigError(
        f"no such file: {name}",
        Location(name),
        code=codes.E107,
        hint="a bare file name is also looked up in omni-deploy's deploy/ and vllm-omni's "
        "bundled deploy/ folder",
    )


def _base_path(doc: Map, path: Path) -> tuple[Path, Scalar] | None:
    entry = doc.pop("base_config")
    if entry is None:
        return None
    node = entry.node
    if isinstance(node, Scalar) and node.value is None:
        return None
    if (
        not isinstance(node, Scalar)
        or not isinstance(node.value, str)
        or not node.value
        or "\0" in node.value
    ):
        raise ConfigError("base_config must be a file path string", node.origin.location, code=codes.E112)
    return path.parent / node.value, node


def _tried(path: Path, requested_by: Scalar) -> str:
    """The path looked for, with an environment value shown as its expression."""
    text = display_path(path)
    if requested_by.expression is not None and requested_by.value:
        text = text.replace(str(requested_by.value), requested_by.expression)
    return text


def resolve_file(
    path: Path,
    env: dict[str, str] | None = None,
    text: str | bytes | None = None,
    *,
    named: bool = True,
    rebase: Callable[[Path], Path] | None = None,
) -> Resolved:
    """Load `path` (or `text`, named `path`, for stdin) and every base below it, then merge bottom-up.

    `named`: the user named the top file outright, so a pipe there is read (guarded.read_bytes);
    files found in folders and every base must be regular files. `rebase`: where each base really
    is read from (`diff --target-version OLD..NEW` reads a base vllm-omni bundles from that release's
    own deploy folder); None: where base_config names it."""
    chain: list[Path] = []
    documents: dict[Path, Map] = {}
    bases: list[tuple[Path, Map]] = []
    current = path
    requested_by: Scalar | None = None
    seen: set[str] = set()
    while True:
        real = os.path.realpath(current)  # never raises, also not on symlink loops
        if real in seen:
            names = " -> ".join(display_path(p) for p in [*chain, current])
            assert requested_by is not None
            raise ConfigError(f"base_config cycle: {names}", requested_by.origin.location, code=codes.E111)
        if len(chain) >= MAX_CHAIN:
            assert requested_by is not None
            raise ConfigError(
                f"base_config chain longer than {MAX_CHAIN} files",
                requested_by.origin.location,
                code=codes.E113,
                hint="vllm-omni's bundled files chain two or three deep; flatten the chain",
            )
        seen.add(real)
        doc = (
            load_file(current, env, text, named=named)
            if requested_by is None
            else _load_base(current, requested_by, env)
        )
        chain.append(current)
        documents[current] = doc
        layer = "base" if len(chain) > 1 else "overlay"
        found = _base_path(doc.copy(), current)
        body = doc.copy()
        body.pop("base_config")
        if found is None and len(chain) == 1:
            layer = "file"
        bases.append((current, retag(body, layer)))  # type: ignore[arg-type]
        if found is None:
            break
        current, requested_by = (rebase(found[0]), found[1]) if rebase is not None else found
    report = MergeReport()
    merged = bases[-1][1]
    for _, overlay in reversed(bases[:-1]):
        merged = merge_documents(merged, overlay, report)
    return Resolved(path, merged, chain, report, documents)


def _load_base(path: Path, requested_by: Scalar, env: dict[str, str] | None) -> Map:
    """Load a base; a base that cannot be opened is reported where base_config names it."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise _missing_base(path, requested_by) from None
    except (OSError, ValueError):
        pass  # a name too long, no permission: the read below says which
    try:
        return load_file(path, env)
    except ConfigError as error:
        if error.code != codes.E107.id:
            raise
        message = error.message
        if requested_by.expression is not None and requested_by.value:
            message = message.replace(str(requested_by.value), requested_by.expression)
        raise ConfigError(
            f"base_config {shown(requested_by)!r}: {message}",
            requested_by.origin.location,
            code=codes.E107,
            hint=error.hint,
        ) from None


def _missing_base(path: Path, requested_by: Scalar) -> ConfigError:
    hint = None
    candidates = bundled_candidates(path.name)
    if candidates:
        hint = (
            f"a bundled file of that name exists at {candidates[0]}; base_config is resolved "
            f"relative to the file that names it, so write that absolute path"
        )
    return ConfigError(
        f"base_config {shown(requested_by)!r} not found (tried {_tried(path, requested_by)})",
        requested_by.origin.location,
        code=codes.E110,
        hint=hint,
    )
