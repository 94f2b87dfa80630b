#!/usr/bin/env bash
# Builds what benchmarks/code2wav_stage_gpu.py needs carried to the GPU machine (which has torch,
# triton, onnxruntime and numpy, but no vLLM and no network), into DEST (default
# /work/main/.gpu29, a folder the session checkout's .git/info/exclude ignores):
#   DEST/site.tar.xz  vLLM 0.30.0's and vllm-omni 0.30.0's Python files (no compiled libraries),
#                     from the vllm tier's virtualenv (VENV)
#   DEST/whl/         cp312 manylinux wheels of what their Code2Wav imports need and the machine
#                     lacks, at the vllm tier's pins (.ci/vllm-tier-requirements.txt), and
#                     stepaudio2-minicpmo (the cosyvoice2 flow classes MiniCPM-o 4.5's flow.yaml names)
#   DEST/tree/        this worktree (omni_deploy, benchmarks, deploy), without .git
# On the GPU machine (see the run command in docs/benchmarks.md):
#   pip install --no-index --no-deps --target /tmp/site DEST/whl/*.whl; tar -xJf DEST/site.tar.xz -C /tmp/site
#   PYTHONPATH=/tmp/site:DEST/tree python3 DEST/tree/benchmarks/code2wav_stage_gpu.py ...
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-/work/main/.gpu29}
VENV=${VENV:-/work/venvs/vllm}
PIP=${PIP:-/work/venvs/main/bin/python -m pip}
PINS="$ROOT/.ci/vllm-tier-requirements.txt"
SITE=$(ls -d "$VENV"/lib/python3.*/site-packages)
mkdir -p "$DEST/whl"

# What vLLM's and vllm-omni's Code2Wav imports need that the GPU image lacks (measured: see
# ../shared/reference/vllm-omni.md, "Running vllm-omni's real stage classes on the GPU machine").
NEEDED="aenum annotated-types apache-tvm-ffi cachetools cbor2 cffi pycparser distro fastapi starlette
httpx2 httpcore2 jiter llguidance loguru msgspec omegaconf openai openai-harmony opentelemetry-api
partial-json-parser prettytable wcwidth pybase64 pydantic pydantic-core pyzmq sniffio soundfile
typing-inspection xgrammar hyperpyyaml ruamel.yaml s3tokenizer antlr4-python3-runtime"

pin() {  # NAME -> NAME==VERSION from the tier's pins (names compared as pip normalises them)
  local want norm
  want=$(echo "$1" | tr 'A-Z_.' 'a-z--')
  while IFS= read -r line; do
    case "$line" in \#*|'') continue ;; esac
    norm=$(echo "${line%%==*}" | tr 'A-Z_.' 'a-z--')
    if [ "$norm" = "$want" ]; then echo "$line"; return; fi
  done <"$PINS"
  # Not pinned by the tier (installed there as a dependency of a pinned one): the installed version.
  local meta
  meta=$(ls -d "$SITE"/*.dist-info | while read -r d; do
    n=$(basename "$d" | sed 's/-[^-]*\.dist-info$//' | tr 'A-Z_.' 'a-z--'); [ "$n" = "$want" ] && echo "$d"; done | head -1)
  if [ -n "$meta" ]; then echo "$1==$(basename "$meta" | sed 's/^.*-\([^-]*\)\.dist-info$/\1/')"; else echo "$1"; fi
}

specs=()
for name in $NEEDED; do specs+=("$(pin "$name")"); done
specs+=("stepaudio2-minicpmo==0.1.1")
echo "wheels: ${specs[*]}"
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform any \
  -d "$DEST/whl" "${specs[@]}"

if [ ! -f "$DEST/site.tar.xz" ]; then
  # The dist-info folders too: vLLM's platform detection and its Triton check read
  # importlib.metadata.version("vllm"); without it the platform is "unspecified" (no CUDA graphs).
  (cd "$SITE" && { find vllm vllm_omni -name '*.py' -o -name '*.yaml' -o -name '*.json' -o -name '*.jinja' \
     -o -name 'py.typed'; ls -d vllm-*.dist-info vllm_omni-*.dist-info; } | grep -v '/__pycache__/' \
     | tar -cJf "$DEST/site.tar.xz" -T -)
fi
rm -rf "$DEST/tree" && mkdir -p "$DEST/tree"
(cd "$ROOT" && tar -cf - --exclude='__pycache__' omni_deploy benchmarks deploy pyproject.toml) | tar -xf - -C "$DEST/tree"
du -sh "$DEST/whl" "$DEST/site.tar.xz" "$DEST/tree"
