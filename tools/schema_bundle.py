"""The output schemas (schemas/output/) as files that each stand alone, from any directory.

Every schema has an absolute `$id` under SCHEMA_BASE, an identifier that never resolves on the
network (`.invalid`, RFC 2606), so no validator tries to fetch one. A document schema refers to
the shared pieces (`common.schema.json`, `finding.schema.json`) by relative references, and
carries a copy of each piece it uses under `$defs` with that piece's `$id` (a 2020-12 compound
document): the references resolve inside the file, whatever the working directory, with no
registry and no network.

    python -m tools.schema_bundle          # rewrite the copies in schemas/output/
    python -m tools.schema_bundle --check  # exit 1 when a committed file is stale

The pieces themselves are edited by hand; the copies never are (a test keeps them current).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

SCHEMA_BASE = "https://omni-deploy.invalid/schemas/output/"
PIECES = ("common.schema.json", "finding.schema.json")
_COPY_NOTE = (
    "The $defs named *.schema.json are copies of those files in schemas/output/, embedded by "
    "`python -m tools.schema_bundle` so that this file stands alone; edit the originals."
)


def schema_dir() -> Path:
    from omni_deploy.common.bundled import project_data_dir

    return project_data_dir("schemas") / "output"


def _refs(node: Any) -> set[str]:
    """The files a schema refers to (the part of each `$ref` before `#`)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                found.add(ref.split("#", 1)[0])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def bundled(name: str, schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Schema `name` with its absolute `$id` and a copy of every piece it reaches."""
    own = copy.deepcopy(schemas[name])
    own["$id"] = SCHEMA_BASE + name
    defs = {k: v for k, v in own.pop("$defs", {}).items() if k not in PIECES}
    own.pop("$comment", None)  # both come back last, in this order, every time
    needed: list[str] = []
    todo = sorted(_refs({k: v for k, v in own.items() if k != "$defs"}) | _refs(defs))
    while todo:
        piece = todo.pop(0)
        if piece in needed or piece == name:
            continue
        if piece not in schemas:
            raise ValueError(f"{name} refers to {piece}, which is not in schemas/output/")
        needed.append(piece)
        todo += sorted(_refs(schemas[piece]))
    for piece in sorted(needed):
        embedded = copy.deepcopy(schemas[piece])
        embedded["$id"] = SCHEMA_BASE + piece
        embedded.pop("$schema", None)
        defs[piece] = embedded
    if needed:
        own["$comment"] = _COPY_NOTE
    if defs:
        own["$defs"] = defs
    return own


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def stale(folder: Path | None = None, write: bool = False) -> list[str]:
    """Names of the committed schemas that differ from their bundled form (rewritten if `write`)."""
    folder = folder or schema_dir()
    paths = sorted(folder.glob("*.schema.json"))
    schemas = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in paths}
    out = []
    for path in paths:
        wanted = render(bundled(path.name, schemas))
        if path.read_text(encoding="utf-8") != wanted:
            out.append(path.name)
            if write:
                path.write_text(wanted, encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    names = stale(write=not check)
    for name in names:
        print(f"{'stale' if check else 'rewrote'}: schemas/output/{name}")
    return 1 if check and names else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
