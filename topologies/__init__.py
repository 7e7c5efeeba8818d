"""The testbed's topologies, by name. Each module defines one ``TestbedTopo`` subclass."""
from __future__ import annotations

import importlib

# name → module; imported on demand (Mininet is only needed when a topology is used).
TOPOLOGIES = {
    "longhaul": "topologies.longhaul",
    "image": "topologies.image",
    "relay": "topologies.relay",
    "wifi": "topologies.wifi",
    "dualpath": "topologies.dualpath",
    "edgecloud": "topologies.edgecloud",
}


def topology_class(name: str):
    if name not in TOPOLOGIES:
        raise ValueError(f"unknown topology {name!r}; available: {', '.join(sorted(TOPOLOGIES))}")
    module = importlib.import_module(TOPOLOGIES[name])
    from topologies.base import TestbedTopo
    for obj in vars(module).values():
        if isinstance(obj, type) and issubclass(obj, TestbedTopo) and obj.name == name:
            return obj
    raise LookupError(f"module {TOPOLOGIES[name]} defines no topology named {name!r}")
