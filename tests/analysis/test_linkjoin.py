"""Capture <-> emulator frame log join (synthetic log records in the emulator's format)."""
import numpy as np
import pytest

pytest.importorskip("scapy.all")
from tests.analysis.test_tcp import Trace  # noqa: E402

from analysis import linkjoin, pcap  # noqa: E402

linklog = pytest.importorskip("testbed.emulator.linklog")


def test_join_by_key_and_occurrence(tmp_path):
    tr = Trace()
    tr.a(0, 0, flags="S")
    for k in range(4):
        tr.a(1 + k, 1 + 100 * k, 100)
    tr.a(9, 101, 100)                         # retransmission of the 2nd segment ...
    for p in tr.pkts:
        p["IP"].id = 42 if p["TCP"].seq == (tr.pkts[2]["TCP"].seq) else p["IP"].id
    f = tr.write(tmp_path / "c.pcap")
    pk = pcap.read(f)
    keys = linkjoin.packet_keys(pk)
    # the emulator saw every packet but the SYN; it dropped the first copy of segment 2
    idx = np.arange(len(pk) - 1, 0, -1)                     # file order = completion order
    rec = np.zeros(len(idx), dtype=linklog.dtype())
    for k in linkjoin.KEY:
        rec[k] = keys[k][idx]
    rec["ethertype"] = 0x0800
    rec["verdict"] = np.where(idx == 2, linklog.LOSS, linklog.DELIVERED)
    rec["t_arrival"] = pk.ts_ns[idx] + 1000
    rec["t_sent"] = np.where(idx == 2, 0, pk.ts_ns[idx] + 5000)
    j = linkjoin.join(pk, rec)
    assert keys["src"][0] == 0x0A000001 and keys["ip_id"][2] == keys["ip_id"][5] == 42
    assert list(j.verdict) == [-1, 0, linklog.LOSS, 0, 0, 0]
    # same key twice (IP id 42, same seq): first capture copy <-> first log record
    assert j.t_arrival[2] == pk.ts_ns[2] + 1000 and j.t_arrival[5] == pk.ts_ns[5] + 1000
    assert (j.t_sent[[1, 3, 4, 5]] - j.t_arrival[[1, 3, 4, 5]] == 4000).all()
    assert j.counts() == {"delivered": 4, "dropped_loss": 1, "dropped_queue": 0, "send_error": 0,
                          "pending_at_exit": 0, "dropped_outage": 0, "dropped_event": 0,
                          "not_in_log": 1}


def test_report_lists_drops(tmp_path):
    from analysis import report
    tr = Trace()
    tr.a(0, 0, flags="S")
    tr.b(1, 1, flags="SA")
    tr.a(2, 1, 100)
    f = tr.write(tmp_path / "c.pcap")
    pk = pcap.read(f)
    keys = linkjoin.packet_keys(pk)
    rec = np.zeros(1, dtype=linklog.dtype())
    for k in linkjoin.KEY:
        rec[k] = keys[k][2]
    rec["verdict"] = linklog.QUEUE
    res = report.analyze_file(f, link_logs=[({"direction": "up"}, rec)])
    link = res["flows"][0]["link"]["up"]
    assert link["c2s"]["dropped_queue"] == 1 and link["c2s"]["not_in_log"] == 1
    assert link["dropped"] == [{"t": 0.002, "from": "client", "seq": int(pk.seq[2]),
                                "payload": 100, "verdict": "dropped_queue"}]
    assert link["dropped_truncated"] is False
