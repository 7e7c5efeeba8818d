"""Every built-in experiment that reports a sender metric (``analysis.runmetrics``: the
retransmissions, in flight, data per ACK, flights of a connection's data sender) captures at
that sender: a download's server, an upload's client."""
from pathlib import Path

import pytest

from analysis.runmetrics import SENDER_METRICS
from testbed.spec.units import parse_size
from topologies import topology_class

try:
    import tomllib
except ImportError:                 # Python 3.10
    import tomli as tomllib

DEFINITIONS = sorted((Path(__file__).parents[2] / "experiments" / "definitions").glob("*.toml"))


def _senders(d: dict) -> set[str]:
    """The roles that send a run's main data, over the experiment's levels."""
    base = d["base"]
    out = set()
    for level in d["levels"]:
        params = dict(base.get("params", {}))
        if d["factor"].startswith("params."):
            params[d["factor"].split(".", 1)[1]] = level
        if base["workload"] == "bulk":
            out.add("server" if params.get("direction", "up") == "down" else "client")
        elif base["workload"] == "reqresp":
            up, down = (sum(parse_size(x) for x in str(params.get(k, v)).split(","))
                        for k, v in (("size", "354640"), ("reply_size", "1000")))
            out.add("server" if down > up else "client")
        else:
            out.add("client")
    return out


@pytest.mark.parametrize("path", DEFINITIONS, ids=lambda p: p.stem)
def test_sender_metrics_are_captured_at_the_sender(path):
    d = tomllib.loads(path.read_text())
    if not set(d["metrics"]) & set(SENDER_METRICS):
        return
    base = d["base"]
    hosts = base.get("capture", {}).get("hosts", "all")
    roles = topology_class(base["topology"]).roles
    role_host = {"client": base.get("client_host", roles["client"]),
                 "server": base.get("server_host", roles["server"])}
    for role in _senders(d):
        assert hosts == "all" or role_host[role] in hosts, (
            f"{path.name}: {role} sends the data; capture.hosts {hosts} misses it")
