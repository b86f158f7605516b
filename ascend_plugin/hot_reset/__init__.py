"""Hot reset: a chip whose fault calls for a reset is reset by the plugin, once nothing uses it.

Huawei's fault levels say what a fault needs; four of them need the chip reset
(RestartRequest, RestartBusiness, FreeRestartNPU, RestartNPU). With
``hot_reset`` on, such a chip is reset by the plugin, as Huawei's plugin does
with ``-hotReset`` (its current version, MindCluster v26.1.0), under these rules:

* **which chips** (:mod:`.rules`): those four levels; a chip at SeparateNPU or
  ManuallySeparateNPU is never reset, it is named in the node's ``ResetInfo``
  annotation (``ManualResetDevs``) for an operator instead;
* **the group** (``ChipBackend.reset_group``): a reset restarts more than the
  chip on most boards (an HCCS ring, a full mesh, a card), and every chip of the
  group must be free;
* **free** (:mod:`.freeness`), on every chip of the group: no container holds
  it, no process runs on it (a process list that cannot be read counts as
  busy), no reset has it already, and all of that for ``hot_reset_idle``
  seconds in a row; the faulty chip's health still bad (non-zero, or -8012);
* **the budget** (:mod:`.budget`): three resets per chip in any 6 hours; past
  that the chip stays out and goes into the annotation;
* **the sequence** (:mod:`.sequence`): every chip of the group marked out
  (:attr:`~ascend_plugin.inventory.inventory.ChipState.resetting`) and the
  kubelet told before the reset, the in-band reset of the faulty chip only, the
  wait for boot status 16 on every chip of the group (at most 180 s), the codes
  read again, and the group back through the normal health path. A reset that
  fails or times out names the chip in the annotation (:mod:`.manual`) and is
  not tried again; the chip leaves the annotation once it is healthy again;
* what happened is told (:mod:`.notices`: the ``HotResetStart``,
  ``HotResetComplete`` and ``HotResetFailed`` Events) and counted
  (:mod:`.stats`: the metrics).

:class:`~.manager.HotResetManager` runs all of it as one part of the plugin. It
is a package of its own, above the inventory and the offers and below the
faces: it reads the chips' verdicts (inventory), which chips pods hold (offers'
``HeldChips``) and asks the driver (chip calls); the Kubernetes face writes the
annotation and the Events from what it reports, and ``doctor`` reads its rules.
"""
