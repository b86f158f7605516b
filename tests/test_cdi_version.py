"""The lowest CDI version of a spec, by the rules of the reference library's MinimumRequiredVersion.

Each rule gets a spec that needs exactly that version, and its near miss (the
same spec without the feature, or with an empty value the Go library ignores).
"""

from __future__ import annotations

from typing import Any

import pytest

from ascend_plugin.handover.cdi import minimum_version, versioned

KIND = "huawei.com/npu"


def spec(devices: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """A spec of one device named "npu" (a name not starting with a digit) unless told otherwise."""
    return {
        "kind": KIND,
        "devices": devices if devices is not None else [{"name": "npu", "containerEdits": {}}],
        **top,
    }


def device(name: str = "npu", **edits: Any) -> dict[str, Any]:
    return {"name": name, "containerEdits": edits}


def test_plain_content_needs_the_earliest_version() -> None:
    content = spec(
        [device(deviceNodes=[{"path": "/dev/davinci0", "permissions": "rw"}], env=["A=1"])],
        containerEdits={
            "mounts": [{"hostPath": "/usr/local/Ascend/driver", "containerPath": "/d", "options": ["ro"]}],
            "hooks": [{"hookName": "createContainer", "path": "/bin/true"}],
        },
    )
    assert minimum_version(content) == "0.3.0"


# -- 0.4.0: a mount type ----------------------------------------------------------------


@pytest.mark.parametrize("where", ["device", "spec"])
def test_a_mount_type_needs_0_4_0(where: str) -> None:
    mount = {"hostPath": "/tmp", "containerPath": "/tmp", "type": "tmpfs"}
    content = (
        spec([device(mounts=[mount])]) if where == "device" else spec(containerEdits={"mounts": [mount]})
    )
    assert minimum_version(content) == "0.4.0"


def test_an_empty_mount_type_is_no_type() -> None:
    assert minimum_version(
        spec([device(mounts=[{"hostPath": "/a", "containerPath": "/a", "type": ""}])])
    ) == ("0.3.0")


# -- 0.5.0: a device name starting with a digit, a device node's hostPath -------------------------


@pytest.mark.parametrize(("name", "expected"), [("0", "0.5.0"), ("9x", "0.5.0"), ("npu0", "0.3.0")])
def test_a_device_name_starting_with_a_digit_needs_0_5_0(name: str, expected: str) -> None:
    assert minimum_version(spec([device(name)])) == expected


def test_only_ascii_digits_count_as_a_leading_digit() -> None:
    """The Go rule compares the first byte with '0'..'9'; other Unicode digits are not among them."""
    assert minimum_version(spec([device("\N{ARABIC-INDIC DIGIT ONE}npu")])) == "0.3.0"


@pytest.mark.parametrize("where", ["device", "spec"])
def test_a_device_node_host_path_needs_0_5_0(where: str) -> None:
    node = {"path": "/dev/davinci_manager", "hostPath": "/dev/davinci_manager_docker"}
    content = (
        spec([device(deviceNodes=[node])])
        if where == "device"
        else spec(containerEdits={"deviceNodes": [node]})
    )
    assert minimum_version(content) == "0.5.0"


def test_an_empty_host_path_is_no_host_path() -> None:
    assert minimum_version(spec([device(deviceNodes=[{"path": "/dev/x", "hostPath": ""}])])) == "0.3.0"


# -- 0.6.0: annotations, a dot in the kind's class -------------------------------------------


def test_spec_annotations_need_0_6_0() -> None:
    assert minimum_version(spec(annotations={"a": "b"})) == "0.6.0"


def test_device_annotations_need_0_6_0() -> None:
    assert minimum_version(spec([{**device(), "annotations": {"a": "b"}}])) == "0.6.0"


def test_empty_annotations_are_no_annotations() -> None:
    assert minimum_version(spec([{**device(), "annotations": {}}], annotations={})) == "0.3.0"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("huawei.com/npu.v2", "0.6.0"), ("huawei.com/npu", "0.3.0"), ("huawei/npu", "0.3.0")],
)
def test_a_dot_in_the_kinds_class_needs_0_6_0(kind: str, expected: str) -> None:
    """Only the class counts: a vendor is a domain and always had dots."""
    assert minimum_version({**spec(), "kind": kind}) == expected


# -- 0.7.0: intelRdt, additionalGids ----------------------------------------------------------


@pytest.mark.parametrize("where", ["device", "spec"])
def test_intel_rdt_needs_0_7_0(where: str) -> None:
    rdt = {"closID": "npu"}
    content = spec([device(intelRdt=rdt)]) if where == "device" else spec(containerEdits={"intelRdt": rdt})
    assert minimum_version(content) == "0.7.0"


def test_an_empty_intel_rdt_object_still_needs_0_7_0() -> None:
    """The Go rule checks that the object is there, not what it holds."""
    assert minimum_version(spec([device(intelRdt={})])) == "0.7.0"


@pytest.mark.parametrize("where", ["device", "spec"])
def test_additional_gids_need_0_7_0(where: str) -> None:
    content = (
        spec([device(additionalGids=[44])])
        if where == "device"
        else spec(containerEdits={"additionalGids": [44]})
    )
    assert minimum_version(content) == "0.7.0"


def test_no_additional_gids_and_a_null_intel_rdt_need_nothing() -> None:
    assert minimum_version(spec([device(additionalGids=[], intelRdt=None)])) == "0.3.0"


# -- 1.1.0: netDevices, intelRdt schemata and monitoring ----------------------------------------


@pytest.mark.parametrize("where", ["device", "spec"])
def test_net_devices_need_1_1_0(where: str) -> None:
    net = [{"hostInterfaceName": "eth1", "name": "npu-net0"}]
    content = (
        spec([device(netDevices=net)]) if where == "device" else spec(containerEdits={"netDevices": net})
    )
    assert minimum_version(content) == "1.1.0"


@pytest.mark.parametrize(
    ("rdt", "expected"),
    [
        ({"schemata": ["L3:0=f"]}, "1.1.0"),
        ({"schemata": []}, "1.1.0"),  # the Go rule: a present list, even empty
        ({"enableMonitoring": True}, "1.1.0"),
        ({"enableMonitoring": False}, "0.7.0"),
        ({"schemata": None}, "0.7.0"),
    ],
)
def test_intel_rdt_schemata_or_monitoring_need_1_1_0(rdt: dict[str, Any], expected: str) -> None:
    assert minimum_version(spec([device(intelRdt=rdt)])) == expected
    assert minimum_version(spec(containerEdits={"intelRdt": rdt})) == expected


# -- the newest rule that holds decides -------------------------------------------------------


def test_the_newest_needed_version_wins() -> None:
    content = spec(
        [device("0", mounts=[{"hostPath": "/a", "containerPath": "/a", "type": "bind"}])],
        annotations={"a": "b"},
    )
    assert minimum_version(content) == "0.6.0"


def test_any_device_decides_not_only_the_first() -> None:
    assert minimum_version(spec([device("npu"), device("1")])) == "0.5.0"


# -- versioned: the version in the spec follows its content ----------------------------------------


def test_versioned_replaces_a_version_that_is_too_low_or_too_high() -> None:
    for declared in ("0.3.0", "0.6.0"):
        result = versioned({"cdiVersion": declared, **spec([device("0")])})
        assert result["cdiVersion"] == "0.5.0"
        assert next(iter(result)) == "cdiVersion"
        assert {key: value for key, value in result.items() if key != "cdiVersion"} == spec([device("0")])


# -- content the rules cannot vouch for -----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({**spec(), "future": 1}, "the spec has unknown field(s) future"),
        (spec([{**device(), "extra": 1}]), "devices[0] has unknown field(s) extra"),
        (spec([device(cgroups=[])]), "devices[0].containerEdits has unknown field(s) cgroups"),
        (
            spec(containerEdits={"deviceNodes": [{"path": "/dev/x", "hostpath": "/dev/y"}]}),
            "containerEdits.deviceNodes[0] has unknown field(s) hostpath",
        ),
        (
            spec([device(mounts=[{"hostPath": "/a", "containerPath": "/a", "propagation": "x"}])]),
            "devices[0].containerEdits.mounts[0] has unknown field(s) propagation",
        ),
        (
            spec([device(intelRdt={"clos": "x"})]),
            "devices[0].containerEdits.intelRdt has unknown field(s) clos",
        ),
        (
            spec([device(netDevices=[{"name": "n", "mtu": 9000}])]),
            "devices[0].containerEdits.netDevices[0] has unknown field(s) mtu",
        ),
        (
            spec(containerEdits={"hooks": [{"hookName": "x", "path": "/p", "when": 1}]}),
            "containerEdits.hooks[0] has unknown field(s) when",
        ),
        ({**spec(), "kind": None}, "kind must be a string, got None"),
        (spec([{"containerEdits": {}}]), "devices[0].name must be a string, got None"),
        ({**spec(), "devices": "npu"}, "devices must be a list, got 'npu'"),
        (
            spec([device(deviceNodes=["/dev/x"])]),
            "devices[0].containerEdits.deviceNodes[0] must be an object",
        ),
        (spec(annotations=["a"]), "annotations must be an object, got ['a']"),
    ],
)
def test_content_it_cannot_version_is_refused_by_name(content: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=r"^CDI spec: ") as error:
        minimum_version(content)
    assert str(error.value).startswith("CDI spec: ")
    assert message in str(error.value)


def test_an_unknown_field_error_lists_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"^CDI spec: ") as error:
        minimum_version(spec([device(cgroups=[])]))
    assert "allowed: additionalGids, deviceNodes, env, hooks, intelRdt, mounts, netDevices" in str(
        error.value
    )
