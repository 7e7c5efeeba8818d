"""Sans-I/O cores of the in-host programs: ``playback`` (the C9 audio player), ``mux`` (the relay
tunnel's framing), ``streammux`` (the C8 streams' framing, scheduler and decoder) and ``socks5``.
Driven by calls, tested without sockets.

Division of labour: decides what bytes mean and what to send next, never touches a socket or a
clock of its own.  May import ``testbed.spec`` (it needs nothing of the project); imported by
``testbed.apps`` and by ``analysis.models`` (the playback model).
"""
