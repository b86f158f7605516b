"""docs/operations.md keeps up with the code: every doctor finding and every metric is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import DoctorRoot

from ascend_plugin.app import PluginApp
from ascend_plugin.settings import Settings

DOC = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text(encoding="utf-8")


@pytest.mark.anyio
async def test_every_finding_name_is_documented(doctor_c_root: DoctorRoot, kubeconfig: Path) -> None:
    names = set(await doctor_c_root.run(kubeconfig=kubeconfig, config_configmap="adp-config"))
    # Names that carry a path or a namespace are documented by their prefix: `host-file:<path>`.
    documented = {name.split(":")[0] + ":" if ":" in name else name for name in names}
    assert {"host-file:", "rbac:", "ai-cores", "dev-shm", "host-ip"} <= documented
    # A prefix is followed by its placeholder (`host-file:<path>`); a plain name is quoted whole.
    missing = sorted(
        name for name in documented if (f"`{name}" if name.endswith(":") else f"`{name}`") not in DOC
    )
    assert not missing, f"docs/operations.md does not describe {missing}"


def test_every_metric_is_documented(tmp_path: Path) -> None:
    app = PluginApp(Settings(backend="fake", fake_scenario=tmp_path / "none.json", node_name=None))
    try:
        exposition = app.metrics.render().decode()
    finally:
        app.calls.shutdown()
    names = set(re.findall(r"^# TYPE (\S+) ", exposition, re.MULTILINE))
    names = {name for name in names if not name.endswith("_created")}  # prometheus_client's own
    assert "ascend_device_healthy" in names
    missing = sorted(name for name in names if f"`{name}`" not in DOC)
    assert not missing, f"docs/operations.md does not list the metrics {missing}"
