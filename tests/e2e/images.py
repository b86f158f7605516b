"""The two container images a test pod needs, made here and imported into the test's containerd.

No registry is reachable, so the images are built as OCI image layouts (tar archives) from files on
this machine: the sandbox ("pause") image holds a static build of ``pause.c``, the test image holds
Debian's static busybox with a link per applet the tests use. ``ctr images import`` unpacks them
into containerd's ``k8s.io`` namespace, where the kubelet's CRI calls find them; test pods say
``imagePullPolicy: Never``.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

PAUSE_SOURCE = Path(__file__).with_name("pause.c")
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "ls", "env", "cat", "sleep", "echo", "stat", "test", "grep", "sort", "tr", "wc", "true")
PAUSE_IMAGE = "e2e.local/pause:1"
TEST_IMAGE = "e2e.local/busybox:1"

_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64"}


@dataclass(frozen=True)
class Image:
    """An image to build: its name, the files of its one layer and how it starts."""

    name: str
    files: dict[str, bytes]  # path in the image -> content (mode 0755)
    links: dict[str, str]  # path in the image -> link target
    entrypoint: list[str]


def _layer(image: Image) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders = {"bin", "dev", "etc", "proc", "sys", "tmp"}
        for folder in sorted(folders):
            entry = tarfile.TarInfo(folder)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(entry)
        for path, content in sorted(image.files.items()):
            entry = tarfile.TarInfo(path.lstrip("/"))
            entry.size, entry.mode = len(content), 0o755
            tar.addfile(entry, io.BytesIO(content))
        for path, target in sorted(image.links.items()):
            entry = tarfile.TarInfo(path.lstrip("/"))
            entry.type, entry.linkname = tarfile.SYMTYPE, target
            tar.addfile(entry)
    return buffer.getvalue()


def _blob(tar: tarfile.TarFile, content: bytes) -> dict[str, object]:
    digest = hashlib.sha256(content).hexdigest()
    entry = tarfile.TarInfo(f"blobs/sha256/{digest}")
    entry.size = len(content)
    tar.addfile(entry, io.BytesIO(content))
    return {"digest": f"sha256:{digest}", "size": len(content)}


def write_layout(image: Image, archive: Path) -> Path:
    """``image`` as an OCI image layout in one tar archive, named as containerd should list it."""
    architecture = _ARCHITECTURES.get(platform.machine(), platform.machine())
    layer = _layer(image)
    config = {
        "architecture": architecture,
        "os": "linux",
        "config": {"Entrypoint": image.entrypoint, "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    with tarfile.open(archive, mode="w") as tar:
        config_blob = _blob(tar, json.dumps(config).encode())
        layer_blob = _blob(tar, layer)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_blob},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_blob}],
        }
        manifest_blob = _blob(tar, json.dumps(manifest).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    **manifest_blob,
                    "platform": {"architecture": architecture, "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": image.name,
                        "org.opencontainers.image.ref.name": image.name.rsplit(":", 1)[1],
                    },
                }
            ],
        }
        for name, content in (("index.json", index), ("oci-layout", {"imageLayoutVersion": "1.0.0"})):
            data = json.dumps(content).encode()
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return archive


def pause_image(scratch: Path) -> Image:
    """The sandbox image: ``pause.c`` compiled statically with the system C compiler."""
    binary = scratch / "pause"
    done = subprocess.run(
        ["cc", "-static", "-O2", "-Wall", "-Werror", "-o", str(binary), str(PAUSE_SOURCE)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"compiling the pause program failed: {done.stderr}")
    return Image(PAUSE_IMAGE, {"/pause": binary.read_bytes()}, {}, ["/pause"])


def _interpreter(binary: bytes) -> bool:
    """Whether an ELF file names a dynamic loader (a PT_INTERP program header): not usable alone."""
    if binary[:4] != b"\x7fELF" or binary[4] != 2:  # 64-bit ELF only
        return True
    order = "little" if binary[5] == 1 else "big"
    table, size, count = (int.from_bytes(binary[at : at + n], order) for at, n in ((32, 8), (54, 2), (56, 2)))
    kinds = (int.from_bytes(binary[table + i * size : table + i * size + 4], order) for i in range(count))
    return 3 in kinds  # PT_INTERP


def busybox_image() -> Image:
    """A shell and the few tools the test pods run, from Debian's static busybox."""
    content = BUSYBOX.read_bytes() if BUSYBOX.exists() else b""
    if not content or _interpreter(content):
        raise RuntimeError(
            f"{BUSYBOX} is missing or not static: install Debian's busybox-static (.ci/run does)"
        )
    links = {f"/bin/{applet}": "busybox" for applet in APPLETS}
    return Image(TEST_IMAGE, {"/bin/busybox": content}, links, ["/bin/sh"])


def import_images(ctr: Path, address: Path, scratch: Path) -> None:
    """Build both images and import them into containerd's ``k8s.io`` namespace."""
    scratch.mkdir(parents=True, exist_ok=True)
    for image in (pause_image(scratch), busybox_image()):
        archive = write_layout(image, scratch / (image.name.replace("/", "_").replace(":", "_") + ".tar"))
        done = subprocess.run(
            [str(ctr), "--address", str(address), "-n", "k8s.io", "images", "import", str(archive)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ctr images import {archive} failed: {done.stdout}{done.stderr}")
