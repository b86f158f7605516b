"""Faces: the ways the plugin shows the node's devices to the outside.

Each face reads the offers (or the inventory) and knows nothing of the others:
the kubelet's device-plugin API (:mod:`~ascend_plugin.faces.deviceplugin`), the
Kubernetes API publishers (:mod:`~ascend_plugin.faces.kube`) and the operations
endpoint with its metrics (:mod:`~ascend_plugin.faces.operations`).
"""
