"""Which container holds which chips, as the kubelet recorded it (its PodResources API), in every mode.

Several parts need to know who holds a chip: the telemetry labels each chip's
figures with the container that holds it, the device-info ConfigMap leaves held
chips out of its free list (Volcano mode), fault management keeps a chip that a
pod holds in service while it may, hot reset waits until nobody holds a chip's
group. None of them may ask the kubelet on its own or know another face, so the
asking and the mapping live here, below the faces:

* :mod:`.pod_resources`: the client of the kubelet's PodResources socket (v1,
  v1alpha1 for old kubelets), one listing per container: device-plugin device
  IDs and DRA claims' devices;
* :mod:`.resolve`: how a kubelet device ID (through the offer book, and the
  Volcano chooser's kubelet-ID map) or a DRA claim's device names chips, vNPUs
  and shares included;
* :mod:`.holdings`: :class:`~.holdings.PodHoldings`, the listing refreshed on a
  cadence and on demand, resolved to chips per container, and the node's
  :class:`~ascend_plugin.offers.assignments.HeldChips` kept filled from it.

It asks the kubelet, never the container runtime: it works on any CRI and needs
no runtime socket in the plugin's pod.
"""
