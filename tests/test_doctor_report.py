"""``ascend-device-plugin doctor`` as a command: exit codes, the JSON contract, the text report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import DoctorRoot

from ascend_plugin.doctor.findings import Finding, Guide
from ascend_plugin.doctor.report import render_text
from backends.fake import FakeScenario

KEYS = {"name", "status", "detail", "fix", "see"}


def _doctor(
    root: DoctorRoot, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command, in a clean environment: no identity, no cluster, no plugin settings."""
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ASCEND_DP_", "KUBERNETES_")) and key not in ("NODE_NAME", "HOST_IP")
    }
    if root.backend == "c":
        backend = ["--dcmi-library", DoctorRoot.LIBRARY, "--dcmi-allow-untrusted-library"]
        clean["FAKE_DCMI_SCENARIO"] = str(root.scenario)
    else:
        backend = ["--backend", "fake", "--fake-scenario", str(root.scenario)]
    command = [sys.executable, "-m", "ascend_plugin", "doctor", "--root", str(root.path), *backend, *argv]
    return subprocess.run(command, capture_output=True, text=True, env=clean | (env or {}), check=False)


def test_a_healthy_board_passes_with_exit_0(doctor_c_root: DoctorRoot) -> None:
    result = _doctor(doctor_c_root, "--format", "json", env={"NODE_NAME": "edge-1", "HOST_IP": "192.0.2.7"})
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] is True
    assert report["root"] == str(doctor_c_root.path)
    statuses = {finding["name"]: finding["status"] for finding in report["findings"]}
    assert statuses["ai-cores"] == statuses["dcmi-library-loads"] == statuses["node-name"] == "ok"
    assert statuses["rbac"] == "skipped"  # no cluster here
    assert "problem" not in statuses.values()


def test_the_json_findings_keep_their_keys(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.remove("/var/slogd")
    doctor_py_root.add_directories("/var/slogd")
    # In a pod (where NODE_NAME and HOST_IP must come from the downward API), without them.
    in_a_pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    bounds = ("--ai-core-min", "8", "--ai-core-max", "36")
    result = _doctor(doctor_py_root, "--format", "json", *bounds, env=in_a_pod)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["passed"] is False
    for finding in report["findings"]:
        assert set(finding) == KEYS
        assert finding["status"] in ("ok", "problem", "warning", "skipped")
        assert isinstance(finding["detail"], str)
        assert (finding["fix"] is None) == (finding["status"] not in ("problem", "warning"))
    guides = {finding["name"]: finding["see"] for finding in report["findings"] if finding["see"]}
    assert guides == {
        "ai-cores": "docs/operations.md#ai-core-bounds",
        "host-file:/var/slogd": "docs/operations.md#board-files-mounted-as-files",
        "node-name": "docs/operations.md#node-name-and-host-ip",
        "host-ip": "docs/operations.md#node-name-and-host-ip",
    }


def test_the_text_report_shows_problems_their_guide_and_fix(doctor_py_root: DoctorRoot) -> None:
    doctor_py_root.remove("/dev/shm/iam")
    result = _doctor(doctor_py_root, "--node-name", "edge-1", "--host-ip", "192.0.2.7")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    [problem] = [index for index, line in enumerate(lines) if line.startswith("PROBLEM")]
    assert lines[problem].split()[1] == "dev-shm"
    assert lines[problem + 1].strip() == "(see docs/operations.md#the-hosts-shared-memory)"
    assert lines[problem + 2].strip().startswith("fix: mount the host's /dev/shm")
    assert lines[-1].endswith("1 problem(s), 8 skipped")  # volcano-choices among them: no cluster here


def test_bad_settings_exit_2(doctor_py_root: DoctorRoot) -> None:
    result = _doctor(doctor_py_root, "--ai-core-min", "-1")
    assert result.returncode == 2
    assert "invalid setting ai_core_min (--ai-core-min / ASCEND_DP_AI_CORE_MIN)" in result.stderr


def test_the_text_report_aligns_details_under_each_other() -> None:
    findings = [
        Finding.ok("a", "fine"),
        Finding.skipped("longer-name", "not here"),
        Finding.problem("b", "broken", fix="mend it", see=Guide.BOARD_FILES),
    ]
    lines = render_text(findings, Path("/host")).splitlines()
    assert lines[0].endswith("doctor, host root /host")
    assert lines[1:] == [
        "",
        "ok       a            fine",
        "skipped  longer-name  not here",
        "PROBLEM  b            broken",
        "                      (see docs/operations.md#board-files-mounted-as-files)",
        "                      fix: mend it",
        "",
        "3 checked: 1 ok, 1 problem(s), 1 skipped",
    ]


def test_a_warning_carries_its_fix_and_does_not_fail_the_run(doctor_py_root: DoctorRoot) -> None:
    node = FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]})
    doctor_py_root.write_scenario(node)
    result = _doctor(doctor_py_root, "--share-count", "2", "--chip-family", "910", "--format", "json")
    report = json.loads(result.stdout)
    (warning,) = [finding for finding in report["findings"] if finding["status"] == "warning"]
    assert warning["name"] == "share-count"
    assert warning["fix"].startswith("nothing breaks; to silence it, set share_count=1")
    problems = [finding["name"] for finding in report["findings"] if finding["status"] == "problem"]
    assert report["passed"] is (not problems) is (result.returncode == 0)
    text = render_text([Finding.warning("w", "worth knowing", fix="do this")], Path("/")).splitlines()
    assert text[2:4] == ["WARNING  w  worth knowing", "            fix: do this"]
    assert text[-1] == "1 checked: 0 ok, 0 problem(s), 1 warning(s), 0 skipped"
