"""The sweep as a list of `vllm bench serve` invocations, computed before anything runs.

Per server start: optional warm-up requests, then per concurrency one or more discarded rounds and
the measured rounds, each round a fresh `vllm bench serve --omni` writing one result file named by
concurrency and round. Flags follow the write-up's reproduction exactly; `--metadata` marks each
file's role so reports can tell discarded rounds from measured ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from omni_deploy.common import defaults
from omni_deploy.common.errors import OmniDeployError

SYSTEM_PROMPT = "Please read the following text out loud in English."
PERCENTILE_METRICS = "audio_ttfp,audio_rtf,audio_duration,e2el"
BENCH_ENV = {
    "SEED_TTS_WER_EVAL": "0",
    "SEED_TTS_SIM_EVAL": "0",
    "SEED_TTS_UTMOS_EVAL": "0",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass
class SweepOptions:
    base_url: str
    model: str
    dataset_path: Path
    tokenizer: str = defaults.MODEL
    concurrency: tuple[int, ...] = (1, 4, 8, 16, 32)
    prompts: int = 64
    rounds: int = 2
    discard: int = 1
    warmup: int = 0
    warmup_path: Path | None = None
    warmup_concurrency: int = 16
    order: str = "forward"
    extra_body: str = ""  # JSON text
    result_dir: Path = Path("bench-results")
    source: str = "candidate"
    ready_check_timeout: int = 600


@dataclass(frozen=True)
class Step:
    role: str  # warmup | discard | measured
    concurrency: int
    label: str  # file stem: warmup, discard1, r1, ...
    argv: tuple[str, ...] = field(default=())

    @property
    def description(self) -> str:
        return f"C={self.concurrency} {self.label}"


def bench_argv(
    options: SweepOptions,
    dataset: Path,
    prompts: int,
    concurrency: int,
    role: str,
    label: str,
    ready_timeout: int,
) -> tuple[str, ...]:
    return (
        "vllm",
        "bench",
        "serve",
        "--omni",
        "--backend",
        "openai-chat-omni",
        "--base-url",
        options.base_url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        options.model,
        "--tokenizer",
        options.tokenizer,
        "--trust-remote-code",
        "--dataset-name",
        "seed-tts",
        "--dataset-path",
        str(dataset),
        "--seed-tts-locale",
        "en",
        "--seed-tts-system-prompt",
        SYSTEM_PROMPT,
        "--disable-shuffle",
        "--num-prompts",
        str(prompts),
        "--output-len",
        "256",
        "--seed",
        "42",
        "--request-rate",
        "inf",
        "--max-concurrency",
        str(concurrency),
        "--num-warmups",
        "0",
        "--ready-check-timeout-sec",
        str(ready_timeout),
        "--extra-body",
        options.extra_body,
        "--percentile-metrics",
        PERCENTILE_METRICS,
        "--metric-percentiles",
        "50,95",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(options.result_dir / f"c{concurrency}"),
        "--result-filename",
        f"{label}.json",
        "--metadata",
        f"omni_deploy_round={role}",
        f"omni_deploy_source={options.source}",
    )


def plan_sweep(options: SweepOptions) -> list[Step]:
    steps: list[Step] = []
    first = True
    if options.warmup > 0:
        dataset = options.warmup_path or options.dataset_path
        argv = bench_argv(
            options,
            dataset,
            options.warmup,
            options.warmup_concurrency,
            "warmup",
            "warmup",
            options.ready_check_timeout,
        )
        steps.append(Step("warmup", options.warmup_concurrency, "warmup", argv))
        first = False
    order = list(options.concurrency) if options.order == "forward" else list(reversed(options.concurrency))
    for c in order:
        plan = [("discard", f"discard{i + 1}") for i in range(options.discard)]
        plan += [("measured", f"r{i + 1}") for i in range(options.rounds)]
        for role, label in plan:
            # Only the very first request waits for the server; later rounds find it ready.
            timeout = options.ready_check_timeout if first else 0
            steps.append(
                Step(
                    role,
                    c,
                    label,
                    bench_argv(options, options.dataset_path, options.prompts, c, role, label, timeout),
                )
            )
            first = False
    return steps


class ExtraBodyError(OmniDeployError):
    """--extra-body names something that is not a JSON object of request fields."""


def load_extra_body(path: Path | None) -> str:
    """The request fields every round sends, as compact JSON (strict: no NaN, an object)."""
    from omni_deploy.common.bundled import project_deploy_dir
    from omni_deploy.common.errors import ConfigError
    from omni_deploy.config.safe_read import read_json

    source = path or project_deploy_dir() / "bench-extra-body.json"
    try:
        body = read_json(source, str(source))
    except ConfigError as exc:
        raise ExtraBodyError(f"--extra-body: {exc}") from None
    if not isinstance(body, dict):
        raise ExtraBodyError(
            f"--extra-body {source}: expected a JSON object of request fields, not {type(body).__name__}"
        )
    return json.dumps(body, separators=(",", ":"))
