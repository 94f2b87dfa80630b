"""Run every check on one deploy file.

Each check declares the codes it may report (validate/rules.py); a finding of another code stops
the run with an internal error (UndeclaredCode), as does a load error whose code the loading step
(validate/check_load.py) does not declare.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from omni_deploy.common.errors import ConfigError
from omni_deploy.config.nodes import env_values
from omni_deploy.deployment.model import Deployment
from omni_deploy.validate import blame, suppress
from omni_deploy.validate.check_capacity import (
    check_batched_tokens,
    check_gpu_memory,
    check_minicpmo_capacity,
)
from omni_deploy.validate.check_code2wav_caches import check_code2wav_caches
from omni_deploy.validate.check_coercions import check_coercions
from omni_deploy.validate.check_connector_setup import check_connector_setup
from omni_deploy.validate.check_device_layout import check_device_layout
from omni_deploy.validate.check_keys import check_keys
from omni_deploy.validate.check_load import load_deployment
from omni_deploy.validate.check_multi_node import check_multi_node
from omni_deploy.validate.check_owners import check_owners_known, check_stage_owners
from omni_deploy.validate.check_pipeline import check_async_chunk, check_pipeline_release
from omni_deploy.validate.check_platform import check_platform_readers, check_platform_rules
from omni_deploy.validate.check_server import check_server, run_server_check, settled_by_server
from omni_deploy.validate.check_shadowed import check_shadowed_flat_keys
from omni_deploy.validate.check_topology import (
    check_connectors,
    check_platform_entries,
    check_replaced_mappings,
    check_stage_ids,
)
from omni_deploy.validate.check_typed_values import check_typed_values
from omni_deploy.validate.check_unstated import check_unstated
from omni_deploy.validate.context import Context, Options
from omni_deploy.validate.findings import ERROR, WARNING, Finding
from omni_deploy.validate.rules import require_declared
from omni_deploy.validate.schema_check import check_schema
from omni_deploy.validate.server_check.run import ServerRun

CHECKS: list[Callable[[Context], list[Finding]]] = [
    check_schema,
    check_coercions,
    check_keys,
    check_stage_ids,
    check_platform_entries,
    check_connectors,
    check_connector_setup,
    check_replaced_mappings,
    check_shadowed_flat_keys,
    check_gpu_memory,
    check_minicpmo_capacity,
    check_batched_tokens,
    check_code2wav_caches,
    check_device_layout,
    check_typed_values,
    check_platform_rules,
    check_platform_readers,
    check_pipeline_release,
    check_async_chunk,
    check_stage_owners,
    check_owners_known,
    check_multi_node,
    check_unstated,
    check_server,
]


@dataclass
class FileReport:
    file: str
    findings: list[Finding] = field(default_factory=list)
    deployment: Deployment | None = None  # what the checks saw, for commands that go on (serve)
    server: ServerRun | None = None  # the server check's run (shared by the files given together)

    @property
    def valid(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "valid": self.valid, "findings": [f.as_dict() for f in self.findings]}


def _from_error(error: ConfigError, file: str) -> Finding:
    """A load error as a finding: loading, merging and platform application own these codes."""
    require_declared(load_deployment, [error.code])
    loc = error.location
    return Finding(
        ERROR,
        error.code,
        loc.file if loc else file,
        loc.line if loc else 0,
        loc.column if loc else 0,
        error.path or "$",
        error.message,
        error.hint,
    )


def validate_file(
    name: str, options: Options, text: str | bytes | None = None, *, named: bool = True
) -> FileReport:
    """Load the file named `name` (or `text` so named, from stdin) and check it; a file that
    cannot be loaded is one finding. `named`: False for a file found in a folder or a glob."""
    return validate_inputs([(name, text, named)], options)[0]


def validate_inputs(
    sources: Sequence[tuple[str, str | bytes | None] | tuple[str, str | bytes | None, bool]], options: Options
) -> list[FileReport]:
    """Check every (name, text[, named]) input (text: read from stdin, else None; named: False for a
    file found in a folder or a glob, True when left out); the server check (when options ask for
    it) runs once for all of them."""
    loaded: list[tuple[str | None, Deployment | FileReport]] = []
    for source in sources:
        name, raw = source[0], source[1]
        named = source[2] if len(source) > 2 else True
        try:
            deployment = load_deployment(name, options, raw, named=named)
        except ConfigError as error:
            loaded.append((None, FileReport(name, [_from_error(error, name)])))
            continue
        # bytes: the loader decoded them strictly already
        text = raw.decode("utf-8").removeprefix("\ufeff") if isinstance(raw, bytes) else raw
        loaded.append((text, deployment))
    deployments = [d for text, d in loaded if isinstance(d, Deployment) and text is None]
    server = run_server_check(deployments, options)
    reports = []
    for text, item in loaded:
        if isinstance(item, FileReport):
            item.server = server
            reports.append(item)
        else:
            reports.append(validate_deployment(item, options, text, server))
    return reports


def validate_deployment(
    deployment: Deployment, options: Options, text: str | None = None, server: ServerRun | None = None
) -> FileReport:
    """Check a loaded deployment; `text`: the top file's text when it came from stdin (its
    `# omni-deploy: ignore[...]` comments count, not the file on disk); `server`: the server
    check's run that covered it (validate_inputs runs it)."""
    ctx = Context(deployment, options, server=server)
    name = deployment.name
    report = FileReport(name, deployment=deployment, server=server)
    platforms = options.platforms if options.platforms is not None else deployment.default_platforms()
    for platform in platforms:
        try:
            ctx.applied[platform] = deployment.on(platform)
        except ConfigError as error:
            report.findings.append(_from_error(error, name))
    for check in CHECKS:
        try:
            found = check(ctx)
        except ConfigError as error:
            report.findings.append(_from_error(error, name))
            continue
        require_declared(check, (f.code for f in found))
        report.findings.extend(found)
    report.findings = settled_by_server(report.findings, server, name)
    texts = {} if text is None else {name: text}
    # A base file's own `# omni-deploy: ignore[...]` comments count wherever it is reached from:
    # suppressed at the base's line first, then moved to the named file (and its comments) if kept.
    kept = suppress.keep(_superseded(list(dict.fromkeys(report.findings))), options.ignore, texts)
    located = blame.keep_to_user_files(kept, deployment.top, name, text)
    unique = suppress.keep(located, options.ignore, texts)
    unique.sort(key=lambda f: (f.file, f.line, f.column, f.code))
    if options.strict:
        unique = [replace(f, severity=ERROR) if f.severity == WARNING else f for f in unique]
    report.findings = _without_env_values(unique, env_values(deployment.config))
    return report


def _superseded(findings: list[Finding]) -> list[Finding]:
    """Without the "this version ignores it" warning (W310) on a stage key the target's typed
    config refuses (E315): the refusal is what happens; nor "passed on to vLLM" (W302) on a key a
    diffusion stage refuses (it never reaches vLLM)."""
    refused = {(f.file, f.line, f.column) for f in findings if f.code == "E315"}
    diffusion = {
        (f.file, f.line, f.column) for f in findings if f.code == "E315" and "diffusion stage" in f.message
    }
    return [
        f
        for f in findings
        if not (f.code == "W310" and (f.file, f.line, f.column) in refused)
        and not (f.code == "W302" and (f.file, f.line, f.column) in diffusion)
    ]


def _without_env_values(findings: list[Finding], values: dict[str, str]) -> list[Finding]:
    """Messages show `${oc.env:NAME}`, never its value: a pull request must not be able to print
    a CI secret by putting it where a number belongs."""
    if not values:
        return findings
    from omni_deploy.common.redact import env_shown

    return [
        replace(
            f,
            message=env_shown(f.message, values),
            hint=env_shown(f.hint, values) if f.hint else f.hint,
        )
        for f in findings
    ]
