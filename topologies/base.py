"""Base class of the testbed's topologies: a Mininet ``Topo`` with declared, overridable parameters.

A topology declares ``params``: name → (default, help).  ``testbed topo up NAME --set KEY=VALUE``
overrides them; an unknown key is an error naming the allowed ones.  Links carry one
``LinkSpec`` per direction: ``addLink(a, b, spec_ab=..., spec_ba=...)`` (a→b and b→a).
Hosts take ``router=True`` (IP forwarding on), ``routes=[(prefix, via), ...]``, ``sysctls`` and
``commands`` (argv lists run in the host after its routes, e.g. source-address routing rules).
Links without a spec (``addLink(a, b)``) are unimpaired veths.
"""
from __future__ import annotations

from typing import Any, ClassVar

from mininet.topo import Topo

from testbed.linkspec import LinkSpec


class TestbedTopo(Topo):
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    chapter_case: ClassVar[str] = ""
    params: ClassVar[dict[str, tuple[Any, str]]] = {}

    def __init__(self, **overrides: Any):
        self.values = self.resolve(overrides)
        super().__init__(**self.values)

    @classmethod
    def resolve(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = set(overrides) - set(cls.params)
        if unknown:
            allowed = ", ".join(f"{k} (default {v[0]})" for k, v in cls.params.items())
            raise ValueError(f"topology {cls.name!r} has no parameter(s) {sorted(unknown)}; "
                             f"allowed: {allowed}")
        values = {k: default for k, (default, _help) in cls.params.items()}
        values.update(overrides)
        return values

    def link_specs(self) -> list[tuple[str, str, LinkSpec | None, LinkSpec | None]]:
        """(a, b, spec a→b, spec b→a) for every link."""
        return [(a, b, info.get("spec_ab"), info.get("spec_ba"))
                for a, b, info in self.links(sort=True, withInfo=True)]

    def link_records(self) -> list[dict[str, Any]]:
        """Every link as recorded in run metadata: ends, both specs, shared medium if any."""
        records = []
        for a, b, info in self.links(sort=True, withInfo=True):
            specs = (info.get("spec_ab"), info.get("spec_ba"))
            medium = info.get("medium")
            records.append({
                "a": a, "b": b,
                "a_to_b": specs[0].to_dict() if specs[0] else None,
                "b_to_a": specs[1].to_dict() if specs[1] else None,
                "medium": medium.to_dict() if medium is not None else None,
                "describe": [(s.describe() if s else "unimpaired")
                             + (f", shared air {medium.name!r}" if medium is not None else "")
                             for s in specs]})
        return records


def spec(rate: Any = None, delay: Any = 0, loss: Any = 0, queue: Any = None, jitter: Any = None,
         **extra: Any) -> LinkSpec:
    """A LinkSpec from human units: ``LinkSpec.parse`` with rate, delay, loss, queue positional."""
    return LinkSpec.parse(rate=rate, delay=delay, loss=loss, queue=queue, jitter=jitter, **extra)
