"""resolve(RunSpec) -> Plan: every name checked against the registries once, the workload record,
params, topology instance, factors and roles held (no root)."""
import pytest

from testbed.run.plan import Plan, build_topology, resolve, workload_record
from testbed.spec.errors import SetupError, UsageError
from testbed.spec.runspec import CaptureSpec, RunSpec


def full_spec():
    return RunSpec(topology="dualpath", topology_params={"rate1": "20mbit"},
                   links={"access2.up.queue": "50", "egress.down.loss": "3%"}, backend="userspace",
                   seed=7, workload="reqresp", params={"mode": "reuse", "requests": 5},
                   socket={"cc": "reno", "window": "64KB", "nodelay": True},
                   host={"ack": "quick", "initcwnd": 40}, capture=CaptureSpec(("client", "server")),
                   client_host="client", server_host="server", timeout=60)


def test_a_plan_holds_what_the_spec_resolves_to():
    plan = resolve(full_spec())
    assert plan.spec == full_spec() and not plan.loopback
    assert plan.workload.name == "reqresp" and plan.params.mode == "reuse" and plan.params.requests == 5
    assert plan.topology.name == "dualpath" and plan.topology.values["rate1"] == "20mbit"
    assert plan.topology.link_overrides == {"access2.up.queue": "50", "egress.down.loss": "3%"}
    assert plan.socket["cc"] == "reno" and plan.socket["nodelay"] is True
    assert plan.host["initcwnd"] == 40
    assert plan.roles == {"client": "client", "server": "server"}


def test_the_record_is_the_one_that_runs_the_params():
    plan = resolve(RunSpec(topology="loopback", capture=CaptureSpec("none"),
                           params={"transport": "udp"}))
    assert plan.loopback and plan.topology is None and plan.workload.transport == "udp"
    assert workload_record("reqresp", {"transport": "udp"})[0] is plan.workload
    assert workload_record("reqresp", {})[0].transport is None


def test_resolve_accepts_the_shipped_combinations():
    resolve(RunSpec(topology="relay", params={"path": "relay"}))
    resolve(RunSpec(topology="wifi", workload="bulk", params={"size": "1MB"}))
    resolve(RunSpec(topology="loopback", capture=CaptureSpec("none")))
    resolve(RunSpec(topology="longhaul", params={"tls": True, "tls_resume": True}))


@pytest.mark.parametrize("change,message", [
    ({"topology": "nosuch"}, "unknown topology"),
    ({"topology": "nosuch"}, "handover, loopback (no topology: 127.0.0.1, no root)"),
    ({"topology_params": {"colour": "red"}}, "has no parameter"),
    ({"links": {"nosuch.up.queue": "50"}}, "links: access1, access2, egress"),
    ({"links": {"access2.up.loss": "140%"}}, "outside [0, 1]"),
    ({"workload": "video"}, "allowed: reqresp"),
    ({"params": {"colour": 1}}, "allowed: sample, mode"),
    ({"params": {"mode": "sometimes"}}, "allowed: new, reuse"),
    ({"params": {"requests": "many"}}, "expected an integer"),
    ({"params": {"think": "soon"}}, "duration"),
    ({"params": {"path": "relay"}}, "gateway hosts"),
    ({"params": {"tls_resume": True}}, "needs tls"),
    ({"params": {"tls_resume": True, "tls": True, "mode": "reuse"}}, "needs mode new"),
    ({"params": {"resume": True}}, "allowed: sample, mode"),      # the old name, given anew
    ({"socket": {"cc": "vegasx"}}, "cc 'vegasx': not available on this kernel; available: "),
    ({"socket": {"ack": "quick"}}, "unknown socket factor"),
    ({"host": {"ack": "sometimes"}}, "delayed, quick or max"),
    ({"host": {"initcwnd": 0}}, "1..65535"),
    ({"host": {"advmss": 100}}, "536..65495"),
    ({"client_host": "station"}, "hosts: client, gw, server"),
    ({"capture": CaptureSpec(("nobody",))}, "capture host"),
    ({"capture": CaptureSpec("none", full_payload=True)}, "--capture none with --full-payload"),
    ({"workload": "duplicate", "params": {"paths": "10.9.9.9,10.0.2.1"}}, "its addresses: 10.0.1.1, 10.0.2.1"),
])
def test_resolve_names_what_is_wrong(change, message):
    spec = RunSpec(topology="dualpath", **{k: v for k, v in change.items() if k != "topology"})
    if "topology" in change:
        spec = spec.set("topology", change["topology"])
    with pytest.raises(UsageError) as err:
        resolve(spec)
    assert message in str(err.value)


def test_a_workload_whose_programs_set_no_socket_factors_refuses_them():
    """duplicate's program has no --cc: the run used to start and its server die unseen."""
    with pytest.raises(UsageError, match="workload duplicate: its programs set no socket factors; cc"):
        resolve(RunSpec(topology="dualpath", workload="duplicate", socket={"cc": "bbr"}))
    resolve(RunSpec(topology="dualpath", workload="duplicate"))


def test_loopback_refuses_host_factors_that_need_a_namespace():
    with pytest.raises(UsageError, match="no namespaces"):
        resolve(RunSpec(topology="loopback", capture=CaptureSpec("none"), host={"initcwnd": 40}))


def test_bulk_needs_size_or_duration():
    with pytest.raises(UsageError, match="exactly one of params.size or params.duration"):
        resolve(RunSpec(workload="bulk"))


def test_roles_come_from_the_topology():
    assert resolve(RunSpec(topology="wifi")).roles == {"client": "station", "server": "server"}
    plan = resolve(RunSpec(topology="edgecloud", server_host="cloud"))
    assert (plan.client, plan.server) == ("device", "cloud")


def test_edgecloud_uplinks_buffer_1000_packets_and_its_downlinks_one_bdp():
    links = resolve(RunSpec(topology="edgecloud")).topology.named
    for name, bdp in (("edge", 133), ("cloud", 106)):       # ceil(rate x 2 delay / 1514 B frames)
        assert links[name]["spec_ab"].queue_limit_packets == 1000
        assert links[name]["spec_ba"].queue_limit_packets == bdp
    shallow = resolve(RunSpec(topology="edgecloud", topology_params={"uplink_queue": "50"})).topology.named
    assert shallow["cloud"]["spec_ab"].queue_limit_packets == 50


def test_with_spec_reuses_the_plan_only_where_the_resolution_does_not_change(monkeypatch):
    plan = resolve(full_spec())
    same = plan.with_spec(full_spec().set("seed", 9).set("capture.keep", False))
    assert same.topology is plan.topology and same.spec.seed == 9 and not same.spec.capture.keep
    other = plan.with_spec(full_spec().set("params.mode", "new"))
    assert other.params.mode == "new" and other.topology is not plan.topology


def test_with_spec_refuses_a_full_payload_of_no_capture():
    """full_payload is read by the resolution: a plan without captures does not take it on."""
    spec = RunSpec(topology="loopback", capture=CaptureSpec("none"))
    with pytest.raises(UsageError, match="--capture none with --full-payload"):
        resolve(spec).with_spec(spec.set("capture.full_payload", True))


def test_build_topology_is_one_usage_error_for_a_bad_name_or_value():
    assert build_topology("longhaul", {"delay": "5ms"}).values["delay"] == "5ms"
    with pytest.raises(UsageError, match="unknown topology 'nosuch'"):
        build_topology("nosuch")
    with pytest.raises(UsageError, match="no link 'nosuch'"):
        build_topology("longhaul", links={"nosuch.up.loss": "1%"})


def test_preflight_needs_root_for_a_topology_not_for_loopback(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(SetupError, match="needs root"):
        resolve(RunSpec(topology="longhaul")).preflight()
    resolve(RunSpec(topology="loopback", capture=CaptureSpec("none"))).preflight()


def test_plan_is_frozen():
    plan = resolve(RunSpec(topology="loopback", capture=CaptureSpec("none")))
    assert isinstance(plan, Plan)
    with pytest.raises(AttributeError):
        plan.client = "x"
