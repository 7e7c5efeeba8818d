"""One run: ``plan`` (a ``RunSpec`` resolved once into a ``Plan``), ``network`` (``Testbed``: a
topology up with its backend), ``execute`` (a plan into a run directory and a ``RunResult``),
``loopback`` (a workload on 127.0.0.1, no root) and ``provenance`` (``metadata.json``).

Division of labour: the machinery between a spec and its run directory; never parses a command
line.  May import every layer below it (it uses spec, emulator, topologies, workloads, apps,
host and backends); imported by ``testbed.calibrate``, ``experiments`` and the CLI.
"""
