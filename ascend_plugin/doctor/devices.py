"""Check of the device nodes a container given NPUs needs: /dev/davinci<N> and the manager node.

The shared nodes that are absent are listed for the record: boards differ in which media nodes they have.
"""

from __future__ import annotations

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, how_to_set, listing

DEVICE_NODES = "device-nodes"


@check(DEVICE_NODES)
async def device_nodes(context: Context) -> Finding:
    """/dev/davinci<N> for every chip, one of the family's manager nodes; shared nodes reported."""
    chips = context.need(context.chips, "chips")
    table = context.table
    own = [f"/dev/davinci{table.device_number(chip)}" for chip in chips]
    missing = [node for node in own if not context.host(node).exists()]
    manager = next((node for node in table.manager_nodes if context.host(node).exists()), None)
    absent = [node for node in table.shared_nodes if not context.host(node).exists()]
    present = len(table.shared_nodes) - len(absent)
    shared = f"{present} of {len(table.shared_nodes)} shared nodes present" + (
        f" (absent, so not handed over: {listing(absent)})" if absent else ""
    )
    for directory in table.shared_node_dirs:
        found = context.host(directory)
        count = sum(not entry.is_dir() for entry in found.iterdir()) if found.is_dir() else 0
        shared += f"; {count} nodes under {directory}" if count else f"; nothing under {directory}"
    problems = []
    if missing:
        problems.append(f"missing under {context.root}: {', '.join(missing)}")
    if manager is None:
        problems.append(f"none of the manager nodes {', '.join(table.manager_nodes)} exists")
    if problems:
        return Finding.problem(
            DEVICE_NODES,
            "; ".join(problems) + f"; {shared}",
            fix="mount the host's /dev into the pod (the chart does) and check on the host that the driver "
            "created them (`ls -l /dev/davinci*`); if the manager node has another name on this board, "
            f"set {how_to_set('manager_nodes', '<node>')}",
        )
    nodes = listing(own)
    return Finding.ok(DEVICE_NODES, f"{nodes}, manager {manager}; {shared}")
