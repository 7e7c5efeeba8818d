"""RunSpec / CaptureSpec / RunResult: values, paths, value checks, JSON round trip, old
manifests (no root).  Checks against the registries: tests/testbed/run/test_plan.py."""
import json

import pytest

from testbed.spec.errors import RunError, SetupError, TestbedError, UsageError
from testbed.spec.runresult import MANIFEST_SCHEMA, RunResult, load_run
from testbed.spec.runspec import CaptureSpec, RunSpec


def full_spec():
    return RunSpec(topology="dualpath", topology_params={"rate1": "20mbit"},
                   links={"access2.up.queue": "50", "egress.down.loss": "3%"}, backend="userspace",
                   seed=7, workload="reqresp", params={"mode": "reuse", "requests": 5},
                   socket={"cc": "reno", "window": "64KB", "nodelay": True},
                   host={"ack": "quick", "initcwnd": 40}, capture=CaptureSpec(("client", "server")),
                   client_host="client", server_host="server", timeout=60)


def test_json_round_trip_is_exact():
    spec = full_spec()
    again = RunSpec.from_json(spec.to_json())
    assert again == spec and again.to_dict() == spec.to_dict()
    assert json.loads(spec.to_json())["capture"]["hosts"] == ["client", "server"]
    assert RunSpec.from_dict(RunSpec().to_dict()) == RunSpec()
    assert len({spec, again, RunSpec()}) == 2          # hashable, equal specs hash alike


def test_set_get_and_diff_name_exactly_one_path():
    spec = full_spec()
    cases = {"params.mode": "new", "socket.cc": "bbr", "host.ack": "max:10ms",
             "links.access2.up.queue": "200", "topology_params.rate1": "10mbit", "seed": 8,
             "backend": "netem", "capture.full_payload": True}
    for path, value in cases.items():
        other = spec.set(path, value)
        assert other.get(path) == value
        assert spec.diff(other) == {path: (spec.get(path), value)}
    assert spec.set("seed", "9").seed == 9
    assert spec.set("socket.cc", None).get("socket.cc") is None
    assert spec.get("params.think") is None


@pytest.mark.parametrize("path", ["colour", "params", "capture.colour", "seed.x"])
def test_bad_paths_list_the_allowed_ones(path):
    with pytest.raises(UsageError, match="allowed|name a key"):
        RunSpec().set(path, 1)


def test_construction_checks_types():
    with pytest.raises(UsageError):
        RunSpec(seed="1")
    with pytest.raises(UsageError):
        RunSpec(params={"mode": object()})
    with pytest.raises(UsageError):
        RunSpec.from_dict({"topology": "longhaul", "colour": "red"})
    assert RunSpec(capture={"hosts": "client,server"}).capture.hosts == ("client", "server")


@pytest.mark.parametrize("kw,message", [
    ({"backend": "ns3"}, "allowed: auto, netem, userspace"),
    ({"timeout": 0}, "must be > 0"),
    # netem's seed is 64 bits and each direction adds its index: 2^64 failed at bring-up
    ({"seed": 2**64}, r"seed 18446744073709551616: give a whole number from 0 to 2\^63-1"),
    ({"seed": 2**63}, r"from 0 to 2\^63-1 \(9223372036854775807\)"),
    ({"seed": -1}, r"seed -1: give a whole number from 0"),
    ({"topology": "loopback", "topology_params": {"delay": "1ms"}}, "no parameters or links"),
    ({"topology": "loopback", "capture": CaptureSpec(("client",))}, "use capture 'none'"),
])
def test_construction_checks_values_on_their_own(kw, message):
    with pytest.raises(UsageError, match=message):
        RunSpec(**kw)


def test_an_alias_is_its_workload_with_its_parameters():
    spec = RunSpec(workload="udpreq", params={"requests": 2})
    assert spec.workload == "reqresp" and spec.params == {"requests": 2, "transport": "udp"}
    with pytest.raises(UsageError, match="cannot take transport='tcp'"):
        RunSpec(workload="udpreq", params={"transport": "tcp"})


def test_a_manifest_written_before_tls_resume_was_renamed_loads():
    old = {"topology": "longhaul", "workload": "reqresp", "params": {"tls": True, "resume": True,
                                                                    "mode": "new"}}
    assert RunSpec.from_dict(old).params == {"mode": "new", "tls": True, "tls_resume": True}
    streams = {"workload": "streams", "params": {"resume": True}}    # QUIC's resume keeps its name
    assert RunSpec.from_dict(streams).params == {"resume": True}


def test_errors_have_exit_codes():
    assert UsageError("x").exit_code == 2 and isinstance(UsageError("x"), ValueError)
    assert SetupError("x").exit_code == RunError("x").exit_code == 1
    assert issubclass(RunError, TestbedError) and RunError("x", result=3).result == 3


def test_manifest_round_trip(tmp_path):
    r = RunResult("tb-x", tmp_path, full_spec(), "failed", "client exited 1", 1.0, 2.5,
                  metrics={"completion_ms": [1.5]}, files=[{"path": "a.pcap", "kind": "pcap",
                                                             "host": "client", "interface": "client-eth0"}])
    r.write()
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["schema"] == MANIFEST_SCHEMA and data["status"] == "failed"
    back = load_run(tmp_path)
    assert back.spec == r.spec and back.metrics == r.metrics and back.error == r.error
    assert back.files_of("pcap") == [tmp_path / "a.pcap"] and not back.ok
    with pytest.raises(UsageError, match="not a run directory"):
        load_run(tmp_path / "nothing")
