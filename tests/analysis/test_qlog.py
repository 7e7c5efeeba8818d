"""QUIC from qlog: a real aioquic exchange over 127.0.0.1, logged by QuicLogger, parsed back."""
import asyncio
import datetime
import json

import pytest

aioquic = pytest.importorskip("aioquic")
from aioquic.asyncio import connect, serve  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402
from aioquic.quic.logger import QuicLogger  # noqa: E402

from analysis import qlog  # noqa: E402

SIZES = {0: 300_000, 4: 50_000}   # client-initiated bidirectional streams -> response size


def _cert(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(key, hashes.SHA256()))
    c, k = tmp_path / "cert.pem", tmp_path / "key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    return c, k


async def _exchange(tmp_path, client_log, server_log):
    cert, key = _cert(tmp_path)
    server = await _server("127.0.0.1", 0, cert, key, server_log)
    port = server._transport.get_extra_info("sockname")[1]
    try:
        return await _client("127.0.0.1", port, cert, client_log)
    finally:
        server.close()


async def _server(host, port, cert, key, log):
    scfg = QuicConfiguration(is_client=False, alpn_protocols=["tbtest"], quic_logger=log)
    scfg.load_cert_chain(cert, key)

    async def handle(reader, writer):
        req = await reader.read()
        size = int(req.decode())
        writer.write(b"s" * size)
        writer.write_eof()

    return await serve(host, port, configuration=scfg,
                       stream_handler=lambda r, w: asyncio.ensure_future(handle(r, w)))


async def _client(host, port, cert, log):
    ccfg = QuicConfiguration(is_client=True, alpn_protocols=["tbtest"], quic_logger=log,
                             server_name="localhost")
    ccfg.load_verify_locations(str(cert))
    got = {}
    async with connect(host, port, configuration=ccfg) as client:
        async def one(size):
            reader, writer = await client.create_stream()
            writer.write(str(size).encode())
            writer.write_eof()
            data = await reader.read()
            return writer.get_extra_info("stream_id"), len(data)
        for sid, n in await asyncio.wait_for(asyncio.gather(*(one(s) for s in SIZES.values())), 60):
            got[sid] = n
    return got


def test_qlog_of_real_aioquic_exchange(tmp_path):
    clog, slog = QuicLogger(), QuicLogger()
    got = asyncio.run(_exchange(tmp_path, clog, slog))
    assert got == SIZES
    path = tmp_path / "client.qlog"
    path.write_text(json.dumps(clog.to_dict()))
    assert qlog.is_qlog(path)
    (tr,) = qlog.load(path)
    assert tr.vantage == "client" and len(tr.sent) > 0 and len(tr.received) > 100
    s = qlog.summary([tr])
    recv = {x["stream"]: x for x in s["streams"] if x["direction"] == "received"}
    assert {k: v["bytes"] for k, v in recv.items()} == SIZES
    assert all(v["fin"] and v["complete"] is not None for v in recv.values())
    # per-stream delivery: in-order prefix grows monotonically up to the stream's size
    for sid, size in SIZES.items():
        t, b = qlog.delivered(tr, sid)
        assert b[-1] == size and (b[1:] >= b[:-1]).all() and (t[1:] >= t[:-1]).all()
    # the server sent the data: its trace carries the congestion controller's state
    spath = tmp_path / "server.qlog"
    spath.write_text(json.dumps(slog.to_dict()))
    ss = qlog.summary(qlog.load(spath))
    assert ss["vantage"] == "server" and ss["bytes_in_flight_max"] > 0 and ss["cwnd_max"] > 0
    sent = {x["stream"]: x["bytes"] for x in ss["streams"] if x["direction"] == "sent"}
    assert sent == SIZES
    assert ss["packets_sent"] >= s["packets_received"] - ss["packets_lost"]


# -- through the emulator: the same exchange as two processes in the long-haul topology --------

ROLE = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import test_qlog as T
from aioquic.quic.logger import QuicLogger
role, host, port, cert, key, out = sys.argv[2:8]
log = QuicLogger()
async def main():
    if role == "server":
        server = await T._server(host, int(port), cert, key, log)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        server.close()
    else:
        print(json.dumps(await T._client(host, int(port), cert, log)), flush=True)
asyncio.run(main())
open(out, "w").write(json.dumps(log.to_dict()))
"""


@pytest.mark.root
@pytest.mark.slow
def test_qlog_through_emulator(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    from testbed.run.network import Testbed
    cert, key = _cert(tmp_path)
    here = str(Path(__file__).parent)
    with Testbed("longhaul", backend="userspace", results_root=tmp_path,
                 overrides={"delay": "15ms", "loss_down": "3%", "loss_up": "0%"}) as tb:
        srv = tb.popen("server", [sys.executable, "-c", ROLE, here, "server", "0.0.0.0", "4433",
                                  str(cert), str(key), str(tmp_path / "server.qlog")],
                       name="quic server", text=True, stdin=subprocess.PIPE)
        assert srv.stdout.readline().strip() == "ready"
        r = tb.run("client", [sys.executable, "-c", ROLE, here, "client", tb.ip("server"), "4433",
                              str(cert), "-", str(tmp_path / "client.qlog")], timeout=60, check=True)
        srv.stdin.write("done\n")
        srv.stdin.flush()
        srv.wait(20)
    assert {int(k): v for k, v in json.loads(r.stdout).items()} == SIZES
    (tr,) = qlog.load(tmp_path / "client.qlog")
    s = qlog.summary([tr])
    rtt = tr.metrics["latest_rtt"][1]
    assert rtt.min() >= 30                       # two 15 ms one-way delays
    recv = {x["stream"]: x for x in s["streams"] if x["direction"] == "received"}
    assert {k: v["bytes"] for k, v in recv.items()} == SIZES and all(v["complete"] for v in recv.values())
    assert s["packets_received"] > 200
    # the server sent through 3% loss: it declared packets lost (P(none of ~270) < 0.1%)
    ss = qlog.summary(qlog.load(tmp_path / "server.qlog"))
    assert ss["packets_lost"] > 0 and ss["bytes_in_flight_max"] > 0 and ss["cwnd_max"] > 0
    assert ss["packets_sent"] > s["packets_received"]
