"""Checks of libdcmi.so: found, trusted, glibc new enough, loadable.

The binding's own steps (:mod:`backends.dcmi.loader`): loaded only if the plugin would load it.
"""

from __future__ import annotations

from pathlib import Path

from ascend_plugin.chip_calls import NODE, ChipCallError
from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import DoctorError, Finding, Guide, NotApplicable, how_to_set, unmet
from ascend_plugin.doctor.glibc import format_version, newest_glibc_needed, running_glibc
from backends.dcmi import loader
from backends.dcmi._dcmi_cffi import ffi
from backends.errors import LibraryUnavailable

FOUND = "dcmi-library"
TRUST = "dcmi-library-trust"
GLIBC = "dcmi-library-glibc"
LOADS = "dcmi-library-loads"

_NOT_USED = "the fake backend is selected; no libdcmi.so is used"
_LOAD_ERRORS = "docs/deployment.md#troubleshooting"


def _located(context: Context) -> Path:
    """The library to check; the fake backend has none, which skips these checks."""
    if context.settings.backend == "fake":
        raise NotApplicable(_NOT_USED)
    return context.need(context.library_path, FOUND)


@check(FOUND)
async def library_found(context: Context) -> Finding:
    """Found where the binding looks: the configured path, else LD_LIBRARY_PATH, else the install paths."""
    if context.settings.backend == "fake":
        raise NotApplicable(_NOT_USED)
    configured = context.settings.dcmi_library
    try:
        if configured is not None:
            path = loader.locate(context.host(str(configured)))
            how = "the dcmi_library setting"
        else:
            searched = [context.host(str(candidate)) for candidate in loader.candidates(context.environ)]
            path = loader.locate(None, environ={}, known=searched)
            how = "the binding's search: LD_LIBRARY_PATH, then the install paths"
    except loader.LibraryNotFound as error:
        return Finding.problem(
            FOUND,
            str(error),
            fix="install the Ascend driver and mount it into the pod (Helm driver.hostPath; on 310B boards "
            "the library is the board's /usr/lib64/libdcmi.so, which values-310b.yaml mounts), or set "
            f"{how_to_set('dcmi_library', '<path>')}",
        )
    context.library_path = path
    return Finding.ok(FOUND, f"{path} (from {how})")


@check(TRUST)
async def library_trusted(context: Context) -> Finding:
    """Owned by root and writable by nobody else, with every directory above it (the binding's rule)."""
    path = _located(context)
    try:
        loader.check_trusted(path)
    except loader.UntrustedLibrary as error:
        if context.settings.dcmi_allow_untrusted_library:
            context.library_may_load = True
            return Finding.skipped(
                TRUST,
                f"not enforced: dcmi_allow_untrusted_library is set (development only), and {error.problem}",
            )
        return Finding.problem(
            TRUST,
            f"the plugin refuses {path}: {error.problem}. A library that a non-root user can replace "
            "would run with the plugin's privileges",
            fix="make the file and each directory above it owned by root and writable only by root "
            "(chown root:root, chmod go-w on the one named); for development only, "
            f"set {how_to_set('dcmi_allow_untrusted_library', True)}",
        )
    context.library_may_load = True
    return Finding.ok(
        TRUST, f"{path} and every directory above it are owned by root, writable by no one else"
    )


@check(GLIBC)
async def library_glibc(context: Context) -> Finding:
    """The newest glibc symbol version the library needs is one this process's glibc has."""
    path = _located(context)
    running = running_glibc()
    if running is None:
        return Finding.skipped(GLIBC, "this process does not run on glibc (or cannot tell its version)")
    try:
        need = newest_glibc_needed(path)
    except (DoctorError, OSError) as error:
        return Finding.problem(
            GLIBC,
            f"cannot read what {path} needs: {error}",
            fix="make sure the file is the driver's libdcmi.so for this machine's architecture "
            "(`file` on it); reinstall the driver if it is damaged",
        )
    have = format_version(running)
    if need is None:
        return Finding.ok(GLIBC, f"{path} needs no versioned glibc symbol; this process has glibc {have}")
    if need.version > running:
        return Finding.problem(
            GLIBC,
            f"{need.needed_by} needs glibc {need.text} (symbol version GLIBC_{need.text}) but this process "
            f"runs on glibc {have}: it cannot load here",
            fix=f"use an image whose glibc is {need.text} or newer; or, where the host's own glibc is, "
            "start the plugin under the host's dynamic loader (Helm hostLoader.enabled=true, see "
            "docs/deployment.md). Never put the host's libc on LD_LIBRARY_PATH: two glibcs in one "
            "process end in SIGBUS (exit code 135)",
            see=Guide.GLIBC,
        )
    return Finding.ok(GLIBC, f"{path} needs glibc {need.text} at most; this process has glibc {have}")


@check(LOADS)
async def library_loads(context: Context) -> Finding:
    """dlopen with every symbol resolved, loading its dependencies from its directory as the binding does."""
    path = _located(context)
    if not context.library_may_load:
        raise unmet(TRUST)
    trusted_only = not context.settings.dcmi_allow_untrusted_library
    try:
        handle = await context.calls.call(
            NODE, "dlopen", lambda: loader.open_library(path, trusted_only=trusted_only)
        )
    except (LibraryUnavailable, ChipCallError) as error:
        return _load_failed(path, error)
    await context.calls.call(NODE, "dlclose", ffi.dlclose, handle)
    context.library_loads = True
    return Finding.ok(LOADS, f"{path} loads, with every symbol of it and its dependencies resolved")


def _load_failed(path: Path, error: Exception) -> Finding:
    """The loader's words, and the fix for the usual causes."""
    message = str(error)
    if isinstance(error, loader.UntrustedLibrary):
        fix = "make the dependency named root's alone (chown root:root, chmod go-w)"
    elif "GLIBC_" in message:
        return Finding.problem(
            LOADS,
            message,
            fix="the library needs a newer glibc than this process has: see the dcmi-library-glibc finding",
            see=Guide.GLIBC,
        )
    elif "cannot open shared object file" in message:
        fix = (
            f"a library {path.name} needs is neither beside it nor on the loader's path: run `ldd` on it "
            f"on the host and see the 310B dependency row of {_LOAD_ERRORS}"
        )
    else:
        fix = f"see {_LOAD_ERRORS}; `ldd` on the library, on the host, shows what it lacks"
    return Finding.problem(LOADS, message, fix=fix)
