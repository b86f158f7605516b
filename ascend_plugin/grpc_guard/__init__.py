"""The guard in front of every kubelet-facing socket: what a client may send, and who may send it.

The device-plugin sockets and both DRA sockets serve through
:class:`server.GuardedEndpoint`; each service supplies its rules as data
(:class:`server.RequestRules`: the shape of each request, the bounds they name,
which peers it answers), and the guard applies them the same way for all:

* ``server``: the 4 MiB cap read from the length prefix, the wire check before
  decoding, the peer rule before reading, the status message capped;
* ``wire_check``: the walk over a request's protobuf bytes;
* ``peers``: the peer's credentials, and the rule that admits only a directory's owner;
* ``status``: a status message cut to 4 KiB;
* ``refusals``: every refusal as a typed exception, its gRPC status decided by its class;
* ``refusal_log``: one log line per peer per 10 s for what was refused.
"""
