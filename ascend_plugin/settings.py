"""The plugin's settings: defaults < config file < environment < command line (docs/configuration.md).

Invalid values raise :class:`SettingsError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import difflib
import functools
import os
import reprlib
import stat
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import annotated_types
from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from ascend_plugin.naming import extended_resource_problem

ENV_PREFIX = "ASCEND_DP_"
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class SettingsError(Exception):
    """Root of the configuration errors: the setting, its value and what is allowed. At start the command
    exits with code 2; while running, the configuration in force stays."""


def _split_list(value: object) -> object:
    """Lists come as YAML/JSON lists from files and as "a,b,c" from flags and env."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class _Reloadable:
    """Marks a setting that may change while the plugin runs (config ConfigMap, SIGHUP)."""

    def __repr__(self) -> str:
        return "Reloadable"


RELOADABLE_SETTING: Final = _Reloadable()


def _one_face(value: object) -> object:
    """``serve`` names one face: both at once would offer every chip twice to the scheduler."""
    named = _split_list(value)
    if not isinstance(named, list | tuple):
        return value
    if len(named) > 1 or any(name in ("both", "all") for name in named):
        raise ValueError(
            f"serve takes one face, 'device-plugin' or 'dra', not {value!r}: serving both would let the "
            "scheduler count every chip twice (once as an extended resource, once through DRA)"
        )
    return named[0] if named else value


PathList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_split_list)]
Seconds = Annotated[float, Field(gt=0, le=3600)]


class Settings(BaseSettings):
    """Everything an operator can tune."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    config_file: Path | None = Field(
        default=None, description="YAML or JSON file with settings (keys as the field names)"
    )

    # -- chips ----------------------------------------------------------------
    backend: Literal["dcmi", "fake"] = Field(
        default="dcmi", description="dcmi: Huawei's libdcmi.so; fake: a scenario file"
    )
    fake_scenario: Path | None = Field(default=None, description="scenario file of the fake backend")
    dcmi_library: Path | None = Field(
        default=None, description="path of libdcmi.so; default: LD_LIBRARY_PATH, then the known install paths"
    )
    dcmi_allow_untrusted_library: bool = Field(
        default=False,
        description="accept a libdcmi.so not owned by root or writable by others (development only)",
    )
    dcmi_call_timeout: Seconds = Field(
        default=5.0, description="seconds a DCMI call may take before its chips count as hung"
    )
    chip_family: Literal["310", "310B", "310P", "910", "950"] | None = Field(
        default=None, description="force the chip family instead of detecting it from the chip name"
    )

    # -- family table overrides ----------------------------------------------------
    resource_name: str | None = Field(
        default=None, description="extended resource name, e.g. huawei.com/Ascend310"
    )
    device_id_prefix: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,40}$",
        description="device ID prefix, e.g. Ascend310",
    )
    ai_core_min: float | None = Field(
        default=None, ge=0, description="lowest plausible AI-core count per chip"
    )
    ai_core_max: float | None = Field(
        default=None, ge=0, description="highest plausible AI-core count per chip"
    )
    manager_nodes: PathList | None = Field(
        default=None, description="manager device node candidates, best first (comma-separated)"
    )
    shared_nodes: PathList | None = Field(
        default=None, description="shared device nodes handed over when present (comma-separated)"
    )
    driver_mounts: PathList | None = Field(
        default=None, description="host paths mounted read-only in device mode when present (comma-separated)"
    )

    # -- kubelet ----------------------------------------------------------------------
    device_plugin_path: Path = Field(
        default=Path("/var/lib/kubelet/device-plugins"), description="the kubelet's device-plugin directory"
    )
    socket_name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][-A-Za-z0-9_.]*\.sock$",
        description="our socket's file name in that directory; default: <resource>.sock",
    )
    kubelet_watch_interval: Annotated[float, Field(gt=0, le=5)] = Field(
        default=0.1,
        description="seconds between looks for a kubelet restart where inotify cannot watch the kubelet's "
        "socket directories (with inotify a change is seen at once; they are looked at every 10 s anyway)",
    )
    preferred_allocation: bool = Field(
        default=True,
        description="answer the kubelet's GetPreferredAllocation from the chips' topology "
        "(rings, cards, NUMA); off: the kubelet picks devices itself",
    )
    allocate_mode: Literal["auto", "device", "runtime", "cdi"] = Field(
        default="auto",
        description="auto: runtime if ASCEND_DOCKER_RUNTIME=True in our own env, else device; "
        "cdi: CDI device names, from a spec written to cdi_spec_dir",
    )
    cdi_spec_dir: Path = Field(
        default=Path("/var/run/cdi"),
        description="where the CDI spec is written in cdi mode (the runtime's dynamic dir)",
    )
    cdi_kind: str = Field(
        default="huawei.com/npu",
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?$",
        description="CDI kind (vendor/class) of the devices; names are <kind>=<physical id> "
        "and <kind>=vnpu-<id>",
    )
    host_root: Path = Field(default=Path("/"), description="where the host's file system is visible")

    # -- health -------------------------------------------------------------------------
    health_interval: Annotated[Seconds, RELOADABLE_SETTING] = Field(
        default=1.0, description="seconds between health polls of each chip"
    )
    health_failure_threshold: Annotated[int, RELOADABLE_SETTING, Field(ge=1, le=100)] = Field(
        default=3,
        description="consecutive failed health queries before a chip counts as unhealthy",
    )
    health_flap_threshold: Annotated[int, RELOADABLE_SETTING, Field(ge=1, le=100)] = Field(
        default=3,
        description="unhealthy spells within health_flap_window that make a chip a flapper",
    )
    health_flap_window: Annotated[Seconds, RELOADABLE_SETTING] = Field(
        default=60.0, description="seconds over which spells are counted"
    )
    health_flap_hold: Annotated[float, RELOADABLE_SETTING, Field(ge=0, le=86400)] = Field(
        default=30.0,
        description="seconds a flapping chip must stay clean before it is healthy again",
    )
    fault_levels_file: Path | None = Field(
        default=None,
        description="JSON file of fault levels: Huawei's faultCode.json (replaces the built-in lists) "
        "or level -> codes (moves those codes)",
    )

    # -- hot reset --
    hot_reset: bool = Field(
        default=False,
        description="reset a chip whose fault calls for a reset (RestartRequest, RestartBusiness, "
        "FreeRestartNPU, RestartNPU) once its reset group is free, at most 3 times in 6 hours; "
        "off: it stays out until reset by hand (Huawei's -hotReset)",
    )
    hot_reset_idle: Annotated[float, Field(ge=0, le=86400)] = Field(
        default=60.0,
        description="seconds a chip's reset group must have been free (no pod, no process) before "
        "its hot reset",
    )

    # -- sharing and vNPUs --
    share_count: Annotated[int, Field(ge=1, le=100)] = Field(
        default=1,
        description="offer each chip this many times (Huawei's shareDevCount; 310B and 310P only, "
        "ignored with a warning elsewhere); 1: off",
    )
    vnpu: Literal["static", "dynamic", "off"] = Field(
        default="static",
        description="static: offer the vNPUs made with npu-smi as resources of their own and never "
        "a split chip whole (310P, 910); dynamic (serve=dra): publish each chip whole and as partitions "
        "by Huawei's templates, make a partition's vNPU when its claim is prepared and destroy it when "
        "unprepared; off: read none (only for nodes known to have none)",
    )
    dra_partition_places: Annotated[int, Field(ge=0, le=64)] = Field(
        default=1,
        description="vnpu dynamic: how many partitions of each template a chip publishes at most (each is "
        "a device the scheduler weighs for every claim on every node); 0: as many as fit the chip",
    )

    # -- Kubernetes API -------------------------------------------------------------------
    node_name: str | None = Field(
        default_factory=lambda: os.environ.get("NODE_NAME") or None,
        description="this node's name (the chart sets NODE_NAME from the downward API); "
        "unset turns the Kubernetes features off",
    )
    host_ip: str | None = Field(
        default_factory=lambda: os.environ.get("HOST_IP") or None,
        description="this node's IP (the chart sets HOST_IP from status.hostIP)",
    )
    pod_namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE") or "kube-system",
        description="namespace the plugin runs in (the chart sets POD_NAMESPACE)",
    )
    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig for development; default: the in-cluster service account"
    )
    node_labels: bool = Field(default=True, description="keep this node's Ascend labels current")
    label_prefix: str = Field(
        default="ascend-device-plugin.io",
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="DNS prefix of the plugin's own node labels (AI cores, chip count)",
    )
    device_info_configmap: bool = Field(
        default=True, description="write Huawei's device-info ConfigMap (read by Volcano) for this node"
    )
    device_info_namespace: str = Field(
        default="kube-system", description="namespace of the device-info ConfigMap"
    )
    device_info_name_prefix: str = Field(
        default="mindx-dl-deviceinfo-", description="device-info ConfigMap name = prefix + node name"
    )
    device_info_refresh: Annotated[float, Field(ge=1, le=3600)] = Field(
        default=300.0,
        description="seconds between rewrites of the device-info ConfigMap when nothing changed",
    )
    config_configmap: str | None = Field(
        default=None, description="name of a ConfigMap whose keys override settings at run time"
    )
    config_configmap_namespace: str | None = Field(
        default=None, description="namespace of that ConfigMap; default: pod_namespace"
    )
    node_events: bool = Field(
        default=True, description="post a Kubernetes Event on the node per health transition"
    )
    fault_config_configmap: bool = Field(
        default=True,
        description="follow Huawei's fault configuration ConfigMap kube-system/mindx-dl-fault-config "
        "(faultCode.json, faultCustomization.json, PollInterval): read at start, watched, re-read every "
        "PollInterval seconds",
    )

    # -- DRA: the chips as a resource.k8s.io/v1 driver -----------------------------------
    serve: Annotated[Literal["device-plugin", "dra"], BeforeValidator(_one_face)] = Field(
        default="device-plugin",
        description="how the chips are offered: device-plugin (extended resources through the kubelet's "
        "device-plugin API) or dra (a DRA driver: ResourceSlices and claims, Kubernetes 1.34+); one, "
        "never both (the scheduler would count every chip twice)",
    )
    dra_driver_name: str = Field(
        default="npu.huawei.com",
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="the DRA driver's name: the ResourceSlices' driver, the domain of the device "
        "attributes, the DeviceClasses' selector",
    )
    dra_registry_path: Path = Field(
        default=Path("/var/lib/kubelet/plugins_registry"),
        description="the kubelet's plugin registry directory, where the DRA registration socket "
        "<driver>-reg.sock goes",
    )
    dra_plugin_path: Path | None = Field(
        default=None,
        description="directory of the DRA socket dra.sock and the prepared-claims checkpoint; "
        "default: /var/lib/kubelet/plugins/<driver>",
    )
    dra_device_taints: bool | None = Field(
        default=None,
        description="unhealthy chips stay in the ResourceSlice with a taint instead of leaving it; "
        "default: wherever the API server keeps device taints (DRADeviceTaints: on from 1.36), asked "
        "with a dry run at start; true: also say so at warning level when it does not; false: never",
    )
    dra_taint_effect: Literal["by-level", "NoSchedule"] = Field(
        default="by-level",
        description="the effect of an unhealthy chip's taint: by-level: NoExecute (its pods are "
        "evicted) for faults whose remedy is a reset or a separation of the chip, NoSchedule for the "
        "rest; NoSchedule: never evict, only keep new pods away",
    )

    # -- Volcano ---------------------------------------------------------------------------
    volcano: bool = Field(
        default=False,
        description="Volcano mode: hand over the chips Volcano chose for the pod (its huawei.com/<type> "
        "annotation), not the kubelet's pick; needs node_name and API access",
    )
    pod_resources_socket: Path = Field(
        default=Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        description="the kubelet's PodResources socket: which container holds which chip (every mode)",
    )

    # -- telemetry ----------------------------------------------------------------------
    telemetry: bool = Field(
        default=True,
        description="read the chips' telemetry (utilization, temperature, power, memory, ...) and show "
        "it on /metrics under npu-exporter's names",
    )
    telemetry_interval: Annotated[float, RELOADABLE_SETTING, Field(ge=1, le=3600)] = Field(
        default=5.0,
        description="seconds between two reads of the chip figures (utilization, temperature, power, "
        "voltage, AI-core clock, health)",
    )
    telemetry_slow_interval: Annotated[float, RELOADABLE_SETTING, Field(ge=1, le=86400)] = Field(
        default=60.0,
        description="seconds between two reads of the slower groups (HBM, device memory, RoCE network, ECC)",
    )
    telemetry_call_timeout: Annotated[float, RELOADABLE_SETTING, Field(gt=0, le=10)] = Field(
        default=1.0,
        description="seconds one telemetry call may take; one that overruns takes its chip's figures off "
        "/metrics until it returns, never its health",
    )

    # -- operations -------------------------------------------------------------------
    http_address: str = Field(
        default="0.0.0.0:11251",
        pattern=r"^$|^(\[[0-9A-Fa-f:.]+\]|[^:\s]*):[0-9]{1,5}$",
        description="host:port of /healthz, /readyz and /metrics; empty turns the endpoint off",
    )

    # -- logs -----------------------------------------------------------------------------
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], RELOADABLE_SETTING] = Field(
        default="INFO", description="log level"
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="text for people, json for machines"
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("resource_name")
    @classmethod
    def _valid_resource_name(cls, value: str | None) -> str | None:
        if value is not None and (problem := extended_resource_problem(value)):
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.backend == "fake" and self.fake_scenario is None:
            raise ValueError("backend 'fake' needs fake_scenario (--fake-scenario PATH)")
        if self.serve == "dra" and not self.node_name:
            raise ValueError(
                "serve 'dra' needs node_name (--node-name, NODE_NAME or ASCEND_DP_NODE_NAME): the "
                "driver's ResourceSlices and pool are this node's"
            )
        if self.serve == "dra" and self.volcano:
            raise ValueError(
                "serve 'dra' lets the scheduler allocate devices through ResourceSlices; volcano chooses "
                "chips through the device-plugin API: unset volcano, or serve 'device-plugin'"
            )
        if self.vnpu == "dynamic" and self.serve != "dra":
            raise ValueError(
                "vnpu 'dynamic' makes vNPUs when their DRA claims are prepared, so it needs serve 'dra' "
                "(--serve dra, ASCEND_DP_SERVE=dra, Helm serve: dra); with the device-plugin API use "
                "vnpu 'static' (vNPUs made with npu-smi)"
            )
        if (
            self.ai_core_min is not None
            and self.ai_core_max is not None
            and self.ai_core_min > self.ai_core_max
        ):
            raise ValueError(f"ai_core_min {self.ai_core_min} is above ai_core_max {self.ai_core_max}")
        return self

    @model_validator(mode="after")
    def _volcano_needs_the_api(self) -> Settings:
        if not self.volcano:
            return self
        if not self.node_name:
            raise ValueError(
                "volcano (--volcano / ASCEND_DP_VOLCANO) needs node_name (--node-name / "
                "ASCEND_DP_NODE_NAME, or NODE_NAME from the downward API): the plugin must know "
                "which node's pods Volcano bound"
            )
        in_cluster = os.environ.get("KUBERNETES_SERVICE_HOST") and Path(SERVICE_ACCOUNT_TOKEN).is_file()
        if self.kubeconfig is None and not in_cluster:
            raise ValueError(
                "volcano (--volcano / ASCEND_DP_VOLCANO) needs access to the API server: set kubeconfig "
                "(--kubeconfig / ASCEND_DP_KUBECONFIG), or run in a pod with a service account "
                f"(KUBERNETES_SERVICE_HOST and {SERVICE_ACCOUNT_TOKEN})"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Command line (init kwargs) beats the environment, which beats the config file."""
        assert isinstance(init_settings, InitSettingsSource)
        path = init_settings.init_kwargs.get("config_file") or os.environ.get(f"{ENV_PREFIX}CONFIG_FILE")
        file_values = read_config_file(Path(path)) if path else {}
        return (init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=file_values))


RELOADABLE: Final[frozenset[str]] = frozenset(
    name for name, info in Settings.model_fields.items() if RELOADABLE_SETTING in info.metadata
)


# A settings file is a few hundred bytes; a larger one is no settings file, and parsing it would cost
# the plugin's memory (YAML's nodes take about 350 bytes for each byte of a flow list).
CONFIG_FILE_LIMIT: Final = 64 * 1024
# Values (scalars, lists, mappings) in it: every setting at once is a few hundred. Parsing stops here, so
# a file of tiny values costs no more than a moment, wherever its bytes go.
CONFIG_FILE_VALUES: Final = 2000
SHOWN: Final = 200  # characters of an operator's value a message repeats
_SHORT = reprlib.Repr()  # a repr that stops early: a few levels, a few entries of each, strings cut
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 2, SHOWN, SHOWN, SHOWN
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxfrozenset = 4


def cut(text: str) -> str:
    """``text`` itself, or its first :data:`SHOWN` characters and how many there were."""
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text)} characters)"


def shown(value: object) -> str:
    """``value`` as a message names it: its repr, about :data:`SHOWN` characters at most."""
    if isinstance(value, str) and len(value) > SHOWN:
        return f"{value[:SHOWN]!r}... ({len(value)} characters)"
    text = _SHORT.repr(value)
    return text if len(text) <= 2 * SHOWN else f"{text[: 2 * SHOWN]}..."


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings in a YAML (or JSON) file; SettingsError saying what is wrong. Bounded: a regular file,
    :data:`CONFIG_FILE_LIMIT` bytes, no aliases (300 bytes of them expand to gigabytes)."""
    import yaml  # only when there is a file: most nodes run on flags and env alone

    text = _read_bounded(path)
    try:
        data = yaml.load(text, Loader=_load_without_aliases(yaml))  # a SafeLoader, aliases refused
    except yaml.YAMLError as error:
        raise SettingsError(f"config file {path} is not valid YAML: {error}") from error
    except RecursionError as error:
        raise SettingsError(f"config file {path} nests its values too deeply to be read") from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(
            f"config file {path} must hold a mapping of setting names, not {type(data).__name__}"
        )
    values = {str(key).replace("-", "_"): value for key, value in data.items()}
    if unknown := [key for key in values if key not in Settings.model_fields]:
        raise SettingsError(f"config file {path}: {_unknown(unknown)}")
    return values


def _read_bounded(path: Path) -> str:
    """The text of the regular file ``path``, if it is at most :data:`CONFIG_FILE_LIMIT` bytes of UTF-8."""
    try:  # O_NONBLOCK: opening a FIFO does not wait for a writer
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise SettingsError(f"cannot read config file {path}: {error.strerror}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(
                f"config file {path} is {_kind(info.st_mode)}, not a regular file: "
                "give the path of a YAML file"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= CONFIG_FILE_LIMIT and (chunk := os.read(descriptor, CONFIG_FILE_LIMIT + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise SettingsError(f"cannot read config file {path}: {error.strerror}") from None
    finally:
        os.close(descriptor)
    if size > CONFIG_FILE_LIMIT:
        raise SettingsError(
            f"config file {path} is over {CONFIG_FILE_LIMIT // 1024} KiB ({max(size, info.st_size)} bytes); "
            "a settings file is a few hundred bytes"
        )
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as error:
        raise SettingsError(f"config file {path} is not UTF-8 text: {error}") from None


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((words for test, words in kinds.items() if test(mode)), "not a regular file")


def _unknown(keys: list[str]) -> str:
    """Unknown setting names, each with the setting it is probably a misspelling of."""
    said = []
    for key in sorted(keys):
        near = difflib.get_close_matches(key, Settings.model_fields, n=1)
        said.append(f"{shown(key)}" + (f" (did you mean {near[0]}?)" if near else ""))
    return (
        f"unknown setting {', '.join(said)}: not a setting of this version "
        "(the settings and their names: docs/configuration.md)"
    )


@functools.cache
def _load_without_aliases(yaml: Any) -> type[Any]:
    """PyYAML's safe loader, refusing an alias (``*name``), and values past :data:`CONFIG_FILE_VALUES`."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        composed = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.composed += 1
            problem = ""
            if self.check_event(yaml.AliasEvent):
                problem = "aliases (*name) are not allowed in a config file"
            elif self.composed > CONFIG_FILE_VALUES:
                problem = f"a config file holds at most {CONFIG_FILE_VALUES} values"
            if problem:
                raise yaml.composer.ComposerError(None, None, problem, self.peek_event().start_mark)
            return super().compose_node(parent, index)

    return Loader


def flag_name(field: str) -> str:
    """The command-line flag of a settings field."""
    return "--" + field.replace("_", "-")


# What a pattern-constrained setting must look like, in words and with an example: the regular
# expression itself means nothing to most operators. Every field with a pattern has an entry
# (tests/test_settings_messages.py checks it, and that each example is accepted).
ALLOWED_FORMS: Final[dict[str, str]] = {
    "device_id_prefix": "a letter or digit, then up to 40 letters, digits, '-', '_' or '.', "
    "such as Ascend310",
    "socket_name": "a file name (no '/') that starts with a letter or digit and ends in .sock, "
    "such as Ascend310.sock",
    "cdi_kind": "vendor/class: a lower-case domain (letters, digits, '-', '.'), a '/', then a class of "
    "letters, digits, '-', '_' or '.' that starts and ends with a letter or digit, such as huawei.com/npu",
    "label_prefix": "a DNS subdomain: dot-separated parts of lower-case letters, digits and '-', each "
    "starting and ending with a letter or digit, such as ascend-device-plugin.io",
    "dra_driver_name": "a DNS subdomain of at most 63 characters: dot-separated parts of lower-case "
    "letters, digits and '-', each starting and ending with a letter or digit, such as npu.huawei.com",
    "http_address": "host:port such as 0.0.0.0:11251 (an IPv6 host in brackets: [::]:11251; no host: "
    "every address), or empty to turn the HTTP server off",
}

_BOUND_ERRORS: Final = frozenset({"greater_than", "greater_than_equal", "less_than_equal"})


def _allowed_range(field: str) -> str | None:
    """The whole range of a bounded setting, e.g. ``1-3600 seconds`` (pydantic names one bound)."""
    info = Settings.model_fields[field]
    low: tuple[object, bool] | None = None  # (bound, whether the bound itself is allowed)
    high: object = None  # the settings' upper bounds are all inclusive (le)
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = (item.ge, True)
        elif isinstance(item, annotated_types.Gt):
            low = (item.gt, False)
        elif isinstance(item, annotated_types.Le):
            high = item.le
    if low is None and high is None:
        return None
    unit = " seconds" if (info.description or "").startswith("seconds") else ""
    if low is not None and high is not None and low[1]:
        return f"{low[0]}-{high}{unit}"
    words = []
    if low is not None:
        words.append(f"{low[0]} or more" if low[1] else f"above {low[0]}")
    if high is not None:
        words.append(f"at most {high}")
    return " and ".join(words) + unit


def _what_is_allowed(field: str, item: ErrorDetails) -> str:
    """Pydantic's words for a problem, replaced or completed by the setting's whole rule."""
    message = item["msg"].removeprefix("Value error, ")
    if field in ALLOWED_FORMS and item["type"] in ("string_pattern_mismatch", "string_too_long"):
        return f"must be {ALLOWED_FORMS[field]}"
    if (bounds := _allowed_range(field)) is None:
        return message
    if item["type"] in _BOUND_ERRORS:
        return f"must be {bounds}"
    return f"{message}; must be {bounds}"


def describe_validation_error(error: ValidationError) -> str:
    """One line per problem: field, its flag and env names, the value, and what is allowed."""
    lines = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        value = item.get("input")
        if field and field in Settings.model_fields:
            where = f"{field} ({flag_name(field)} / {ENV_PREFIX}{field.upper()})"
            got = shown(value) if not isinstance(value, dict) else repr("(missing)")
            lines.append(f"invalid setting {where}: got {got}: {_what_is_allowed(field, item)}")
        elif item["type"] == "extra_forbidden":
            lines.append(f"invalid settings: {_unknown([field])}")
        else:
            lines.append(f"invalid settings: {item['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def load_settings(cli_values: dict[str, Any] | None = None) -> Settings:
    """Build the settings from every source; raise SettingsError when they are invalid."""
    values = {key: value for key, value in (cli_values or {}).items() if value is not None}
    try:
        return Settings(**values)
    except ValidationError as error:
        raise SettingsError(describe_validation_error(error)) from error


# The settings that override the FamilyTable field of their name.
FAMILY_FIELDS: Final = (
    "resource_name", "device_id_prefix", "ai_core_min", "ai_core_max", "manager_nodes", "shared_nodes",
    "driver_mounts",
)  # fmt: skip


def family_overrides(settings: Settings) -> dict[str, object]:
    """The FamilyTable fields the operator overrode (None means keep the family's value)."""
    return {name: getattr(settings, name) for name in FAMILY_FIELDS}


def dra_plugin_dir(settings: Settings) -> Path:
    """Where the DRA socket and the claim checkpoint live: dra_plugin_path, else plugins/<driver>."""
    return settings.dra_plugin_path or Path("/var/lib/kubelet/plugins") / settings.dra_driver_name


def served_directory(settings: Settings) -> Path:
    """The directory whose sockets an instance serves: the one two instances must not share."""
    return dra_plugin_dir(settings) if settings.serve == "dra" else settings.device_plugin_path


# -- naming a setting in messages --


def how_to_set(name: str, value: object, *, helm: bool = True) -> str:
    """Every way to give a setting a value, e.g. ``ai_core_min=1 (--ai-core-min 1,
    ASCEND_DP_AI_CORE_MIN=1, Helm settings.aiCoreMin: 1)``; ``helm=False`` where the chart sets it itself.
    """
    first, *rest = name.split("_")
    if isinstance(value, bool):
        text = str(value).lower()
        flag = flag_name(name) if value else flag_name(f"no_{name}")
    else:
        text = str(value)
        flag = f"{flag_name(name)} {text}"
    ways = [flag, f"{ENV_PREFIX}{name.upper()}={text}"]
    if helm:
        ways.append(f"Helm settings.{first}{''.join(part.capitalize() for part in rest)}: {text}")
    return f"{name}={text} ({', '.join(ways)})"
