"""The build: the Dockerfile as an operator behind a proxy would build it.

Inside the build the package index is reached the way pip reaches it on this
machine: the same index URL (when one is configured) and the same CA bundle,
which a TLS-intercepting proxy makes necessary. The bundle goes in as the
``ca-bundle`` build secret, so it never lands in a layer. Builds use the
host's network: a dockerd started here has no bridge. A foreign platform's
build runs its RUN steps under qemu (emulation.py); the builder stage has no
compiler, so every dependency must come as a wheel for that platform.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from image_check.base_image import Base
from image_check.clock import Clock
from image_check.engine import Engine, EngineError

BUILD_TIMEOUT = 420.0


def _pip_config() -> dict[str, str]:
    """pip's configuration here as ``{key: value}`` (``global.cert``, ``:env:.index-url``, ...)."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    return {match[1]: match[2] for match in re.finditer(r"^(\S+?)='(.*)'$", listing, re.MULTILINE)}


def _configured(config: dict[str, str], option: str) -> list[str]:
    """The values pip has for ``option``, environment first, then the config files."""
    return [value for key, value in sorted(config.items(), key=lambda item: not item[0].startswith(":env:"))
            if key.rpartition(".")[2] == option]  # fmt: skip


def ca_bundle(explicit: Path | None) -> tuple[Path | None, str]:
    """The CA bundle pip uses here, and where it was found; None when pip uses its own."""
    if explicit is not None:
        return explicit, "--ca-bundle"
    # Strongest first: pip's own option, its configuration, then what requests and ssl honour.
    candidates = [
        (os.environ.get("PIP_CERT", ""), "$PIP_CERT"),
        *((value, "pip config cert") for value in _configured(_pip_config(), "cert")),
        (os.environ.get("REQUESTS_CA_BUNDLE", ""), "$REQUESTS_CA_BUNDLE"),
        (os.environ.get("SSL_CERT_FILE", ""), "$SSL_CERT_FILE"),
    ]
    for value, source in candidates:
        if value and Path(value).is_file():
            return Path(value), source
    return None, "none configured: pip's own CA certificates"


def index_url(explicit: str | None) -> tuple[str | None, str]:
    """The package index pip uses here when it is not the default one and a build can reach it."""
    if explicit is not None:
        return explicit, "--index-url"
    for value in [os.environ.get("PIP_INDEX_URL", ""), *_configured(_pip_config(), "index-url")]:
        if value.startswith(("http://", "https://")):
            return value, "pip's configuration"
    return None, "pip's default (https://pypi.org/simple)"


def build(
    engine: Engine,
    context: Path,
    tag: str,
    *,
    base: Base,
    ca: Path | None,
    index: str | None,
    clock: Clock,
) -> None:
    """Build ``tag`` from the Dockerfile in ``context``, for the engine's platform; output streams to ours."""
    args = ["build", "--network=host", "--tag", tag]
    if engine.platform is not None:
        args += ["--platform", engine.platform]
    args += [option for arg in base.build_args for option in ("--build-arg", arg)]
    if index is not None:
        args += ["--build-arg", f"PIP_INDEX_URL={index}"]
    if ca is not None:
        args += ["--secret", f"id=ca-bundle,src={ca}"]
    command = engine.command(*args, str(context))
    clock.say(f"building: {' '.join(command)}")
    try:
        result = subprocess.run(
            command, env={**os.environ, **engine.env}, timeout=clock.budget(BUILD_TIMEOUT), check=False
        )
    except subprocess.TimeoutExpired as error:
        raise EngineError(f"the build did not finish within {error.timeout:.0f} s") from None
    if result.returncode != 0:
        raise EngineError(f"the build failed (exit code {result.returncode}); its output is above")
    if not engine.has_image(tag, clock):  # what a manifest list would file it under, and nodes pull by
        found = engine.run("image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", tag, clock=clock)
        raise EngineError(f"the build gave {tag} for {found.stdout.strip()}, not {engine.platform}")
