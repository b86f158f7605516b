"""The chart with ``serve: dra``: DeviceClasses that pick the driver's devices, RBAC, host paths, objects.

The DeviceClasses' CEL selectors are evaluated (with a CEL implementation)
against the devices the driver itself publishes for each family, so a
selector that names the wrong attribute, domain or value fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
from chart_harness import CHART_DIR, NAMESPACE, VALUES_FILES, ChartRenderer, Rendering
from dra_harness import cel_selects, split_inventory
from kube_harness import make_inventory
from test_chart_settings import settings_from_pod_env

from ascend_plugin.faces.dra.devices import DeviceCatalog, Publishing
from ascend_plugin.faces.dra.rbac import DRA_GRANTS
from ascend_plugin.offers.node_offers import VNPU_TEMPLATES
from ascend_plugin.settings import dra_plugin_dir
from backends.families import FAMILIES

DRIVER = "npu.huawei.com"
DRA = {"serve": "dra"}
CHIP_NAMES = {"310": "310", "310B": "310B1", "310P": "310P3", "910": "910B3", "950": "Ascend950PR"}


FAMILY_CLASSES = {
    f"{name}.{DRIVER}" for name in ("ascend310", "ascend310b", "ascend310p", "ascend910", "ascend950")
}


@pytest.fixture(scope="module")
def dra(chart: ChartRenderer) -> Rendering:
    return chart.render(DRA)


def device_classes(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {manifest["metadata"]["name"]: manifest for manifest in rendering.of_kind("DeviceClass")}


def published(family: str, short_tmp: Path, driver: str = DRIVER) -> list[dict[str, Any]]:
    """The devices the driver publishes for a node of ``family``."""
    inventory = make_inventory(short_tmp, family=family, chip_name=CHIP_NAMES[family], phy_ids=(0, 1))
    return DeviceCatalog(inventory, driver).pool().devices


@pytest.mark.parametrize("kube_version", ["1.34", "1.35", "1.36", "1.37"])
@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_every_object_is_valid_for_kubernetes(
    chart: ChartRenderer, values_file: str, kube_version: str
) -> None:
    rendering = chart.render_file(values_file, DRA)
    assert rendering.of_kind("DeviceClass")
    for manifest in rendering.manifests:
        kubernetes_validate.validate(manifest, kube_version, strict=True)


def test_helm_lint_is_clean() -> None:
    report = helm.lint(CHART_DIR, DRA, strict=True, namespace=NAMESPACE, kube_version="v1.34.0")
    assert report["errors"] == []
    assert [message for message in report["messages"] if message["severity"] >= 2] == []


def test_one_device_class_per_family_with_the_family_s_extended_resource(dra: Rendering) -> None:
    classes = {name: c for name, c in device_classes(dra).items() if name in FAMILY_CLASSES}
    assert len(classes) == len(FAMILY_CLASSES)
    extended = {name: c["spec"].get("extendedResourceName") for name, c in classes.items()}
    assert extended == {
        f"ascend310.{DRIVER}": "huawei.com/Ascend310",
        f"ascend310b.{DRIVER}": None,
        f"ascend310p.{DRIVER}": "huawei.com/Ascend310P",
        f"ascend910.{DRIVER}": "huawei.com/Ascend910",
        f"ascend950.{DRIVER}": "huawei.com/npu",
    }
    # Each family's chips are reached by the name pods already use for them (the family table's).
    names = {value for value in extended.values() if value}
    assert {family.TABLE.resource_name for family in FAMILIES} == names


@pytest.mark.parametrize("family", [family.TABLE.family for family in FAMILIES])
def test_the_selectors_pick_exactly_the_devices_of_their_families(
    dra: Rendering, family: str, short_tmp: Path
) -> None:
    devices = published(family, short_tmp)
    chosen = {
        name
        for name, device_class in device_classes(dra).items()
        if name in FAMILY_CLASSES
        and all(
            cel_selects(selector["cel"]["expression"], device, DRIVER)
            for device in devices
            for selector in device_class["spec"]["selectors"]
        )
    }
    expected = {
        "310": {"ascend310"},
        "310B": {"ascend310", "ascend310b"},
        "310P": {"ascend310p"},
        "910": {"ascend910"},
        "950": {"ascend950"},
    }[family]
    assert chosen == {f"{name}.{DRIVER}" for name in expected}


def test_no_selector_picks_another_driver_s_devices(dra: Rendering, short_tmp: Path) -> None:
    devices = published("910", short_tmp, driver="npu.example.com")
    for device_class in device_classes(dra).values():
        for selector in device_class["spec"]["selectors"]:
            assert not any(cel_selects(selector["cel"]["expression"], d, "npu.example.com") for d in devices)


def test_a_driver_of_another_name_moves_every_name_with_it(chart: ChartRenderer, short_tmp: Path) -> None:
    rendering = chart.render({**DRA, "settings": {"draDriverName": "npu.example.com"}})
    classes = device_classes(rendering)
    assert "ascend910.npu.example.com" in classes
    devices = published("910", short_tmp, driver="npu.example.com")
    expression = classes["ascend910.npu.example.com"]["spec"]["selectors"][0]["cel"]["expression"]
    assert all(cel_selects(expression, device, "npu.example.com") for device in devices)
    _, volume = rendering.volume_at("/var/lib/kubelet/plugins/npu.example.com")
    assert volume["hostPath"]["path"] == "/var/lib/kubelet/plugins/npu.example.com"


DRA_REQUESTS = [
    *[
        (verb, "resource.k8s.io", "resourceslices", None)
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete")
    ],
    *[(verb, "resource.k8s.io", "resourceclaims", None) for verb in ("get", "list", "watch")],
    ("get", "", "nodes", None),
]


@pytest.mark.parametrize("request_", DRA_REQUESTS, ids=str)
def test_the_driver_may_do_what_it_does(dra: Rendering, request_: tuple[str, str, str, None]) -> None:
    assert dra.allows(*request_)


def test_the_chart_grants_every_call_the_driver_makes(dra: Rendering) -> None:
    for grant in DRA_GRANTS:
        for verb in grant.verbs:
            assert dra.allows(verb, grant.group, grant.resource, None), (verb, grant)


def test_only_a_dra_release_grants_resource_k8s_io(renderings: dict[str, Rendering], dra: Rendering) -> None:
    assert not renderings["values.yaml"].allows("list", "resource.k8s.io", "resourceslices", None)
    assert not renderings["values.yaml"].of_kind("DeviceClass")
    for verb in ("update", "delete", "create"):
        assert not dra.allows(verb, "resource.k8s.io", "resourceclaims", None)
    assert not dra.allows("create", "resource.k8s.io", "deviceclasses", None)


def test_the_kubelet_s_plugin_directories_are_mounted_where_the_plugin_looks(
    dra: Rendering, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet dials the socket path the driver names: host and container paths must be the same."""
    settings = settings_from_pod_env(dra, monkeypatch)
    assert settings.serve == "dra"
    registry_mount, registry = dra.volume_at(str(settings.dra_registry_path))
    plugin_mount, plugin = dra.volume_at(str(dra_plugin_dir(settings)))
    assert registry["hostPath"] == {"path": "/var/lib/kubelet/plugins_registry", "type": "Directory"}
    assert plugin["hostPath"] == {"path": f"/var/lib/kubelet/plugins/{DRIVER}", "type": "DirectoryOrCreate"}
    assert not registry_mount.get("readOnly")
    assert not plugin_mount.get("readOnly")
    cdi_mount, cdi = dra.volume_at(str(settings.cdi_spec_dir))
    assert cdi["hostPath"]["path"] == "/var/run/cdi"
    assert not cdi_mount.get("readOnly")
    assert "/var/lib/kubelet/device-plugins" not in [m["mountPath"] for m in dra.container["volumeMounts"]]


def test_moved_kubelet_directories_follow_the_settings(
    chart: ChartRenderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        **DRA,
        "settings": {
            "draRegistryPath": "/var/lib/k0s/kubelet/plugins_registry",
            "draPluginPath": "/var/lib/k0s/kubelet/plugins/npu.huawei.com",
        },
    }
    rendering = chart.render(values)
    settings = settings_from_pod_env(rendering, monkeypatch)
    for path in (settings.dra_registry_path, dra_plugin_dir(settings)):
        _, volume = rendering.volume_at(str(path))
        assert volume["hostPath"]["path"] == str(path)


def test_the_device_plugin_release_is_unchanged(
    renderings: dict[str, Rendering], monkeypatch: pytest.MonkeyPatch
) -> None:
    rendering = renderings["values.yaml"]
    assert settings_from_pod_env(rendering, monkeypatch).serve == "device-plugin"
    assert "/var/lib/kubelet/plugins_registry" not in [
        m["mountPath"] for m in rendering.container["volumeMounts"]
    ]


def test_an_allocate_mode_with_serve_dra_is_refused(chart: ChartRenderer) -> None:
    with pytest.raises(
        helm.HelmRenderError, match=r"settings.allocateMode \(device\) has no effect with serve: dra"
    ):
        chart.render({**DRA, "settings": {"allocateMode": "device"}})


@pytest.mark.parametrize("serve", ["both", "device-plugin,dra", ""])
def test_serve_takes_one_face(chart: ChartRenderer, serve: str) -> None:
    with pytest.raises(helm.HelmValuesError, match="serve"):
        chart.render({"serve": serve})


def test_the_notes_say_how_to_see_the_slices(dra: Rendering) -> None:
    assert (
        f"kubectl get resourceslices --field-selector spec.driver={DRIVER},spec.nodeName=<node>" in dra.notes
    )
    assert "kubectl describe node <node>" not in dra.notes


# vnpu=dynamic nodes of every chip bin, and shared 310P/310B chips, as the driver publishes them.
SPLIT_NODES = {
    "910B3": ("910", 20.0, 65536),
    "910B4": ("910", 20.0, 32768),
    "910B2": ("910", 24.0, 65536),
    "910A": ("910", 30.0, 32768),
    "Ascend910": ("910", 24.0, 65536),
    "310P3": ("310P", 8.0, 24576),
}


def split_devices(short_tmp: Path) -> list[dict[str, Any]]:
    devices = []
    for chip_name, (family, cores, memory) in SPLIT_NODES.items():
        inventory, splits = split_inventory(short_tmp / chip_name, family, chip_name, cores, memory, 2)
        devices += DeviceCatalog(inventory, DRIVER, splits=splits).pool(Publishing(partitions=True)).devices
    for family, chip_name in (("310P", "310P3"), ("310B", "310B1")):
        inventory, _ = split_inventory(short_tmp / f"shared-{family}", family, chip_name, 8.0, 8192, 2)
        devices += DeviceCatalog(inventory, DRIVER, share_count=4).pool(Publishing(shares=True)).devices
    return devices


def selected(device_class: dict[str, Any], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The devices the class selects; a selector that errs on any device fails here (it aborts allocation)."""
    selectors = [selector["cel"]["expression"] for selector in device_class["spec"]["selectors"]]
    return [d for d in devices if all(cel_selects(expression, d, DRIVER) for expression in selectors)]


def template_of(device: dict[str, Any]) -> str | None:
    value = device["attributes"].get("vnpuTemplate")
    return value["string"] if value else None


def test_one_partition_class_per_template_the_driver_can_publish(dra: Rendering) -> None:
    classes = device_classes(dra)
    for family, prefix in (("310P", "huawei.com/Ascend310P"), ("910", "huawei.com/Ascend910")):
        known = set()
        for implementation in FAMILIES:
            if implementation.TABLE.family == family:
                known |= every_template(implementation)
        for template in known:
            name = f"ascend{family.lower()}-{template.replace('_', '-')}.{DRIVER}"
            assert name in classes, template
            assert classes[name]["spec"]["extendedResourceName"] == f"{prefix}-{VNPU_TEMPLATES[template]}", (
                "Huawei's vNPU resource name"
            )


def every_template(family: type[Any]) -> set[str]:
    """Every template a family's chips may be split by, whatever their bin."""
    from backends.families.ascend310p import _TEMPLATES
    from backends.families.ascend910 import A1_TEMPLATES, A2_TEMPLATES, A3_TEMPLATES

    return set(_TEMPLATES) if family.TABLE.family == "310P" else {*A1_TEMPLATES, *A2_TEMPLATES, *A3_TEMPLATES}


def test_each_class_selects_exactly_its_devices_and_errs_on_none(dra: Rendering, short_tmp: Path) -> None:
    devices = split_devices(short_tmp)
    partitions = [d for d in devices if template_of(d)]
    shared = [d for d in devices if "shareCount" in d["attributes"]]
    whole = [d for d in devices if d not in partitions]
    for name, device_class in device_classes(dra).items():
        chosen = selected(device_class, devices)
        if name in FAMILY_CLASSES:
            assert not any(template_of(d) for d in chosen), f"{name} selects no partition"
            family = name.split(".", 1)[0].removeprefix("ascend").upper()
            assert chosen == [d for d in whole if d["attributes"]["family"]["string"] in expected(family)]
        elif "-share." in name:
            families = {"ascend310-share": {"310B"}, "ascend310p-share": {"310P"}}[name.split(".", 1)[0]]
            assert chosen == [d for d in shared if d["attributes"]["family"]["string"] in families]
        else:
            templates = {template_of(d) for d in chosen}
            assert len(templates) == 1, f"{name} selects partitions of one template: {templates}"
            (template,) = templates
            assert template is not None
            assert name.split(".", 1)[0].endswith("-" + template.replace("_", "-"))
            assert all(d in partitions for d in chosen)
    assert {template_of(d) for d in partitions} <= {
        template_of(d) for c in device_classes(dra).values() for d in selected(c, partitions)
    }, "every published partition has a class"


def expected(family: str) -> set[str]:
    families = {"310": {"310", "310B"}, "310B": {"310B"}, "310P": {"310P"}, "910": {"910"}, "950": {"950"}}
    return families[family]
