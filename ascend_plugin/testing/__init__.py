"""Stand-ins for what a node provides, for the demo, the tests and the benchmarks.

Nothing in the running plugin imports this package: it holds the grpcio
kubelet stand-in and the ``simulate`` demo built on it.
"""
