"""The report: aligned text for a person, or JSON for a script.

The JSON is a contract: ``findings`` (name, status, detail, fix, see) and ``passed`` (the exit code).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ascend_plugin import __version__
from ascend_plugin.doctor.findings import Finding, Status


def passed(findings: Sequence[Finding]) -> bool:
    """True when nothing is a problem (skipped checks do not fail the run)."""
    return all(finding.status is not Status.PROBLEM for finding in findings)


def render_json(findings: Sequence[Finding], root: Path) -> str:
    document = {
        "version": __version__,
        "root": str(root),
        "passed": passed(findings),
        "findings": [finding.as_json() for finding in findings],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def render_text(findings: Sequence[Finding], root: Path) -> str:
    width = max((len(finding.name) for finding in findings), default=0)
    indent = " " * (9 + width + 2)
    lines = [f"ascend-device-plugin {__version__} doctor, host root {root}", ""]
    for finding in findings:
        shout = finding.status in (Status.PROBLEM, Status.WARNING)
        label = finding.status.value.upper() if shout else finding.status.value
        lines.append(f"{label:<9}{finding.name:<{width}}  {finding.detail}")
        if finding.see is not None:
            lines.append(f"{indent}(see {finding.see.value})")
        if finding.fix:
            lines.append(f"{indent}fix: {finding.fix}")
    counts = {status: sum(1 for f in findings if f.status is status) for status in Status}
    warnings = f", {counts[Status.WARNING]} warning(s)" if counts[Status.WARNING] else ""
    lines += [
        "",
        f"{len(findings)} checked: {counts[Status.OK]} ok, {counts[Status.PROBLEM]} problem(s){warnings}, "
        f"{counts[Status.SKIPPED]} skipped",
    ]
    return "\n".join(lines) + "\n"
