"""validate's reporters, one module per `--format`, all behind one signature (base.Reporter):
`emit(reports, stream, options)` writes the whole document for every file's report; `render`
returns it as text. None of them decides the exit code.

`REPORTERS` maps each `--format` name to its reporter; the command looks the name up and calls
`emit`, the same way for every format.
"""

from __future__ import annotations

from omni_deploy.validate.reporters.base import Reporter, ReportOptions
from omni_deploy.validate.reporters.concise import Concise
from omni_deploy.validate.reporters.github import GitHub
from omni_deploy.validate.reporters.json import Json
from omni_deploy.validate.reporters.junit import JUnit
from omni_deploy.validate.reporters.sarif import Sarif
from omni_deploy.validate.reporters.text import Text

REPORTERS: dict[str, Reporter] = {
    reporter.name: reporter for reporter in (Text(), Concise(), Json(), Sarif(), GitHub(), JUnit())
}

__all__ = ["REPORTERS", "ReportOptions", "Reporter"]
