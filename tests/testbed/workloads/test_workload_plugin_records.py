"""A workload record of the user's own (a plugin file on TESTBED_PATH) of the wrong shape is
refused when it is made or registered, one line naming what is wrong and what is allowed (a
plugin file that makes one fails to load, named) — not an argparse traceback when ``testbed run``
builds its options, nor a run that starts and fails in the host."""
import argparse
import dataclasses
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import REPO
from testbed.spec.errors import UsageError
from testbed.workloads.base import (PROGRAM_OPTIONS, RESERVED, Workload, WorkloadRegistry, param)


@dataclass(frozen=True)
class Count:
    count: int = param(10, "messages")


def test_an_unknown_param_unit_or_side_is_refused_with_the_allowed_ones():
    with pytest.raises(ValueError, match=r"^param unit 'bytes'; allowed: size, time or none$"):
        param("1KB", "bytes per message", unit="bytes")
    with pytest.raises(ValueError, match=r"^param side 'host'; allowed: client, server, both, run$"):
        param(1, "x", side="host")


class NotADataclass:
    count: int = param(10, "messages")


@pytest.mark.parametrize("kw,message", [
    ({"port": "5100"}, "workload 'toy': port '5100'; allowed: a whole number 1..65535"),
    ({"port": 0}, "workload 'toy': port 0; allowed: a whole number 1..65535"),
    ({"port": True}, "workload 'toy': port True; allowed: a whole number 1..65535"),
    ({"params": NotADataclass}, "workload 'toy': params 'NotADataclass' is not a dataclass (a class with "
                                "@dataclass of its own); allowed: "
                                "a class decorated with @dataclass(frozen=True)"),
    ({"params": Count()}, "is not a dataclass"),
    ({"metrics": "client.jsonl"}, "workload 'toy': metrics 'client.jsonl'; allowed: a function run_dir"),
    ({"check": True}, "workload 'toy': check True; allowed: a function (params, spec, topology) or None"),
    ({"module": ""}, "workload 'toy': module ''; allowed: the module its programs run as"),
])
def test_a_record_of_the_wrong_shape_is_refused_naming_the_field(kw, message):
    with pytest.raises(UsageError) as exc:
        Workload(**{"name": "toy", "help": "a toy", "module": "toy", "params": Count, "port": 5100, **kw})
    assert message in str(exc.value), exc.value


@pytest.mark.parametrize("name", ["set", "help", "timeout", "topo", "overrides", "check_in_guest"])
def test_a_parameter_named_like_a_testbed_run_option_is_refused_when_registered(name):
    params = dataclasses.make_dataclass("P", [(name, str, param("1", "x"))], frozen=True)
    with pytest.raises(UsageError, match=f"parameter name\\(s\\) {name} collide with `testbed run` options"):
        WorkloadRegistry().register(Workload("toy", "a toy", "toy", params, 5100))


@pytest.mark.parametrize("name", ["log", "server", "listen"])
def test_a_parameter_its_program_gets_named_like_the_programs_own_option_is_refused(name):
    """``log`` went to the program as a second ``--log``: its parser failed in the host, after
    the topology was up; a ``run`` parameter of that name never reaches the program."""
    params = dataclasses.make_dataclass("P", [(name, str, param("1", "x"))], frozen=True)
    with pytest.raises(UsageError, match=f"parameter name\\(s\\) {name} collide with the options of its "
                                         "program .*; rename them, or give them side='run'"):
        WorkloadRegistry().register(Workload("toy", "a toy", "toy", params, 5100))
    run_side = dataclasses.make_dataclass("P", [(name, str, param("1", "x", side="run"))], frozen=True)
    WorkloadRegistry().register(Workload("toy", "a toy", "toy", run_side, 5100))


def test_reserved_names_are_every_option_testbed_run_has_of_its_own():
    """``set`` and ``help`` were missing: a parameter of either name crashed argparse."""
    from testbed.cli.run import _add_common
    p = argparse.ArgumentParser()
    _add_common(p)
    taken = {a.dest for a in p._actions} | {o.lstrip("-").replace("-", "_")
                                            for a in p._actions for o in a.option_strings}
    assert taken - {"h"} <= set(RESERVED), sorted(taken - set(RESERVED))
    from testbed.apps.appcli import app_parser
    from testbed.workloads import get
    parser, server, client = app_parser(get("bulk"), "bulk", print, print)
    own = {o.lstrip("-") for q in (server, client) for a in q._actions for o in a.option_strings
           if not any(o == "--" + f.name.replace("_", "-") for f in dataclasses.fields(get("bulk").params))}
    from testbed.spec import factors
    own -= {f.option.lstrip("-") for f in factors.FACTORS.values()} | {"h"}
    assert own <= set(PROGRAM_OPTIONS), sorted(own - set(PROGRAM_OPTIONS))


def test_a_factor_of_ones_own_named_like_a_builtin_workloads_parameter_is_the_factors_fault(
        tmp_path, monkeypatch):
    """A plugin factor ``size`` was reported as reqresp's parameter ``size`` to be renamed."""
    import socket

    from testbed.spec import factors
    from testbed.workloads import get

    registry = WorkloadRegistry()
    registry.register(get("reqresp"))
    plugin = tmp_path / "fsize.py"          # as plugins.import_file records it (test_plugins.py)
    monkeypatch.setitem(factors.FACTORS._records, "size", factors.Factor(
        "size", "socket", factors.positive_size, factors.SIZE, "x",
        sockopt=factors.SockOpt(socket.IPPROTO_TCP, 25)))
    monkeypatch.setitem(factors.FACTORS._origins, "size", str(plugin))
    with pytest.raises(UsageError) as exc:
        registry.check_factor_names()
    assert str(exc.value) == (f"factor 'size' ({plugin}) has the name of a parameter of the built-in "
                              "workload 'reqresp': --size would be both; rename the factor")


def test_a_factor_named_like_a_testbed_run_option_is_refused(monkeypatch):
    from testbed.spec import factors

    def parse(value):
        return value
    monkeypatch.setitem(factors.FACTORS._records, "timeout", factors.Factor(
        "timeout", "host", parse, "anything", "x", apply=parse))
    monkeypatch.setitem(factors.FACTORS._origins, "timeout", __file__)
    with pytest.raises(UsageError, match=r"^factor 'timeout' \(.*test_workload_plugin_records.py\): its "
                                         r"option --timeout is one of `testbed run`'s own"):
        WorkloadRegistry().check_factor_names()


PLUGIN = '''from dataclasses import dataclass
from testbed.workloads import WORKLOADS, Workload, param


@dataclass(frozen=True)
class P:
    {field}


WORKLOADS.register(Workload("{name}", "a toy", "{name}", P, {port}, socket_factors=False))
'''


@pytest.mark.parametrize("name,field,port,words", [
    ("tbwset", 'set: str = param("1", "x")', 5100, "parameter name(s) set collide with `testbed run` options"),
    ("tbwunit", 'count: str = param("1KB", "x", unit="bytes")', 5100, "param unit 'bytes'; allowed: size, time"),
    ("tbwport", 'count: int = param(1, "x")', '"5100"', "port '5100'; allowed: a whole number 1..65535"),
])
def test_testbed_run_names_the_plugin_file_in_one_line(tmp_path, name, field, port, words):
    """``set`` crashed argparse with a traceback; a unit of ``bytes`` and a port of ``"5100"``
    were taken, and the run failed later, in the host."""
    plugin = tmp_path / f"{name}.py"
    plugin.write_text(PLUGIN.format(name=name, field=field, port=port))
    r = subprocess.run([sys.executable, "-m", "testbed", "run", "--help"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO), "TESTBED_PATH": str(tmp_path)})
    err = r.stderr.strip()
    assert r.returncode == 2 and "\n" not in err and err.startswith(
        f"testbed: error: plugin {plugin} failed to load: ") and words in err, r.stderr
