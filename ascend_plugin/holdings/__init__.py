"""Which container holds which chips, in every mode: the one place the other parts ask
(:class:`.held.HeldChips`).

:mod:`.pod_resources` asks the kubelet's PodResources API; :mod:`.held` resolves what it lists to chips and
adds what Allocate, Prepare and Volcano's annotations tell it. ARCHITECTURE.md "Who holds a chip".
"""
