"""What touches a host of a topology: ``namespace`` (commands and sysctls in a host's namespace),
``netlink`` (routes, neighbours and sysctls over netlink), ``capture`` (tcpdump on every
interface), ``steering`` (receive processing steered away from the emulator's CPU), ``ready``
(waiting for a server), ``lifecycle`` (the record of everything a run starts, which teardown
and ``testbed clean`` end) and ``git`` (the checkout's revision, handed into a guest without
git).

Division of labour: the namespaces and processes of one host, nothing about links or runs.  May
import the layers below it (it uses ``testbed.spec`` and ``analysis``); imported by
``testbed.backends``, ``testbed.run``, ``testbed.calibrate`` and the CLI.
"""
