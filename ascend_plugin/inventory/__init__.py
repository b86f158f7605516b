"""The inventory: the node's chips and the health verdict on each, the one source of truth.

Discovery (:mod:`~ascend_plugin.inventory.discovery`) finds the chips; the
health monitor (:mod:`~ascend_plugin.inventory.monitor`) keeps a verdict on
each, from polls and fault events judged by the fault policy
(:mod:`ascend_plugin.fault_policy`, :mod:`~ascend_plugin.inventory.verdict`,
:mod:`~ascend_plugin.inventory.damping`);
:class:`~ascend_plugin.inventory.inventory.Inventory` holds the result and tells
whoever subscribes when it changes. Nothing here knows of the kubelet or of
Kubernetes: the faces above read the inventory through the offers.
"""
