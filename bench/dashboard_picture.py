"""The picture of the chart's Grafana dashboard in docs/telemetry.md, rendered from its JSON with real data.

Run: ``python bench/dashboard_picture.py [--minutes 3] [--out docs/telemetry-dashboard.png]``
(needs matplotlib: ``pip install matplotlib``, and Debian's prometheus). A
plugin process on the C fake libdcmi.so serves eight 910B3 chips while a
made-up training load moves their figures; two pods hold chips through the
kubelet stand-in's PodResources; Debian's Prometheus scrapes it every second.
Then every panel of ``charts/ascend-device-plugin/dashboards/ascend-npu.json``
is drawn where its ``gridPos`` puts it, from its own queries' results
(Prometheus' ``query_range``, the ``node`` variable set to All). No Grafana is
involved: none is packaged for Debian or npm.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import CFakePlugin, print_command

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from dashboard_queries import dashboard
from fake_dcmi.build import build_fake_library
from local_port import free_port
from pod_resources_standin import PodResourcesStandIn
from prometheus_server import Prometheus

from backends.fake import FakeScenario

ROOT = Path(__file__).resolve().parent.parent
CHIPS = 8
NODE = "atlas-800t-a2-01"


def load(second: float) -> FakeScenario:
    """The node at ``second`` of a made-up load: chips 0-3 train, 4-5 serve, 6-7 idle."""
    chips = []
    for phy in range(CHIPS):
        busy = 0.0 if phy >= 6 else (0.85 if phy < 4 else 0.4) + 0.12 * math.sin(second / 20 + phy)
        chips.append(
            {
                "phy_id": phy,
                "card_id": phy // 2 + 1,
                "telemetry": {
                    "utilization_pct": {"aicore": round(100 * busy), "vectorcore": round(60 * busy)},
                    "temperature_c": round(38 + 30 * busy),
                    "power_w": round(90 + 260 * busy, 1),
                    "memory_used_mb": round(3000 + 52000 * min(busy * 1.1, 1.0)),
                },
            }
        )
    return FakeScenario.model_validate({"chip_name": "910B3", "memory_mb": 65536, "chips": chips})


def draw(results: list[tuple[dict[str, Any], list[list[dict[str, Any]]]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(panel["gridPos"]["y"] + panel["gridPos"]["h"] for panel, _ in results) + 2  # 2: the title
    figure = plt.figure(figsize=(16, rows * 0.42), facecolor="#111217")
    for panel, series in results:
        grid = panel["gridPos"]
        left, width = grid["x"] / 24, grid["w"] / 24
        bottom, height = 1 - (grid["y"] + grid["h"] + 2) / rows, grid["h"] / rows
        if panel["type"] == "row":
            figure.text(
                left + 0.005, bottom + height / 2, panel["title"], color="#d8d9da", fontsize=12, weight="bold"
            )
            continue
        axes = figure.add_axes((left + 0.06 * width, bottom + 0.12 * height, 0.9 * width, 0.72 * height))
        axes.set_facecolor("#181b1f")
        axes.set_title(panel["title"], color="#d8d9da", fontsize=10, loc="left")
        for spine in axes.spines.values():
            spine.set_color("#2c3235")
        axes.tick_params(colors="#8e8e8e", labelsize=7)
        unit = panel["fieldConfig"]["defaults"].get("unit", "")
        matrix = [item for result in series for item in result]
        if panel["type"] == "stat":
            axes.set_xticks([])
            axes.set_yticks([])
            last = float(matrix[0]["values"][-1][1]) if matrix else float("nan")
            text = {"percent": f"{last:.0f}%", "watt": f"{last:.0f} W"}.get(unit, f"{last:.0f}")
            axes.text(0.5, 0.45, text, color="#73bf69", fontsize=24, ha="center", va="center", weight="bold")
            continue
        legend = panel["targets"][0]["legendFormat"]
        for item in matrix:
            times = [(float(t) - float(matrix[0]["values"][0][0])) / 60 for t, _ in item["values"]]
            values = [float(v) for _, v in item["values"]]
            name = legend.replace("{{node}} ", "")  # one node here
            for key, value in item["metric"].items():
                name = name.replace("{{" + key + "}}", value)
            axes.plot(times, values, linewidth=1.2, label=name)
        axes.set_xlabel("minutes", color="#8e8e8e", fontsize=7)
        axes.grid(color="#2c3235", linewidth=0.5)
        axes.margins(y=0.35)
        if matrix:
            axes.legend(fontsize=6, loc="upper left", ncol=4, frameon=False, labelcolor="#d8d9da")
    title = f"Ascend NPUs    node: {NODE}"
    figure.text(0.005, 1 - 0.9 / rows, title, color="#d8d9da", fontsize=14, weight="bold")
    figure.savefig(out, dpi=80, facecolor=figure.get_facecolor())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "telemetry-dashboard.png")
    args = parser.parse_args()
    print_command()
    socket = Path(tempfile.mkdtemp(prefix="adp-pod-resources-", dir="/tmp")) / "kubelet.sock"
    port = free_port()
    node = CFakePlugin(
        build_fake_library(), load(0),
        "--http-address", f"127.0.0.1:{port}", "--telemetry-interval", "2", "--telemetry-slow-interval", "5",
        "--pod-resources-socket", str(socket),
    )  # fmt: skip
    pod_resources = PodResourcesStandIn(node.kubelet, socket)
    pod_resources.start()
    prometheus = Prometheus(node.work.root / "prometheus", [f"127.0.0.1:{port}"], {"node": NODE})
    try:
        pod_resources.admit(
            "training", "llama-finetune-0", "huawei.com/Ascend910", [f"Ascend910-{n}" for n in range(4)]
        )
        pod_resources.admit(
            "serving", "qwen-infer-7f9c", "huawei.com/Ascend910", ["Ascend910-4", "Ascend910-5"]
        )
        started = time.time()
        while time.time() - started < args.minutes * 60:
            node.write(load(time.time() - started))
            time.sleep(2)
        end = time.time()
        results = []
        for panel in dashboard()["panels"]:
            series = [
                prometheus.query_range(target["expr"].replace("$instance", ".*"), started + 10, end, 5)
                for target in panel.get("targets", ())
            ]
            results.append((panel, series))
        draw(results, args.out)
        print(f"wrote {args.out}")
    finally:
        prometheus.stop()
        pod_resources.stop()
        node.stop()


if __name__ == "__main__":
    main()
