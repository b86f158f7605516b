"""Build the Go reference plugin of bench/go_reference/ offline, in a scratch directory of its own.

No Go module proxy is needed: the kubelet API's Go code is generated from
proto/deviceplugin.proto with Debian's protoc-gen-go and protoc-gen-go-grpc,
the DCMI declarations are the binding's own (backends/dcmi/build_ffi.py, as the
C fake library is compiled against them), and the build runs in GOPATH mode over
Debian's packaged Go libraries in /usr/share/gocode. Builds are cached by a hash
of everything that goes into them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "bench" / "go_reference" / "main.go"
PROTO = ROOT / "proto" / "deviceplugin.proto"
GOPATH_SYSTEM = Path("/usr/share/gocode")
BUILD_ROOT = Path(tempfile.gettempdir()) / "adp-bench-go-reference"
PACKAGE = "adpbench"
# grpc-go's codec goes through github.com/golang/protobuf: its 1.5 package wraps the messages
# protoc-gen-go generates; the older 1.3 one cannot read them.
DEBIAN_PACKAGES = (
    "golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev "
    "protoc-gen-go protoc-gen-go-grpc protobuf-compiler"
)
GRPC = GOPATH_SYSTEM / "src" / "google.golang.org" / "grpc" / "version.go"
GOLANG_PROTOBUF = GOPATH_SYSTEM / "src" / "github.com" / "golang" / "protobuf" / "proto" / "registry.go"


class GoUnavailable(Exception):
    """The Go reference cannot be built here; the message says what is missing."""


def _header() -> str:
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_dcmi.build import _header as fake_header

    return fake_header()


def _tools() -> dict[str, str]:
    found = {tool: shutil.which(tool) for tool in ("go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc")}
    missing = [tool for tool, path in found.items() if path is None]
    if not GRPC.exists():
        missing.append(f"grpc-go in {GOPATH_SYSTEM}")
    if not GOLANG_PROTOBUF.exists():
        missing.append(f"github.com/golang/protobuf 1.4 or later in {GOPATH_SYSTEM}")
    if missing:
        raise GoUnavailable(f"no {', '.join(missing)}: install Debian's {DEBIAN_PACKAGES} (apt-get install)")
    return {tool: str(path) for tool, path in found.items()}


def _run(command: list[str], env: dict[str, str], cwd: Path) -> None:
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise GoUnavailable(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")


def build_go_plugin() -> Path:
    """The path of the built Go reference plugin; GoUnavailable (saying why) when it cannot be built."""
    tools = _tools()
    version = subprocess.run([tools["go"], "version"], capture_output=True, text=True, check=False).stdout
    header = _header()
    recipe = "\0".join([SOURCE.read_text(), PROTO.read_text(), header, version, GRPC.read_text()])
    work = BUILD_ROOT / hashlib.sha256(recipe.encode()).hexdigest()[:16]
    binary = work / "go-plugin"
    if binary.exists():
        return binary
    api = work / "src" / PACKAGE / "v1beta1"
    main = work / "src" / PACKAGE / "plugin"
    api.mkdir(parents=True, exist_ok=True)
    main.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": f"{work}:{GOPATH_SYSTEM}",
        "GOCACHE": str(work / "cache"),
        "GOFLAGS": "",
        "CGO_ENABLED": "1",
    }
    mapping = f"M{PROTO.name}={PACKAGE}/v1beta1"
    _run(
        [
            tools["protoc"], f"-I{PROTO.parent}",
            f"--go_out={api}", "--go_opt=paths=source_relative", f"--go_opt={mapping}",
            f"--go-grpc_out={api}", "--go-grpc_opt=paths=source_relative", f"--go-grpc_opt={mapping}",
            str(PROTO),
        ],
        env,
        work,
    )  # fmt: skip
    shutil.copy(SOURCE, main / "main.go")
    (main / "dcmi_cdef.h").write_text(header)
    _run([tools["go"], "build", "-o", str(binary.with_suffix(".tmp")), f"{PACKAGE}/plugin"], env, work)
    os.replace(binary.with_suffix(".tmp"), binary)
    return binary
