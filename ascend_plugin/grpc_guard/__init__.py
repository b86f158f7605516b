"""The guard in front of every kubelet-facing socket: what a client may send, and who may send it.

Each service supplies its rules as data (:class:`server.RequestRules`); :class:`server.GuardedEndpoint`
applies them the same way for all.
"""
