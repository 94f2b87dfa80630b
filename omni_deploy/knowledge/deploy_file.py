"""Tell a vllm-omni deploy file from the other YAML in a repository (workflows, manifests, compose files).

Used where files are found rather than named: directories and globs on the command line, and the
pre-commit hook, which is handed every staged YAML file under its `files:` pattern. A file is a
deploy file unless it is clearly something else: several YAML documents (vllm-omni reads one), or
a single mapping with none of the top-level keys vllm-omni reads. A file that does not parse is
kept, so that a broken deploy file is reported rather than skipped.
"""

from __future__ import annotations

from functools import cache

import yaml

from omni_deploy.common import guarded
from omni_deploy.knowledge.keys import by_place


@cache
def _top_level_keys() -> frozenset[str]:
    return frozenset(by_place("top"))


def looks_like_deploy_file(text: str) -> bool:
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError):  # nested past the composer's recursion: the loader says so
        return True
    documents = [d for d in documents if d is not None]
    if len(documents) != 1:
        return False
    root = documents[0]
    if not isinstance(root, yaml.MappingNode):
        return True  # vllm-omni would refuse it: let validate say why
    keys = {k.value for k, _ in root.value if isinstance(k, yaml.ScalarNode)}
    return bool(keys & _top_level_keys())


def is_deploy_source(name: str, text: str | bytes | None) -> bool:
    """Whether a FILE argument looks like a deploy file: its text as read (stdin's bytes are
    decoded), else the file `name` read now. A source that cannot be read counts as one, so that
    validate reports why (too big, not UTF-8), and so does a pipe: the loader reads it, once."""
    try:
        if isinstance(text, bytes):
            text = guarded.decode(text, name)
        elif text is None:
            if not guarded.is_readable_file(name):
                return True
            text = guarded.read_text(name)
    except guarded.Refused:
        return True
    return looks_like_deploy_file(text)
