"""What the plugin patches in vllm-omni, and the shape of the code it relies on, per model.

One table serves three readers: `register()` hooks each target module lazily (import_hooks), the
patch checks the code shapes before it touches anything, and `explain --probe` checks the same
shapes in the installed vllm-omni's source without importing it. A shape is read from source text
by `ast` (a class, a function, its parameters, a call its body must still make), so a vllm-omni
whose code moved on is refused with a reason instead of being patched blindly; the version number
is never what decides.

Standard library only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from omni_deploy.integrations.speaker_rules import (
    CODE2WAV_MODULE,
    COSYVOICE3,
    GLM_TTS,
    MING_TTS,
    MINICPMO,
    Model,
)

MODELS_PKG = "vllm_omni.model_executor.models"


@dataclass(frozen=True)
class Shape:
    module: str  # dotted module name
    path: tuple[str, ...]  # ("Class", "method"), ("function",), or a module-level name
    params: tuple[str, ...] | None = None  # positional parameter names, when they matter
    needles: tuple[str, ...] = ()  # the definition's source must contain one of these

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Target:
    model: Model
    hook_module: str  # patched when this module is imported
    patch: str  # "module:function" of omni-deploy's patch, imported only then
    shapes: tuple[Shape, ...]


CODE2WAV = CODE2WAV_MODULE
STEP_AUDIO2_CORE = f"{MODELS_PKG}.step_audio2.step_audio2_token2wav"
COSYVOICE3_MODULE = f"{MODELS_PKG}.cosyvoice3.cosyvoice3"
GLM_TTS_MODULE = f"{MODELS_PKG}.glm_tts.glm_tts"
MING_EXTRACTOR = f"{MODELS_PKG}.ming_tts.speaker_extractor"

TARGETS: tuple[Target, ...] = (
    Target(MINICPMO, CODE2WAV, "omni_deploy.integrations.minicpmo:patch", (
        Shape(CODE2WAV, ("MiniCPMO45Code2Wav", "_build_backend"), ("self",)),
        Shape(STEP_AUDIO2_CORE, ("StepAudio2Token2WavCore", "_forward_spk_embedding"), None,
              ("spk_model(spk_feat)", "self._spk_model(")),
        Shape(STEP_AUDIO2_CORE, ("StepAudio2Token2WavCore", "__init__"), None, ("_spk_model",)),
    )),
    Target(COSYVOICE3, COSYVOICE3_MODULE, "omni_deploy.integrations.cosyvoice3:patch", (
        Shape(COSYVOICE3_MODULE, ("CosyVoice3MultiModalProcessor", "_build_runtime_components"),
              ("self", "model_dir", "config"), ('"campplus_session"',)),
        Shape(COSYVOICE3_MODULE, ("CosyVoice3MultiModalProcessor", "_call_hf_processor"), None,
              ("extract_spk_embedding(audio, self.campplus_session",)),
        Shape(f"{MODELS_PKG}.cosyvoice3.utils", ("extract_spk_embedding",), None, ("campplus_session.run(",)),
    )),
    Target(GLM_TTS, GLM_TTS_MODULE, "omni_deploy.integrations.glm_tts:patch", (
        Shape(GLM_TTS_MODULE, ("load_voice_clone_frontend",)),
        Shape(GLM_TTS_MODULE, ("GLMTTSMultiModalProcessor", "_call_hf_processor"), None,
              ("extract_spk_embedding(wav", )),
        Shape(f"{MODELS_PKG}.glm_tts.voice_clone", ("load_voice_clone_frontend",),
              ("model_root", "model_device"), ("campplus_session",)),
        Shape(f"{MODELS_PKG}.glm_tts.voice_clone", ("extract_spk_embedding",), None, ("campplus_session.run(",)),
    )),
    Target(MING_TTS, MING_EXTRACTOR, "omni_deploy.integrations.ming_tts:patch", (
        Shape(MING_EXTRACTOR, ("_load_speaker_extractor",), ("wrapper",)),
        Shape(f"{MODELS_PKG}.common.ming.speaker_extractor", ("SpeakerEmbeddingExtractor", "__init__"), None,
              ("self._core = SpkembExtractor(",)),
        Shape(f"{MODELS_PKG}.common.ming.spk_embedding", ("SpkembExtractor", "_extract_spk_embedding"), None,
              ("self.campplus_session.run(",)),
    )),
)  # fmt: skip
BY_MODEL = {t.model.pipeline: t for t in TARGETS}


def _names(stmt: ast.stmt) -> list[str]:
    """The names a module-level statement binds that a shape may look for."""
    if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name for a in stmt.names]
    return []


def _find(tree: ast.Module, path: tuple[str, ...]) -> ast.AST | None:
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for depth, part in enumerate(path):
        found = [
            s
            for s in body
            if part in _names(s) and (depth == 0 or not isinstance(s, (ast.Import, ast.ImportFrom)))
        ]
        if not found:
            return None
        node = found[-1]  # the last binding wins, as at run time
        body = getattr(node, "body", [])
    return node


def shape_problem(shape: Shape, source: str | None) -> str | None:
    """Why `source` (the text of `shape.module`) does not have the shape, or None."""
    if source is None:
        return f"{shape.module} not found"
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"{shape.module} does not parse ({exc.msg})"
    node = _find(tree, shape.path)
    if node is None:
        return f"{shape.name} not found in {shape.module}"
    if shape.params is not None:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return f"{shape.name} in {shape.module} is not a function"
        params = tuple(a.arg for a in [*node.args.posonlyargs, *node.args.args])
        if params[: len(shape.params)] != shape.params or len(params) != len(shape.params):
            return f"{shape.name}({', '.join(params)}) is not ({', '.join(shape.params)})"
    if shape.needles:
        text = ast.get_source_segment(source, node) or ""
        if not any(needle in text for needle in shape.needles):
            return f"{shape.name} no longer contains {' or '.join(repr(n) for n in shape.needles)}"
    return None


def shape_problems(target: Target, read_source: Callable[[str], str | None]) -> list[str]:
    """Every shape of `target` the code read through `read_source(module)` lacks."""
    cache: dict[str, str | None] = {}
    problems = []
    for shape in target.shapes:
        if shape.module not in cache:
            cache[shape.module] = read_source(shape.module)
        problem = shape_problem(shape, cache[shape.module])
        if problem is not None:
            problems.append(problem)
    return problems
