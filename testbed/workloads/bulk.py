"""``bulk``: a bulk transfer by size or duration, either direction (app ``testbed/apps/bulk.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from testbed.spec.units import parse_size, parse_time
from testbed.workloads.base import WORKLOADS, Common, ParamError, Workload, param


@dataclass(frozen=True)
class BulkParams(Common):
    direction: str = param("up", "up: the client sends; down: the server sends", choices=("up", "down"))
    size: str | None = param(None, "bytes to transfer, e.g. 30MB (or give duration)", unit="size")
    duration: str | None = param(None, "or: transfer for this long, e.g. 10s", unit="time")

    def validate(self) -> None:
        if (self.size is None) == (self.duration is None):
            raise ParamError("needs exactly one of {size} or {duration}", "size", "duration")
        if self.size is not None and parse_size(self.size) <= 0:
            raise ValueError(f"size {self.size}: give at least 1 byte, e.g. 30MB")
        if self.duration is not None and parse_time(self.duration) <= 0:
            raise ValueError(f"duration {self.duration}: give more than 0 s, e.g. 10s")


BULK = WORKLOADS.register(Workload("bulk", "bulk transfer by size or duration, either direction",
                                   "testbed.apps.bulk", BulkParams, 5001))
