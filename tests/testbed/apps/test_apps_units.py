"""Sans-I/O and socket-level pieces of testbed.apps, on loopback without root."""
import json
import socket

import pytest

from testbed.apps import eventlog, payload, tcpinfo, tcpopts
from testbed.protocols import mux, socks5
from testbed.apps.appmain import parse_hostport


def test_eventlog_clock_line_and_threadsafe_jsonl(tmp_path):
    path = tmp_path / "log.jsonl"
    with eventlog.EventLog(path) as log:
        log.emit("x", a=1)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    clock = lines[0]
    assert clock["event"] == "clock"
    assert clock["realtime_minus_monotonic_ns"] == clock["realtime_ns"] - clock["monotonic_ns"]
    assert lines[1]["event"] == "x" and lines[1]["t"] >= clock["t"]


def test_payload_is_fixed():
    body = payload.body()
    assert len(body) == 354_640
    assert body == payload.body(354_640)
    assert payload.digest(body) == payload.digest(payload.body(354_640, payload.DEFAULT_SEED))
    assert payload.body(10) == body[:10]
    with pytest.raises(ValueError):
        payload.body(-1)


def _pair():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    c = socket.create_connection(lst.getsockname())
    s, _ = lst.accept()
    lst.close()
    return c, s


def test_socket_factors_set_before_connect_read_back():
    f = tcpopts.SocketFactors(cc="reno", sndbuf=100_000, rcvbuf="64KB", window_clamp=64_000,
                              nodelay=True, delack_max="10ms")
    lst = socket.socket()
    f.apply(lst)
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    c = socket.socket()
    f.apply(c)
    c.connect(lst.getsockname())
    s, _ = lst.accept()
    for sock in (c, s):              # the accepted socket inherits from the listener
        rb = tcpopts.read_back(sock)
        assert rb["cc"] == "reno" and rb["nodelay"] is True
        assert rb["rcvbuf"] == 128_000 and rb["sndbuf"] == 200_000   # Linux doubles
        assert rb["window_clamp"] == 64_000
        # stored in jiffies: read back is >= the request and within one tick (HZ >= 100)
        assert 10_000 <= rb["delack_max_us"] < 20_000
    for x in (c, s, lst):
        x.close()


def test_bad_factors_are_clear_errors():
    with pytest.raises(ValueError, match="cc 'vegasx': not available on this kernel; available: "):
        tcpopts.SocketFactors(cc="vegasx")
    with pytest.raises(ValueError, match=r"rcvbuf -1: a size > 0 bytes"):
        tcpopts.SocketFactors(rcvbuf=-1)
    with pytest.raises(ValueError, match="'window' is not a socket factor set on a socket"):
        tcpopts.SocketFactors(window="64KB")       # a shorthand: factors.socket_fields expands it
    with pytest.raises(ValueError, match="allowed: delayed"):
        tcpopts.parse_ack("sometimes")
    assert tcpopts.parse_ack("max:10ms") == (False, 10_000)
    assert tcpopts.parse_ack("quick") == (True, None)
    with pytest.raises(ValueError, match="initcwnd 0: a segment count in 1..65535"):
        tcpopts.HostFactors("10.0.0.2", initcwnd=0)
    with pytest.raises(ValueError):
        parse_hostport("host:99999")


def test_route_argv_and_host_flags():
    h = tcpopts.HostFactors("10.0.0.2", ack="quick", initcwnd=100, slow_start_after_idle=False)
    route = {"dst": "10.0.0.2", "dev": "client-eth0", "prefsrc": "10.0.0.1", "gateway": "10.0.1.254"}
    assert tcpopts.route_argv("10.0.0.2", route, h.route_options()) == [
        "ip", "route", "replace", "10.0.0.2/32", "dev", "client-eth0", "via", "10.0.1.254",
        "src", "10.0.0.1", "quickack", "1", "initcwnd", "100"]
    assert h.argv() == ["--peer", "10.0.0.2", "--ack", "quick", "--initcwnd", "100",
                        "--slow-start-after-idle", "false"]
    from testbed.spec import factors
    mss = tcpopts.HostFactors("10.0.0.2", **factors.host_fields({"advmss": "1180", "keep_metrics": True}))
    assert mss.route_options() == ["advmss", "1180"]
    assert mss.argv() == ["--peer", "10.0.0.2", "--advmss", "1180", "--keep-metrics"]
    assert tcpopts.HostFactors("10.0.0.2").route_options() == []      # ack delayed: no quickack


def test_host_program_parses_the_argv_host_factors_make(monkeypatch, capsys):
    """``tcpopts host`` takes every host factor's option (derived from the records) and parses
    the argv a HostFactors makes back into the same factors."""
    h = tcpopts.HostFactors("10.0.0.2", ack="max:10ms", initcwnd=40, advmss=1180, initrwnd=20,
                            slow_start_after_idle=False, keep_metrics=True)
    monkeypatch.setattr(tcpopts, "apply_host", lambda got: {"peer": got.peer, **got.values})
    assert tcpopts.main(["host", *h.argv()]) == 0
    assert json.loads(capsys.readouterr().out) == {"peer": "10.0.0.2", **h.values}


def test_bad_factor_values_name_the_factor_and_what_is_allowed():
    from testbed.spec import factors
    from testbed.spec.errors import UsageError
    for values, where, message in (
            ({"initcwnd": "abc"}, "host", "initcwnd 'abc': a segment count in 1..65535"),
            ({"initcwnd": "1.5"}, "host", "initcwnd '1.5': a segment count in 1..65535"),
            ({"advmss": 100}, "host", "advmss 100: bytes in 536..65495"),
            ({"ack": "sometimes"}, "host", "ack 'sometimes': delayed, quick or max:<time>"),
            ({"slow_start_after_idle": "maybe"}, "host", "slow_start_after_idle 'maybe': true or false"),
            ({"window": "big"}, "socket", "window 'big': a size > 0 bytes"),
            ({"delack_max": "2s"}, "socket", r"delack_max '2s': a time in \(0, 1 s\)"),
            ({"speed": 1}, "socket", "unknown socket factor 'speed'; allowed: cc, window")):
        with pytest.raises(UsageError, match=message):
            factors.parse_all(values, where)


def test_tcpinfo_decodes_this_kernel():
    c, s = _pair()
    c.sendall(b"x" * 100_000)
    got = 0
    while got < 100_000:
        got += len(s.recv(65536))
    raw = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 512)
    assert len(raw) <= tcpinfo.STRUCT_SIZE == 280
    info = tcpinfo.decode(raw)
    assert info["state"] == 1                        # TCP_ESTABLISHED
    assert info["bytes_acked"] >= 100_000 - 1
    assert info["bytes_sent"] >= 100_000
    assert info["snd_cwnd"] >= 1 and info["snd_mss"] > 0
    assert info["snd_wscale"] > 0 and info["snd_wnd"] > 0
    assert tcpinfo.decode(raw[:104])["total_retrans"] == 0   # prefix of an older kernel
    c.close()
    s.close()


def test_mux_roundtrip_fragmented_and_interleaved():
    client, server = mux.Mux("client"), mux.Mux("server")
    s1, open1 = client.open("10.0.3.2", 5000)
    s2, open2 = client.open("example", 80)
    big = bytes(range(256)) * 1000                   # 256,000 B → 4 DATA frames
    wire = open1 + open2 + mux.encode_data(s2, b"hi") + mux.encode_data(s1, big) + client.eof(s1)
    frames = []
    for i in range(0, len(wire), 7):                 # fed 7 bytes at a time
        frames += server.receive(wire[i:i + 7])
    assert [f.type for f in frames[:2]] == [mux.FrameType.OPEN] * 2
    assert mux.decode_open(frames[0].payload) == ("10.0.3.2", 5000)
    assert b"".join(f.payload for f in frames if f.stream == s1 and f.type is mux.FrameType.DATA) == big
    assert frames[-1].type is mux.FrameType.EOF
    back = server.accept(s1, True) + server.accept(s2, False, socks5.CONNECTION_REFUSED)
    got = client.receive(back)
    assert [f.type for f in got] == [mux.FrameType.OPENED, mux.FrameType.REFUSED]
    assert s2 not in client.streams
    client.receive(server.eof(s1))
    assert s1 not in client.streams                  # both directions finished


def test_mux_protocol_errors():
    with pytest.raises(mux.ProtocolError):
        mux.Decoder().feed(bytes([99, 0, 0, 0, 1, 0, 0, 0, 0]))
    with pytest.raises(mux.ProtocolError):
        mux.Decoder().feed(mux.HEADER.pack(4, 1, mux.MAX_PAYLOAD + 1))
    with pytest.raises(mux.ProtocolError):
        mux.Mux("client").receive(mux.encode(mux.FrameType.OPEN, 1, b"\0\x50x"))
    with pytest.raises(mux.ProtocolError):
        mux.Mux("client").receive(mux.encode(mux.FrameType.OPENED, 7))


def test_socks5_parser_connect_ipv4_and_domain():
    p = socks5.Socks5Server()
    msg = socks5.greeting() + socks5.connect_request("10.0.3.2", 5000) + b"early"
    out = b"".join(p.feed(msg[i:i + 1]) for i in range(len(msg)))   # byte by byte
    assert out == bytes([5, 0]) and p.state == "connect"
    assert p.target == ("10.0.3.2", 5000) and p.leftover() == b"early"
    p = socks5.Socks5Server()
    p.feed(socks5.greeting() + socks5.connect_request("service.local", 443))
    assert p.target == ("service.local", 443)
    assert socks5.reply(0)[:2] == bytes([5, 0]) and len(socks5.reply(0)) == 10


def test_socks5_parser_rejections():
    p = socks5.Socks5Server()
    assert p.feed(bytes([5, 1, 2])) == bytes([5, 0xFF]) and p.state == "failed"   # auth only
    p = socks5.Socks5Server()
    out = p.feed(socks5.greeting() + bytes([5, 2, 0, 1, 1, 2, 3, 4, 0, 80]))     # BIND
    assert out[-10:-8] == bytes([5, socks5.COMMAND_NOT_SUPPORTED]) and p.state == "failed"
    p = socks5.Socks5Server()
    assert p.feed(bytes([4, 1])) == b"" and p.state == "failed"                 # SOCKS4


def test_cc_used_parses_ss_and_compares_with_the_namespace_default(tmp_path):
    import json
    from testbed.apps import ccusage
    ss = ("ESTAB 0      0      127.0.0.1:45629 127.0.0.1:56506\n"
          "\t bbr wscale:9,9 rto:208 rtt:0.019/0.009 ato:40 mss:22016 bbr:(bw:0bps,mrtt:0.019)\n"
          "ESTAB 0      0      127.0.0.1:56506 127.0.0.1:45629\n"
          "\t reno wscale:9,9 rto:204 rtt:0.025/0.014 mss:23296 cwnd:10\n")
    socks = ccusage.parse_ss(ss)
    assert [(s["local"], s["cc"]) for s in socks] == [("127.0.0.1:45629", "bbr"), ("127.0.0.1:56506", "reno")]
    (tmp_path / "client.jsonl").write_text(json.dumps(
        {"t": 1, "event": "factors", "conn": 0, "side": "client", "readback": {"cc": "cubic"}}) + "\n")
    (tmp_path / "metadata.json").write_text(json.dumps(
        {"hosts": {"client": {"sysctls": {"net.ipv4.tcp_congestion_control": "bbr"}}}}))
    with open(tmp_path / "client.jsonl", "a") as f:
        f.write(json.dumps({"t": 2, "event": "sockets_cc", "sockets": socks}) + "\n")
    used = ccusage.cc_used(tmp_path)
    assert used["apps"] == {"client": ["cubic"]} and used["namespace_default"] == {"client": "bbr"}
    assert used["differs"] == ["client: outside programs would use bbr; the testbed's apps used cubic",
                               "client: socket 127.0.0.1:45629 → 127.0.0.1:56506 ran bbr",
                               "client: socket 127.0.0.1:56506 → 127.0.0.1:45629 ran reno"]
    assert isinstance(ccusage.snapshot(), list)


def test_bbr_model_read_with_tcp_cc_info():
    import socket
    from testbed.apps import tcpinfo, tcpopts
    if "bbr" not in tcpopts.available_cc():
        pytest.skip("no bbr in this kernel")
    with socket.create_server(("127.0.0.1", 0)) as lst, \
            socket.create_connection(lst.getsockname()) as c:
        a, _ = lst.accept()
        with a:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"bbr")
            c.sendall(b"x" * 100_000)
            a.recv(200_000)
            info = tcpinfo.sample(c, bbr=True)
            assert info["bbr_pacing_gain"] > 0 and info["bbr_bw"] > 0 and "snd_cwnd" in info
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"reno")
            assert tcpinfo.bbr_info(c) == {}


def test_cc_note_only_when_the_namespace_default_differs():
    from testbed.apps import ccusage
    default = ccusage.namespace_default()
    assert ccusage.note(default) is None and ccusage.note(None) is None
    other = next(c for c in ("reno", "cubic") if c != default)
    assert f"default, {default}" in ccusage.note(other)


def test_params_argv_passes_zero():
    """0 is a value (0 == False in Python): --warmup 0 must reach the app, not its default 10."""
    from testbed.workloads import ReqRespParams, params_argv
    argv = params_argv(ReqRespParams(mode="reuse", warmup=0), "client")
    assert argv[argv.index("--warmup") + 1] == "0"


def test_clients_print_every_request_s_completion():
    """README: the client prints every request's completion, not only the median (the TCP and
    the UDP client share completion_line)."""
    from testbed.apps import udpreq
    from testbed.apps.reqresp import completion_line, summarize
    line = completion_line(summarize([1_000_000, 2_500_000]))
    assert line == "median 1.75 ms over 2 requests; each (ms): 1.0, 2.5"
    assert udpreq.completion_line is completion_line


def test_block_plan_splits_the_body_replies_and_processing():
    from testbed.apps.reqresp import block_plan
    # the chapter's three independent blocks: 10 MB each, outputs 1, 2, 2 MB, 0.1 s each
    assert block_plan(30_000_000, 3, [1_000_000, 2_000_000, 2_000_000], [300_000]) == [
        (10_000_000, 1_000_000, 100_000), (10_000_000, 2_000_000, 100_000), (10_000_000, 2_000_000, 100_000)]
    # a global dependency: nothing before the last block, then all of T and every reply byte
    assert block_plan(10, 3, [5], [300], dependent=True) == [(4, 0, 0), (3, 0, 0), (3, 5, 300)]
    with pytest.raises(ValueError, match="2 values for 3 blocks"):
        block_plan(10, 3, [1, 2], [0])
    with pytest.raises(ValueError, match="blocks 0"):
        block_plan(10, 0, [1], [0])


def test_reqresp_block_and_codec_params_are_checked():
    from testbed.spec.errors import UsageError
    from testbed.workloads import get
    w = get("reqresp")
    p = w.make_params({"blocks": "3", "reply_size": "1MB,2MB,2MB", "compress": "0.5", "encode": "150ms"})
    assert p.blocks == 3 and "--dependent" not in w.client_argv(p, "x:1", "l")
    for bad, msg in (({"blocks": "2", "reply_size": "1,2,3"}, "one per block"),
                     ({"compress": "2"}, "ratio in (0, 1]"), ({"dependent": "true"}, "blocks >= 2"),
                     ({"blocks": "2", "tls": "true"}, "not with tls")):
        with pytest.raises(UsageError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            w.make_params(bad)


def test_agent_disconnect_param_is_checked():
    from testbed.spec.errors import UsageError
    from testbed.workloads import get
    w = get("agent")
    assert "--disconnect" in w.client_argv(w.make_params({"disconnect": "10:keep", "rounds": "20"}), "x:1", "l")
    for bad, msg in (({"disconnect": "10:maybe"}, "K:keep | K:lose"), ({"disconnect": "0:keep"}, "K >= 1"),
                     ({"disconnect": "31:lose"}, "only 30 rounds")):
        with pytest.raises(UsageError, match=msg.replace("|", r"\|")):
            w.make_params(bad)


def _uplink_frames(request: int, rounds: int, mss: int = 1448, acks: int = 1) -> list[tuple[int, str]]:
    """The uplink frames of a kept agent connection, labelled: SYN, its ACK, then per round the
    request's frames and ``acks`` ACKs of the action (0: piggybacked on the next request)."""
    out = [(74, "syn"), (66, "ack")]
    for i in range(rounds):
        n = -(-request // mss)
        out += [(66 + min(mss, request - j * mss), f"data{i}") for j in range(n)]
        out += [(66, f"gap{i}")] * acks
    return out


@pytest.mark.parametrize("screenshot,acks", [("150KB", 1), ("0.8MB", 1), ("0.8MB", 0), ("0.8MB", 2),
                                             ("1449", 1), ("1420", 1)])
def test_agent_uplink_steps_land_between_the_rounds_in_the_link_model(screenshot, acks):
    """The emulator's schedule model, fed the agent's uplink frames: each round's step applies
    from a frame after round i−1's request (its action's ACK, or round i's first frame), also
    when the ACKs per round are miscounted (none, two: 198 B over three rounds) — the moments sit
    midway in that window (±432 B for 0.8 MB: the 798-byte last frame and one ACK)."""
    from testbed.emulator.schedule_model import make_direction
    from testbed.spec.linkspec import LinkSpec
    from testbed.spec.schedule import parse_inline
    from testbed.spec.units import parse_size
    from testbed.workloads.agent import AGENT, REQUEST_HEADER, uplink_schedule
    p = AGENT.make_params({"rounds": "4", "screenshot": screenshot, "reuse": "true",
                           "uplinks": "6.4mbit,3.2mbit,12.8mbit,1mbit"})
    m = make_direction(LinkSpec(rate=6.4e6, schedule=parse_inline("schedule", uplink_schedule(p))), seed=1)
    m.set_origin(0)
    frames = _uplink_frames(REQUEST_HEADER + parse_size(screenshot), 4, acks=acks)
    for k, (length, _) in enumerate(frames):
        m.arrive(k * 1000, length)
    changes = m.drain_changes()
    assert [c.what for c in changes] == ["rate=6.4mbit", "rate=3.2mbit", "rate=12.8mbit", "rate=1mbit"]
    first = [frames[c.frames_before][1] for c in changes]     # the first frame each applies to
    assert first[0] == "syn"
    for i, label in enumerate(first[1:], 1):
        assert label in (f"gap{i - 1}", f"data{i}") and frames[changes[i].frames_before - 1][1] != f"data{i}"


def test_agent_uplinks_param_is_checked():
    from testbed.spec.errors import UsageError
    from testbed.workloads import get
    from testbed.workloads.agent import round_rates
    w = get("agent")
    p = w.make_params({"rounds": "3", "reuse": "true", "uplinks": "6.4mbit,3.2mbit,12.8mbit"})
    assert round_rates(p) == [6.4e6, 3.2e6, 12.8e6] and "--uplinks" not in w.client_argv(p, "x:1", "l")
    assert round_rates(w.make_params({"rounds": "3", "reuse": "true", "uplinks": "5mbit"})) == [5e6] * 3
    for bad, msg in (({"uplinks": "1mbit,2mbit"}, "give 3 rates > 0"), ({"uplinks": "0,1mbit,2mbit"}, "> 0"),
                     ({"uplinks": "1mbps"}, "ambiguous rate unit"), ({"uplinks": "1mbit", "reuse": "false"},
                                                                     "needs reuse"),
                     ({"uplinks": "1mbit", "disconnect": "2:keep"}, "no disconnect")):
        with pytest.raises(UsageError, match=msg):
            w.make_params({"rounds": "3", "reuse": "true", **bad})


def test_agent_uplink_steps_check_can_fail():
    """``uplink_steps``: a step before round i−1's request left the send queue, after round i's
    first write (+ the slack), at the wrong rate or missing, or a round without its stamps,
    fails the check."""
    from testbed.workloads.agent import STEP_SLACK, uplink_steps
    ev = [{"event": name, "req": k, "t": t} for k, name, t in (
        (0, "first_request_byte_sent", 100), (0, "request_left_send_queue", 200),
        (1, "first_request_byte_sent", 1000), (1, "request_left_send_queue", 1200))]

    def steps(t1, rate1="rate=3.2mbit"):
        return [{"kind": "step", "item": 0, "actual_ns": 50, "what": "rate=6.4mbit"},
                {"kind": "step", "item": 1, "actual_ns": t1, "what": rate1}]
    rates = [6.4e6, 3.2e6]
    assert uplink_steps(steps(500), ev, rates)["ok"]
    assert uplink_steps(steps(1000 + int(STEP_SLACK * 1e9)), ev, rates)["ok"]
    for bad in (steps(150), steps(1001 + int(STEP_SLACK * 1e9)), steps(500, "rate=6.4mbit"), steps(500)[:1]):
        assert not uplink_steps(bad, ev, rates)["ok"]
    assert not uplink_steps(steps(500), [e for e in ev if e["t"] != 200], rates)["ok"]   # round 0 never left


def test_agent_uplinks_need_their_schedule_on_the_server_link():
    """The run refuses a queue that cannot hold a request and a schedule that is not the
    list's, naming the right ones; the request header counted is reqresp's operation header."""
    from testbed.apps.reqresp import OP_HEADER
    from testbed.run.plan import resolve
    from testbed.spec.errors import UsageError
    from testbed.spec.runspec import RunSpec
    from testbed.spec.schedule import parse_inline
    from testbed.workloads.agent import AGENT, REQUEST_HEADER, uplink_schedule
    assert REQUEST_HEADER == OP_HEADER.size
    params = {"rounds": 2, "reuse": True, "uplinks": "6.4mbit,3.2mbit"}
    want = uplink_schedule(AGENT.make_params(params))
    def spec(links):
        return RunSpec(topology="edgecloud", workload="agent", server_host="cloud", params=params, links=links)
    with pytest.raises(UsageError, match="queue must hold one request's 553 frames .* cloud.up.queue=553"):
        resolve(spec({"cloud.up.schedule": want, "cloud.up.queue": "552"}))
    with pytest.raises(UsageError, match=f"the list sets cloud.up.schedule to '{want}'; leave"):
        resolve(spec({"cloud.up.schedule": "rate=3.2mbit@1MB", "cloud.up.queue": "553"}))
    assert resolve(spec({"cloud.up.schedule": want, "cloud.up.queue": "553"})).server == "cloud"
    # without it, the list implies it: in the resolved spec (the manifest) and on the link
    plan = resolve(spec({"cloud.up.queue": "553"}))
    assert plan.spec.links["cloud.up.schedule"] == want
    assert plan.topology.named["cloud"]["spec_ab"].schedule == parse_inline("schedule", want)
