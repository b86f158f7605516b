"""The ``ascend-device-plugin`` command: run, doctor, simulate, version.

Flags of ``run`` are generated from the settings fields.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import anyio

from ascend_plugin import __version__
from ascend_plugin.doctor import add_arguments as add_doctor_arguments
from ascend_plugin.logs import setup_logging
from ascend_plugin.settings import ENV_PREFIX, Settings, SettingsError, flag_name, load_settings

EXIT_BAD_SETTINGS = 2
EXIT_READER_GONE = 128 + signal.SIGPIPE  # what a shell reports for a program ended by SIGPIPE

log = logging.getLogger(__name__)

_TRUE = ("true", "yes", "on")
_FALSE = ("false", "no", "off")
# Flags whose Huawei namesake takes a number: the number is refused with what it means here.
_HUAWEI_NUMBERS = {
    "hot_reset": "Huawei's -hotReset=0 and -hotReset=2 are --hot-reset here, -hotReset=-1 is --no-hot-reset "
    "(docs/migration.md)"
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are two lines: the problem, and where the flags are described."""

    def error(self, message: str) -> NoReturn:
        help_line = f"(`{self.prog} --help` lists every flag)"
        self.exit(EXIT_BAD_SETTINGS, f"{self.prog}: error: {message}\n{help_line}\n")


class _BooleanFlag(argparse.Action):
    """``--hot-reset``, ``--hot-reset=true`` (or false, yes, no, on, off) and ``--no-hot-reset``."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        negative = "--no-" + option_strings[0].removeprefix("--")
        super().__init__([*option_strings, negative], dest, nargs="?", metavar="true|false", **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        negated = bool(option_string and option_string.startswith("--no-"))
        if values is None:
            setattr(namespace, self.dest, not negated)
            return
        text = str(values).strip().lower()
        if negated or text not in (*_TRUE, *_FALSE):
            allowed = f"{option_string} takes no value" if negated else "true or false (or yes, no, on, off)"
            hint = _HUAWEI_NUMBERS.get(self.dest, "") if not negated and text.lstrip("-").isdigit() else ""
            raise argparse.ArgumentError(self, f"got {values!r}: {allowed}" + (f"; {hint}" if hint else ""))
        setattr(namespace, self.dest, text in _TRUE)


def _add_settings_flags(parser: argparse.ArgumentParser) -> None:
    for name, info in Settings.model_fields.items():
        help_text = f"{info.description} (env {ENV_PREFIX}{name.upper()})"
        if info.annotation in (bool, bool | None):
            parser.add_argument(flag_name(name), dest=name, action=_BooleanFlag, help=help_text)
        else:
            parser.add_argument(flag_name(name), dest=name, metavar="VALUE", help=help_text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = _Parser(
        prog="ascend-device-plugin",
        description="Kubernetes device plugin for Huawei Ascend NPUs (310, 310B, 310P, 910, 950).",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="run the device plugin daemon")
    _add_settings_flags(run)
    doctor = commands.add_parser(
        "doctor", help="check this node's preconditions and say how to fix each problem"
    )
    _add_settings_flags(doctor)
    add_doctor_arguments(doctor)
    simulate = commands.add_parser(
        "simulate", help="demo: the plugin on a fake 310B node with a built-in kubelet stand-in"
    )
    simulate.add_argument("--log-level", default="ERROR", help="log level of the plugin's own lines")
    simulate.add_argument(
        "--share-count",
        type=int,
        default=1,
        metavar="N",
        help="offer the board's chip N times (1-100; 1: not shared)",
    )
    simulate.add_argument(
        "--vnpu",
        choices=("static", "off"),
        default="off",
        help="static: an Atlas 300I Duo whose first chip is split into vNPUs, instead of the 310B board",
    )
    simulate.add_argument(
        "--family",
        choices=("310B", "950"),
        default="310B",
        help="950: an Atlas 850 (eight Ascend 950PR) served through DCMI v2, instead of the 310B board",
    )
    simulate.add_argument(
        "--serve",
        choices=("device-plugin", "dra"),
        default="device-plugin",
        help="dra: the DRA driver on a fake 910B server, a DRA kubelet stand-in and the fake API server",
    )
    commands.add_parser("version", help="print the version")
    return parser


def run_daemon(settings: Settings, reload: Callable[[], Settings] | None = None) -> int:
    """Run the plugin until SIGTERM or SIGINT: 0 after a clean stop, :data:`EXIT_BAD_SETTINGS` when the
    settings fail once it runs. SIGHUP re-reads the settings with ``reload``."""
    from ascend_plugin.app import PluginApp

    async def main() -> int:
        app = PluginApp(settings, settle_heap=True)
        async with anyio.create_task_group() as tasks:

            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                    async for received in signals:
                        if received == signal.SIGHUP:
                            log.info("received SIGHUP: re-reading the config file")
                            await app.config.reread_config_file(reload or load_settings)
                            continue
                        log.info("received %s; shutting down", signal.Signals(received).name)
                        app.stop()
                        return

            tasks.start_soon(stop_on_signal)
            try:
                await app.run()
            except SettingsError as refused:  # caught in the group's body, to stay out of its group
                return _refusing(refused)
            finally:
                tasks.cancel_scope.cancel()
        return 0

    # Until the signal receiver is up, a SIGHUP must not end the process (its default action).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    log.info(
        "ascend-device-plugin %s starting", __version__, extra={"settings": settings.model_dump(mode="json")}
    )
    try:
        return anyio.run(main)
    except SettingsError as refused:  # before the plugin ran: the fault-level file
        return _refusing(refused)


def _refusing(refused: SettingsError) -> int:
    """The settings cannot work: say why, and exit as for invalid settings."""
    log.error("refusing to start: %s", refused)
    return EXIT_BAD_SETTINGS


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    reader_gone = False
    try:
        code = _command(argv)
        sys.stdout.flush()  # inside the try: a reader gone before the last flush is the same case
    except* BrokenPipeError:
        reader_gone = True
    if reader_gone:
        # Whatever is still buffered has nowhere to go; without this, the interpreter's own last flush
        # fails once more on the way out and prints a traceback after all.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_READER_GONE
    return code


def _command(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "version":
        print(__version__)
        return 0
    if args.command == "simulate":
        from ascend_plugin.testing.simulate import simulate

        if args.serve == "dra" and (args.share_count != 1 or args.vnpu != "off"):
            parser.error(
                "simulate --serve dra shows whole chips of a fake 910B server only: --share-count "
                "and --vnpu work with --serve device-plugin (the default)"
            )
        if args.serve == "dra" and args.family != "310B":
            parser.error("simulate --serve dra plays a 910B server; --family works with the device plugin")
        if args.family == "950" and (args.share_count != 1 or args.vnpu != "off"):
            parser.error("simulate --family 950 shows whole chips: the 950 has no vNPUs and shares no chip")
        setup_logging(args.log_level.upper(), "text")
        if args.serve == "dra":
            from ascend_plugin.testing.simulate_dra import simulate_dra

            return simulate_dra()
        try:
            return simulate(share_count=args.share_count, vnpu=args.vnpu, family=args.family)
        except SettingsError as refused:
            print(
                f"the plugin refused to start (exit code {EXIT_BAD_SETTINGS}); "
                "its log says why (--log-level ERROR)"
            )
            return _refusing(refused)
    values = {name: getattr(args, name) for name in Settings.model_fields}  # None: not given
    try:
        settings = load_settings(values)
    except SettingsError as error:
        print(f"ascend-device-plugin: {error}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    if args.command == "doctor":
        from ascend_plugin.doctor.runner import run_doctor

        return run_doctor(settings, args.root, args.format)
    setup_logging(settings.log_level, settings.log_format)
    return run_daemon(settings, lambda: load_settings(values))
