"""The committed kubelet API code is exactly what proto/ compiles to."""

from __future__ import annotations

import filecmp
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_generator() -> object:
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _files(root: Path) -> dict[str, Path]:
    return {
        str(path.relative_to(root)): path
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_committed_kubelet_api_matches_a_fresh_generation(tmp_path: Path) -> None:
    generator = _load_generator()
    generator.generate(tmp_path)  # type: ignore[attr-defined]
    fresh, committed = _files(tmp_path), _files(ROOT / "ascend_plugin" / "kubelet_api")
    assert sorted(fresh) == sorted(committed), "run `nox -s proto` to regenerate"
    stale = [name for name in fresh if not filecmp.cmp(fresh[name], committed[name], shallow=False)]
    assert stale == [], f"stale generated files {stale}: run `nox -s proto`"


def test_the_package_is_v1beta1() -> None:
    from ascend_plugin.kubelet_api.v1beta1 import DevicePluginBase

    assert "/v1beta1.DevicePlugin/Allocate" in DevicePluginBase().__mapping__()


def test_the_pod_resources_packages_are_v1_and_v1alpha1() -> None:
    """The kubelet serves PodResources under the proto packages' own names."""
    from ascend_plugin.kubelet_api.v1 import PodResourcesListerBase as V1
    from ascend_plugin.kubelet_api.v1alpha1 import PodResourcesListerBase as V1Alpha1

    assert set(V1().__mapping__()) == {
        "/v1.PodResourcesLister/List",
        "/v1.PodResourcesLister/GetAllocatableResources",
        "/v1.PodResourcesLister/Get",
    }
    assert set(V1Alpha1().__mapping__()) == {"/v1alpha1.PodResourcesLister/List"}
