"""Checks of what the driver's user space needs from the host: its files and its shared memory (310B boards).

The lists are those values-310b.yaml mounts (a test keeps them in step).
"""

from __future__ import annotations

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, Guide, NotApplicable
from backends.families import FamilyTable, HostFile

HOST_FILES_CHECK = "host-files"
SHM = "dev-shm"


_DIRECTORY_FIX = (
    "mount it into the pod as a hostPath of type File, read-only (Helm hostFiles; values-310b.yaml lists "
    "all six). If the host itself has an empty directory there, a hostPath mounted without type: File "
    "created it: remove it (rmdir) and restore the driver's file"
)
_MISSING_FIX = (
    "mount it from the host as a hostPath of type File (Helm hostFiles). If the host lacks it, the driver "
    "install is incomplete; if this board has no such file at all, remove it from hostFiles, or the pod's "
    "MountVolume fails"
)


def _family(context: Context) -> FamilyTable:
    if context.family is None:
        raise NotApplicable(
            "not checked: the chip family is unknown (chip-family did not pass); "
            "--chip-family 310B checks a 310B board's files regardless"
        )
    return context.table


@check(HOST_FILES_CHECK)
async def host_files(context: Context) -> list[Finding]:
    """Each host file the family needs is a regular file (never a directory: a hostPath of the wrong type)."""
    table = _family(context)
    wanted = table.host_files
    if not wanted:
        raise NotApplicable(f"the {table.family} family needs no host files")
    return [_host_file(context, item) for item in wanted]


def _host_file(context: Context, item: HostFile) -> Finding:
    name = f"host-file:{item.path}"
    path = context.host(item.path)
    if path.is_file():
        return Finding.ok(name, f"{path} is a file ({item.role})")
    if path.is_dir():
        return Finding.problem(
            name,
            f"{path} is a directory, not the file the driver needs ({item.role}); a hostPath volume of the "
            "wrong type shows up as an empty directory",
            fix=_DIRECTORY_FIX,
            see=Guide.BOARD_FILES,
        )
    there = path.exists()  # as something else than a file or a directory
    detail = (
        f"{path} is not a regular file ({item.role})" if there else f"{path} does not exist ({item.role})"
    )
    return Finding.problem(name, detail, fix=_DIRECTORY_FIX if there else _MISSING_FIX, see=Guide.BOARD_FILES)


@check(SHM)
async def shared_memory(context: Context) -> Finding:
    """The host's /dev/shm, recognised by dmp_daemon's files in it (an emptyDir has none)."""
    table = _family(context)
    wanted = table.shm_markers
    if not wanted:
        raise NotApplicable(f"the {table.family} family's driver keeps nothing in /dev/shm")
    missing = [path for path in wanted if not context.host(path).exists()]
    if missing:
        return Finding.problem(
            SHM,
            f"{', '.join(str(context.host(path)) for path in missing)} not found: this is not the host's "
            "/dev/shm, or dmp_daemon is not running; DCMI then fails with 'dm_send_msg fail:2'",
            fix="mount the host's /dev/shm into the pod as a hostPath, never an emptyDir (the chart always "
            "does); on the host, check that dmp_daemon runs (`ps -e | grep dmp_daemon`): it creates them",
            see=Guide.SHARED_MEMORY,
        )
    shown = " and ".join(str(context.host(path)) for path in wanted)
    return Finding.ok(SHM, f"the host's /dev/shm: dmp_daemon's {shown} are visible")
