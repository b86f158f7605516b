"""The prepared claims, kept in a file in the plugin directory so that no restart forgets one.

A claim is written down before the kubelet hears it is prepared (``preparing`` before any vNPU is made).
A file that cannot be decoded is moved aside; one that cannot be read at all fails the start (retried).
docs/dra.md: "Claims", "A lost checkpoint".
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ascend_plugin.files import write_atomically
from ascend_plugin.path_facts import PathUnusable, file_kind

log = logging.getLogger(__name__)

FORMAT: Final = 2
_READABLE: Final = (1, 2)
PREPARING: Final = "preparing"  # written before its vNPUs are made; never answered to the kubelet
PREPARED: Final = "prepared"


class CheckpointError(PathUnusable):
    """The checkpoint file exists but does not hold prepared claims in our format."""


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of_uid(cls, uid: str) -> ClaimRef:
        """A claim known by its UID alone (rebuilt from its CDI spec): named so until the kubelet asks."""
        return cls("", f"with UID {uid}", uid)


@dataclass(frozen=True)
class OwnedVnpu:
    """A vNPU made for a claim's partition: its chip, its template, its id (None until it exists)."""

    phy_id: int
    template: str
    vdev_id: int | None = None


@dataclass(frozen=True)
class PreparedDevice:
    """A device prepared for a claim: what the kubelet was answered, and the vNPU made for it."""

    device: str
    requests: tuple[str, ...]
    cdi_ids: tuple[str, ...]
    admin_access: bool = False
    share_id: str | None = None  # one share of a device several claims are allocated
    vnpu: OwnedVnpu | None = None


@dataclass(frozen=True)
class PreparedClaim:
    """A claim the kubelet was told is prepared (or, ``preparing``, whose vNPUs are being made)."""

    ref: ClaimRef
    pool: str
    devices: tuple[PreparedDevice, ...]
    state: str = PREPARED
    # Rebuilt from its CDI spec after the checkpoint was lost: its namespace, name and requests are
    # unknown until the kubelet asks again (the claim is then read from the API server).
    recovered: bool = False

    @property
    def vnpus(self) -> list[OwnedVnpu]:
        return [device.vnpu for device in self.devices if device.vnpu is not None]

    @property
    def lost(self) -> list[OwnedVnpu]:
        """The vNPUs of a prepared claim that are gone (destroyed outside the plugin): their ids forgotten."""
        return [vnpu for vnpu in self.vnpus if vnpu.vdev_id is None] if self.state == PREPARED else []


def _device_json(device: PreparedDevice) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "device": device.device,
        "requests": list(device.requests),
        "cdiDeviceIDs": list(device.cdi_ids),
        "adminAccess": device.admin_access,
    }
    if device.share_id is not None:
        entry["shareID"] = device.share_id
    if device.vnpu is not None:
        entry["vnpu"] = {
            "chip": device.vnpu.phy_id,
            "template": device.vnpu.template,
            "id": device.vnpu.vdev_id,
        }
    return entry


def _claim_json(claim: PreparedClaim) -> dict[str, Any]:
    return {
        "namespace": claim.ref.namespace,
        "name": claim.ref.name,
        "pool": claim.pool,
        "state": claim.state,
        "devices": [_device_json(device) for device in claim.devices],
        **({"recovered": True} if claim.recovered else {}),
    }


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CheckpointError(f"{where} must be a list of strings, got {value!r}")
    return tuple(value)


def _string(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str):
        raise CheckpointError(f"{where}.{key} must be a string, got {value!r}")
    return value


def _vnpu(value: object, where: str) -> OwnedVnpu | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CheckpointError(f"{where} must be an object, got {value!r}")
    chip, vdev_id = value.get("chip"), value.get("id")
    if not isinstance(chip, int) or isinstance(chip, bool):
        raise CheckpointError(f"{where}.chip must be a physical id, got {chip!r}")
    if vdev_id is not None and (not isinstance(vdev_id, int) or isinstance(vdev_id, bool)):
        raise CheckpointError(f"{where}.id must be a vNPU id or null, got {vdev_id!r}")
    return OwnedVnpu(chip, _string(value, "template", where), vdev_id)


def _device(device: object, at: str) -> PreparedDevice:
    if not isinstance(device, dict):
        raise CheckpointError(f"{at} must be an object, got {device!r}")
    share_id = device.get("shareID")
    if share_id is not None and not isinstance(share_id, str):
        raise CheckpointError(f"{at}.shareID must be a string, got {share_id!r}")
    return PreparedDevice(
        _string(device, "device", at),
        _strings(device.get("requests"), f"{at}.requests"),
        _strings(device.get("cdiDeviceIDs"), f"{at}.cdiDeviceIDs"),
        device.get("adminAccess") is True,
        share_id,
        _vnpu(device.get("vnpu"), f"{at}.vnpu"),
    )


def _claim(uid: str, entry: object) -> PreparedClaim:
    where = f"claim {uid}"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where} must be an object, got {entry!r}")
    devices = entry.get("devices")
    if not isinstance(devices, list):
        raise CheckpointError(f"{where}.devices must be a list, got {devices!r}")
    prepared = tuple(_device(device, f"{where}.devices[{index}]") for index, device in enumerate(devices))
    state = entry.get("state", PREPARED)
    if state not in (PREPARING, PREPARED):
        raise CheckpointError(f"{where}.state must be {PREPARING!r} or {PREPARED!r}, got {state!r}")
    ref = ClaimRef(_string(entry, "namespace", where), _string(entry, "name", where), uid)
    return PreparedClaim(ref, _string(entry, "pool", where), prepared, state, entry.get("recovered") is True)


def parse(text: str) -> dict[str, PreparedClaim]:
    """The prepared claims by UID in a checkpoint's text; CheckpointError says what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise CheckpointError(f"not JSON: {error}") from None
    except RecursionError:
        raise CheckpointError("not JSON this plugin can read: nested too deeply") from None
    if not isinstance(data, dict) or data.get("format") not in _READABLE:
        raise CheckpointError(f"not a checkpoint of format 1 or {FORMAT} (an object with format: {FORMAT})")
    claims = data.get("claims")
    if not isinstance(claims, dict):
        raise CheckpointError(f"claims must be an object of claims by UID, got {claims!r}")
    return {uid: _claim(uid, entry) for uid, entry in claims.items()}


def render(claims: Mapping[str, PreparedClaim]) -> str:
    content = {"format": FORMAT, "claims": {uid: _claim_json(claims[uid]) for uid in sorted(claims)}}
    return json.dumps(content, indent=1, sort_keys=True) + "\n"


class Checkpoint:
    """The checkpoint file ``path``: read once at start, rewritten atomically on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lost = ""  # why the last load found no usable checkpoint where one was (moved aside)

    @property
    def temporary(self) -> Path:
        """Where a new checkpoint is written before it replaces the old (``files.write_atomically``)."""
        return self.path.with_name(f".{self.path.name}.tmp")

    def load(self) -> dict[str, PreparedClaim]:
        """The prepared claims (none without a file); what cannot be decoded is moved aside, a crash's
        temporary file removed. PathUnusable when the file cannot be read or moved: the start is retried."""
        self._remove_temporary()
        self.lost = ""
        try:
            claims = self.read()
        except FileNotFoundError:
            return {}
        except CheckpointError as error:
            self._move_aside(error)
            self.lost = str(error)
            return {}
        except OSError as error:
            raise PathUnusable(
                f"cannot read the prepared-claims checkpoint {self.path}: {error.strerror or error}"
            ) from error
        return claims

    def read(self) -> dict[str, PreparedClaim]:
        """The prepared claims, changing nothing (``doctor`` reads it so); CheckpointError for what
        :meth:`load` moves aside (not UTF-8 text, bad content), OSError for a file missing or unreadable."""
        try:
            mode = os.stat(self.path).st_mode
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise CheckpointError("a symbolic link that leads nowhere (a loop)") from None
            raise
        if not stat.S_ISREG(mode):  # a directory, a FIFO (reading it would block), a socket, a device
            raise CheckpointError(f"not a regular file but {file_kind(mode)}")
        data = self.path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CheckpointError(
                f"not UTF-8 text (byte {error.start} is 0x{data[error.start]:02x})"
            ) from None
        return parse(text)

    def _remove_temporary(self) -> None:
        """Remove the half-written temporary file of a write a crash cut short (a file only: a directory
        there is someone else's); said once. One that cannot be removed is said, and the next write fails."""
        temporary = self.temporary
        try:
            if not (temporary.is_symlink() or temporary.is_file()):
                return
            temporary.unlink()
        except OSError as error:
            log.error(
                "cannot remove %s, left by a write of the checkpoint that did not finish: %s",
                temporary,
                error,
            )
            return
        log.warning(
            "removed %s: a write of the checkpoint did not finish (the plugin stopped during it); the "
            "checkpoint itself is whole",
            temporary,
            extra={"checkpoint": str(self.path)},
        )

    def _move_aside(self, error: CheckpointError) -> None:
        stamp = f"{self.path.name}.bad-{time.strftime('%Y%m%dT%H%M%S')}"
        aside = self.path.with_name(stamp)
        number = 0
        while aside.exists() or aside.is_symlink():  # never over an earlier one moved aside
            number += 1
            aside = self.path.with_name(f"{stamp}-{number}")
        try:
            os.replace(self.path, aside)
        except OSError as failure:
            raise PathUnusable(
                f"the prepared-claims checkpoint {self.path} is unusable ({error}) and cannot be moved "
                f"aside to {aside.name}: {failure.strerror or failure}"
            ) from failure
        log.error(
            "the prepared-claims checkpoint %s is unusable (%s); moved it to %s: the prepared claims are "
            "rebuilt from their CDI specs, and no vNPU or spec is removed that a spec names",
            self.path,
            error,
            aside,
            extra={"checkpoint": str(self.path), "moved_to": str(aside), "problem": str(error)},
        )

    def save(self, claims: Mapping[str, PreparedClaim]) -> None:
        """Write ``claims`` so that the file is always either the old or the new content (blocking)."""
        write_atomically(self.path, render(claims), durable=True)
