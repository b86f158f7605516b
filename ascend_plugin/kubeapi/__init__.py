"""The Kubernetes API as the plugin's faces use it: one client, typed errors, backoff, the reflector.

kubernetes-asyncio costs tens of MB and most of a second to import, so nothing
imports this package until a face that talks to the API server starts (and
none does on a node without ``NODE_NAME``).
"""
