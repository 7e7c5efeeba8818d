"""Real Linux TCP into a receiver with a small receive buffer that reads slowly, between two
namespaces, captured at the sender with tcpdump: the receiver's window fills and closes, and
analysis.rwnd flags the same packets as tshark's tcp.analysis.zero_window, zero_window_probe,
window_full and window_update on the same file."""
import shutil
import subprocess
import sys

import pytest

from analysis import flows, pcap, report, rwnd, tcp
from testbed.host.capture import Capture
from tests.fixtures.vethpair import veth_pair

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not shutil.which("tshark") or not shutil.which("tcpdump"),
                                 reason="needs tshark and tcpdump")]

PORT = 5301
SIZE = 300_000
#: receiver: a 32 KiB receive buffer (set before listen: the SYN/ACK's window scale follows it)
#: drained every 300 ms: the sender fills the window, the buffer fills and the window closes
#: (zero window) between reads, and the next read opens it (window update): about 1.5 s in all.
#: Linux probes a closed window after 200 ms at the earliest, and with the segment below
#: snd_una that Wireshark calls a keep-alive: no zero-window probe is expected.
SLOW = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept()
total = 0
while True:
    b = c.recv(1 << 16)
    if not b: break
    total += len(b)
    time.sleep(0.3)
print(total, flush=True)
"""
SEND = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.sendall(b"x" * int(sys.argv[3]))
c.shutdown(socket.SHUT_WR)
c.recv(1)
"""


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("rwnd") / "slow.pcap"
    with veth_pair("w") as p:
        cap = Capture(path, "tbt0", popen=lambda argv, **kw: p.popen(p.a, argv, **kw))
        cap.start()
        srv = p.popen(p.b, [sys.executable, "-c", SLOW, str(PORT)], stdout=subprocess.PIPE, text=True)
        assert srv.stdout.readline().strip() == "ready"
        subprocess.run(p.exec_argv(p.a, [sys.executable, "-c", SEND, p.ip_b, str(PORT), str(SIZE)]),
                       check=True, timeout=60, capture_output=True)
        assert int(srv.communicate(timeout=30)[0].split()[-1]) == SIZE
        res = cap.stop()
    assert res.exit_code == 0 and res.dropped_by_kernel == 0
    return path


def tshark(path) -> dict[str, set[int]]:
    """Per kind of rwnd.KINDS, the frames tshark flags ``tcp.analysis.<kind>``."""
    argv = ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"]
    argv += [x for k in rwnd.KINDS for x in ("-e", f"tcp.analysis.{k}")]
    rows = [line.split("\t") for line in
            subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()]
    return {k: {int(r[0]) for r in rows if r[1 + i]} for i, k in enumerate(rwnd.KINDS)}


def test_window_events_match_tshark(capture):
    pk = pcap.read(capture)
    (flow,) = [f for f in flows.split(pk) if f.key.proto == pcap.TCP]
    ours = {k: set() for k in rwnd.KINDS}
    for from_client in (True, False):     # tshark flags both directions' packets
        ev = tcp.analyze_direction(pk, flow, from_client).window_events
        for k in rwnd.KINDS:
            ours[k] |= set((flow.index[getattr(ev, k)] + 1).tolist())
    theirs = tshark(capture)
    assert ours == theirs
    # the run did what it is for: the receiver's window filled and closed, and opened again
    assert len(theirs["window_full"]) >= 5
    assert len(theirs["zero_window"]) >= 3 and len(theirs["window_update"]) >= 3
    (f,) = [f for f in report.analyze_file(capture)["flows"] if f["proto"] == "tcp"]
    w = f["directions"]["c2s"]["receiver_window"]
    assert w["scaling"] == "signalled" and w["window_full"]["count"] == len(theirs["window_full"])
    assert w["zero_window"]["count"] == len(theirs["zero_window"])
