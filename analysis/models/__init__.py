"""Closed-form models of CHAPTER12.md, one module per concept group, all in one registry.

``MODELS`` maps a name to a :class:`~analysis.models.base.Model`; ``evaluate(name, **params)``
returns named outputs with units.  Plain functions, no I/O; ``testbed model`` is the CLI.
"""
from analysis.models.base import MODELS, Model, Params, Q, evaluate, get  # noqa: F401
from analysis.models import transfer, window, longhaul, recovery, setup, streams, audio, airtime  # noqa: F401
from analysis.models import multipath, agent  # noqa: F401
