"""The inventory: the node's chips and the health verdict on each.

Discovery finds the chips, the health monitor keeps a verdict on each, the inventory holds them:
ARCHITECTURE.md "A fault's way". Nothing here knows of the kubelet or of Kubernetes.
"""
