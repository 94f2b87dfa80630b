#!/usr/bin/env bash
# Builds what benchmarks/code2wav_stage_gpu.py needs carried to the GPU machine (which has torch,
# triton, onnxruntime and numpy, but no vLLM and no network), into DEST (default
# /work/main/.gpu29, a folder the session checkout's .git/info/exclude ignores), for RELEASE
# (0.30.0, the default, or 0.32.0rc1: the vllm tier whose pins and virtualenv it reads):
#   DEST/site.tar.xz  vLLM's and vllm-omni's Python files of that tier (no compiled libraries),
#                     from the tier's virtualenv (VENV; vLLM 0.30.0 or 0.32.0)
#   DEST/whl/         cp312 manylinux wheels of what their Code2Wav imports need and the machine
#                     lacks, at the tier's pins (.ci/vllm-tier-requirements*.txt), and
#                     stepaudio2-minicpmo (the cosyvoice2 flow classes MiniCPM-o 4.5's flow.yaml names)
#   DEST/tree/        this worktree (omni_deploy, benchmarks, deploy), without .git
# On the GPU machine (see the run command in docs/benchmarks.md):
#   pip install --no-index --no-deps --target /tmp/site DEST/whl/*.whl; tar -xJf DEST/site.tar.xz -C /tmp/site
#   PYTHONPATH=/tmp/site:DEST/tree python3 DEST/tree/benchmarks/code2wav_stage_gpu.py --release RELEASE ...
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-/work/main/.gpu29}
RELEASE=${2:-0.30.0}
case "$RELEASE" in
  0.30.0) PINS="$ROOT/.ci/vllm-tier-requirements.txt"; VENV=${VENV:-/work/vllm030-venv}; EXTRA="" ;;
  # 0.32's model loader imports compressed-tensors (quantization config classes).
  0.32.0rc1) PINS="$ROOT/.ci/vllm-tier-requirements-0.32.txt"; VENV=${VENV:-/work/vllm032-venv}; EXTRA="compressed-tensors" ;;
  *) echo "gpu_carry.sh: RELEASE is 0.30.0 or 0.32.0rc1, not $RELEASE" >&2; exit 2 ;;
esac
PIP=${PIP:-/work/venv/bin/python -m pip}
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
for name in $NEEDED $EXTRA; do specs+=("$(pin "$name")"); done
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
