"""The guard in front of every kubelet-facing socket: what a client may send, and who may send it.

Each service gives its rules as data (:class:`server.RequestRules`), applied alike for all.
"""
