"""``testbed calibrate``: measure an emulated link with real packets — RTT, rate and loss per
direction, reordering, the emulator's scheduling error — configured against measured
(``link``), with UDP probes (``probe``, ``pathprobe``).

Division of labour: measures the path a run would get, runs no workload.  May import the layers
below it (it uses ``testbed.spec``, ``testbed.host`` and ``testbed.run``); imported by the CLI
(``testbed calibrate``, ``testbed demo``).
"""
