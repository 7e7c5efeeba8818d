"""Packet capture with tcpdump on one interface, started before and stopped after the traffic.

    cap = Capture(run_dir / "server-eth0.pcap", "server-eth0",
                  popen=lambda argv, **kw: tb.popen("server", argv, name="tcpdump-server", **kw))
    cap.start()          # returns once tcpdump reports "listening on"
    ... traffic ...
    result = cap.stop()  # SIGINT to that PID, wait, parse tcpdump's counters
    result.dropped_by_kernel

Headers only by default: ``snaplen=192`` keeps Ethernet/SLL2 + IPv4 or IPv6 with
options + a TCP header with all options (SACK, timestamps) + the first 8
payload bytes (a TLS record header and the handshake message type).
``full_payload=True`` captures whole packets.

Timestamps: tcpdump writes CLOCK_REALTIME with nanosecond precision.  The
testbed's clock is CLOCK_MONOTONIC, so ``realtime - monotonic`` (ns) is taken
right before start and right after stop and written with tcpdump's counters to
``<pcap>.meta.json``; ``analysis`` uses it to put packet times on the
monotonic clock (``mono = pcap_time - offset``).

:func:`capture_hosts` starts one Capture per interface of every host of a
``testbed.run.network.Testbed`` (files ``<tb.dir>/pcap/<host>-<intf>.pcap``) and
stops them all, also on error.

The ``popen`` callable receives an argv list and the keyword arguments
``stdout`` and ``stderr`` (open file objects) and must return a
``subprocess.Popen``-like object; ``subprocess.Popen`` itself captures in the
current namespace.  tcpdump's stderr goes to ``<pcap>.tcpdump.log``.
"""
from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from analysis.clock import meta_path
from testbed.spec.clock import clock_offset_ns

DEFAULT_SNAPLEN = 192
_COUNTER = re.compile(r"^(\d+) packets? (captured|received by filter|dropped by kernel|"
                      r"dropped by interface)", re.M)


@dataclass
class CaptureResult:
    pcap: str
    interface: str
    snaplen: int
    argv: list
    offset_start_ns: int
    offset_stop_ns: int
    captured: int | None = None
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None
    dropped_by_interface: int | None = None
    exit_code: int | None = None
    warnings: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when tcpdump reported its counters and dropped nothing."""
        return not self.warnings and not self.dropped_by_kernel and not self.dropped_by_interface


class Capture:
    """One tcpdump process writing one pcap (see module docstring)."""

    def __init__(self, path: str | Path, interface: str, *, popen: Callable = subprocess.Popen,
                 snaplen: int = DEFAULT_SNAPLEN, full_payload: bool = False,
                 bpf: list[str] | None = None, buffer_kib: int = 8192,
                 ready_timeout: float = 10.0):
        if not interface or interface.startswith("-"):
            raise ValueError(f"bad interface name {interface!r}; give an interface such as eth0")
        if not full_payload and not 96 <= snaplen <= 262144:
            raise ValueError(f"snaplen {snaplen} out of range; allowed 96..262144")
        self.path = Path(path)
        self.interface = interface
        self.snaplen = 0 if full_payload else snaplen     # tcpdump: 0 = whole packet
        self.popen = popen
        self.bpf = list(bpf or [])
        self.buffer_kib = buffer_kib
        self.ready_timeout = ready_timeout
        self.proc = None
        self.result: CaptureResult | None = None
        self._log = None
        self._offset_start = None

    @property
    def log_path(self) -> Path:
        return Path(str(self.path) + ".tcpdump.log")

    def argv(self) -> list[str]:
        return ["tcpdump", "-i", self.interface, "-w", str(self.path), "-s", str(self.snaplen),
                "-n", "-U", "--immediate-mode", "--time-stamp-precision=nano",
                "-B", str(self.buffer_kib), "-Z", "root", *self.bpf]

    def start(self) -> "Capture":
        if self.proc is not None:
            raise RuntimeError("capture already started")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w+b")
        self._offset_start = clock_offset_ns()
        self.proc = self.popen(self.argv(), stdout=subprocess.DEVNULL, stderr=self._log)
        deadline = time.monotonic() + self.ready_timeout
        while b"listening on" not in self.log_path.read_bytes():
            if self.proc.poll() is not None:
                err = self.log_path.read_text(errors="replace").strip()
                self._close()
                raise RuntimeError(f"tcpdump on {self.interface} exited: {err}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tcpdump on {self.interface} not listening after "
                                   f"{self.ready_timeout} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> CaptureResult:
        """SIGINT the tcpdump we started, wait for it to flush and exit, record counters."""
        if self.proc is None:
            raise RuntimeError("capture not started")
        warnings = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                warnings.append("tcpdump did not exit on SIGINT; sent SIGTERM")
                self.proc.terminate()
                self.proc.wait(timeout)
        offset_stop = clock_offset_ns()
        text = self.log_path.read_text(errors="replace")
        counts = {m.group(2).replace(" ", "_"): int(m.group(1)) for m in _COUNTER.finditer(text)}
        res = CaptureResult(
            pcap=str(self.path), interface=self.interface, snaplen=self.snaplen, argv=self.argv(),
            offset_start_ns=self._offset_start, offset_stop_ns=offset_stop,
            captured=counts.get("captured"), received_by_filter=counts.get("received_by_filter"),
            dropped_by_kernel=counts.get("dropped_by_kernel"),
            dropped_by_interface=counts.get("dropped_by_interface"),
            exit_code=self.proc.returncode, warnings=warnings)
        if res.dropped_by_kernel is None:
            res.warnings.append("tcpdump printed no 'dropped by kernel' counter")
        if res.dropped_by_kernel:
            res.warnings.append(f"{res.dropped_by_kernel} packets dropped by kernel: "
                                "the capture is incomplete")
        self._close()
        meta_path(self.path).write_text(json.dumps(asdict(res), indent=1) + "\n")
        self.result = res
        return res

    def _close(self):
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "Capture":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.result is None:
            self.stop()


def _host_popen(tb, host: str, intf: str) -> Callable:
    def popen(argv, **kw):
        return tb.popen(host, argv, name=f"tcpdump {intf}", **kw)
    return popen


@contextlib.contextmanager
def capture_hosts(tb, hosts: list[str] | None = None, directory: Path | str | None = None,
                  **kwargs) -> Iterator[list[Capture]]:
    """Capture on every non-loopback interface of ``hosts`` (default: all hosts of ``tb``),
    started before the block and stopped (flushed, counters read) after it, into
    ``<directory>/pcap/`` (default ``tb.dir``).  ``kwargs`` go to :class:`Capture`.  Each
    result is in ``capture.result``; kernel drops are warnings there."""
    caps = []
    try:
        for name in hosts or sorted(tb.hosts):
            for intf in tb.host(name).intfList():
                if intf.name == "lo":
                    continue
                path = Path(directory or tb.dir) / "pcap" / f"{name}-{intf.name}.pcap"
                caps.append(Capture(path, intf.name, popen=_host_popen(tb, name, intf.name),
                                    **kwargs).start())
        yield caps
    finally:
        for c in caps:
            if c.result is None:
                c.stop()
