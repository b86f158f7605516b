"""Check of the device nodes a container given NPUs needs.

Allocate hands over /dev/davinci<phy> per chip and the family's manager node
unconditionally (a container without them cannot use the NPU), plus each of
the family's shared nodes that exists. So the first two must exist; the
absent shared nodes are listed for the record, since boards differ in which
media nodes they have.
"""

from __future__ import annotations

from ascend_plugin.doctor.check import check
from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, how_to_set, listing

DEVICE_NODES = "device-nodes"


@check(DEVICE_NODES)
async def device_nodes(context: Context) -> Finding:
    """/dev/davinci<phy> for every chip, one of the family's manager nodes; shared nodes reported."""
    chips = context.need(context.chips, "chips")
    table = context.table
    missing = [
        f"/dev/davinci{chip.phy_id}"
        for chip in chips
        if not context.host(f"/dev/davinci{chip.phy_id}").exists()
    ]
    manager = next((node for node in table.manager_nodes if context.host(node).exists()), None)
    absent = [node for node in table.shared_nodes if not context.host(node).exists()]
    present = len(table.shared_nodes) - len(absent)
    shared = f"{present} of {len(table.shared_nodes)} shared nodes present" + (
        f" (absent, so not handed over: {listing(absent)})" if absent else ""
    )
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
    nodes = listing([f"/dev/davinci{chip.phy_id}" for chip in chips])
    return Finding.ok(DEVICE_NODES, f"{nodes}, manager {manager}; {shared}")
