"""Handover: what a container gets for the devices it was given.

Three modes, one protocol (:class:`~ascend_plugin.handover.modes.Handover`) and
one table (:data:`~ascend_plugin.handover.modes.MODES`): ``device`` (the plugin
lists the device nodes and mounts the driver), ``runtime`` (the Ascend Docker
Runtime does the mounting from ``ASCEND_VISIBLE_DEVICES``) and ``cdi`` (the
container runtime edits the container from the node's CDI spec). Each answers
with a :class:`~ascend_plugin.handover.grant.ContainerGrant`, which the faces turn
into their own messages.
"""
