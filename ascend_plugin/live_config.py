"""LiveConfig: the settings in force, swapped atomically when they reload (config ConfigMap, SIGHUP).

A reload applies as a whole or not at all: a setting that may not change at run time (not ``RELOADABLE``)
refuses the whole change, and the old configuration stays. The fault configuration's inputs are
:class:`~ascend_plugin.fault_policy.policy.FaultSources`'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
from pydantic import ValidationError

from ascend_plugin.settings import RELOADABLE, Settings, SettingsError, describe_validation_error

log = logging.getLogger(__name__)

RELOAD_TIMEOUT = 5.0  # seconds a re-read of the config file may take before it is given up

ChangeListener = Callable[[list[str]], None]


class LiveConfig:
    """The configuration in force, and who to tell when it changes."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.startup_settings = settings
        self.overrides: dict[str, object] = {}  # the config ConfigMap's, over the start-up settings
        self._listeners: list[ChangeListener] = []

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener(changed names)`` after every change; return the way to stop."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def reloadable_at_startup(self) -> dict[str, object]:
        """The reloadable settings' start-up values: what a removed key returns to."""
        return {name: getattr(self.startup_settings, name) for name in RELOADABLE}

    def apply(self, overrides: Mapping[str, object]) -> list[str]:
        """Apply run-time overrides atomically; the settings that changed (SettingsError: none)."""
        refused = sorted(set(overrides) - RELOADABLE)
        if refused:
            allowed = ", ".join(sorted(RELOADABLE))
            raise SettingsError(
                f"settings {', '.join(refused)} cannot change at run time; allowed: {allowed}"
            )
        try:
            updated = Settings.model_validate({**self.settings.model_dump(), **overrides})
        except ValidationError as error:
            raise SettingsError(describe_validation_error(error)) from error
        changed = [
            name for name in sorted(overrides) if getattr(updated, name) != getattr(self.settings, name)
        ]
        self.settings = updated
        if changed:
            log.info("settings changed at run time: %s", ", ".join(changed), extra={"changed": changed})
            self._notify(changed)
        return changed

    def apply_overrides(self, overrides: Mapping[str, object]) -> list[str]:
        """Make ``overrides`` (the config ConfigMap) the run-time layer; settings it no longer names
        return to their start-up values.
        """
        changed = self.apply({**self.reloadable_at_startup(), **overrides})
        self.overrides = dict(overrides)
        return changed

    def rebase(self, base: Settings) -> list[str]:
        """Replace the start-up base (SIGHUP); SettingsError, refusing it all, as an override would."""
        moved: dict[str, Any] = {
            name: getattr(base, name)
            for name in Settings.model_fields
            if name not in RELOADABLE and getattr(base, name) != getattr(self.startup_settings, name)
        }
        reloadable = {name: getattr(base, name) for name in RELOADABLE}
        changed = self.apply({**moved, **reloadable, **self.overrides})
        self.startup_settings = base
        return changed

    async def reread_config_file(self, load: Callable[[], Settings]) -> bool:
        """SIGHUP: rebase on ``load()``, run on a worker thread within :data:`RELOAD_TIMEOUT` seconds.

        False (one line logged, nothing changed) without a config file, past the time, or on invalid settings.
        """
        path = self.startup_settings.config_file
        if path is None:
            log.warning("received SIGHUP, but no config file is set (config_file): nothing to re-read")
            return False
        source = f"config file {path}"
        try:
            with anyio.fail_after(RELOAD_TIMEOUT):
                settings = await anyio.to_thread.run_sync(load, abandon_on_cancel=True)
            changed = self.rebase(settings)
        except TimeoutError:
            log.error(
                "%s was not read within %g s (a file system that does not answer?); the current "
                "configuration stays",
                source,
                RELOAD_TIMEOUT,
                extra={"source": source},
            )
            return False
        except SettingsError as error:
            log.error(
                "%s refused, the current configuration stays: %s", source, error, extra={"source": source}
            )
            return False
        now = ", ".join(f"{name} is now {getattr(self.settings, name)!r}" for name in changed)
        log.info(
            "%s re-read: %s", source, now or "nothing changed", extra={"source": source, "changed": changed}
        )
        return True

    def _notify(self, changed: list[str]) -> None:
        for listener in list(self._listeners):
            listener(changed)
