"""Link backends: how a topology's LinkSpecs become real impairments.

``netem``: the kernel's htb + netem on each side's egress (testbed/backends/kernel.py).
``userspace``: the project's emulator forwarding frames between veth ends
(testbed/backends/userspace.py).  ``auto`` picks netem where the kernel has it.
``netem-uml``: the kernel backend inside a User-Mode Linux guest (testbed/backends/uml/__init__.py), for machines
whose own kernel has no netem; ``netem-vm``: the same inside a Debian VM booted by qemu
(testbed/backends/vm/__init__.py).

A backend is anything that satisfies ``Backend`` below.

Division of labour: turns a topology's LinkSpecs into impairments on its veths and records what
it did; knows nothing of workloads.  May import the layers below it (it uses ``testbed.spec``,
``testbed.emulator`` and ``testbed.host``); imported by ``testbed.run`` and the CLI.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from testbed.spec.runspec import BACKENDS  # what a RunSpec takes, written once


class Backend(Protocol):
    """How a topology's LinkSpecs become impairments."""
    name: str

    def link_class(self) -> Callable[..., Any]:
        """A Mininet Link factory ``(node1, node2, spec_ab=, spec_ba=, medium=, **params)``."""

    def setup(self, net: Any, run: Any) -> None:
        """After the network is built: start what the backend needs, record it in ``run``."""

    def teardown(self) -> None:
        """Stop what ``setup`` started; idempotent."""

    def summary(self) -> dict[str, Any]:
        """What the run records about the backend (``fidelity.verdict`` reads it)."""

# Link schedules (``LinkSpec.schedule``): a backend that applies them also has
# ``set_origin(t_ns) -> dict | None``, which ``Testbed.set_link_origin`` calls when the client
# starts: start every schedule at CLOCK_MONOTONIC ``t_ns``, return ``{"origin_requested_ns": t_ns,
# "origin_ns": {direction: ns applied}, ...}`` (None when no link has a schedule).  Its
# ``summary()["directions"][direction]["schedule"]`` is ``{"origin_ns", "changes": [
# ScheduleChange.to_dict(), ...]}``, which the run's manifest (``link_changes``) and
# ``testbed analyze`` read.

# What commands accept: ``netem-uml`` re-runs the whole command inside a User-Mode Linux guest
# with ``--backend netem`` (testbed/backends/uml/__init__.py), ``netem-vm`` inside the qemu VM
# (testbed/backends/vm/__init__.py); select_backend itself never sees them.
BACKEND_CHOICES = BACKENDS + ("netem-uml", "netem-vm")


def check_available(name: str) -> None:
    """Refuse ``netem`` where the kernel lacks netem or htb (probed once, as root), saying what
    to use instead, before anything is built."""
    if name != "netem":
        return
    from testbed.spec.errors import UsageError
    from testbed.backends.kernel import probe_qdiscs
    probe = probe_qdiscs()
    missing = [q for q in ("netem", "htb") if not probe[q]]
    if missing and probe["netns"]:  # without a namespace nothing was tried: root, netns say why
        why = "; ".join(probe["errors"].get(q, "") for q in missing if probe["errors"].get(q))
        raise UsageError(f"--backend netem: this kernel has no {' and no '.join(missing)} qdisc"
                         + (f" ({why})" if why else "") + "; use --backend userspace or auto (the "
                         "userspace emulator), netem-vm (netem in a qemu VM, `testbed vm build`) or netem-uml "
                         "(netem in a User-Mode Linux guest); "
                         "`testbed doctor` shows what this machine has")


def select_backend(name: str, seed: int = 1) -> Backend:
    """The backend object for ``name``; ``auto`` probes the kernel for netem and htb."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    if name == "auto":
        from testbed.backends.kernel import probe_qdiscs
        probe = probe_qdiscs()
        name = "netem" if probe["netem"] and probe["htb"] else "userspace"
    if name == "netem":
        from testbed.backends.kernel import KernelBackend
        return KernelBackend(seed=seed)
    from testbed.backends.userspace import UserspaceBackend
    return UserspaceBackend(seed=seed)
