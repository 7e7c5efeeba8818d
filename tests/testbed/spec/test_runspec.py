"""RunSpec / CaptureSpec / RunResult: values, paths, validation, JSON round trip (no root)."""
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


def test_validate_accepts_a_full_spec():
    full_spec().validate()
    RunSpec(topology="relay", params={"path": "relay"}).validate()
    RunSpec(topology="wifi", workload="bulk", params={"size": "1MB"}).validate()
    RunSpec(topology="loopback", capture=CaptureSpec("none")).validate()


@pytest.mark.parametrize("change,message", [
    ({"topology": "nosuch"}, "unknown topology"),
    ({"topology_params": {"colour": "red"}}, "has no parameter"),
    ({"links": {"nosuch.up.queue": "50"}}, "links: access1, access2, egress"),
    ({"links": {"access2.up.loss": "140%"}}, "outside [0, 1]"),
    ({"backend": "ns3"}, "allowed: auto, netem, userspace"),
    ({"workload": "video"}, "allowed: reqresp"),
    ({"params": {"colour": 1}}, "allowed: sample, mode"),
    ({"params": {"mode": "sometimes"}}, "allowed: new, reuse"),
    ({"params": {"requests": "many"}}, "expected an integer"),
    ({"params": {"think": "soon"}}, "duration"),
    ({"params": {"path": "relay"}}, "gateway hosts"),
    ({"socket": {"cc": "vegasx"}}, "not available"),
    ({"socket": {"ack": "quick"}}, "unknown socket factor"),
    ({"host": {"ack": "sometimes"}}, "unknown ACK policy"),
    ({"host": {"initcwnd": 0}}, "1..65535"),
    ({"host": {"advmss": 100}}, "536..65495"),
    ({"client_host": "station"}, "hosts: client, gw, server"),
    ({"capture": CaptureSpec(("nobody",))}, "capture host"),
])
def test_validate_names_what_is_wrong(change, message):
    spec = RunSpec(topology="dualpath", **{k: v for k, v in change.items() if k != "topology"})
    if "topology" in change:
        spec = spec.set("topology", change["topology"])
    with pytest.raises(UsageError) as err:
        spec.validate()
    assert message in str(err.value)


def test_bulk_needs_size_or_duration():
    with pytest.raises(UsageError, match="exactly one of --size or --duration"):
        RunSpec(workload="bulk").validate()


def test_roles_come_from_the_topology():
    assert RunSpec(topology="wifi").roles == ("station", "server")
    assert RunSpec(topology="edgecloud", server_host="cloud").roles == ("device", "cloud")


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
