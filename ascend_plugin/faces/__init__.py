"""Faces: the ways the plugin shows the node's devices to the outside (kubelet device-plugin API, DRA,
Kubernetes API publishers, operations endpoint); each reads the offers or the inventory, not the others.
"""
