"""Where the fault configuration in force came from, in one line an operator can read.

The fault-config watcher logs it on every change and ``doctor`` shows it:
each part (``faultCode.json``, ``faultCustomization.json``, ``PollInterval``,
and the plugin's own overlay where there is one) with the file or ConfigMap
key it was read from.
"""

from __future__ import annotations

from ascend_plugin.fault_policy.config import POLL_INTERVAL_KEY, FaultConfig

_PARTS = ("faultCode.json", "faultCustomization.json")


def origin(config: FaultConfig) -> str:
    """Each part and its source: ``faultCode.json from <source>; ...; PollInterval N s (<source>)``."""
    parts = [f"{part} from {config.sources[part]}" for part in _PARTS if part in config.sources]
    interval_source = config.sources.get(POLL_INTERVAL_KEY, "default")
    parts.append(f"{POLL_INTERVAL_KEY} {config.poll_interval} s ({interval_source})")
    overlay = config.sources.get("overlay")
    if overlay:
        parts.append(f"levels changed by {overlay}")
    return "; ".join(parts)
