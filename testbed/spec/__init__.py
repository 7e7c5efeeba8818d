"""Values of the testbed, no I/O: ``units`` (parsing human units), ``errors`` (the error
hierarchy), ``clock``, ``linkspec`` (``LinkSpec``), ``runspec`` (``RunSpec``), ``runresult``
(``RunResult`` and the manifest), ``factors`` (the factor records), ``registry`` (``Registry``,
every lookup by name) and ``plugins`` (records from the user's own directories).

Division of labour: the lowest layer, values every other layer passes around.  It imports nothing
of the project; every package but ``testbed.protocols`` imports it.
"""
