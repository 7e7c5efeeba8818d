"""A packet-level transport research testbed: topologies with emulated links, real stacks,
captures and analysis.

The Python API is a handful of names; ``import testbed`` is cheap (each is imported when first
used):

    from testbed import RunSpec, execute, load_run
    spec = RunSpec(topology="longhaul", workload="reqresp", params={"requests": 5},
                   socket={"cc": "bbr"})
    result = execute(spec, "results/my-run")          # needs root for a topology
    result.metrics["completion_ms_median"], result.checks, result.fidelity["verdict"]
    load_run("results/my-run").spec.diff(spec)        # {} : the run records its spec

- ``RunSpec`` (and ``CaptureSpec``): one run as a frozen, JSON-round-tripping value
  (``testbed/spec/runspec.py``); ``LinkSpec``: one direction of a link (``testbed/spec/linkspec.py``).
- ``resolve(spec) -> Plan``: the spec checked against the registries once, with the workload
  record, its params, the topology and the roles (``testbed/run/plan.py``).
- ``execute(spec_or_plan, out_dir) -> RunResult``: one run into a run directory
  (``testbed/run/execute.py``); ``load_run(dir)``: a run directory's ``RunResult``
  (``testbed/spec/runresult.py``).
- ``UsageError`` (bad input: one line saying what is wrong and what is allowed), ``SetupError``
  and ``RunError`` (``testbed/spec/errors.py``).

The command line (``testbed --help``) is ``testbed.cli``.

Division of labour: the packages by role, lowest layer first — ``spec`` (values), ``protocols``
and ``emulator`` (sans-I/O cores, the link emulator), ``transport``, then (outside this package)
``analysis`` and ``topologies``, then ``workloads``, ``apps``, ``host``, ``backends``, ``run``,
``calibrate``, (outside) ``experiments``, and ``cli`` on top; a module imports only its own layer
and those below (``tests/test_hygiene.py``; ``docs/architecture.md``).  This module only names
the public API; it imports each name when first used.
"""

__all__ = ["CaptureSpec", "LinkSpec", "Plan", "RunError", "RunResult", "RunSpec", "SetupError",
           "UsageError", "execute", "load_run", "resolve"]


def __getattr__(name: str):
    if name in ("RunSpec", "CaptureSpec"):
        from testbed.spec import runspec as module
    elif name in ("RunResult", "load_run"):
        from testbed.spec import runresult as module
    elif name == "LinkSpec":
        from testbed.spec import linkspec as module
    elif name in ("UsageError", "SetupError", "RunError"):
        from testbed.spec import errors as module
    elif name in ("Plan", "resolve"):
        from testbed.run import plan as module
    elif name == "execute":
        from testbed.run import execute as module
    else:
        raise AttributeError(f"module 'testbed' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
