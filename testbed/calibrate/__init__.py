"""``testbed calibrate``: measure an emulated link with real packets — RTT, rate and loss per
direction, reordering, the emulator's scheduling error — configured against measured
(``link``), with UDP probes (``probe``, ``pathprobe``).

Division of labour: measures the path a run would get, runs no workload.  May import the layers
below it (it uses ``testbed.spec``, ``testbed.host`` and ``testbed.run``); imported by the CLI
(``testbed calibrate``, ``testbed demo``).
"""
from __future__ import annotations

import json
import os


def guest() -> str | None:
    """Where this process runs when it is in a guest of ``--backend netem-uml``/``netem-vm``
    (from ``TESTBED_UML_GUEST``/``TESTBED_VM_GUEST``, which the guest's host sets): "a UML guest
    (UML 6.1.0, ptrace)", "the VM (tcg, 1 vCPU, kernel 6.1.0-…)"; None outside a guest."""
    uml = json.loads(os.environ.get("TESTBED_UML_GUEST") or "null")
    if uml:
        return f"a UML guest (UML {uml.get('release')}, {uml.get('mode')})"
    vm = json.loads(os.environ.get("TESTBED_VM_GUEST") or "null")
    if vm:
        return f"the VM ({vm.get('accel')}, {vm.get('cpus')} vCPU, kernel {vm.get('kernel')})"
    return None
