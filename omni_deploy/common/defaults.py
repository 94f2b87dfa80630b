"""Defaults that several commands share, each written once.

The option dataclasses take theirs from here (launch.options.LaunchOptions, serve.request.ServeRequest,
k8s.options.K8sOptions, bench.protocol.SweepOptions) and the commands' options from those classes,
so `--help`, docs/cli.md and a library call all say the same.
"""

from __future__ import annotations

MODEL = "openbmb/MiniCPM-o-4_5"  # MiniCPM-o 4.5 on the Hugging Face hub
PORT = 8091  # the API port of a served deploy file (serve, k8s, bench ab)
# Model load, graph capture and TensorRT builds take minutes: how long a server may take to answer
# /health (serve --ready-timeout, bench's, the k8s startupProbe's budget).
READY_TIMEOUT_S = 1800
# The CUDA CAM++ plugin's warm-up of a Code2Wav stage (encoder buckets, S3 tokenizer buckets,
# batched passes up to max_num_seqs voices) runs inside the stage's load, so inside
# READY_TIMEOUT_S; it stops at this budget (OMNI_DEPLOY_SPK_WARMUP_BUDGET_S) and leaves the rest to
# the first requests. Seconds on an H200 (docs/benchmarks.md); the budget allows a slow host.
SPK_WARMUP_BUDGET_S = 120
STOP_GRACE_S = 10  # between TERM and KILL when a server is stopped
MAX_GPUS_PER_NODE = 1024  # the most GPUs a node may offer (validate's and k8s's --gpus-per-node)
