"""The server check's verdict as findings: what vllm-omni's own start-up config code refused.

`run_server_check` runs the child once for every file validate was given (omni_deploy/validate/server_check/);
`check_server` reports, for one file, each refusal at the place its message names (E395), each
connector set-up failure upstream swallows (E396), and, under `--server-check on`, a check that
could not run or could not decide the file (E397).
"""

from __future__ import annotations

from omni_deploy.common import codes
from omni_deploy.deployment.model import Deployment
from omni_deploy.knowledge.pipelines import infer_registered
from omni_deploy.validate.context import Context, Options
from omni_deploy.validate.findings import ERROR, INFO, Finding, at
from omni_deploy.validate.rules import emits
from omni_deploy.validate.server_check.locate import places
from omni_deploy.validate.server_check.run import (
    AUTO,
    OFF,
    ON,
    REQUIRE,
    FileVerdict,
    Job,
    Refusal,
    ServerRun,
    check,
)

_HINT = "found by running vllm-omni's own start-up config code (the server check)"
# The static tier's codes that claim vllm-omni refuses the file in a step the server check runs
# (load, pipeline, typed config, connector set-up: not E373, which a platform's Code2Wav raises when
# it builds): where the check ran the release's own code on the file and it raised nothing, the
# code's word stands and these become infos that say the static rule disagrees. So does E201, a
# value of a type the static schema does not take, on a stage's engine keys (the typed config
# types those; a connector's extra is read only when its stage builds).
STATIC_STARTUP_CODES = frozenset(
    {"E123", "E124", "E130", "E304", "E311", "E315", "E316", "E317", "E319", "E330", "E334", "E335", "E370"}
)  # fmt: skip


def _typed_by_the_check(finding: Finding) -> bool:
    if finding.code in STATIC_STARTUP_CODES:
        return True
    return finding.code == "E201" and finding.path.startswith("$.stages") and ".extra" not in finding.path


def job_for(deployment: Deployment, options: Options) -> Job:
    """What the child checks for one file: its platforms, and the pipeline omni-deploy knows of."""
    platforms = options.platforms if options.platforms is not None else deployment.default_platforms()
    pipeline = options.pipeline
    if (
        pipeline is None
        and deployment.pipeline.name
        and not deployment.pipeline.source.startswith("pipeline:")
    ):
        pipeline = deployment.pipeline.name
    if pipeline is None and deployment.pipeline.name is None:
        pipeline = infer_registered(
            deployment.chain, _registered(options.target_version), version=options.target_version
        )
    return Job(deployment.name, deployment.top.resolve(), tuple(platforms), pipeline, options.model)


def _registered(version: str) -> frozenset[str]:
    """The pipelines the target release's registry has (its facts, read from its wheel), else
    0.30.0's: a file named after a pipeline 0.32.0rc1 added (fish_omni, vibevoice) is that one."""
    from omni_deploy.knowledge.pipelines import REGISTERED
    from omni_deploy.knowledge.target import facts_data

    entry = facts_data()["versions"].get(version)
    return frozenset(entry["pipelines"]) if entry and entry.get("pipelines") else REGISTERED


def run_server_check(deployments: list[Deployment], options: Options) -> ServerRun | None:
    """One child over every file (None when the check is off)."""
    if options.server_check == OFF:
        return None
    assert options.server_check in (AUTO, ON, REQUIRE), options.server_check
    return check(
        [job_for(d, options) for d in deployments],
        python=options.server_python,
        target_version=options.target_version,
        timeout_s=options.server_timeout_s,
        memory_gib=options.server_memory_gib,
    )


def _message(refusals: list[Refusal], version: str) -> tuple[codes.Code, str]:
    first = refusals[0]
    platforms = sorted({r.platform for r in refusals})
    where = f" ({first.where})" if first.where else ""
    on = f" on {', '.join(platforms)}" if platforms else ""
    if first.swallowed:
        return codes.E396, (
            f"vllm-omni {version}'s connector set-up fails{on}; it logs a warning and starts with no "
            f"connector configuration (every connector and its extra dropped): {first.type}: "
            f"{first.message}{where}"
        )
    return (
        codes.E395,
        f"vllm-omni {version} refuses this file at start-up{on}: {first.type}: {first.message}{where}",
    )


def verdict_findings(verdict: FileVerdict, deployment: Deployment, version: str) -> list[Finding]:
    """One finding per place each distinct refusal names (the platforms it was seen on merged)."""
    grouped: dict[tuple[str, str, str, bool], list[Refusal]] = {}
    for refusal in verdict.refusals:
        key = (refusal.type, refusal.message, refusal.where or "", refusal.swallowed)
        grouped.setdefault(key, []).append(refusal)
    out: list[Finding] = []
    for refusals in grouped.values():
        code, message = _message(refusals, version)
        spots = places(refusals[0], deployment.config)
        if not spots:
            out.append(at(None, deployment.name, code, "$", message, _HINT))
        out.extend(at(s.origin, deployment.name, code, s.path, message, _HINT) for s in spots)
    return out


@emits(codes.E395, codes.E396, codes.E397, codes.W398)
def check_server(ctx: Context) -> list[Finding]:
    """The server check's verdict on this file as findings (validate --server-check).

    E395:
        What it does: runs vllm-omni's own start-up config code (load, pipeline, typed config with the
            platform applied, connector set-up) on the file in a child process of the serving
            environment's interpreter (no GPU, no weights) and reports each refusal at the key its
            message names.
        Why: the real code is the last word on what it accepts; a static model can lag behind a
            release, the child cannot.
        Fails:
            # shown, not run by the tests: needs vllm-omni installed for the interpreter the server runs with
            # options: --server-check on
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                enable_lora: true
        Passes:
            # shown, not run by the tests: needs vllm-omni installed for the interpreter the server runs with
            # options: --server-check on
            base_config: minicpmo_4_5_turn.yaml
    E396:
        What it does: reports a connector set-up failure that vllm-omni's start-up catches and only
            logs (such as a wired connector without a name).
        Why: the server then starts with no connector configuration at all, and stages that need one
            fail on the first request.
        Fails:
            # shown, not run by the tests: needs vllm-omni installed for the interpreter the server runs with
            # options: --server-check on
            pipeline: minicpmo_4_5
            connectors:
              shm:
                extra: {codec_chunk_frames: 25}
            stages:
              - {stage_id: 0, devices: "0"}
              - {stage_id: 1, devices: "0", output_connectors: {to_stage_2: shm}}
              - {stage_id: 2, devices: "0", input_connectors: {from_stage_1: shm}}
        Passes:
            # shown, not run by the tests: needs vllm-omni installed for the interpreter the server runs with
            # options: --server-check on
            pipeline: minicpmo_4_5
            connectors:
              shm:
                name: SharedMemoryConnector
                extra: {codec_chunk_frames: 25}
            stages:
              - {stage_id: 0, devices: "0"}
              - {stage_id: 1, devices: "0", output_connectors: {to_stage_2: shm}}
              - {stage_id: 2, devices: "0", input_connectors: {from_stage_1: shm}}
    E397:
        What it does: with --server-check on or require, reports a check that could not run (no
            vllm-omni for the interpreter, stdin); with require, also a file it could not decide (an
            import its pipeline needs, a pipeline only the model names).
        Why: "on" and "require" ask for the real code's verdict; without it the file is not known to
            start.
        Fails:
            # shown, not run by the tests: the serving interpreter must lack vllm-omni, or what the pipeline imports
            # options: --server-check require
            base_config: minicpmo_4_5_turn.yaml
        Passes:
            # options: --server-check auto
            base_config: minicpmo_4_5_turn.yaml
    W398:
        What it does: with --server-check on, reports a file the check ran on but could not decide
            (the serving environment lacks what its pipeline's code imports, or only the model names
            its pipeline).
        Why: said loudly, since the file is not known to start; but nothing is known to be wrong with
            it, so it does not make the file invalid (--server-check require does).
        Fails:
            # shown, not run by the tests: the serving interpreter must lack what the pipeline imports
            # options: --server-check on
            base_config: minicpmo_4_5_turn.yaml
        Passes:
            # options: --server-check auto
            base_config: minicpmo_4_5_turn.yaml
    """
    run = ctx.server
    if run is None:
        return []
    insist = ctx.options.server_check in (ON, REQUIRE)
    if not run.ran:
        return (
            [at(None, ctx.file, codes.E397, "$", f"the server check did not run: {run.reason}")]
            if insist
            else []
        )
    verdict = run.verdicts.get(ctx.deployment.name)
    if verdict is None:
        return (
            [
                at(
                    None,
                    ctx.file,
                    codes.E397,
                    "$",
                    "the server check did not run: files read from stdin are not checked",
                )
            ]
            if insist
            else []
        )
    out = verdict_findings(verdict, ctx.deployment, run.version or "installed")
    if verdict.undecided is not None and insist:
        # Undecided is not refused: loud under "on", an error only where the verdict is required.
        code = codes.E397 if ctx.options.server_check == REQUIRE else codes.W398
        out.append(
            at(None, ctx.file, code, "$", f"the server check could not decide this file: {verdict.undecided}")
        )
    return out


def settled_by_server(findings: list[Finding], server: ServerRun | None, name: str) -> list[Finding]:
    """`findings` with the static start-up errors made infos where the server check decided the file
    `name` and the release's own start-up code raised nothing on any platform it ran: then the
    code is the last word (issue 39: an E201 on a `quantization` mapping 0.32.0rc1 accepts)."""
    verdict = server.verdicts.get(name) if server is not None and server.ran else None
    if verdict is None or not verdict.decided or verdict.refusals or not verdict.platforms:
        return findings
    from dataclasses import replace

    accepted = (
        f"vllm-omni {server.version}'s own start-up config code accepts this file on "  # type: ignore[union-attr]
        f"{', '.join(sorted(set(verdict.platforms)))} (server check): the static rule disagrees"
    )
    return [
        replace(f, severity=INFO, message=f"{f.message}; {accepted}")
        if _typed_by_the_check(f) and f.severity == ERROR
        else f
        for f in findings
    ]
