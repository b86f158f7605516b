"""One raw gRPC call from a process of another uid, for the tests of who a socket answers.

The client runs under setpriv as ``uid``, with the capability to read any file
(the interpreter may live where only root reads). With ``open_any_file`` it
may also write any file, as root in another container may: connecting to a
unix socket needs write permission on it, so only such a client gets past
the socket's mode to the plugin's own check of its peer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

_CLIENT = """
import json, sys, grpc
socket, method, payload = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
channel = grpc.insecure_channel("unix:" + socket)
try:
    print(json.dumps({"code": "OK", "answer": channel.unary_unary(method)(payload, timeout=10).hex()}))
except grpc.RpcError as error:
    print(json.dumps({"code": error.code().name, "details": error.details()}))
channel.close()
"""


def call_as(uid: int, socket: Path, method: str, payload: bytes, *, open_any_file: bool) -> dict[str, Any]:
    """The call's status code and details (or ``answer``: the reply's bytes, hex) as ``uid`` made it."""
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) runs the client as another uid"
    caps = "+dac_read_search" + (",+dac_override" if open_any_file else "")
    done = subprocess.run(
        [
            setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            f"--inh-caps={caps}", f"--ambient-caps={caps}",
            sys.executable, "-c", _CLIENT, str(socket), method, payload.hex(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd="/",
    )  # fmt: skip
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer
