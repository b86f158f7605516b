"""values.schema.json: a typo or a wrong type stops `helm install` with Helm's own message.

The schema is closed at every object level (additionalProperties: false), names
exactly the keys values.yaml documents, and Helm applies it before any template
runs: the error names the key, and nothing reaches the cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import helm_python as helm
import pytest
import yaml
from chart_harness import CHART_DIR, FAMILY_FILES, ChartRenderer, load_values_file

# Objects whose keys are the user's data (labels, annotations, resource names), typed by value.
OPEN_MAPS = frozenset({"#/definitions/stringMap", "#/definitions/resourceList"})
# Helm's own key for values shared with subcharts; Helm may add it to any chart's values.
HELM_OWNED = frozenset({"/properties/global"})


def load_schema() -> dict[str, Any]:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text(encoding="utf-8"))
    assert isinstance(schema, dict)
    return schema


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The node a "$ref": "#/definitions/..." points at."""
    target: dict[str, Any] = schema
    for part in node["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    return target


def object_nodes(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node that describes an object, with its JSON pointer."""
    if isinstance(node, dict):
        types = node.get("type")
        if types == "object" or (isinstance(types, list) and "object" in types):
            yield where, node
        for key, child in node.items():
            yield from object_nodes(child, f"{where}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from object_nodes(child, f"{where}/{index}")


def test_every_object_level_is_closed() -> None:
    schema = load_schema()
    for where, node in object_nodes(schema):
        if where in HELM_OWNED or f"#{where}" in OPEN_MAPS:
            continue
        if "properties" in node or where == "":
            assert node.get("additionalProperties") is False, f"{where or '/'} accepts unknown keys"
        else:
            assert isinstance(node.get("additionalProperties"), dict), f"{where}: a map needs a value type"


# Definitions shaped like Kubernetes objects: values.yaml shows an example, not every field.
KUBERNETES_SHAPES = frozenset(
    f"#/definitions/{name}"
    for name in ("affinity", "toleration", "envVar", "volume", "volumeMount", "nodeSelectorTerm")
)


def documented_keys(
    schema: dict[str, Any], node: dict[str, Any], value: Any, where: str, *, both_ways: bool = True
) -> Iterator[str]:
    """Mismatches between a values.yaml subtree and its schema node."""
    while "$ref" in node:
        both_ways = both_ways and node["$ref"] not in KUBERNETES_SHAPES
        node = resolve(schema, {"$ref": node["$ref"]})
    if isinstance(value, dict) and "properties" in node:
        keys, known = set(value), set(node["properties"])
        yield from (f"{where}/{key}: in values.yaml, not in the schema" for key in sorted(keys - known))
        if both_ways:
            yield from (f"{where}/{key}: in the schema, not in values.yaml" for key in sorted(known - keys))
        for key in sorted(keys & known):
            yield from documented_keys(
                schema, node["properties"][key], value[key], f"{where}/{key}", both_ways=both_ways
            )
    elif isinstance(value, list) and "items" in node:
        for index, item in enumerate(value):
            yield from documented_keys(schema, node["items"], item, f"{where}/{index}", both_ways=both_ways)


def test_values_yaml_documents_exactly_the_schemas_keys() -> None:
    """Every value has a default and a comment in values.yaml, and every value there is checked."""
    schema = load_schema()
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert list(documented_keys(schema, schema, defaults, "")) == [
        "/global: in the schema, not in values.yaml"
    ]


@pytest.mark.parametrize(
    ("values_yaml", "message"),
    [
        pytest.param(
            "imag:\n  tag: x\n", "at '': additional properties 'imag' not allowed", id="unknown key"
        ),
        pytest.param(
            "image:\n  tga: x\n", "at '/image': additional properties 'tga' not allowed", id="nested typo"
        ),
        pytest.param(
            "image: registry.example.com/adp:1\n", "at '/image': got string, want object", id="flat image"
        ),
        pytest.param("httpPort: '11251'\n", "at '/httpPort': got string, want integer", id="quoted port"),
        pytest.param("hostNetwork: 'yes'\n", "at '/hostNetwork': got string, want boolean", id="string bool"),
        pytest.param(
            "settings:\n  aiCoreMinimum: 1\n",
            "at '/settings': additional properties 'aiCoreMinimum' not allowed",
            id="setting typo",
        ),
        pytest.param(
            "settings:\n  healthInterval: fast\n",
            "at '/settings/healthInterval': got string, want null or number",
            id="setting type",
        ),
        pytest.param("settings:\n  healthInterval: 0\n", "at '/settings/healthInterval'", id="setting bound"),
        pytest.param(
            "settings:\n  logLevel: LOUD\n", "at '/settings/logLevel': value must be one of", id="enum"
        ),
        pytest.param(
            "settings:\n  dcmiLibrary: libdcmi.so\n", "at '/settings/dcmiLibrary'", id="relative library path"
        ),
        pytest.param(
            "hostFiles: [etc/hdcBasic.cfg]\n",
            "at '/hostFiles/0': 'etc/hdcBasic.cfg' does not match",
            id="relative file",
        ),
        pytest.param(
            "runtimeConfig:\n  faultLevels:\n    Separate: ['80E01801']\n",
            "at '/runtimeConfig/faultLevels': additional properties 'Separate' not allowed",
            id="fault level name",
        ),
        pytest.param(
            "runtimeConfig:\n  faultLevels:\n    SeparateNPU: ['0x80E01801G']\n",
            "at '/runtimeConfig/faultLevels/SeparateNPU/0'",
            id="fault code",
        ),
        pytest.param(
            "tolerations:\n  - key: huawei.com/Ascend310\n    efect: NoSchedule\n",
            "at '/tolerations/0': additional properties 'efect' not allowed",
            id="toleration typo",
        ),
        pytest.param(
            "extraVolumes:\n  - name: x\n    hostPath: {path: /a}\n    emptyDir: {}\n",
            "at '/extraVolumes/0'",
            id="volume with two sources",
        ),
        pytest.param(
            "updateStrategy:\n  maxUnavailable: 0\n", "at '/updateStrategy/maxUnavailable'", id="no progress"
        ),
        pytest.param("image:\n  pullPolicy: Sometimes\n", "at '/image/pullPolicy'", id="pull policy"),
        pytest.param(
            "image:\n  registry: https://registry.example.com\n",
            "at '/image/registry'",
            id="registry with scheme",
        ),
    ],
)
def test_a_bad_values_file_fails_with_helms_message(
    chart: ChartRenderer, values_yaml: str, message: str
) -> None:
    values = helm.values_from_yaml(values_yaml)
    with pytest.raises(helm.HelmValuesError) as raised:
        chart.render(values)
    assert message in str(raised.value)


@pytest.mark.parametrize("values_file", FAMILY_FILES.values())
def test_a_typo_in_a_family_file_fails_too(chart: ChartRenderer, values_file: str) -> None:
    values = load_values_file(values_file)
    values["settings"]["resourceNmae"] = values["settings"].pop("resourceName")
    with pytest.raises(helm.HelmValuesError, match="additional properties 'resourceNmae' not allowed"):
        chart.render(values)
