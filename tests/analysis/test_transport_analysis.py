"""analysis/fec.py on a pcap written here: source/repair/ACK counts, retransmissions, rounds."""
import struct

from analysis import fec, pcap
from testbed.transport import wire


def frame(payload: bytes, sport: int, dport: int, src="10.0.0.1", dst="10.0.0.2", proto=17) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(payload), 0, 0, 64, proto, 0,
                     bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return b"\0" * 12 + b"\x08\x00" + ip + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def write_pcap(path, frames, snaplen=192, times_us=None):
    """A pcap of ``frames``, the i-th at 1000 + i s, or at ``times_us[i]`` µs after 1000 s."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)]
    for i, f in enumerate(frames):
        cap = f[:snaplen]
        sec, usec = (1000 + i, 0) if times_us is None else divmod(1000 * 10**6 + times_us[i], 10**6)
        out.append(struct.pack("<IIII", sec, usec, len(cap), len(f)) + cap)
    path.write_bytes(b"".join(out))


def sym(pn, esi, rnd=0, k=3):
    return wire.encode_symbol(wire.SymbolPacket(pn, esi >= k, 0, k * wire.SYMBOL, rnd, esi, bytes(wire.SYMBOL)))


def test_connections_count_source_repair_retransmissions_and_rounds(tmp_path):
    frames = [frame(sym(0, 0), 40000, 5003), frame(sym(1, 1), 40000, 5003), frame(sym(2, 3), 40000, 5003),
              frame(sym(3, 4), 40000, 5003), frame(sym(4, 1, rnd=1), 40000, 5003),
              frame(sym(5, 5, rnd=2), 40000, 5003),
              frame(wire.encode_ack(wire.AckPacket(0, 5, ((0, 0),), ((5, 0),))), 5003, 40000, "10.0.0.2", "10.0.0.1"),
              frame(b"\x00junk", 40000, 5003), frame(b"x" * 40, 40000, 5003, proto=6)]
    write_pcap(tmp_path / "c.pcap", frames)
    conns = {(r["sport"], r["dport"]): r for r in fec.connections(pcap.read(tmp_path / "c.pcap"))}
    up, down = conns[(40000, 5003)], conns[(5003, 40000)]
    assert (up["source"], up["repair"], up["acks"], up["retransmitted"], up["rounds"]) == (3, 3, 0, 1, 2)
    assert (down["source"], down["repair"], down["acks"]) == (0, 0, 1)
    assert up["src"].endswith("10.0.0.1")
    # round 0 = the first transmission (esi 0, 1 source, 3, 4 repair): its last packet is pn 3;
    # round 1 carries the one source symbol found lost
    assert (up["round0_repair"], up["round1_source"]) == (2, 1)
    assert up["first_ns"] < up["round0_last_ns"] < up["last_ns"]


def test_timeline_and_command_line(tmp_path):
    import json
    import subprocess
    import sys
    from conftest import REPO
    frames = [frame(sym(i, i), 40000, 5003) for i in range(3)] + [frame(sym(3, 4), 40000, 5003)]
    frames.append(frame(wire.encode_ack(wire.AckPacket(0, 5, ((0, 0),), ((3, 0),))), 5003, 40000))
    (tmp_path / "pcap").mkdir()
    write_pcap(tmp_path / "pcap" / "client-client-eth0.pcap", frames)
    files = fec.timeline(pcap.read(tmp_path / "pcap" / "client-client-eth0.pcap"), 5003, tmp_path / "tl")
    assert sorted(p.rsplit(".", 1)[1] for p in files) == ["pdf", "png", "svg"]
    (tmp_path / "client.jsonl").write_text("")
    out = subprocess.run([sys.executable, "-m", "analysis.fec", str(tmp_path), "--plots", str(tmp_path / "p")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    checks = json.loads(out.stdout)["checks"]
    assert (checks["source_packets"], checks["repair_packets"]) == (3, 1)
    assert (tmp_path / "p" / "fec-timeline-client-client-eth0.png").is_file()
    bad = subprocess.run([sys.executable, "-m", "analysis.fec", str(tmp_path / "nope")], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a udpreq run directory" in bad.stderr.strip().splitlines()[-1]


def test_a_udp_run_reports_no_tcp_counters(tmp_path):
    """Metrics of a run whose client captures hold only the transport's UDP packets: no TCP
    retransmissions, packet counts, payload or path read-backs (they read 0 before), and the
    transport's own counts instead."""
    import json
    from analysis import runmetrics
    frames = [frame(sym(i, i), 40000, 5003) for i in range(3)] + [frame(sym(3, 1, rnd=1), 40000, 5003)]
    frames.append(frame(wire.encode_ack(wire.AckPacket(0, 5, ((0, 0),), ((3, 0),))), 5003, 40000,
                        "10.0.0.2", "10.0.0.1"))
    (tmp_path / "pcap").mkdir()
    write_pcap(tmp_path / "pcap" / "client-eth0.pcap", frames)
    (tmp_path / "client.jsonl").write_text("".join(json.dumps(e) + "\n" for e in (
        {"t": 1000 * 10**9, "event": "request_issued", "req": 0, "conn": 0},
        {"t": 1005 * 10**9, "event": "first_request_byte_sent", "req": 0, "conn": 0},
        {"t": 1010 * 10**9, "event": "last_response_byte", "req": 0, "conn": 0})))
    (tmp_path / "metadata.json").write_text(json.dumps({"hosts": {"client": {"ips": {"eth0": "10.0.0.1/24"}}}}))
    tcp = {"retransmissions", "retransmitted_bytes", "max_in_flight_bytes", "packets_c2s",
           "packets_s2c", "data_packets_c2s", "data_packets_s2c", "wire_bytes", "max_payload",
           "syn_per_request", "path"}
    base = runmetrics.run_metrics(tmp_path)
    assert base["metrics"]["completion_ms"] == [10000.0]
    assert not tcp & {*base["metrics"], *base["checks"]}
    out = fec.run_metrics(tmp_path, 5003)
    assert out["metrics"]["retransmissions"] == 1 and out["checks"]["source_packets"] == 4
    assert not (tcp - {"retransmissions"}) & {*out["metrics"], *out["checks"]}


def test_flights_and_symbols_per_ack_of_the_request(tmp_path):
    """Three flights of two symbols 130 ms apart, one ACK after each (a batch ACK per window):
    with the client's smallest RTT 100 ms, gaps over 50 ms separate flights."""
    import json
    frames, times = [], []
    for f in range(3):
        for i in range(2):
            frames.append(frame(sym(2 * f + i, 2 * f + i, k=6), 40000, 5003))
            times.append(f * 130_000 + i * 600)
        frames.append(frame(wire.encode_ack(wire.AckPacket(f, 5, ((0, 0),), ((2 * f + 1, 0),))), 5003, 40000,
                            "10.0.0.2", "10.0.0.1"))
        times.append(f * 130_000 + 101_000)
    (tmp_path / "pcap").mkdir()
    write_pcap(tmp_path / "pcap" / "client-eth0.pcap", frames, times_us=times)
    (tmp_path / "client.jsonl").write_text(json.dumps({"t": 1, "event": "transport_stats", "conn": 0,
                                                       "min_rtt_ms": 100.0, "retransmitted": 0,
                                                       "repair_sent": 0, "source_sent": 6}) + "\n")
    out = fec.run_metrics(tmp_path, 5003, client="client")
    assert out["metrics"]["flights"] == 3
    assert out["metrics"]["flight_period_ms"] == 130.0
    assert out["checks"]["symbols_per_ack"] == 2.0


def test_the_arms_udp_figure_has_one_legend_with_every_kind_and_none_over_the_packets(tmp_path, monkeypatch):
    """The fec experiment's representative figure had its legend inside the first arm's panel,
    over its packets, and without "repair", which only the FEC arm sends."""
    from analysis import plots
    from experiments import plots as xplots
    ack = frame(wire.encode_ack(wire.AckPacket(0, 5, ((0, 0),), ((3, 0),))), 5003, 40000)
    arms = {"off": [frame(sym(i, i), 40000, 5003) for i in range(3)] + [ack],
            "adaptive": [frame(sym(i, i), 40000, 5003) for i in range(3)] + [frame(sym(3, 4), 40000, 5003), ack]}
    analysed = []
    for lab, frames in arms.items():
        write_pcap(tmp_path / f"{lab}.pcap", frames, times_us=[2000 * i for i in range(len(frames))])
        analysed.append((lab, f"runs/{lab}", {"_pcap": tmp_path / f"{lab}.pcap", "_host": "client",
                                                "_at_sender": True, "damage": []}))
    figs = []
    real = xplots._save
    monkeypatch.setattr(xplots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    plots.LAYOUT_PROBLEMS.clear()
    xplots._udp_figure(analysed, {"experiment": "fec", "factor": "params.fec"}, tmp_path / "f", {})
    assert plots.LAYOUT_PROBLEMS == [], plots.LAYOUT_PROBLEMS
    (fig,) = figs
    assert not any(ax.get_legend() for ax in fig.axes)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["source", "ACK received", "repair"]
