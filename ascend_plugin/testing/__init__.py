"""Stand-ins for what a node and a cluster provide, for the demos, the tests and the benchmarks.

Nothing in the running plugin imports this package. It holds the grpcio kubelet
stand-ins (device plugins, PodResources, DRA), the loopback Kubernetes API
server the real kubernetes-asyncio client talks to, and the ``simulate`` demos
built on them.
"""
