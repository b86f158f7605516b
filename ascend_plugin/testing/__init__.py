"""Stand-ins for what a node and a cluster provide, for the demos, the tests and the benchmarks.

Nothing in the running plugin imports this package: kubelet stand-ins, a loopback API server, ``simulate``.
"""
