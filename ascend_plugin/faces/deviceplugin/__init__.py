"""The kubelet's device-plugin API: one gRPC endpoint and registrar per offered resource."""
