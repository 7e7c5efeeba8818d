"""Captures in, timelines and TCP/QUIC metrics out (``testbed analyze``).

Modules: ``pcap`` (vectorised pcap/pcapng reader), ``flows`` (5-tuple flows), ``tcpsender``
(sans-I/O sender model: outstanding, pipe, retransmission kinds, RTT samples; the
reference), ``senderrun`` (runs it over a flow, packet by packet or on the fast path),
``native`` (the fast path's C library: reader and sender state machines), ``tcp``
(per-direction analysis: rates, ACK ratio, flights), ``handshake`` (connection and
request/response timeline), ``clock`` (pcap time -> CLOCK_MONOTONIC), ``applog`` (JSONL
event join), ``linkjoin`` (emulator frame-log join), ``qlog`` (QUIC from aioquic qlog),
``report`` (per-flow JSON), ``plots``/``plotset`` (figures, their layout check), ``page`` (one
self-contained HTML page: the shell every report uses), ``runpage`` (a run's page and the setup
rows every report starts with), ``runmetrics`` (a run directory's named metrics and checks) and
``models`` (the chapter's closed-form models); the command line is ``testbed/cli/analyze.py``.

Division of labour: files in, numbers and plots out — no namespaces, no processes, no sockets.
May import ``testbed.spec``, ``testbed.protocols`` and ``testbed.emulator`` (frame logs, the
playback and air models); imported by ``testbed.workloads`` (each workload's metrics),
``testbed.host``, ``experiments`` and the CLI.
"""
