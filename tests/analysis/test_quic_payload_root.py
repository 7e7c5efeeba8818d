"""QUIC runs and the TLS key log (docs/run-directory.md): the default headers-only capture
(snap length 192) holds no decryptable QUIC payload, so tshark with the client's key log
finds no STREAM frame in it; ``capture.full_payload`` (``--full-payload``) keeps whole packets
and the same key log decrypts them."""
import shutil
import subprocess

import pytest

from analysis import pcap
from testbed.run.execute import execute
from testbed.spec.runspec import CaptureSpec, RunSpec

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("isolated_state"),
              pytest.mark.skipif(not shutil.which("tshark"), reason="needs tshark")]


def _stream_frames(run_dir) -> int:
    (cap,) = (run_dir / "pcap").glob("client-*.pcap")
    out = subprocess.run(["tshark", "-r", str(cap), "-o",
                          f"tls.keylog_file:{run_dir / 'client.keylog'}", "-Y", "quic.stream.stream_id",
                          "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True, check=True).stdout
    return len(out.split())


@pytest.mark.parametrize("full", [False, True], ids=["headers-only", "full-payload"])
def test_the_key_log_decrypts_only_a_full_payload_capture(tmp_path, full):
    spec = RunSpec(topology="longhaul", backend="userspace", workload="streams",
                   topology_params={"delay": "10ms", "loss_up": "0%", "loss_down": "0%"},
                   params={"transport": "quic", "image": "100KB", "chunks": 4},
                   capture=CaptureSpec(("client",), full_payload=full))
    r = execute(spec, tmp_path / "run")
    assert r.status == "complete", r.error
    (cap,) = (r.dir / "pcap").glob("client-*.pcap")
    pk = pcap.read(cap)
    udp = pk.proto == pcap.UDP
    assert udp.sum() > 50
    whole = (pk.caplen[udp] == pk.wirelen[udp]).mean()
    frames = _stream_frames(r.dir)
    if full:
        assert whole == 1 and frames > 50
    else:
        assert whole < 0.5 and frames == 0
