"""junit: JUnit XML for CI dashboards, one test case per file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_deploy.common.output import escape
from omni_deploy.validate.findings import ERROR
from omni_deploy.validate.reporters.base import Reporter, ReportOptions

if TYPE_CHECKING:  # annotations only: REPORTERS (validate's --output choices) loads no checks
    from omni_deploy.validate.runner import FileReport


def junit(reports: list[FileReport]) -> str:
    """JUnit XML: one test case per file, failing with its errors (warnings go to system-out)."""
    from xml.etree import ElementTree  # only here: validate's start-up stays light

    xml = escape.for_xml  # every text and attribute from a file: XML 1.0 characters only
    suite = ElementTree.Element("testsuite", name="omni-deploy validate")
    failures = 0
    for report in reports:
        case = ElementTree.SubElement(
            suite, "testcase", classname="omni-deploy.validate", name=xml(report.file)
        )
        errors = [f for f in report.findings if f.severity == ERROR]
        others = [f for f in report.findings if f.severity != ERROR]
        if errors:
            failures += 1
            failure = ElementTree.SubElement(
                case, "failure", type=xml(errors[0].code), message=f"{len(errors)} error(s)"
            )
            failure.text = xml("\n".join(f.text() for f in errors))
        if others:
            ElementTree.SubElement(case, "system-out").text = xml("\n".join(f.text() for f in others))
    suite.set("tests", str(len(reports)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suite, encoding="unicode")


class JUnit(Reporter):
    name = "junit"

    def render(self, reports: list[FileReport], options: ReportOptions) -> str:
        return junit(reports)
