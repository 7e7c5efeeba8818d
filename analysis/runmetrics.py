"""Named metrics and manipulation checks of one run directory (what ``RunResult.metrics`` and
``testbed analyze RUN_DIR`` report, computed by this one function).

Inputs, by the run directory's layout: the client app's event log ``client.jsonl`` (all logs
``*.jsonl`` for the checks), and the captures of the client host ``pcap/<client>-<iface>.pcap``
(the client host comes from ``manifest.json``'s ``roles`` unless given).  Each capture is read by
``analysis.report.analyze_file`` joined with the client's events; vantage point: the client's
own interfaces, i.e. the sender side of request data and the receiver side of response data.

*Sender metrics* describe the sender of a connection's data direction: ``retransmissions``,
``retransmitted_bytes``, ``max_in_flight_bytes``, ``data_per_ack`` and the checks
``data_segments_per_ack`` and ``first_flight_segments``, ``flights``, ``flight_period_ms``.  They
come from a capture at that sender, whatever the direction: the client's own capture when the
client sent the data (an upload, a request), else the captures of the host that holds the
sending address (``metadata.json``'s host addresses; the run's server role when unknown) —
``pcap/<host>-<iface>.pcap``, the same connection found by its endpoints.  When a connection's
sender has no such capture, they are left out (not the receiver's view under the sender's
name) and the check ``sender_metrics`` says which host's capture was missing.

Metrics (absent when the run has no such thing — the TCP ones below, from captures, when the
client's captures hold no TCP connection, e.g. a run over the UDP transport; times in ms, rates
in Mbit/s):

* ``completion_ms``: per timed request (event ``req`` 0..K-1, or agent round), in request
  order: ``last_response_byte.t − request_issued.t`` on the client's clock (CLOCK_MONOTONIC).
  ``completion_ms_median``: their median.
* ``first_byte_ms``: per timed request, ``first_response_byte.t − request_issued.t``.
* ``socks_ms``: per timed request through a SOCKS5 proxy, ``socks_done.t − request_issued.t``
  (the proxy's reply as the application sees it); ``socks_ms_median``: their median.
* ``rwnd_limited_ms``, ``busy_ms``: per connection of the client (``conn`` of its ``tcp_info``
  samples, in order), the last sample's ``tcpi_rwnd_limited`` and ``tcpi_busy_time`` in ms —
  how long the client's sending was limited by the peer's advertised receive window, and how
  long it had data in flight (warm-up requests included in reuse mode).
* ``handshake_ms``: per TCP connection the client opened, in order of its SYN: SYN sent → the
  client's ACK of the SYN/ACK (the capture's timestamps).
* ``goodput_mbps``: bulk: the client's summary (8 × bytes / (bulk_end − bulk_start)).
* ``total_s``, ``setup_s``, ``round_s``: agent: the client's summary — the whole run (before the
  preparation to the end of the last terminal work), what came before the first round
  (preparation, a reused connection's opening), and per round its whole time (encoding, request,
  terminal work) in s; after a disconnect ``redo_s`` (rounds done again) and ``disconnect_s`` (the
  drop, the reconnect step, reopening).
* ``retransmissions``: data segments sent again (``analysis.tcpsender``; fast, RTO, probe, and
  spurious ones all count), summed over the connections' data directions, at their senders;
  ``retransmitted_bytes``: their sequence-space bytes.
* ``max_in_flight_bytes``: largest *outstanding* (highest seq sent − highest cumulative ACK)
  of any connection's data direction, at its sender.
* ``max_pipe_bytes``: largest *pipe* (RFC 6675: the bytes still in the network — outstanding
  less what the SACK scoreboard holds or deems lost, plus retransmissions; ``analysis.tcpsender``)
  of any connection's data direction, at its sender: what a congestion window bounds.  Equal to
  ``max_in_flight_bytes`` without losses; below it where SACKed bytes wait behind holes.
* ``data_per_ack``: data segments ÷ pure ACKs over the connections' data directions
  (Σ data segments / Σ pure ACKs).
* ``bdp_bytes``: the path's bandwidth-delay product as the *first data connection*'s sender sees
  it (``analysis.tcp``: ``Direction.bdp_bytes``): its largest delivery rate — payload bytes
  newly ACKed over any interval of at least one smallest RTT between two ACKs, before the first
  retransmission — × its smallest RTT sample (Karn); the bytes in flight that fill the
  bottleneck without a queue (BBR's BtlBw × RTprop).  Absent without an RTT sample or such an
  interval.
* ``packets_c2s``, ``packets_s2c``, ``data_packets_c2s``, ``data_packets_s2c``, ``wire_bytes``:
  TCP packets (all, and those with payload > 0) of the client's connections per direction
  (client→server, server→client), and Σ IP total length of both directions, counted in the
  *timed window*: capture timestamps (on the client's monotonic clock) from the first timed
  request's ``request_issued`` to the last one's ``last_response_byte`` — warm-up requests and a
  trailing delayed ACK are outside it.
* ``flights``: flights (``analysis.tcp``: data segments separated by idle gaps) of the *first data
  connection*'s data direction — slow-start rounds when the sender is window-limited;
  ``flight_period_ms``: median start-to-start interval of its consecutive flights;
  ``flight_bytes``: the new bytes of each of its flights (at most the first 20).
* ``cumulative_5``: per connection with data, in order of its first packet, the new bytes its
  data direction sent in its first 5 flights — after 5 slow-start rounds when window-limited.
* ``stalls``, ``stall_ms``: audio: per player and initial buffer (``"wait@40ms"``), the
  playback model's stall count and total stall time.

The *first data connection* is the first, by its first packet, of the connections whose data
direction sent at least :data:`DATA_SHARE` of the payload of the run's busiest one: a control
connection beside a transfer (iperf3's, a few hundred bytes beside megabytes) is not it.

Checks (read-backs that show a factor took effect; the capture ones absent as the TCP metrics):

* ``syn_per_request``: SYNs the client sent ÷ requests it sent (timed and warm-up).
* ``cc``: the congestion controls read back from the sockets (``factors`` events), sorted.
* ``socket_readback``: every key of the sockets' read-backs (``factors`` events of all logs:
  listeners, connections, both ends) → its distinct values in log order — what a socket factor's
  manipulation check compares with the level (``testbed.spec.factors``).
* ``data_segments_per_ack``: as ``data_per_ack``.
* ``max_adv_window``: the largest window (bytes, scaled by the window scale of its sender's
  SYN when both SYNs carried one) advertised by the receiver of any connection's data
  direction, SYNs excluded.
* ``wscale``: the window scale option of the first data connection's SYN (``client``) and SYN/ACK
  (``server``); -1 when absent.
* ``syn_mss``: the MSS option of the first data connection's SYN (``client``) and SYN/ACK
  (``server``), 0 when absent; ``max_payload``: the largest TCP payload of any captured segment.
* ``first_flight_segments``: data segments in the first flight (``analysis.tcp``) of the first
  data connection's data direction.
* ``tls_resumed``: fraction of the timed requests whose TLS handshake resumed a session.
* ``path``: capture file (every host's) → TCP packets to or from the client host's addresses.
* ``capture_damage``: capture file → what was wrong with it (``analysis.pcap``: a record cut
  short, a bad record header, headers cut by the snap length), for every capture these metrics
  read that was damaged: the numbers then come from the part that could be read.
* ``log_damage``: event log file → what was wrong with it (``analysis.applog.load``: its last
  line cut short, left out), for every log these metrics read that was damaged.
* ``unanswered_requests``: present only when some timed request has a ``request_issued`` and no
  ``last_response_byte`` in the client's log (a request that never completed, or a log cut short
  after it): their ``req`` numbers; ``completion_ms`` and the timed window leave them out.
* ``sender_metrics``: present only when the sender metrics are left out: why (the data sender
  whose capture is missing).
* ``queue_limit``: the bottleneck buffer of each link direction whose queue the run's spec
  overrode, as the topology was built (``metadata.json``; packets, or bytes for a byte limit).
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from analysis import applog, report

CLIENT_LOG = "client.jsonl"
#: a connection whose data direction sent less than this share of the busiest one's payload is
#: not the *first data connection* (module docstring)
DATA_SHARE = 0.1
SYN_OPTIONS = (("wscale", "wscale"), ("syn_mss", "mss"))    # check name, TCP option
# and the checks data_segments_per_ack, first_flight_segments
SENDER_METRICS = ("retransmissions", "retransmitted_bytes", "max_in_flight_bytes", "max_pipe_bytes",
                  "data_per_ack", "bdp_bytes",
                  "flights", "flight_period_ms", "flight_bytes", "cumulative_5")


def run_metrics(run_dir: str | Path, client: str | None = None) -> dict[str, dict[str, Any]]:
    """``{"metrics": {...}, "checks": {...}}`` of a run directory (see the module docstring)."""
    run_dir = Path(run_dir)
    manifest, metadata = applog.run_manifest(run_dir), applog.read_object(run_dir / "metadata.json") or {}
    client = client or manifest.get("roles", {}).get("client") or "client"
    logs = {f.name: applog.load(f) for f in sorted(run_dir.glob("*.jsonl"))}
    events = logs.get(CLIENT_LOG, [])
    metrics: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    _from_events(events, metrics, checks)
    cut = {name: [d["message"] for d in evs.damage] for name, evs in logs.items() if evs.damage}
    if cut:
        checks["log_damage"] = cut
    readbacks = [e["readback"] for evs in logs.values()
                 for e in evs if e["event"] == "factors" and e.get("readback")]
    if readbacks:
        checks["cc"] = sorted({r["cc"] for r in readbacks})
        checks["socket_readback"] = {k: list(dict.fromkeys(r[k] for r in readbacks if k in r))
                                     for k in dict.fromkeys(k for r in readbacks for k in r)}
    pcaps = sorted((run_dir / "pcap").glob(f"{client}-*.pcap"))
    senders = Senders(run_dir, client, manifest.get("roles", {}).get("server") or "server",
                       metadata)
    tcp = _from_captures(pcaps, events, metrics, checks, senders) if pcaps else None   # None: not captured
    sent = sum(e["event"] == "first_request_byte_sent" for e in events)
    if tcp and sent:
        checks["syn_per_request"] = len(metrics.get("handshake_ms", [])) / sent
    resumed = [bool(e.get("resumed")) for e in events
               if e["event"] == "tls_done" and isinstance(e.get("req"), int)]
    if resumed:
        checks["tls_resumed"] = sum(resumed) / len(resumed)
    ips = [ip.split("/")[0] for ip in metadata.get("hosts", {}).get(client, {}).get("ips", {}).values()]
    if ips and tcp is not False:
        checks["path"] = {p.name: _packets_of(p, ips) for p in sorted((run_dir / "pcap").glob("*.pcap"))}
    overridden = {k.rsplit(".", 1)[0] for k in manifest.get("spec", {}).get("links", {})
                  if k.endswith((".queue", ".queue_packets", ".queue_bytes"))}
    if overridden and metadata.get("links"):
        checks["queue_limit"] = [_queue(metadata["links"], name) for name in sorted(overridden)]
    return {"metrics": metrics, "checks": checks}


def _packets_of(pcap_path: Path, ips: list[str]) -> int:
    """TCP packets of a capture to or from any of ``ips``."""
    import socket

    import numpy as np

    from analysis import pcap
    pk = pcap.read(pcap_path)
    tcp = pk.proto == pcap.TCP
    hit = np.zeros(len(pk), bool)
    for ip in ips:
        mapped = np.frombuffer(bytes(10) + b"\xff\xff" + socket.inet_aton(ip), np.uint8)
        hit |= (pk.src == mapped).all(axis=1) | (pk.dst == mapped).all(axis=1)
    return int((hit & tcp).sum())


def _queue(links: list[dict], name: str):
    """The built buffer of link direction ``LINK.DIR`` (metadata records: a→b is ``up``)."""
    link, direction = name.split(".")
    rec = next((r for r in links if r.get("name") == link), None)
    spec = rec and rec["a_to_b" if direction == "up" else "b_to_a"]
    if not spec:
        return None
    return spec["queue_bytes"] if spec.get("queue_bytes") is not None else spec.get("queue_packets")


def _from_events(events: list[dict], metrics: dict, checks: dict) -> None:
    issued = {e["req"]: e["t"] for e in events
              if e["event"] == "request_issued" and isinstance(e.get("req"), int)}
    firsts = {e["req"]: e["t"] for e in events if e["event"] == "first_response_byte" and e.get("req") in issued}
    lasts = {e["req"]: e["t"] for e in events if e["event"] == "last_response_byte" and e.get("req") in issued}
    done = sorted(r for r in issued if r in lasts)
    if len(done) < len(issued):
        checks["unanswered_requests"] = sorted(set(issued) - set(lasts))
    if done:
        metrics["completion_ms"] = [(lasts[r] - issued[r]) / 1e6 for r in done]
        metrics["completion_ms_median"] = statistics.median(metrics["completion_ms"])
        metrics["first_byte_ms"] = [(firsts[r] - issued[r]) / 1e6 for r in done if r in firsts]
    socks = {e["req"]: e["t"] for e in events if e["event"] == "socks_done" and e.get("req") in issued}
    if socks:
        metrics["socks_ms"] = [(socks[r] - issued[r]) / 1e6 for r in sorted(socks)]
        metrics["socks_ms_median"] = statistics.median(metrics["socks_ms"])
    info = {e["conn"]: e for e in events if e["event"] == "tcp_info" and "rwnd_limited" in e}
    if info:
        metrics["rwnd_limited_ms"] = [info[c]["rwnd_limited"] / 1e3 for c in sorted(info)]
        metrics["busy_ms"] = [info[c]["busy_time"] / 1e3 for c in sorted(info)]
    for e in events:
        if e["event"] == "summary" and "goodput_bps" in e:
            metrics["goodput_mbps"] = e["goodput_bps"] / 1e6
        if e["event"] == "summary" and "total_s" in e:
            metrics.update({k: e[k] for k in ("total_s", "setup_s", "round_s", "redo_s", "disconnect_s")
                            if k in e})
        if e["event"] == "playback":
            key = f"{e['player']}@{e['buffer_ms']:g}ms"
            metrics.setdefault("stalls", {})[key] = e["stalls"]
            metrics.setdefault("stall_ms", {})[key] = e["stall_total"]


class Senders:
    """Where a connection's data was sent from (module docstring, *sender metrics*): the
    sending host, and that host's view of the connection from its own captures."""

    def __init__(self, run_dir: Path, client: str, server: str, metadata: dict):
        self.run_dir, self.client, self.server = run_dir, client, server
        self.host_of = {ip.split("/")[0]: name for name, h in metadata.get("hosts", {}).items()
                        for ip in (h.get("ips") or {}).values()}
        self._captures: dict[str, list] = {}
        self.damage: dict[str, list[str]] = {}      # capture file name -> what was wrong

    def host(self, key, main: str) -> str:
        """The host that sent data direction ``main`` ("c2s"/"s2c") of the flow ``key``."""
        addr, role = (key.client, self.client) if main == "c2s" else (key.server, self.server)
        return self.host_of.get(addr, role)

    def view(self, host: str, key, main: str):
        """(direction summary, direction object) of ``key``'s data direction ``main`` in the
        captures of ``host``, or None when they do not hold that connection's data."""
        if host not in self._captures:
            self._captures[host] = [report.analyze_file(p, keep=True) for p in
                                    sorted((self.run_dir / "pcap").glob(f"{host}-*.pcap"))]
            for res in self._captures[host]:
                _note_damage(res, self.damage)
        ends = ((key.client, key.client_port), (key.server, key.server_port))
        for res in self._captures[host]:
            for rec, obj in zip(res["flows"], res["_objects"]["flows"]):
                k = obj["flow"].key
                mine = ((k.client, k.client_port), (k.server, k.server_port))
                if k.proto != key.proto or set(mine) != set(ends):
                    continue
                name = main if mine == ends else {"c2s": "s2c", "s2c": "c2s"}[main]
                if name in obj["directions"]:
                    return rec["directions"][name], obj["directions"][name]
        return None


def _from_captures(pcaps: list[Path], events: list[dict], metrics: dict, checks: dict,
                   senders: Senders) -> bool:
    """The capture metrics and checks of the module docstring; False (and none of them) when
    the captures hold no TCP connection."""
    flows = 0
    handshakes: list[tuple[int, float]] = []
    rtx = rtx_bytes = in_flight = pipe = data = acks = adv = 0
    sending: list[tuple[int, int, Any]] = []       # (t0, payload, Direction) per connection with flights
    five: list[tuple[int, int]] = []               # (t0, bytes in its first 5 flights) per connection
    syn_options: list[tuple[int, int, dict]] = []  # (t0, payload, its SYN options) per connection with data
    missing: set[str] = set()                      # data senders without a capture
    window = _timed_window(events)
    counts = dict.fromkeys(("packets_c2s", "packets_s2c", "data_packets_c2s", "data_packets_s2c",
                            "wire_bytes"), 0)
    max_payload = 0
    for pcap in pcaps:
        res = report.analyze_file(pcap, events=events, keep=True)
        _note_damage(res, senders.damage)
        pk = res["_objects"]["packets"]
        for rec, obj in zip(res["flows"], res["_objects"]["flows"]):
            if rec["proto"] != "tcp":
                continue
            flows += 1
            _count(pk, obj["flow"], window, counts)
            max_payload = max(max_payload, int(pk.payload_len[obj["flow"].index].max(initial=0)))
            hs = rec["handshake"]
            if hs.get("syn") is not None and hs.get("ack") is not None:
                handshakes.append((rec["t0_ns"], round((hs["ack"] - hs["syn"]) * 1e3, 6)))   # to the ns
            main = rec.get("data_direction")
            if main is None:
                continue
            adv = max(adv, _max_window(pk, obj["flow"], receiver_is_client=main == "s2c"))
            syn_options.append((rec["t0_ns"], rec["directions"][main]["payload_bytes"],
                                {k: _syn_option(pk, obj["flow"], opt) for k, opt in SYN_OPTIONS}))
            host = senders.host(obj["flow"].key, main)
            view = (rec["directions"][main], obj["directions"][main]) if host == senders.client \
                else senders.view(host, obj["flow"].key, main)
            if view is None:
                missing.add(host)
                continue
            summary, d = view
            if len(d.flights):
                sending.append((rec["t0_ns"], d.payload_bytes, d))
                five.append((rec["t0_ns"], int(d.flights["cum_bytes"][:5][-1])))
            rtx += len(d.tracker.retransmissions)
            rtx_bytes += sum((r.end - r.seq) & 0xFFFFFFFF for r in d.tracker.retransmissions)
            in_flight = max(in_flight, summary["in_flight"]["max"])
            pipe = max(pipe, summary["in_flight"]["pipe_max"])
            data += summary["acks"]["data_segments"]
            acks += summary["acks"]["pure_acks"]
    if senders.damage:
        checks["capture_damage"] = senders.damage
    if not flows:
        return False
    if syn_options:
        checks.update(_first_data(syn_options))
    if handshakes:
        metrics["handshake_ms"] = [ms for _, ms in sorted(handshakes)]
    if adv:
        checks["max_adv_window"] = adv
    if window is not None:
        metrics.update(counts)
    checks["max_payload"] = max_payload
    if missing:
        checks["sender_metrics"] = (
            f"left out ({', '.join(SENDER_METRICS)}, data_segments_per_ack, "
            f"first_flight_segments): no capture at the data sender {', '.join(sorted(missing))}; "
            "the client's capture is the receiver's view (capture.hosts must include the sender)")
        return True
    metrics.update(retransmissions=rtx, retransmitted_bytes=rtx_bytes, max_in_flight_bytes=in_flight,
                   max_pipe_bytes=pipe)
    if acks:
        metrics["data_per_ack"] = checks["data_segments_per_ack"] = data / acks
    if sending:
        first = _first_data(sending)
        fl, bdp = first.flights, first.bdp_bytes
        if bdp is not None:
            metrics["bdp_bytes"] = bdp
        checks["first_flight_segments"] = int(fl[0]["segments"])
        metrics["flights"] = len(fl)
        metrics["flight_bytes"] = [int(b) for b in fl["bytes"][:20]]
        metrics["cumulative_5"] = [b for _, b in sorted(five)]
        if len(fl) > 1:
            metrics["flight_period_ms"] = float(statistics.median((fl["start"][1:] - fl["start"][:-1]) / 1e6))
    return True


def _first_data(conns: list[tuple[int, int, Any]]):
    """Of ``conns`` — (first packet's time, its data direction's payload, what to take) per
    connection — what the *first data connection* (module docstring) has."""
    busiest = max(payload for _, payload, _ in conns)
    return min((c for c in conns if c[1] >= DATA_SHARE * busiest), key=lambda c: c[0])[2]


def _note_damage(res: dict, damage: dict) -> None:
    if res["damage"]:
        damage[Path(res["file"]).name] = [d["message"] for d in res["damage"]]


def _timed_window(events: list[dict]) -> tuple[int, int] | None:
    """(first timed request_issued, last timed last_response_byte), monotonic ns."""
    issued = [e["t"] for e in events if e["event"] == "request_issued" and isinstance(e.get("req"), int)]
    last = [e["t"] for e in events if e["event"] == "last_response_byte" and isinstance(e.get("req"), int)]
    return (min(issued), max(last)) if issued and last else None


def _count(pk, flow, window, counts: dict) -> None:
    """Add ``flow``'s packets inside ``window`` to the per-direction counts (module doc)."""
    if window is None:
        return
    idx = flow.index
    t = pk.ts_ns[idx]
    inside = (t >= window[0]) & (t <= window[1])
    for side, name in ((True, "c2s"), (False, "s2c")):
        sel = inside & (flow.fwd == side)
        counts[f"packets_{name}"] += int(sel.sum())
        counts[f"data_packets_{name}"] += int((sel & (pk.payload_len[idx] > 0)).sum())
        counts["wire_bytes"] += int(pk.ip_len[idx][sel].astype("int64").sum())


def _syn_option(pk, flow, option: str) -> dict[str, int]:
    """A SYN option (``wscale``: -1 when absent; ``mss``: 0 when absent) of each side of ``flow``
    (-1 when no SYN of that side was captured)."""
    from analysis.pcap import SYN
    idx, fwd = flow.index, flow.fwd
    syn = (pk.flags[idx] & SYN) != 0
    out = {}
    for name, side in (("client", True), ("server", False)):
        w = getattr(pk, option)[idx][syn & (fwd == side)]
        out[name] = int(w[0]) if len(w) else -1
    return out


def _max_window(pk, flow, receiver_is_client: bool) -> int:
    """Largest scaled window the data receiver advertised on ``flow``, SYNs excluded."""
    import numpy as np

    from analysis.pcap import SYN
    idx, fwd = flow.index, flow.fwd
    syn = (pk.flags[idx] & SYN) != 0
    ws = _syn_option(pk, flow, "wscale")
    scale_of = {True: ws["client"], False: ws["server"]}
    side = receiver_is_client
    shift = scale_of[side] if min(scale_of.values()) >= 0 else 0
    mine = (fwd == side) & ~syn
    return int((pk.win[idx][mine].astype(np.int64) << shift).max()) if mine.any() else 0
