"""Which deploy keys a vllm-omni source tree reads, found by reading its code (never importing it).

Used two ways: by `omni_deploy.knowledge.generate` over each released wheel (the committed
`upstream_keys.json`), and at run time over an installed vllm-omni whose version the data does not
know (a main checkout, a newer release).

What counts as a read, per place (a key's location in a deploy file):
- `top`: the fields of `DeployConfig` and every `raw_dict.get/pop/[...]/in` in `resolve_deploy_yaml`
  and `load_deploy_config` (stage_config.py). A key whose presence leads to `raise` is *refused*.
- `stage`: the fields of `StageDeployConfig`, its reserved-key set, and `stage_data` reads in
  `_parse_stage_deploy`. Other stage keys are passed on to vLLM as engine arguments.
- `duplex_session`: the fields of `DuplexSessionRuntimeConfig` (it is built with `**mapping`).
- `platform` / `platform_stage`: reads of the platform section and of its stage entries in the
  platform merge/apply functions; a platform stage entry may also set any `StageDeployConfig` field.
- `connector`: reads of a connector entry (`name`, `extra`) in the connector set-up code.
- `connector_extra`: `config`/`extra` reads in the connector classes and their set-up code.
- `code2wav`: `extra` reads in the MiniCPM-o 4.5 model code (the Code2Wav options).
- `stage2_additional_config`: MiniCPM-o 4.5's NPU graph switches read from `additional_config`.
- `speech_cache` and other top-level sections read by model code are not modelled here.
"""

from __future__ import annotations

import ast
import hashlib
import math
import operator
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_deploy.common import guarded
from omni_deploy.common.errors import OmniDeployError

STAGE_CONFIG = "vllm_omni/config/stage_config.py"
LEGACY_LOADER = "vllm_omni/entrypoints/utils.py"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()  # a key read without a default the code states


@dataclass(frozen=True)
class Read:
    place: str
    key: str
    file: str  # relative to the tree root, e.g. vllm_omni/config/stage_config.py
    line: int
    default: Any = NO_DEFAULT  # a JSON value, when the code states a literal one
    default_code: str | None = None  # the default's source text when it is not a literal
    refused: bool = False  # the code raises when the key is present

    @property
    def at(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class _Rule:
    place: str
    files: tuple[str, ...]  # globs under the tree root
    receivers: frozenset[str]  # source text of the mapping the key is read from
    functions: frozenset[str] | None = None  # only inside these functions (None: anywhere)


_RULES = (
    _Rule("top", (STAGE_CONFIG,), frozenset({"raw_dict"}),
          frozenset({"resolve_deploy_yaml", "load_deploy_config"})),
    _Rule("stage", (STAGE_CONFIG,), frozenset({"stage_data"}), frozenset({"_parse_stage_deploy"})),
    _Rule("platform", (STAGE_CONFIG,), frozenset({"platform_section", "bp", "op"}),
          frozenset({"_apply_platform_overrides", "_merge_platforms"})),
    _Rule("platform_stage", (STAGE_CONFIG,), frozenset({"ps"}),
          frozenset({"_apply_platform_overrides", "_extract_platform_overrides"})),
    _Rule("connector", ("vllm_omni/distributed/omni_connectors/**/*.py",),
          frozenset({"connector_config", "conn_config", "conn_ref"})),
    _Rule("connector_extra", ("vllm_omni/distributed/omni_connectors/**/*.py",
                              "vllm_omni/platforms/*/omni_connectors/**/*.py"),
          frozenset({"config", "self.config", "extra", "c_extra"})),
    # From 0.31 on the stage schedulers read their stage's connector extra too (0.32.0rc1
    # core/sched/omni_generation_scheduler.py:68-112: coalescing, first-chunk express).
    _Rule("connector_extra", ("vllm_omni/core/sched/*.py",), frozenset({"extra"})),
    _Rule("code2wav", ("vllm_omni/model_executor/models/minicpmo_4_5/**/*.py",), frozenset({"extra"})),
    # The Talker -> Code2Wav input processor reads the chunking keys from the same connector extra
    # (0.26.0 minicpmo_4_5_omni.py:133-134), outside the model folder.
    _Rule("code2wav", ("vllm_omni/model_executor/stage_input_processors/minicpmo_4_5*.py",),
          frozenset({"config"})),
    _Rule("stage2_additional_config", ("vllm_omni/platforms/*/models/minicpmo_4_5*.py",),
          frozenset({"config"})),
)  # fmt: skip

# Dataclasses whose fields are keys, with the place they fill.
_DATACLASSES = {
    "DeployConfig": "top",
    "StageDeployConfig": "stage",
    "DuplexSessionRuntimeConfig": "duplex_session",
}
# Outside stage_config.py: a diffusion stage's engine_extras reach OmniDiffusionConfig.from_kwargs
# (0.22.0 stage_config.py:578, 869), which takes its fields: read there, not ignored.
DIFFUSION_DATA = "vllm_omni/diffusion/data.py"
_OTHER_DATACLASSES = {
    DIFFUSION_DATA: {"OmniDiffusionConfig": "diffusion_engine"},
    # 0.31 on: the top-level speech_cache mapping builds SpeechCacheConfig(**speech_cache), a pydantic
    # config with extra="forbid" (0.32.0rc1 config/speech_cache.py:9, stage_config.py:1071-1085).
    "vllm_omni/config/speech_cache.py": {"SpeechCacheConfig": "speech_cache"},
}
_RESERVED_SETS = ("_STAGE_RESERVED_KEYS", "_STAGE_NON_ENGINE_KEYS")


class SourceTreeError(OmniDeployError):
    """A source tree that cannot be read as vllm-omni's code (a module that is a FIFO, too big,
    not UTF-8, or no vllm_omni package at all): its reads would be incomplete, so none are given."""


MAX_MODULE_BYTES = 8 * 1024 * 1024  # vllm-omni's largest module is under 200 KiB


def _matches(root: Path, pattern: str) -> list[Path]:
    try:
        return guarded.glob(f"{root}/{pattern}")
    except guarded.Refused as refused:
        raise SourceTreeError(f"vllm-omni source {root}: {refused.why}") from None


def source_files(root: Path) -> list[Path]:
    """Every file a rule reads, in a stable order (what the run-time cache hashes)."""
    if not (root / "vllm_omni").is_dir():
        raise SourceTreeError(f"vllm-omni source {root}: no vllm_omni package folder in it")
    found: set[Path] = set()
    for rule in _RULES:
        for pattern in rule.files:
            found.update(p for p in _matches(root, pattern) if not p.is_dir())
    others = (root / STAGE_CONFIG, *(root / rel for rel in _OTHER_DATACLASSES))
    found.update(p for p in others if os.path.lexists(p) and not p.is_dir())
    return sorted(found)


def _source(path: Path) -> str:
    try:
        return guarded.read_text(path, str(path), MAX_MODULE_BYTES)
    except guarded.Refused as refused:
        raise SourceTreeError(str(refused)) from None


def module_text(path: Path) -> str | None:
    """A module's text for knowledge/facts.py (its `read`): None when there is no such file; a FIFO,
    a device, a file past the size cap or not UTF-8 is a SourceTreeError, as for the rules' files."""
    if not os.path.lexists(path) or path.is_dir():
        return None
    return _source(path)


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(hashlib.sha256(_source(path).encode("utf-8")).digest())
    return digest.hexdigest()


def read_tree(root: Path) -> list[Read]:
    """Every key read found under `root` (the folder that holds `vllm_omni/`)."""
    reads: list[Read] = []
    # Several rules read the same module (stage_config.py four times, the connectors twice): each
    # module is parsed and walked once, then every rule looks at the same candidate nodes.
    readers: dict[Path, _ModuleReader | None] = {}
    for rule in _RULES:
        for pattern in rule.files:
            for path in _matches(root, pattern):
                if path.is_dir():
                    continue
                if path not in readers:
                    module = _parse(path)
                    rel = path.relative_to(root).as_posix()
                    readers[path] = _ModuleReader(module, rel) if module is not None else None
                reader = readers[path]
                if reader is not None:
                    reads.extend(reader.rule_reads(rule))
    for rel, classes in _OTHER_DATACLASSES.items():
        other = _parse(root / rel) if os.path.lexists(root / rel) else None
        if other is not None:
            reads.extend(_ModuleReader(other, rel).dataclass_fields(classes))
    stage_config = root / STAGE_CONFIG
    module = _parse(stage_config) if os.path.lexists(stage_config) else None
    if module is not None:
        reader = _ModuleReader(module, STAGE_CONFIG)
        reads.extend(reader.dataclass_fields())
        reads.extend(reader.reserved_keys())
        # A platform stage entry sets any StageDeployConfig attribute (`hasattr(base, key)`).
        reads.extend(
            Read("platform_stage", r.key, r.file, r.line, r.default, r.default_code)
            for r in reader.dataclass_fields()
            if r.place == "stage"
        )
    return reads


def legacy_stage_args(root: Path) -> str | None:
    """Where a version still routes a `stage_args` file to its legacy loader (file:line), if it does."""
    path = root / LEGACY_LOADER
    module = _parse(path) if os.path.lexists(path) else None
    if module is None:
        return None
    for node in ast.walk(module):
        if isinstance(node, ast.Compare) and any(
            isinstance(c, ast.Constant) and c.value == "stage_args" for c in [node.left, *node.comparators]
        ):
            return f"{LEGACY_LOADER}:{node.lineno}"
    return None


def _parse(path: Path) -> ast.Module | None:
    """The module's tree; None for code that does not parse (no reads are found in it). A
    module that cannot be read at all is a SourceTreeError: skipping it would hide its reads."""
    text = _source(path)
    try:
        return ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError, RecursionError):
        return None


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv,
}  # fmt: skip
# Constant folding is bounded: a default is a small number, so larger operands or results (and
# deeper expressions) are simply not folded: `10 ** 10 ** 10` or a 5,000-term sum cost nothing.
MAX_BITS = 64
MAX_DEPTH = 32
MAX_ITEMS = 1000
MAX_CODE = 200  # characters of a default's source text kept


def _small(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return value.bit_length() <= MAX_BITS
    return math.isfinite(value)


def _fold(op: type[ast.operator], left: Any, right: Any) -> Any:
    if not (_small(left) and _small(right)):
        return NO_DEFAULT
    if op is ast.Pow and (abs(right) > MAX_BITS or (isinstance(right, float) and abs(left) > 2**MAX_BITS)):
        return NO_DEFAULT  # never computed: 2 ** 64 is the largest exponent a default needs
    try:
        value = _BINOPS[op](left, right)
    except (ArithmeticError, OverflowError, ValueError):
        return NO_DEFAULT
    return value if _small(value) else NO_DEFAULT


def source_text(node: ast.AST) -> str:
    """An expression's source text, cut to MAX_CODE characters; a tree too deep to unparse is named so."""
    try:
        text = ast.unparse(node)
    except (RecursionError, ValueError):
        return "<an expression too deep to show>"
    return text if len(text) <= MAX_CODE else text[: MAX_CODE - 3] + "..."


def dotted(node: ast.AST) -> str | None:
    """`a`, `self.config`: a name or attribute chain (short), else None; iterative."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute) and len(parts) < 8:
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or len(parts) >= 8:
        return None
    return ".".join([node.id, *reversed(parts)])


def _constant(value: object) -> Any:
    """A literal's value when it is small enough to show (strings to 4 KiB, bounded numbers)."""
    if isinstance(value, str):
        return value if len(value) <= 4096 else NO_DEFAULT
    if value is None or isinstance(value, bool) or _small(value):
        return value
    return NO_DEFAULT


def _empty_container(node: ast.expr) -> Any:
    """`{}`, `dict()`, `list()`: an empty default; anything else is not a constant."""
    if isinstance(node, ast.Dict) and not node.keys:
        return {}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and not node.keywords:
        return {"dict": {}, "list": []}.get(node.func.id, NO_DEFAULT)
    return NO_DEFAULT


class _ModuleReader:
    def __init__(self, module: ast.Module, rel: str) -> None:
        self.module = module
        self.rel = rel
        # Module constants are evaluated only when a read names one (most never are), once each.
        self._assigned: dict[str, ast.expr] = {}
        self._constants: dict[str, Any] = {}
        self._evaluating: set[str] = set()
        self._defs: list[ast.FunctionDef | ast.AsyncFunctionDef] | None = None
        self._scanned: dict[int, tuple[list[ast.AST], set[int]]] = {}
        for node in module.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                self._assigned[node.targets[0].id] = node.value

    def constant(self, name: str, depth: int) -> Any:
        if name in self._constants:
            return self._constants[name]
        node = self._assigned.get(name)
        if node is None or name in self._evaluating:
            return NO_DEFAULT
        self._evaluating.add(name)
        try:
            value = self.literal(node, depth + 1)
        finally:
            self._evaluating.discard(name)
        self._constants[name] = value
        return value

    def literal(self, node: ast.expr, depth: int = 0) -> Any:
        """A JSON-able value for a constant expression, else NO_DEFAULT (bounded, see MAX_*)."""
        if depth > MAX_DEPTH:
            return NO_DEFAULT
        if isinstance(node, ast.Constant):
            return _constant(node.value)
        if isinstance(node, ast.Name):
            return self.constant(node.id, depth)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.literal(node.operand, depth + 1)
            return -value if _small(value) else NO_DEFAULT
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _fold(
                type(node.op), self.literal(node.left, depth + 1), self.literal(node.right, depth + 1)
            )
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._items(node.elts, depth)
        return _empty_container(node)

    def _items(self, elements: list[ast.expr], depth: int) -> Any:
        if len(elements) > MAX_ITEMS:
            return NO_DEFAULT
        items = [self.literal(e, depth + 1) for e in elements]
        return NO_DEFAULT if any(i is NO_DEFAULT for i in items) else items

    def key_name(self, node: ast.expr) -> str | None:
        value = self.literal(node)
        return value if isinstance(value, str) and value is not NO_DEFAULT else None

    def _functions(self, names: frozenset[str] | None) -> Iterator[ast.AST]:
        if names is None:
            yield self.module
            return
        if self._defs is None:
            self._defs = [
                n for n in ast.walk(self.module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
        yield from (node for node in self._defs if node.name in names)

    def _scan(self, scope: ast.AST) -> tuple[list[ast.AST], set[int]]:
        """The nodes of `scope` a read can be (calls, subscripts, compares) and the lines of its
        `if ...: raise` tests, from one walk, kept for the next rule over the same scope."""
        found = self._scanned.get(id(scope))
        if found is None:
            nodes: list[ast.AST] = []
            refused: set[int] = set()
            for node in ast.walk(scope):
                if isinstance(node, (ast.Call, ast.Subscript, ast.Compare)):
                    nodes.append(node)
                elif isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body):
                    refused.add(node.test.lineno)
            found = self._scanned[id(scope)] = (nodes, refused)
        return found

    def rule_reads(self, rule: _Rule) -> Iterator[Read]:
        for scope in self._functions(rule.functions):
            nodes, refused_lines = self._scan(scope)
            for node in nodes:
                yield from self._read_at(node, rule, refused_lines)

    def _read_at(self, node: ast.AST, rule: _Rule, refused: set[int]) -> Iterable[Read]:
        if isinstance(node, ast.Call):
            return self._call_read(node, rule)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = self.key_name(node.slice) if dotted(node.value) in rule.receivers else None
            return [Read(rule.place, key, self.rel, node.lineno)] if key is not None else []
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
        ):
            key = self.key_name(node.left) if dotted(node.comparators[0]) in rule.receivers else None
            if key is not None:
                return [Read(rule.place, key, self.rel, node.lineno, refused=node.lineno in refused)]
        return []

    def _call_read(self, node: ast.Call, rule: _Rule) -> list[Read]:
        """`mapping.get(key[, default])`, `.pop(...)`, `.setdefault(...)`."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") and node.args):
            return []
        key = self.key_name(node.args[0]) if dotted(func.value) in rule.receivers else None
        if key is None:
            return []
        default: Any = NO_DEFAULT  # `.get(key)` states no default (None is Python's)
        code = None
        if len(node.args) > 1 and func.attr != "setdefault":  # setdefault writes the key, not a default
            default = self.literal(node.args[1])
            code = source_text(node.args[1]) if default is NO_DEFAULT else None
        return [Read(rule.place, key, self.rel, node.lineno, default, code)]

    def dataclass_fields(self, classes: dict[str, str] | None = None) -> list[Read]:
        classes = _DATACLASSES if classes is None else classes
        out = []
        for node in self.module.body:
            if not isinstance(node, ast.ClassDef) or node.name not in classes:
                continue
            place = classes[node.name]
            for item in node.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                    continue
                default, code = NO_DEFAULT, None
                if item.value is not None:
                    default = self._field_default(item.value)
                    if default is NO_DEFAULT:
                        code = source_text(item.value)
                out.append(Read(place, item.target.id, self.rel, item.lineno, default, code))
        return out

    def _field_default(self, value: ast.expr) -> Any:
        if isinstance(value, ast.Call) and dotted(value.func) == "field":
            for keyword in value.keywords:
                if keyword.arg == "default":
                    return self.literal(keyword.value)
                if keyword.arg == "default_factory" and isinstance(keyword.value, ast.Name):
                    return {"dict": {}, "list": []}.get(keyword.value.id, NO_DEFAULT)
            return NO_DEFAULT
        return self.literal(value)

    def reserved_keys(self) -> list[Read]:
        out = []
        for node in self.module.body:
            if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
                continue
            if node.targets[0].id not in _RESERVED_SETS:
                continue
            for const in ast.walk(node.value):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    out.append(Read("stage", const.value, self.rel, const.lineno))
        return out
