"""The testbed's topologies: ``TOPOLOGIES`` (``topologies.base``) holds each by name.

Each built-in module defines one ``TestbedTopo`` subclass, registered with
``@TOPOLOGIES.register``; this package imports them.  ``topology_class`` looks a topology up by
name, or loads a file of the user's own given by path (``--topo ./chain.py``).

Division of labour: describes paths — hosts, roles, named links with a ``LinkSpec`` per
direction, structural parameters — and never brings one up.  May import the layers below it (it
uses ``testbed.spec`` and ``testbed.emulator``, for air media); imported by ``testbed.run``
(which brings the description up), ``experiments`` and the CLI.
"""
from __future__ import annotations

from pathlib import Path

from testbed.spec import plugins
from testbed.spec.errors import UsageError
from topologies.base import TOPOLOGIES, TestbedTopo, spec  # noqa: F401
from topologies import longhaul, image, relay, wifi, dualpath, edgecloud, handover  # noqa: F401


def topology_class(name_or_path: str) -> type[TestbedTopo]:
    """The topology registered as ``name_or_path``, or the one topology the Python file at that
    path registers (imported once, see ``testbed.spec.plugins.import_file``; its ``source`` is
    then the file's absolute path).  UsageError names the allowed names, or what the file lacks."""
    if not plugins.is_path(name_or_path):
        return TOPOLOGIES.get(name_or_path)
    module = plugins.import_file(name_or_path)
    found = [cls for cls in TOPOLOGIES.values() if cls.__module__ == module.__name__]
    if len(found) != 1:
        what = f"{len(found)} topologies ({', '.join(c.name for c in found)})" if found else "no topology"
        raise UsageError(f"{module.__file__} registers {what}; a topology file registers one "
                         "TestbedTopo subclass with @TOPOLOGIES.register")
    cls = found[0]
    cls.source = str(Path(module.__file__).resolve())
    return cls
