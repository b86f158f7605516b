"""The plugin's Kubernetes side: node labels, the device-info ConfigMap, config reloads, node Events.

Imported only after the first kubelet registration and only with ``node_name`` set: kubernetes-asyncio
costs tens of MB. Each publisher (:data:`.publishers.PUBLISHERS`) rides out the API server's moods with
backoff, and the kubelet side never waits on any of them (docs/kubernetes.md).
"""
