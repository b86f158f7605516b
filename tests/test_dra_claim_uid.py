"""A claim UID names a file: one that is no plain file name is refused, and nothing outside is touched.

The kubelet passes the claim's UID; the driver names the claim's CDI spec file
and CDI devices after it. A UID with a '/' (or anything else no API server
assigns) would write, or remove, a file outside the CDI directory.
"""

from __future__ import annotations

import pytest
from dra_harness import DraNode, prepare, put_claim, result, unprepare
from fake_apiserver import FakeApiServer

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.dra_standin import DraKubeletStandIn

pytestmark = pytest.mark.anyio

ESCAPING = "x/../../outside"  # the spec "<kind>-claim-x/../../outside.json" lands beside the CDI directory


def with_uid(apiserver: FakeApiServer, name: str, uid: str) -> tuple[str, str, str]:
    """An allocated claim whose UID is ``uid`` (as a broken or hostile API server would give it)."""
    namespace, name, _ = put_claim(apiserver, name, [result("npu-0")])
    apiserver.objects[("resourceclaims", namespace, name)]["metadata"]["uid"] = uid
    return namespace, name, uid


async def test_a_uid_that_is_no_file_name_is_refused_and_writes_nothing_outside(
    dra_driver: PluginApp, dra_node: DraNode, apiserver: FakeApiServer, dra_kubelet: DraKubeletStandIn
) -> None:
    claim = with_uid(apiserver, "escaping", ESCAPING)
    prepared = (await prepare(dra_kubelet, claim)).claims[ESCAPING]
    assert "claim UID 'x/../../outside' cannot name a CDI spec file" in prepared.error
    assert not prepared.devices
    assert not (dra_node.cdi_dir.parent / "outside.json").exists()
    assert dra_node.spec_files() == {}
    good = put_claim(apiserver, "good", [result("npu-1")])
    assert (await prepare(dra_kubelet, good)).claims[good[2]].error == ""


async def test_unpreparing_such_a_uid_removes_nothing_outside(
    dra_driver: PluginApp, dra_node: DraNode, apiserver: FakeApiServer, dra_kubelet: DraKubeletStandIn
) -> None:
    decoy = dra_node.cdi_dir.parent / "outside.json"
    decoy.write_text("someone else's")
    (dra_node.cdi_dir / "huawei.com-npu-claim-x").mkdir(parents=True)  # the way out, ready
    answer = await unprepare(dra_kubelet, ("default", "escaping", ESCAPING))
    assert answer.claims[ESCAPING].error == ""  # nothing of ours can have that name: nothing to do
    assert decoy.read_text() == "someone else's"
