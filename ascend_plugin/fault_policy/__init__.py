"""Huawei's fault policy: the level a chip's faults reach, what escalates it, and what lifts it.

The rules and files are those of Huawei's Ascend Device Plugin, so a cluster
configured for it behaves the same with this one (docs/faults.md). Nothing here
calls a chip library or the API server, or reads a clock but the one it is
given. The modules, from the ground up: ARCHITECTURE.md "A fault's way".
"""
