"""The testbed's workloads: ``WORKLOADS`` (``testbed.workloads.base``) holds each by name.

One module per workload holds its params dataclass, its record(s) and its check: ``reqresp``,
``bulk``, ``audio``, ``agent``, ``udpreq`` (reqresp over the UDP transport) and ``streams``
(streams, airbulk, airimage, multipath, duplicate).  This package imports them, so importing it registers
the built-ins; it re-exports what the apps and the CLI use.

Division of labour: what a workload is — its parameters, the programs it starts and their argv,
how its run directory becomes metrics — as records, without running anything.  May import the
layers below it (it uses ``testbed.spec``, ``testbed.transport`` and ``analysis``); imported by
``testbed.apps`` (their parsers derive from the params), ``testbed.run`` and the CLI.
"""
from testbed.workloads.base import (  # noqa: F401
    ALIASES, RESERVED, SIDES, WORKLOADS, Common, ParamError, Workload, add_params, all_workloads,
    applies, from_args, get, option, param, params_argv, resolve_alias, spec_path, transport_of)
from testbed.workloads.reqresp import ReqRespParams  # noqa: F401
from testbed.workloads.bulk import BulkParams  # noqa: F401
from testbed.workloads.audio import AudioParams  # noqa: F401
from testbed.workloads.agent import AgentParams  # noqa: F401
from testbed.workloads import udpreq, streams  # noqa: F401
