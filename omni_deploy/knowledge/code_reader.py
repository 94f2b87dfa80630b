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
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
_OTHER_DATACLASSES = {DIFFUSION_DATA: {"OmniDiffusionConfig": "diffusion_engine"}}
_RESERVED_SETS = ("_STAGE_RESERVED_KEYS", "_STAGE_NON_ENGINE_KEYS")


def source_files(root: Path) -> list[Path]:
    """Every file a rule reads, in a stable order (what the run-time cache hashes)."""
    found: set[Path] = set()
    for rule in _RULES:
        for pattern in rule.files:
            found.update(p for p in root.glob(pattern) if p.is_file())
    found.update(p for p in (root / STAGE_CONFIG, *(root / rel for rel in _OTHER_DATACLASSES)) if p.is_file())
    return sorted(found)


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def read_tree(root: Path) -> list[Read]:
    """Every key read found under `root` (the folder that holds `vllm_omni/`)."""
    reads: list[Read] = []
    for rule in _RULES:
        for pattern in rule.files:
            for path in sorted(root.glob(pattern)):
                module = _parse(path)
                if module is None:
                    continue
                rel = path.relative_to(root).as_posix()
                reads.extend(_ModuleReader(module, rel).rule_reads(rule))
    for rel, classes in _OTHER_DATACLASSES.items():
        other = _parse(root / rel) if (root / rel).is_file() else None
        if other is not None:
            reads.extend(_ModuleReader(other, rel).dataclass_fields(classes))
    stage_config = root / STAGE_CONFIG
    module = _parse(stage_config) if stage_config.is_file() else None
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
    module = _parse(path) if path.is_file() else None
    if module is None:
        return None
    for node in ast.walk(module):
        if isinstance(node, ast.Compare) and any(
            isinstance(c, ast.Constant) and c.value == "stage_args" for c in [node.left, *node.comparators]
        ):
            return f"{LEGACY_LOADER}:{node.lineno}"
    return None


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv,
}  # fmt: skip


class _ModuleReader:
    def __init__(self, module: ast.Module, rel: str) -> None:
        self.module = module
        self.rel = rel
        self.constants: dict[str, Any] = {}
        for node in module.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                value = self.literal(node.value)
                if value is not NO_DEFAULT:
                    self.constants[node.targets[0].id] = value

    def literal(self, node: ast.expr) -> Any:
        """A JSON-able value for a constant expression, else NO_DEFAULT."""
        if isinstance(node, ast.Constant):
            return (
                node.value
                if node.value is None or isinstance(node.value, (str, int, float, bool))
                else NO_DEFAULT
            )
        if isinstance(node, ast.Name):
            return self.constants.get(node.id, NO_DEFAULT)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.literal(node.operand)
            return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else NO_DEFAULT
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = self.literal(node.left), self.literal(node.right)
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
                try:
                    return _BINOPS[type(node.op)](left, right)
                except (ArithmeticError, OverflowError):
                    return NO_DEFAULT
            return NO_DEFAULT
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.literal(e) for e in node.elts]
            return NO_DEFAULT if any(i is NO_DEFAULT for i in items) else items
        if isinstance(node, ast.Dict) and not node.keys:
            return {}
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and not node.args
            and not node.keywords
        ):
            return {"dict": {}, "list": []}.get(node.func.id, NO_DEFAULT)
        return NO_DEFAULT

    def key_name(self, node: ast.expr) -> str | None:
        value = self.literal(node)
        return value if isinstance(value, str) and value is not NO_DEFAULT else None

    def _functions(self, names: frozenset[str] | None) -> Iterator[ast.AST]:
        if names is None:
            yield self.module
            return
        for node in ast.walk(self.module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
                yield node

    def rule_reads(self, rule: _Rule) -> Iterator[Read]:
        for scope in self._functions(rule.functions):
            refused_lines = self._refused_compares(scope)
            for node in ast.walk(scope):
                yield from self._read_at(node, rule, refused_lines)

    def _read_at(self, node: ast.AST, rule: _Rule, refused: set[int]) -> Iterable[Read]:
        if isinstance(node, ast.Call):
            return self._call_read(node, rule)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = self.key_name(node.slice) if ast.unparse(node.value) in rule.receivers else None
            return [Read(rule.place, key, self.rel, node.lineno)] if key is not None else []
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
        ):
            key = self.key_name(node.left) if ast.unparse(node.comparators[0]) in rule.receivers else None
            if key is not None:
                return [Read(rule.place, key, self.rel, node.lineno, refused=node.lineno in refused)]
        return []

    def _call_read(self, node: ast.Call, rule: _Rule) -> list[Read]:
        """`mapping.get(key[, default])`, `.pop(...)`, `.setdefault(...)`."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") and node.args):
            return []
        key = self.key_name(node.args[0]) if ast.unparse(func.value) in rule.receivers else None
        if key is None:
            return []
        default: Any = NO_DEFAULT  # `.get(key)` states no default (None is Python's)
        code = None
        if len(node.args) > 1 and func.attr != "setdefault":  # setdefault writes the key, not a default
            default = self.literal(node.args[1])
            code = ast.unparse(node.args[1]) if default is NO_DEFAULT else None
        return [Read(rule.place, key, self.rel, node.lineno, default, code)]

    def _refused_compares(self, scope: ast.AST) -> set[int]:
        """Lines of `if "key" in mapping: raise ...` tests."""
        lines = set()
        for node in ast.walk(scope):
            if isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body):
                lines.add(node.test.lineno)
        return lines

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
                        code = ast.unparse(item.value)
                out.append(Read(place, item.target.id, self.rel, item.lineno, default, code))
        return out

    def _field_default(self, value: ast.expr) -> Any:
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "field":
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
