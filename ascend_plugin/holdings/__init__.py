"""Which container holds which chips, in every mode: the one place the other parts ask.

:class:`~.held.HeldChips` asks the kubelet's PodResources API (:mod:`.pod_resources`),
resolves what it lists to chips (:mod:`.resolve`: device-plugin IDs, Volcano's
kubelet IDs, DRA claims' devices) and adds what Allocate, Prepare and Volcano's
annotations tell it. ARCHITECTURE.md "Who holds a chip".
"""
