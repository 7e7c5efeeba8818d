"""What touches a host of a topology: ``namespace`` (commands and sysctls in a host's namespace),
``netlink`` (routes, neighbours and sysctls over netlink), ``capture`` (tcpdump on every
interface), ``steering`` (receive processing steered away from the emulator's CPU), ``ready``
(waiting for a server), ``lifecycle`` (the record of everything a run starts, which teardown
and ``testbed clean`` end), ``git`` (the checkout's revision, handed into a guest without
git) and ``logs`` (log lines on stderr as the CLI prints them, in a command's process and a
campaign worker's).

Division of labour: the namespaces and processes of one host, nothing about links or runs.  May
import the layers below it (it uses ``testbed.spec`` and ``analysis``); imported by
``testbed.backends``, ``testbed.run``, ``testbed.calibrate``, ``experiments`` and the CLI.
"""
