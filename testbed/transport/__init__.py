"""The testbed's own UDP transport: a sans-I/O endpoint (``endpoint.Endpoint``) with
selective-repeat ARQ, RaptorQ FEC with fixed or adaptive redundancy, ACK policies and pacing,
driven by ``(now, datagram)`` / ``(now, timer)`` calls; ``udploop`` is the thin socket loop and
``sim`` drives two endpoints over the emulator's ``DirectionModel`` in virtual time.

Modules: ``wire`` (packet format), ``config`` (the typed configuration and factor parsing),
``rtt`` (RFC 6298 estimator), ``ackpolicy`` (when the receiver ACKs), ``fec`` (redundancy rule,
loss-rate estimate, RaptorQ blocks), ``pacing`` (pacer and delivery-rate estimate),
``endpoint`` (the protocol), ``sim``, ``model`` (closed forms and the ideal round model); the
socket loop is ``testbed/apps/udploop.py``.

Division of labour: the protocol alone, no sockets.  May import ``testbed.spec`` and
``testbed.emulator`` (the virtual-time harness); imported by ``testbed.apps`` (``udpreq``,
``udploop``) and ``testbed.workloads`` (reqresp's transport parameters).
"""
