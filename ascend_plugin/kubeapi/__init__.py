"""The Kubernetes API as the faces use it: one client, typed errors, backoff, the reflector. Imported only
when a face that talks to the API server starts (kubernetes-asyncio costs tens of MB)."""
