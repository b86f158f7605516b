"""Run every check in the plugin's bring-up order, and report: the first problem is usually the one to fix."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

import anyio

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.doctor import (
    chips,
    devices,
    dra_features,
    fault_config,
    host_files,
    hot_reset,
    identity,
    kubelet,
    library,
    other_plugins,
    rbac,
    splits,
    volcano,
)
from ascend_plugin.doctor.check import Check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding
from ascend_plugin.doctor.report import passed, render_json, render_text
from ascend_plugin.logs import setup_logging
from ascend_plugin.settings import Settings

CHECKS: tuple[Check, ...] = (
    library.library_found,
    library.library_trusted,
    library.library_glibc,
    library.library_loads,
    chips.dcmi_init,
    chips.chips,
    chips.chip_family,
    chips.ai_cores,
    splits.vnpus,
    splits.share_count,
    hot_reset.hot_reset,
    host_files.host_files,
    host_files.shared_memory,
    devices.device_nodes,
    kubelet.kubelet,
    other_plugins.other_plugins,
    identity.node_identity,
    rbac.permissions,
    fault_config.fault_configuration,
    dra_features.dra_features,
    volcano.volcano_choices,
)


async def diagnose(
    settings: Settings, root: Path, environ: Mapping[str, str] = os.environ, checks: Sequence[Check] = CHECKS
) -> list[Finding]:
    """Every check's findings, in order; the chip library is released at the end."""
    context = Context(settings, root, environ, ChipCalls(settings.dcmi_call_timeout))
    findings: list[Finding] = []
    try:
        for each in checks:
            findings.extend(await each.run(context))
    finally:
        await context.close()
    return findings


def run_doctor(settings: Settings, root: Path, fmt: str, out: TextIO = sys.stdout) -> int:
    """The ``doctor`` subcommand: print the report; 0 if nothing is a problem, else 1. The plugin's own log
    lines go to stderr, at WARNING unless a level is asked for: at INFO they would bury the report."""
    level = settings.log_level if "log_level" in settings.model_fields_set else "WARNING"
    setup_logging(level, settings.log_format)
    findings = anyio.run(diagnose, settings, root)
    out.write(render_json(findings, root) if fmt == "json" else render_text(findings, root))
    return 0 if passed(findings) else 1
