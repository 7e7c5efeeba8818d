"""Default schedules declared by a topology (``TestbedTopo.schedules``), replaced or removed by
``--link``, and shown by ``testbed topo show`` / ``list``."""
import json

import pytest

from testbed.cli import main
from testbed.run.plan import build_topology
from testbed.spec.errors import UsageError
from topologies import base


def schedules(topo):
    return {d: topo.named["cell"][slot].schedule for d, slot in (("up", "spec_ab"), ("down", "spec_ba"))}


def test_handover_defaults_apply_and_are_marked_as_the_topologys():
    topo = build_topology("handover")
    s = schedules(topo)
    assert [(st.at.value, dict(st.changes)) for st in s["down"].steps] == [(3.0, {"rate": 4e6}), (5.5, {"rate": 30e6})]
    assert [(o.down.value, o.duration) for o in s["up"].outages] == [(5.0, 0.5)]
    assert topo.schedule_from == {"cell.down": "topology", "cell.up": "topology"}
    assert topo.scheduled_links() == ["cell.up", "cell.down"]
    assert build_topology("longhaul").scheduled_links() == []
    table = {link["name"]: link for link in topo.link_table()}["cell"]
    assert table["down"]["schedule"] == {"from": "topology", "items": [
        "at 3.0s: rate=4mbit", "at 5.5s: rate=30mbit", "down at 5.0s for 0.5s (drop)"]}


def test_a_link_schedule_item_replaces_the_default_later_ones_add_and_none_removes():
    topo = build_topology("handover", links={"cell.down.down": "2s+1s", "cell.down.rate": "8mbit@4s",
                                             "cell.up.schedule": "none", "cell.up.delay": "30ms"})
    s = schedules(topo)
    assert [(o.down.value, o.duration) for o in s["down"].outages] == [(2.0, 1.0)]
    assert [(st.at.value, dict(st.changes)) for st in s["down"].steps] == [(4.0, {"rate": 8e6})]
    assert s["up"] is None and topo.named["cell"]["spec_ab"].delay == 0.03
    assert topo.schedule_from == {"cell.down": "links"} and topo.scheduled_links() == ["cell.down"]
    # a plain field leaves the default in place
    kept = schedules(build_topology("handover", links={"cell.down.delay": "40ms"}))
    assert len(kept["down"].steps) == 2


def test_a_bad_default_is_one_line_naming_the_topology_and_direction():
    class Bad(base.TestbedTopo):
        name = "bad-default"
        schedules = {"cell.down": {"step": [{"at": "2s", "rate": "1mbit"}, {"at": "1s", "rate": "2mbit"}]}}

        def build(self):
            self.addLink(self.addHost("a"), self.addHost("b"), name="cell", spec_ab=base.spec(), spec_ba=base.spec())
    with pytest.raises(ValueError, match=r"^topology 'bad-default': default schedule of cell.down: step 2: "):
        Bad()
    Bad.schedules = {"cell.sideways": {}}
    with pytest.raises(ValueError, match="direction 'sideways'; allowed: up, down"):
        Bad()
    assert "bad-default" not in base.TOPOLOGIES


def test_topo_show_and_list_print_the_defaults(capsys):
    assert main(["topo", "show", "handover"]) == 0
    out = capsys.readouterr().out
    assert "schedule (the topology's default), from the client's start:" in out
    assert "           at 3.0s: rate=4mbit" in out
    assert main(["topo", "show", "handover", "--link", "cell.up.down=1s+2s", "--json"]) == 0
    up = json.loads(capsys.readouterr().out)["links"][0]["up"]["schedule"]
    assert up == {"from": "links", "items": ["down at 1.0s for 2.0s (drop)"]}
    assert main(["topo", "list"]) == 0
    assert "links: cell; default schedules on cell.up, cell.down (topo show)" in capsys.readouterr().out


def test_a_run_on_netem_with_the_defaults_resolves_and_a_frame_step_is_refused():
    from testbed.run.plan import resolve
    from testbed.spec.runspec import RunSpec
    assert resolve(RunSpec(topology="handover", backend="netem")).topology.schedule_from
    with pytest.raises(UsageError, match=r"^link cell.up: moment\(s\) 10frames"):
        resolve(RunSpec(topology="handover", backend="netem", links={"cell.up.rate": "1mbit@10frames"}))
