"""The server check against the real vllm 0.30.0 and vllm-omni 0.30.0 (their own test tier).

One child process (this interpreter: it has vllm-omni) checks every start-up case of
tests/data/startup/ whose target is 0.30.0 and every deploy file vllm-omni 0.30.0 bundles. For each
file the server check decides, validate's static verdict (start-up codes, tests/support/
startup_cases.py) must equal the server's: refused or not, and at the same lines. The files it
cannot decide here are listed with the reason (the model's config, or torchvision, which this
CPU-torch tier cannot have); the diffusion pipelines are decided (diffusers is in the tier), and
every MiniCPM-o file is.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")
pytest.importorskip("jsonschema")

from omni_deploy.deployment.model import Deployment
from omni_deploy.validate.check_server import job_for
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import FileReport, validate_deployment
from omni_deploy.validate.server_check.run import ServerRun, check
from tests.support.examples import example_options
from tests.support.profiles import profiles, release_of
from tests.support.startup_cases import SERVER_CODES, STARTUP_CODES, Case, cases, lines_of

pytestmark = pytest.mark.vllm
VERSION = importlib.metadata.version("vllm-omni")
BUNDLED = sorted((Path(sys.modules["vllm_omni"].__file__).parent / "deploy").glob("*.yaml"))  # type: ignore[arg-type]
CASES = [c for c in cases() if (c.target or VERSION) == VERSION and c.server_decides]
# Files this release's own start-up code refuses where the static tier, judging by the same release,
# does not yet: vllm-omni 0.32 types a stage's kv_transfer_config as vLLM 0.32's KVTransferConfig
# (kv_role required with kv_connector, unknown fields such as kv_ip refused), which the static tier
# does not model. The server check decides them (E395); each is held to still differ, so that the
# entry goes when the static tier learns it.
STATIC_GAPS: dict[str, set[str]] = {
    "0.32.0rc1": {"kv_transfer_with_async_chunk.yaml", "hunyuan-image-3-mooncakeconnector.yaml"},
}
GAPS = STATIC_GAPS.get(VERSION, set())
# What the static tier says the check's own steps (load, pipeline, typed config, connector set-up)
# refuse: not E373, which a platform's Code2Wav raises when it builds (no step of the check builds a
# model), as 0.32.0rc1's minicpmo_4_5_duplex_h200.yaml shows on npu.
CHECKED_CODES = STARTUP_CODES - {"E373"}


# omni-deploy's own profiles for this tier's release (each names its release on its first line).
PROFILES = [p for p in profiles() if release_of(p) == VERSION]


def _options(path: Path) -> Options:
    return replace(
        example_options(path) if path.parent.name == "startup" else Options(), target_version=VERSION
    )


@cache
def _run() -> tuple[ServerRun, dict[str, Deployment]]:
    """One child for all cases and bundled files (what CI pays for: one vllm-omni import)."""
    deployments = {str(p): Deployment.load(str(p)) for p in [*(c.path for c in CASES), *BUNDLED, *PROFILES]}
    jobs = [job_for(d, _options(Path(name))) for name, d in deployments.items()]
    run = check(jobs, python=sys.executable, target_version=VERSION, timeout_s=900)
    assert run.ran, run.reason
    return run, deployments


def _report(name: str) -> FileReport:
    run, deployments = _run()
    return validate_deployment(
        deployments[name], replace(_options(Path(name)), server_check="auto"), server=run
    )


def _static(name: str) -> FileReport:
    """The static tier's own verdict: with the server's verdict in the report, a static start-up
    error the server's code does not raise is an info (check_server.settled_by_server)."""
    _, deployments = _run()
    return validate_deployment(deployments[name], _options(Path(name)))


def test_the_check_ran_the_typed_config_path_without_the_registry() -> None:
    run, _ = _run()
    assert run.version == VERSION and run.path == "typed_config", run
    assert run.registry_imported is False  # only each file's own pipeline module


@pytest.mark.parametrize("case", CASES, ids=[c.path.name for c in CASES])
def test_server_and_static_give_the_case_the_same_verdict(case: Case) -> None:
    run, _ = _run()
    verdict = run.verdicts[str(case.path)]
    assert verdict.decided, verdict.undecided
    report, alone = _report(str(case.path)), _static(str(case.path))
    shown = "\n".join(f.text() for f in [*report.findings, *alone.findings])
    server = lines_of(report, SERVER_CODES, case.path.name)
    static = lines_of(alone, STARTUP_CODES, case.path.name)
    expected = {case.line or 0} if case.refused else set()
    assert server == expected, f"vllm-omni's own code says otherwise than {case.upstream}:\n{shown}"
    if case.path.name in GAPS:
        assert static != server, (
            f"{case.path.name} is no longer a static gap on {VERSION}: drop it from STATIC_GAPS"
        )
        pytest.xfail(f"the static tier does not model what {VERSION} refuses here (STATIC_GAPS)")
    assert static == server, shown


_CITED = re.compile(r"\((vllm_omni/[\w/]+\.py:\d+)\)")


@pytest.mark.parametrize("case", [c for c in CASES if c.path.name.startswith("connector_extra_null")],
                         ids=lambda c: c.path.name)  # fmt: skip
def test_a_null_extra_is_cited_at_the_line_that_raised(case: Case) -> None:
    """E335 names the dict(extra) line vllm-omni's own set-up raised at (E396's traceback line):
    the set-up has four identical ones, by side and form."""
    report = _report(str(case.path))
    raised = {
        m.group(1) for f in report.findings if f.code == "E396" for m in [_CITED.search(f.message)] if m
    }
    cited = {m.group(1) for f in report.findings if f.code == "E335" for m in [_CITED.search(f.message)] if m}
    assert raised and cited == raised, (raised, cited)
    # The case names 0.30.0's line; on another release the raising line must be its own dict(extra).
    rel, _, line = next(iter(raised)).rpartition(":")
    package = Path(sys.modules["vllm_omni"].__file__).parents[1]  # type: ignore[arg-type]
    code = (package / rel).read_text(encoding="utf-8").splitlines()[int(line) - 1]
    assert "extra = dict(conn_" in code and '.get("extra", {}))' in code, code
    if (case.target or "0.30.0") == VERSION:
        assert case.upstream.startswith(next(iter(raised))), (case.upstream, raised)


def test_enough_cases_are_decided_by_both() -> None:
    assert len(CASES) >= 30


def _bundled_verdicts() -> tuple[list[str], dict[str, str]]:
    run, _ = _run()
    disagree, undecided = [], {}
    for path in BUNDLED:
        verdict = run.verdicts[str(path)]
        if not verdict.decided:
            undecided[path.name] = verdict.undecided or ""
            continue
        report, alone = _report(str(path)), _static(str(path))
        server = {
            (f.file, f.line) for f in report.findings if f.code in SERVER_CODES and f.severity == "error"
        }
        static = {
            (f.file, f.line) for f in alone.findings if f.code in CHECKED_CODES and f.severity == "error"
        }
        if path.name in GAPS:
            if server == static:
                disagree.append(
                    f"{path.name} is no longer a static gap on {VERSION}: drop it from STATIC_GAPS"
                )
            continue
        if server != static:
            disagree.append(f"{path.name}: server {sorted(server)} static {sorted(static)}\n" +
                            "\n".join(f.text() for f in [*report.findings, *alone.findings]
                                       if f.severity == "error"))  # fmt: skip
        # Where the release's own start-up code accepts the file, no start-up error is left standing.
        claimed = {
            (f.file, f.line) for f in report.findings if f.code in CHECKED_CODES and f.severity == "error"
        }
        if not server and claimed:
            disagree.append(
                f"{path.name}: start-up errors the server's code does not raise: {sorted(claimed)}"
            )
    return disagree, undecided


def test_bundled_files_get_the_same_verdict_from_both() -> None:
    disagree, undecided = _bundled_verdicts()
    assert not disagree, "\n".join(disagree)
    # What cannot be decided here, and why (printed with -s; docs/validating.md lists it).
    for name, why in sorted(undecided.items()):
        print(f"undecided: {name}: {why}")
    # Only what the environment lacks (a package the pipeline imports, the model's config) or a file
    # that names no pipeline; never a failure of the check itself.
    known = ("cannot import what this pipeline's code needs", "needs the model's config", "no pipeline")
    unexplained = {n: w for n, w in undecided.items() if not any(k in w for k in known)}
    assert not unexplained, unexplained
    assert not [n for n in undecided if n.startswith("minicpmo")], undecided
    # With diffusers and compressed-tensors in the tier (.ci/vllm-tier-requirements.txt), the
    # diffusion pipelines are decided too: what stays undecided is the model's config (three
    # qwen3_omni files, two MOSS files only the model's architecture names) and torchvision (auk:
    # PyPI's build needs CUDA torch).
    assert not [n for n in undecided if "diffusers" in undecided[n]], undecided
    assert len(undecided) <= 6, undecided
    assert len(BUNDLED) - len(undecided) >= 104


def test_owned_sets_have_not_drifted() -> None:
    from tools import generate_owners

    version, entry = generate_owners.current()
    committed = generate_owners.json.loads(generate_owners.DATA_FILE.read_text())
    assert committed.get(version) == entry, "run python -m tools.generate_owners in this tier"


def test_validate_stays_light_while_the_check_runs() -> None:
    """With vllm-omni installed, validate runs the check in a child; the parent imports none of it."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys\n"
        "from omni_deploy.cli.app import main\n"
        "code = main(['validate', 'tests/data/startup/lora_on_talker.yaml', '-o', 'json'])\n"
        "heavy = [m for m in ('torch', 'onnxruntime', 'vllm', 'vllm_omni') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 1, done.stderr[-2000:]  # the file is refused: by both paths
    assert '"code": "E395"' in done.stdout and '"code": "E315"' in done.stdout
    assert '"ran": true' in done.stdout


def test_the_profiles_for_this_release_start_and_validate_clean() -> None:
    """deploy/turn-bench.yaml on 0.30.0, deploy/vllm-omni-0.32.0rc1/turn-bench.yaml (the seed's own
    file) on 0.32.0rc1: the release's own start-up code accepts each, and validate with its verdict
    calls each valid."""
    assert PROFILES, f"no profile of deploy/ says it is for vllm-omni {VERSION}"
    run, _ = _run()
    for path in PROFILES:
        verdict = run.verdicts[str(path)]
        assert verdict.decided and not verdict.refusals, (path.name, verdict)
        report = _report(str(path))
        assert report.valid, "\n".join(f.text() for f in report.findings)
