"""Workloads that run as separate processes inside the testbed's hosts, each writing a JSONL
event log on CLOCK_MONOTONIC (``eventlog`` defines every event name).

Apps (``python -m testbed.apps.<name> ...``; ``testbed run <workload>`` starts them in a topology):
``reqresp`` (request/response, C7), ``bulk``, ``audio`` (C9 streaming with the ``playback``
model), ``agent`` (screenshot agent loop, C13), ``relay`` (SOCKS5 gateway pair joined by one
tunnel, C7), ``tcpopts host`` (namespace-wide TCP factors).

Building blocks: ``tcpopts`` (factors set before listen/connect and read back), ``tcpinfo``
(TCP_INFO decoded for Linux 6.18 and sampled), ``sockets``, ``payload`` (the fixed 354,640 B
request body), ``tls`` (TLS 1.3, certificate made at run time); the sans-I/O cores they drive
(``playback``, ``mux``, ``streammux``, ``socks5``) are in ``testbed.protocols``.

Division of labour: programs that run inside a host as processes; nothing here brings up a
topology or reads a run directory.  May import the layers below it (it uses ``testbed.spec``,
``testbed.protocols``, ``testbed.transport`` and ``testbed.workloads``, whose records derive the
apps' parsers); started by ``testbed.run`` (``python -m testbed.apps.NAME``), which imports only
what it needs to build their argv.
"""
