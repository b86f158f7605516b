"""Huawei's fault policy: the level a chip's faults reach, what escalates it, and what lifts it.

Huawei's rules and files, so a cluster configured for its plugin behaves the same (docs/faults.md);
nothing here calls a chip or the API server. The modules: ARCHITECTURE.md "A fault's way".
"""
