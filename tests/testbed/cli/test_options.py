"""One meaning per shared option: ``--set``/``--link`` in ``run``, ``topo up``/``show`` and
``experiment run``; the KEY=VALUE parsers (no root)."""
import pytest

from testbed.cli import build_parser
from testbed.cli.options import spec_sets, topology_sets, value
from testbed.spec.errors import UsageError


def test_a_bare_key_is_a_topology_parameter_and_a_dotted_path_a_spec_path():
    sets = spec_sets(["rate_up=50mbit", "params.requests=5", "socket.nodelay=true"],
                     ["bottleneck.down.loss=3%"])
    assert sets == {"topology_params.rate_up": "50mbit", "params.requests": 5,
                    "socket.nodelay": True, "links.bottleneck.down.loss": "3%"}
    assert spec_sets(["topology_params.rate_up=50mbit"], []) == spec_sets(["rate_up=50mbit"], [])
    assert spec_sets([], ["bottleneck.down.loss=3%"]) == spec_sets(["links.bottleneck.down.loss=3%"], [])
    assert spec_sets(["timeout=30", "backend=userspace"], []) == {"timeout": 30, "backend": "userspace"}


@pytest.mark.parametrize("sets,links,message", [
    (["rate_up"], [], "--set 'rate_up': expected KEY=VALUE with a value"),
    (["rate_up="], [], "expected KEY=VALUE with a value"),
    ([], ["bottleneck.down="], "expected LINK.DIR.FIELD=VALUE with a value"),
    ([], ["bottleneck=3%"], "expected LINK.DIR.FIELD=VALUE"),
])
def test_bad_items_are_one_line(sets, links, message):
    with pytest.raises(UsageError, match=message):
        spec_sets(sets, links)


def test_a_command_without_a_run_takes_the_topology_paths_only():
    assert topology_sets(["delay=5ms", "topology_params.rate_up=50mbit"], ["bottleneck.down.loss=3%"]) == \
        ({"delay": "5ms", "rate_up": "50mbit"}, {"bottleneck.down.loss": "3%"})
    with pytest.raises(UsageError, match="brings up a topology only"):
        topology_sets(["params.requests=5"], [])


def test_values_are_toml_literals_else_the_string():
    assert (value("5"), value("0.5"), value("true"), value('"x y"')) == (5, 0.5, True, "x y")
    assert (value("50mbit"), value("3%"), value("unshaped")) == ("50mbit", "3%", "unshaped")


def _parse(*argv):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("flag", [["--set", "rate_up=50mbit"], ["--set", "topology_params.rate_up=50mbit"]])
def test_set_means_the_same_in_run_topo_up_and_experiment_run(flag, tmp_path):
    from experiments import load_definition
    from testbed.cli.run import spec_from_args
    from testbed.cli.topo import build

    run = spec_from_args(_parse("run", "reqresp", "--topo", "longhaul", *flag, "--link",
                                "bottleneck.down.queue=50"))
    assert run.topology_params == {"rate_up": "50mbit"} and run.links == {"bottleneck.down.queue": 50}
    topo = build(_parse("topo", "up", "longhaul", *flag, "--link", "bottleneck.down.queue=50"))
    assert topo.values["rate_up"] == "50mbit" and topo.link_overrides == {"bottleneck.down.queue": 50}
    args = _parse("experiment", "run", "reuse", *flag, "--link", "bottleneck.down.queue=50")
    base = load_definition("reuse").with_overrides(sets=spec_sets(args.overrides, args.link)).base_spec()
    assert base.topology_params["rate_up"] == "50mbit" and base.links == {"bottleneck.down.queue": 50}


def test_run_takes_any_spec_path_after_its_own_options():
    from testbed.cli.run import spec_from_args
    spec = spec_from_args(_parse("run", "reqresp", "--topo", "loopback", "--capture", "none",
                                 "--requests", "3", "--set", "params.requests=5", "--set", "socket.cc=reno"))
    assert spec.params == {"requests": 5} and spec.socket == {"cc": "reno"}


def test_resume_means_continue_and_tls_resume_tls_session_resumption():
    assert _parse("experiment", "run", "reuse", "--resume").resume is True
    assert _parse("run", "reqresp", "--tls", "--tls-resume").tls_resume is True
    with pytest.raises(SystemExit):
        _parse("run", "reqresp", "--resume")


def test_every_backend_option_offers_the_one_backend_list():
    import argparse

    from testbed.backends import BACKEND_CHOICES, BACKENDS
    found = {}

    def walk(parser, name):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, p in a.choices.items():
                    walk(p, f"{name} {sub}")
            elif "--backend" in a.option_strings:
                found[name] = tuple(a.choices)
    walk(build_parser(), "testbed")
    assert {"testbed run reqresp", "testbed topo up", "testbed experiment run", "testbed calibrate",
            "testbed demo", "testbed reproduce"} <= set(found)
    assert set(found.values()) <= {BACKEND_CHOICES, BACKENDS}
