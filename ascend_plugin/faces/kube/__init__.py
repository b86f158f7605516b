"""The plugin's Kubernetes side: node labels, device-info ConfigMap, config reload, node Events.

Only the app imports :mod:`~ascend_plugin.faces.kube.run`, lazily, after the first kubelet
registration and only when ``node_name`` is set: kubernetes-asyncio costs tens
of MB and most of a second to import, which a 4 GB edge board should not pay
before its NPU is served (or at all, with the kube features off). Nothing
outside this package imports kubernetes-asyncio.

Each publisher (:data:`~ascend_plugin.faces.kube.publishers.PUBLISHERS`) runs
supervised in one task group and handles the API server's moods itself (down,
403, 409, 410, 5xx) with backoff, so none of them can stall or break the kubelet
side, which never waits on anything here.
"""
