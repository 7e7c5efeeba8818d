"""TCP_INFO decoded exactly, and a sampler that logs it during transfers.

Layout: ``struct tcp_info`` of include/uapi/linux/tcp.h as of Linux 6.18 (280 bytes, ending in
the AccECN counters).  Older kernels return a prefix; fields past the returned length are
left out of the decoded dict.  The 8 leading u8s hold two bitfield bytes
(snd_wscale:4 | rcv_wscale:4, delivery_rate_app_limited:1 | fastopen_client_fail:2).

Logged sample fields (``SAMPLE_FIELDS``), in Linux's units:
``state``, ``ca_state``; ``snd_cwnd`` (segments); ``unacked`` (segments sent, not yet
cumulatively ACKed: packets_out), ``sacked``, ``lost``, ``retrans`` (segments currently
SACKed / presumed lost / retransmitted and in flight); ``total_retrans`` (segments
retransmitted over the connection); ``rtt``, ``rttvar``, ``min_rtt`` (µs, smoothed);
``snd_ssthresh``; ``delivery_rate`` (B/s, most recent delivery-rate sample);
``snd_wnd``/``rcv_wnd`` (peer's / our advertised receive window in bytes, after scaling);
``bytes_acked``, ``bytes_received``, ``bytes_sent``, ``bytes_retrans``;
``data_segs_in``/``data_segs_out``; ``segs_in``/``segs_out``; ``snd_mss``, ``rcv_mss``;
``snd_wscale``/``rcv_wscale``; ``pacing_rate`` (B/s); ``notsent_bytes``; ``busy_time``,
``rwnd_limited``, ``sndbuf_limited`` (µs the connection had data in flight / was limited by
the peer's window / by its own send buffer, cumulative); ``rcv_ooopack`` (segments that
arrived out of order at this receiver, cumulative), ``rcv_space`` and ``rcv_ssthresh`` (the
receive-buffer autotuning's estimate and the window ceiling it allows, bytes); ``reord_seen``,
``dsack_dups``; ``delivery_rate_app_limited``; with bbr also BBR's own model (``bbr_info``).
"""
from __future__ import annotations

import socket
import struct
import threading

from testbed.apps.eventlog import TCP_INFO, EventLog

_FIELDS = [
    ("B", "state"), ("B", "ca_state"), ("B", "retransmits"), ("B", "probes"), ("B", "backoff"),
    ("B", "options"), ("B", "_wscale"), ("B", "_rate_flags"),
    ("I", "rto"), ("I", "ato"), ("I", "snd_mss"), ("I", "rcv_mss"),
    ("I", "unacked"), ("I", "sacked"), ("I", "lost"), ("I", "retrans"), ("I", "fackets"),
    ("I", "last_data_sent"), ("I", "last_ack_sent"), ("I", "last_data_recv"), ("I", "last_ack_recv"),
    ("I", "pmtu"), ("I", "rcv_ssthresh"), ("I", "rtt"), ("I", "rttvar"), ("I", "snd_ssthresh"),
    ("I", "snd_cwnd"), ("I", "advmss"), ("I", "reordering"), ("I", "rcv_rtt"), ("I", "rcv_space"),
    ("I", "total_retrans"),
    ("Q", "pacing_rate"), ("Q", "max_pacing_rate"), ("Q", "bytes_acked"), ("Q", "bytes_received"),
    ("I", "segs_out"), ("I", "segs_in"), ("I", "notsent_bytes"), ("I", "min_rtt"),
    ("I", "data_segs_in"), ("I", "data_segs_out"),
    ("Q", "delivery_rate"), ("Q", "busy_time"), ("Q", "rwnd_limited"), ("Q", "sndbuf_limited"),
    ("I", "delivered"), ("I", "delivered_ce"), ("Q", "bytes_sent"), ("Q", "bytes_retrans"),
    ("I", "dsack_dups"), ("I", "reord_seen"), ("I", "rcv_ooopack"), ("I", "snd_wnd"),
    ("I", "rcv_wnd"), ("I", "rehash"), ("H", "total_rto"), ("H", "total_rto_recoveries"),
    ("I", "total_rto_time"), ("I", "received_ce"),
    ("I", "delivered_e1_bytes"), ("I", "delivered_e0_bytes"), ("I", "delivered_ce_bytes"),
    ("I", "received_e1_bytes"), ("I", "received_e0_bytes"), ("I", "received_ce_bytes"),
    ("I", "_accecn_bits"),
]
# (name, offset, struct format) for each field; '=' = native order, no implicit padding
# (every field of struct tcp_info is naturally aligned, so offsets equal the C layout).
_LAYOUT = []
_offset = 0
for _fmt, _name in _FIELDS:
    _LAYOUT.append((_name, _offset, "=" + _fmt))
    _offset += struct.calcsize("=" + _fmt)
STRUCT_SIZE = _offset  # 280 on Linux 6.18

SAMPLE_FIELDS = ("state", "ca_state", "snd_cwnd", "unacked", "sacked", "lost", "retrans",
                 "total_retrans", "rtt", "rttvar", "min_rtt", "snd_ssthresh", "delivery_rate",
                 "snd_wnd", "rcv_wnd", "bytes_acked", "bytes_received", "bytes_sent",
                 "bytes_retrans", "data_segs_in", "data_segs_out", "segs_in", "segs_out",
                 "snd_mss", "rcv_mss", "snd_wscale", "rcv_wscale", "pacing_rate", "notsent_bytes",
                 "busy_time", "rwnd_limited", "sndbuf_limited", "rcv_ooopack", "rcv_space",
                 "rcv_ssthresh", "reord_seen", "dsack_dups", "delivery_rate_app_limited")


def decode(raw: bytes) -> dict:
    """Decode the bytes getsockopt(TCP_INFO) returned (any prefix of the 6.18 struct)."""
    out = {}
    for name, offset, fmt in _LAYOUT:
        if offset + struct.calcsize(fmt) > len(raw):
            break
        out[name] = struct.unpack_from(fmt, raw, offset)[0]
    wscale = out.pop("_wscale")
    out["snd_wscale"], out["rcv_wscale"] = wscale & 0x0F, wscale >> 4
    flags = out.pop("_rate_flags")
    out["delivery_rate_app_limited"] = flags & 1
    out["fastopen_client_fail"] = (flags >> 1) & 3
    bits = out.pop("_accecn_bits", None)
    if bits is not None:
        out["ecn_mode"], out["accecn_opt_seen"] = bits & 3, (bits >> 2) & 3
        out["accecn_fail_mode"], out["options2"] = (bits >> 4) & 0xF, bits >> 8
    return out


def read(sock: socket.socket) -> dict:
    return decode(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, STRUCT_SIZE))


TCP_CC_INFO = getattr(socket, "TCP_CC_INFO", 26)
_BBR_INFO = struct.Struct("=IIIII")   # struct tcp_bbr_info (include/uapi/linux/inet_diag.h)


def bbr_info(sock: socket.socket) -> dict:
    """BBR's model (TCP_CC_INFO of a socket running bbr): ``bbr_bw`` (its bandwidth estimate,
    B/s), ``bbr_min_rtt`` (µs), ``bbr_pacing_gain`` and ``bbr_cwnd_gain`` (as factors; the
    pacing gain names the mode: 2.89 startup, 0.35 drain, 1.25/0.75/1 probe_bw cycle, 1 with
    cwnd 4 probe_rtt).  Empty for other congestion controls."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, _BBR_INFO.size)
    if len(raw) < _BBR_INFO.size:
        return {}
    lo, hi, min_rtt, pacing, cwnd = _BBR_INFO.unpack(raw)
    return {"bbr_bw": (hi << 32) | lo, "bbr_min_rtt": min_rtt,
            "bbr_pacing_gain": round(pacing / 256, 3), "bbr_cwnd_gain": round(cwnd / 256, 3)}


def sample(sock: socket.socket, bbr: bool = False) -> dict:
    """The ``SAMPLE_FIELDS`` of TCP_INFO, plus ``bbr_info`` when ``bbr``."""
    info = read(sock)
    out = {k: info[k] for k in SAMPLE_FIELDS if k in info}
    if bbr:
        out.update(bbr_info(sock))
    return out


class Sampler:
    """Logs ``tcp_info`` for ``sock`` every ``interval`` seconds from a thread, plus one
    sample at start and one at stop.  ``interval <= 0`` logs only those two."""

    def __init__(self, log: EventLog, sock: socket.socket, conn: int, interval: float):
        self.log, self.sock, self.conn, self.interval = log, sock, conn, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        try:
            cc = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
        except OSError:
            cc = b""
        self.bbr = cc.rstrip(b"\0") == b"bbr"

    def _emit(self) -> None:
        try:
            self.log.emit(TCP_INFO, conn=self.conn, **sample(self.sock, self.bbr))
        except OSError:  # socket closed under us
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._emit()

    def __enter__(self) -> "Sampler":
        self._emit()
        if self.interval > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._emit()


class SendQueueWatch:
    """When did the bytes of one write leave the send queue?  After the write returned
    (``start()``), polls TCP_INFO every ``poll`` seconds from a thread and logs ``left_event``
    at the first poll with ``notsent_bytes`` = 0 (everything written has been transmitted at
    least once) and ``acked_event`` at the first poll with ``unacked`` = 0 (and everything sent
    was cumulatively ACKed); each stamp is the poll's time, at most ``poll`` + one getsockopt
    after the fact (``poll_us`` is logged with it).  ``stop()`` ends the polling."""

    def __init__(self, log: EventLog, sock: socket.socket, poll: float, left_event: str,
                 acked_event: str, **fields):
        self.log, self.sock, self.poll = log, sock, poll
        self.left_event, self.acked_event, self.fields = left_event, acked_event, fields
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        from testbed.apps.eventlog import now
        left, poll_us = False, round(self.poll * 1e6)
        while True:
            last = self._stop.is_set()              # one more poll after stop(), then end
            t = now()
            try:
                info = read(self.sock)
            except OSError:
                return
            if not left and info.get("notsent_bytes") == 0:
                left = True
                self.log.emit(self.left_event, t=t, poll_us=poll_us, **self.fields)
            if left and info["unacked"] == 0:
                self.log.emit(self.acked_event, t=t, poll_us=poll_us, **self.fields)
                return
            if last:
                return
            self._stop.wait(self.poll)

    def start(self) -> "SendQueueWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
