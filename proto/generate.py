"""Compile proto/*.proto into ascend_plugin/kubelet_api with betterproto2 (async client + server).

Each proto package becomes a subpackage named after it: ``v1beta1`` (the
device-plugin API), ``v1`` and ``v1alpha1`` (the kubelet's PodResources API).

Run through ``nox -s proto``; the test suite calls :func:`generate` into a
temporary directory and fails when the committed code differs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
TARGET = PROTO_DIR.parent / "ascend_plugin" / "kubelet_api"


def generate(out_dir: Path) -> None:
    """Write the generated package for every .proto file into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # protoc finds the betterproto2 plugin (protoc-gen-python_betterproto2) on PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"--python_betterproto2_out={out_dir}",
            "--python_betterproto2_opt=client_generation=async,server_generation=async",
            *sorted(str(path) for path in PROTO_DIR.glob("*.proto")),
        ],
        check=True,
        env=env,
        capture_output=True,
    )


if __name__ == "__main__":
    generate(TARGET)
    print(f"generated {TARGET}")
