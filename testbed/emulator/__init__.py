"""Userspace link emulator.

The sans-I/O core (no sockets, clocks or processes; driven by ``(now_ns, frame_len)`` calls in
virtual time) decides for every frame "delivered at t" or "dropped (random loss | queue
overflow)":

- ``direction``: ``DirectionModel``, one direction of one link, and the order of operations
  (queue → serializer or shared air → random loss → propagation);
- ``queue``: the drop-tail bottleneck buffer;
- ``serializer``: exact integer-nanosecond transmission at the bottleneck rate;
- ``loss``: Bernoulli, Gilbert–Elliott (netem ``gemodel``) and drop-list generators;
- ``airtime``: ``AirtimeSpec`` and ``AirMedium``, the shared half-duplex 802.11a air interface
  of CHAPTER12.md C10;
- ``schedule_model``: ``ScheduledDirection``, a direction whose ``LinkSpec.schedule`` changes it
  during the run (steps, outages, per-frame events, Mahimahi traces), its ``ScheduleChange``
  records, and ``make_direction`` (the constant or the scheduled model of a spec).

The I/O loop around it (AF_PACKET forwarder, logs, Mininet link class) lives in the other
modules of this package; ``native`` holds the C engine, the same model and loop in C, tested
against these classes frame by frame.  Nothing here imports numpy, so importing the package stays cheap.

Division of labour: decides, frame by frame, what an emulated link does, and forwards the frames;
knows nothing of topologies, workloads or runs.  May import ``testbed.spec``; imported by the
userspace backend (``testbed.backends``), ``testbed.run``, ``analysis`` (frame logs, the air
model), ``testbed.transport`` (its virtual-time harness), ``topologies`` (air media) and
``experiments``.
"""
from testbed.emulator.airtime import AirMedium, AirStats, AirtimeSpec
from testbed.emulator.direction import (DELIVER, DROP_EVENT, DROP_LOSS, DROP_OUTAGE, DROP_QUEUE, VERDICT_NAMES,
                                        DirectionModel, DirectionStats)
from testbed.emulator.schedule_model import ScheduleChange, ScheduledDirection, make_direction

__all__ = ["AirMedium", "AirStats", "AirtimeSpec", "DELIVER", "DROP_EVENT", "DROP_LOSS", "DROP_OUTAGE",
           "DROP_QUEUE", "VERDICT_NAMES", "DirectionModel", "DirectionStats", "ScheduleChange",
           "ScheduledDirection", "make_direction"]
