"""SIGHUP with a hostile config file: how long the refusal takes, the event loop's stalls, memory, the log.

Run: ``python bench/config_reload.py`` (or ``nox -s bench``). The plugin runs as its own process on
the fake backend (8 chips) with a loop-lag probe in its event loop (bench/loop_probe.py), started with
a small config file. Each case writes the file, sends SIGHUP, and waits for the re-read's log line:

* about the most a file may hold: 1,995 paths in a list, 44 KiB (parsed whole, then refused:
  driver_mounts cannot change at run time);
* 64 KiB of 21,000 values (refused at the 2,001st); 10 MiB of YAML; a FIFO at the config path (no
  writer); a 300-byte YAML alias bomb.

Each line gives the time from the signal to the refusal, the longest stall of the event loop meanwhile
(and the CPU its thread used in it), the peak RSS, and the length of the log line. Targets: refused
within 1 s, no stall over 100 ms, memory and the line bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from common import Workspace, print_command
from loop_stall import describe_stalls, stalls

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

CHIPS = 8
WAIT = 60.0


def largest(path: Path) -> None:
    path.write_text("driver_mounts: [" + ", ".join(["/usr/local/Ascend/x"] * 1995) + "]\n")


def many_values(path: Path) -> None:
    path.write_text("driver_mounts: [" + ", ".join(["1"] * 21_000) + "]\n")


def ten_mib(path: Path) -> None:
    path.write_text("driver_mounts:\n" + "- /usr/local/dcmi\n" * (10 * 1024 * 1024 // 18))


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def alias_bomb(path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{n}: &a{n} [{','.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 9)]
    path.write_text("\n".join([*lines, "driver_mounts: *a8"]) + "\n")


CASES: dict[str, Callable[[Path], None]] = {
    "2,000 paths": largest,
    "21,000 values": many_values,
    "10 MiB file": ten_mib,
    "FIFO": fifo,
    "alias bomb": alias_bomb,
}


def reread_line(log: Path, after: int) -> dict[str, object] | None:
    for line in log.read_text(errors="replace").splitlines()[after:]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("logger") == "ascend_plugin.live_config":
            return dict(entry)
    return None


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    work = Workspace.create(CHIPS)
    work.write_scenario({"chip_name": "910B3", "chips": [{"phy_id": n} for n in range(CHIPS)]})
    config = work.root / "config.yaml"
    config.write_text("health_failure_threshold: 3\n")
    probe, log = work.root / "probe.txt", work.root / "plugin.log"
    probe.touch()
    kubelet = KubeletStandIn(work.plugin_dir)
    kubelet.start()
    launcher = [str(Path(__file__).with_name("loop_probe.py")), str(probe)]
    with log.open("wb") as output:
        plugin = work.start_plugin(
            "--config-file", str(config), "--log-format", "json", "--log-level", "INFO",
            entry=launcher, stderr=output,
        )  # fmt: skip
    print_command()
    try:
        kubelet.wait_until(lambda k: any(v.updates for v in k.resources.values()), WAIT, "registration")
        for name, make in CASES.items():
            if config.exists() and not config.is_file():
                config.unlink()
            config.write_text("health_failure_threshold: 3\n")
            make(config)
            seen = len(log.read_text(errors="replace").splitlines())
            began_wall, began = time.time(), time.monotonic()
            plugin.send_signal(signal.SIGHUP)
            while (line := reread_line(log, seen)) is None and time.monotonic() - began < WAIT:
                time.sleep(0.01)
            took = time.monotonic() - began
            ended_wall = time.time()
            said = str(line.get("msg", "")) if line else "(no line)"
            print(
                f"{name}: answered in {took * 1000:.0f} ms ({line.get('level') if line else '-'}); "
                f"peak RSS {peak_rss_mib(plugin.pid):.1f} MiB; the line: {len(said)} characters"
            )
            print("  " + describe_stalls("loop stalls", stalls(probe, began_wall, ended_wall)))
            print(f"  {said[:160]}")
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)
        kubelet.stop()


if __name__ == "__main__":
    sys.exit(main())
