"""The chips as a Dynamic Resource Allocation driver (``resource.k8s.io/v1``, Kubernetes 1.34+), instead of
the device-plugin face: registration, Prepare and Unprepare, ResourceSlices, the health stream. docs/dra.md
says what it does; :mod:`.face` puts it together."""
