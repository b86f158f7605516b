"""Huawei's fault policy: the level a chip's faults reach, what escalates it, and what lifts it.

The rules and the files are those of Huawei's Ascend Device Plugin
(MindCluster), so a cluster configured for Huawei's plugin behaves the same
with this one:

* :mod:`.fault_codes` reads ``faultCode.json`` and decides a chip's level and
  its network level from its current codes; :mod:`.overlay` is the plugin's
  own shorter format laid over it;
* :mod:`.customization` reads ``faultCustomization.json`` (GraceTolerance,
  FaultFrequency, FaultDuration);
* :mod:`.config` puts them together from the ConfigMap ``mindx-dl-fault-config``,
  the operator's file and the built-in files, with Huawei's fallbacks;
* :mod:`.frequency`, :mod:`.duration` and :mod:`.accompanying` are the counters
  and clocks per chip and code; :mod:`.reasons` the escalations they leave;
* :mod:`.chip` keeps one chip's state, :mod:`.policy` the node's, with the API
  the monitor and the Kubernetes publishers use.

Nothing here calls a chip library or the API server, or reads the clock except
through the one it is given: times come with the observations.
"""
