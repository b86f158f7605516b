"""The operations endpoint (/healthz, /readyz, /metrics) and the metrics it serves."""
