"""What the plugin patches in vllm-omni, and the shape of the code it relies on, per model.

One table serves three readers: `register()` hooks each target module lazily (import_hooks), the
patch checks the code shapes before it touches anything, and `explain --probe` checks the same
shapes in the installed vllm-omni's source without importing it. A shape is read from source text
by `ast` (a class, a function, its parameters, a call its body must still make), so a vllm-omni
whose code moved on is refused with a reason instead of being patched blindly; the version number
is never what decides.

A target's code has changed shape between releases (vllm-omni 0.32 builds MiniCPM-o's CAM++ session
lazily and prepares references ahead of time; CosyVoice3's embedding call moved out of the
processor's method). Each shape the patch knows is a `Layout`: the target's own shapes must all
hold, and then the first layout whose shapes all hold is the one the patch works on. Code that
matches none is refused, never patched partially.

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
class Layout:
    """One shape of a target's code that the patch knows how to work on."""

    name: str  # named in the report line (`layout=`) and by explain --probe
    releases: str  # the releases whose code has it, for people (never what decides)
    shapes: tuple[Shape, ...]


@dataclass(frozen=True)
class Target:
    model: Model
    hook_module: str  # patched when this module is imported
    patch: str  # "module:function" of omni-deploy's patch, imported only then
    shapes: tuple[Shape, ...]  # every layout needs these
    layouts: tuple[Layout, ...] = ()  # () : the shapes alone decide


CODE2WAV = CODE2WAV_MODULE
STEP_AUDIO2_CORE = f"{MODELS_PKG}.step_audio2.step_audio2_token2wav"
COSYVOICE3_MODULE = f"{MODELS_PKG}.cosyvoice3.cosyvoice3"
GLM_TTS_MODULE = f"{MODELS_PKG}.glm_tts.glm_tts"
MING_EXTRACTOR = f"{MODELS_PKG}.ming_tts.speaker_extractor"

MINICPMO_CODE2WAV = "MiniCPMO45Code2Wav"
CORE = "StepAudio2Token2WavCore"
# MiniCPM-o's layouts. eager-session: the core's model load (`_ensure_models_loaded`, run when the
# Code2Wav backend is built) makes the CPU ONNX Runtime session, and the forward prepares each new
# voice (0.30.0, 0.31.0rc1). lazy-session: the session is built on
# first use (`spk_model`), and references may be prepared at request arrival (`run_idle_prefetch`,
# `_run_prefetch_phase`) before the forward (0.32.0rc1).
MINICPMO_EAGER = Layout("eager-session", "0.30.0, 0.31.0rc1", (
    Shape(STEP_AUDIO2_CORE, (CORE, "_ensure_models_loaded"), None, ("self._spk_model = onnxruntime.InferenceSession(",)),
))  # fmt: skip
MINICPMO_LAZY = Layout("lazy-session+prefetch", "0.32.0rc1", (
    Shape(STEP_AUDIO2_CORE, (CORE, "spk_model"), None, ("self._spk_model is None",)),
    Shape(CODE2WAV, (MINICPMO_CODE2WAV, "run_idle_prefetch"), ("self",), ("self._run_prefetch_phase(",)),
    Shape(CODE2WAV, (MINICPMO_CODE2WAV, "_run_prefetch_phase"), ("self", "state_id", "record"),
          ("self.backend.prepare_prompt(entry.cache_id, entry.path)",)),
))  # fmt: skip
# CosyVoice3's embedding call: in the processor's method (0.30.0), or in the module-level
# `_audio_conditioning(proc, ...)` the method calls (0.31.0rc1, 0.32.0rc1); both read the session
# from the processor's components, where the patch puts its facade.
COSYVOICE3_IN_PROCESSOR = Layout("processor-call", "0.30.0", (
    Shape(COSYVOICE3_MODULE, ("CosyVoice3MultiModalProcessor", "_call_hf_processor"), None,
          ("extract_spk_embedding(audio, self.campplus_session",)),
))  # fmt: skip
COSYVOICE3_CONDITIONING = Layout("audio-conditioning", "0.31.0rc1, 0.32.0rc1", (
    Shape(COSYVOICE3_MODULE, ("_audio_conditioning",), None,
          ("extract_spk_embedding(audio, proc.campplus_session",)),
))  # fmt: skip

TARGETS: tuple[Target, ...] = (
    Target(MINICPMO, CODE2WAV, "omni_deploy.integrations.minicpmo:patch", (
        Shape(CODE2WAV, (MINICPMO_CODE2WAV, "_build_backend"), ("self",)),
        Shape(STEP_AUDIO2_CORE, (CORE, "_forward_spk_embedding"), None,
              ("spk_model(spk_feat)", "self._spk_model(")),
        Shape(STEP_AUDIO2_CORE, (CORE, "__init__"), None, ("_spk_model",)),
    ), (MINICPMO_EAGER, MINICPMO_LAZY)),
    Target(COSYVOICE3, COSYVOICE3_MODULE, "omni_deploy.integrations.cosyvoice3:patch", (
        Shape(COSYVOICE3_MODULE, ("CosyVoice3MultiModalProcessor", "_build_runtime_components"),
              ("self", "model_dir", "config"), ('"campplus_session"',)),
        Shape(f"{MODELS_PKG}.cosyvoice3.utils", ("extract_spk_embedding",), None, ("campplus_session.run(",)),
    ), (COSYVOICE3_IN_PROCESSOR, COSYVOICE3_CONDITIONING)),
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


def _problems(shapes: tuple[Shape, ...], read: Callable[[str], str | None]) -> list[str]:
    return [p for p in (shape_problem(shape, read(shape.module)) for shape in shapes) if p is not None]


@dataclass(frozen=True)
class Recognition:
    """What a target's code is: the layout it has (None: not one the patch knows), and why not."""

    layout: str | None
    problems: list[str]


def recognise(target: Target, read_source: Callable[[str], str | None]) -> Recognition:
    """The first of `target`'s layouts that the code read through `read_source(module)` has (each
    module read once). Without layouts the target's shapes alone decide ("default")."""
    cache: dict[str, str | None] = {}

    def read(module: str) -> str | None:
        if module not in cache:
            cache[module] = read_source(module)
        return cache[module]

    problems = _problems(target.shapes, read)
    if problems:
        return Recognition(None, problems)
    if not target.layouts:
        return Recognition("default", [])
    missed = []
    for layout in target.layouts:
        lacks = _problems(layout.shapes, read)
        if not lacks:
            return Recognition(layout.name, [])
        missed.append(f"not {layout.name} (as in {layout.releases}): {'; '.join(lacks)}")
    return Recognition(None, missed)


def shape_problems(target: Target, read_source: Callable[[str], str | None]) -> list[str]:
    """Why the code read through `read_source(module)` is not one `target`'s patch knows; [] when
    it is."""
    return recognise(target, read_source).problems
