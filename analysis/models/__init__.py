"""Closed-form models of CHAPTER12.md, one module per concept group, all in one registry.

``MODELS`` (``analysis.models.base``) holds each :class:`~analysis.models.base.Model` by name;
each module registers its models with the ``register`` decorator and this package imports the
modules.  ``evaluate(name, **params)`` returns named outputs with units.  Plain functions, no
I/O; ``testbed model`` is the CLI.
"""
from analysis.models.base import MODELS, Model, Params, Q, evaluate, get  # noqa: F401
from analysis.models import transfer, window, longhaul, recovery, setup, streams, audio, airtime  # noqa: F401
from analysis.models import multipath, agent  # noqa: F401
