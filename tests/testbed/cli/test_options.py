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


def test_a_negative_value_with_a_unit_is_the_options_value_not_an_option():
    """`--think -1s` was refused by argparse ("argument --think: expected one argument": '-1s'
    looks like an option to it) while `--think=-1s` reached the workload's check; every option
    that takes one value now takes such a value after a space."""
    import argparse

    from testbed.cli.options import OneLineParser
    p = OneLineParser(prog="t")
    p.add_argument("--think")
    p.add_argument("-d", dest="delay")
    p.add_argument("--flag", action="store_true")
    p.add_argument("--exec", nargs=argparse.REMAINDER, default=[])
    p.add_argument("words", nargs="*")
    join = p.joined_negative_values
    assert join(["--think", "-1s", "-d", "-5ms"]) == ["--think=-1s", "-d-5ms"]
    for given in ("-1s", "-0.5", "-.5", "-5%", "-1e3", "-3mbit"):
        assert p.parse_args(["--think", given]).think == given
    assert p.parse_args(["-d", "-5ms"]).delay == "-5ms"
    # not joined: an option that takes no value, a value that is an option, what follows `--`
    # or an option that takes the rest of the line (a program's own arguments)
    assert join(["--flag", "-1s"]) == ["--flag", "-1s"]
    assert join(["--think", "--flag"]) == ["--think", "--flag"]
    assert join(["--", "--think", "-1s"]) == ["--", "--think", "-1s"]
    assert join(["--exec", "prog", "--think", "-1s"]) == ["--exec", "prog", "--think", "-1s"]
    assert p.parse_args(["--exec", "prog", "--think", "-1s"]).exec == ["prog", "--think", "-1s"]


@pytest.mark.parametrize("argv,message", [
    (["run", "reqresp", "--think", "-1s"], "reqresp: --think '-1s': cannot read duration '-1s'"),
    (["run", "bulk", "--duration", "-5s"], "bulk: --duration '-5s': cannot read duration '-5s'"),
    (["model", "fec", "--loss", "-5%"], "argument --loss: invalid number value: '-5%'"),
    (["topo", "show", "longhaul", "--set", "-1s"], "--set '-1s': expected KEY=VALUE"),
])
def test_every_subcommand_takes_negative_values_after_a_space(tmp_path, capsys, restore_logging, argv, message):
    from testbed.cli import main
    try:
        code = main([*argv, *(["--results", str(tmp_path)] if argv[0] == "run" else [])])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "expected one argument" not in err, err


def test_topo_up_exec_arguments_are_the_programs_own():
    args = build_parser().parse_args(["topo", "up", "longhaul", "--exec", "client", "prog", "--seed", "-1"])
    assert args.execs == [["client", "prog", "--seed", "-1"]] and args.seed == 1
