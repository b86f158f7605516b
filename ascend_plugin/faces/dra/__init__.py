"""The chips as a Dynamic Resource Allocation driver (``resource.k8s.io/v1``, Kubernetes 1.34+).

The scheduler allocates devices that a driver publishes in ResourceSlices, and
the kubelet asks the driver to prepare each allocated claim on the node. This
face is that driver, on the same inventory and health verdicts as the
device-plugin face (which does not run beside it: the scheduler would count
every chip twice):

* :mod:`~ascend_plugin.faces.dra.registration`: the plugin watcher's
  registration service on ``<registry>/<driver>-reg.sock``;
* :mod:`~ascend_plugin.faces.dra.service`: the DRA v1 and v1beta1 services on
  ``<plugin dir>/dra.sock``, serialised by
  :mod:`~ascend_plugin.faces.dra.prepare` (claims from
  :mod:`~ascend_plugin.faces.dra.claims`, state in
  :mod:`~ascend_plugin.faces.dra.checkpoint`, CDI specs per claim from
  :mod:`~ascend_plugin.faces.dra.claim_specs`);
* :mod:`~ascend_plugin.faces.dra.health`: the device-health stream;
* :mod:`~ascend_plugin.faces.dra.slices`: the node's ResourceSlices, built by
  :mod:`~ascend_plugin.faces.dra.devices` and kept in place after any wipe;
* :mod:`~ascend_plugin.faces.dra.face`: the whole, as one part of the app.
"""
