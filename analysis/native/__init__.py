"""The compiled fast path of :mod:`analysis` (``tbanalysis.c``, loaded with ctypes).

Built by ``make -C analysis/native`` (run by ``scripts/install.sh``).  The Python
implementations (:mod:`analysis.pcap`, :class:`analysis.tcpsender.SenderTracker`) are the
reference; the library mirrors them rule for rule and ``tests/analysis/test_native.py``
checks that both give identical results.

:func:`engine` picks the implementation: ``TESTBED_ANALYSIS_ENGINE`` = ``native`` (the
library, an error when it is not built), ``python`` (the reference) or ``auto`` (the
default: native when built).  ``testbed analyze`` reports which one ran (``engine``).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

LIB = Path(__file__).with_name("libtbanalysis.so")
ENGINES = ("auto", "native", "python")
# output field order of tb_decode / tb_pcap_records (the F_* enum in tbanalysis.c)
FIELDS = ("ts_ns", "iface", "caplen", "wirelen", "ipver", "proto", "src", "dst", "ip_id",
          "ip_len", "sport", "dport", "payload_len", "flags", "seq", "ack", "win", "wscale",
          "mss", "sack_perm", "has_ts", "tsval", "tsecr", "nsack", "sack", "tcp_hdr_ok", "head",
          "head_len")
_DTYPES = {"ts_ns": np.int64, "iface": np.uint16, "caplen": np.uint32, "wirelen": np.uint32,
           "ipver": np.uint8, "proto": np.uint8, "src": (np.uint8, 16), "dst": (np.uint8, 16),
           "ip_id": np.uint32, "ip_len": np.uint32, "sport": np.uint16, "dport": np.uint16,
           "payload_len": np.int32, "flags": np.uint16, "seq": np.uint32, "ack": np.uint32,
           "win": np.uint16, "wscale": np.int8, "mss": np.uint16, "sack_perm": bool,
           "has_ts": bool, "tsval": np.uint32, "tsecr": np.uint32, "nsack": np.uint8,
           "sack": (np.uint32, (4, 2)), "tcp_hdr_ok": bool, "head": (np.uint8, 8),
           "head_len": np.uint8}
_lib = None


def _built() -> bool:
    """The library exists and is not older than its source (else it is not used)."""
    src = LIB.with_name("tbanalysis.c")
    return LIB.is_file() and (not src.is_file() or LIB.stat().st_mtime >= src.stat().st_mtime)


def _load():
    global _lib
    if _lib is None and _built():
        lib = ctypes.CDLL(str(LIB))
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.tb_decode.argtypes = [p, i64, i64, p, p, p, p]
        lib.tb_decode.restype = None
        lib.tb_pcap_records.argtypes = [p, i64, ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64,
                                        i64, p, p, p]
        lib.tb_pcap_records.restype = i64
        lib.tb_sender.argtypes = [i64] + [p] * 8 + [i64] + [p] * 11
        lib.tb_sender.restype = i64
        _lib = lib
    return _lib


def engine(requested: str | None = None) -> str:
    """``native`` or ``python``: the implementation to run (see the module docstring)."""
    want = requested or os.environ.get("TESTBED_ANALYSIS_ENGINE", "auto")
    if want not in ENGINES:
        raise ValueError(f"analysis engine {want!r}: use one of {', '.join(ENGINES)}")
    if want == "python":
        return "python"
    if _load() is None:
        if want == "native":
            raise ValueError(f"analysis engine 'native': {LIB} is not built or older than "
                             "its source (run make -C analysis/native, or make install)")
        return "python"
    return "native"


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def empty_fields(n: int) -> dict:
    """Output arrays for ``n`` packets, in :data:`FIELDS` order."""
    out = {}
    for name in FIELDS:
        dt = _DTYPES[name]
        out[name] = np.empty((n, *dt[1]) if isinstance(dt[1], tuple) else (n, dt[1]), dt[0]) \
            if isinstance(dt, tuple) else np.empty(n, dt)
    return out


def _table(out: dict, k0: int = 0):
    """Pointer table for the C side, each field's pointer offset to packet ``k0``."""
    ptrs = [_ptr(out[name]) + k0 * out[name][0:1].nbytes for name in FIELDS]
    return (ctypes.c_void_p * len(FIELDS))(*ptrs)


def decode(buf: np.ndarray, off: np.ndarray, cap: np.ndarray, lt: np.ndarray, out: dict) -> None:
    """Fields from ``ipver`` on of the records at ``buf[off]`` (see tb_decode)."""
    off = np.ascontiguousarray(off, np.int64)
    cap = np.ascontiguousarray(cap, np.int64)
    lt = np.ascontiguousarray(lt, np.int32)
    _load().tb_decode(_ptr(buf), len(buf), len(off), _ptr(off), _ptr(cap), _ptr(lt), _table(out))


def pcap_records(buf: np.ndarray, length: int, le: bool, nano: bool, linktype: int, maxcap: int,
                 out: dict | None = None, k0: int = 0,
                 kmax: int = 1 << 62) -> tuple[int, int, bool]:
    """(complete records, bytes they span, whether a bad record header stopped the walk) at
    the start of ``buf[:length]``; decoded into ``out`` from index ``k0`` when given."""
    used, bad = ctypes.c_int64(), ctypes.c_int32()
    n = _load().tb_pcap_records(_ptr(buf), length, int(le), int(nano), int(linktype), maxcap, k0,
                                kmax, _table(out) if out is not None else None,
                                ctypes.byref(used), ctypes.byref(bad))
    return n, used.value, bool(bad.value)


def sender(kind, t, val, end, fl, win, nsack, sack, smss: int) -> dict:
    """Run tb_sender over the rows of one direction (see tbanalysis.c); numpy arrays."""
    m = len(kind)
    c = lambda a, dt: np.ascontiguousarray(a, dt)  # noqa: E731
    args = [c(kind, np.uint8), c(t, np.int64), c(val, np.int64), c(end, np.int64),
            c(fl, np.uint8), c(win, np.int64), c(nsack, np.uint8), c(sack, np.int64)]
    row_series = np.empty(m, np.int64)
    advanced = np.empty(m, np.uint8)
    pipe, sacked, ws = (np.empty(m, np.int64) for _ in range(3))
    shown = np.empty(m, np.uint8)
    rx = np.empty((m, 7), np.int64)
    karn = np.empty((m, 2), np.int64)
    nrx, nkarn = ctypes.c_int64(), ctypes.c_int64()
    misc = np.zeros(2, np.int64)
    n = _load().tb_sender(m, *map(_ptr, args), smss, _ptr(row_series), _ptr(advanced), _ptr(pipe),
                          _ptr(sacked), _ptr(ws), _ptr(shown), _ptr(rx), ctypes.byref(nrx),
                          _ptr(karn), ctypes.byref(nkarn), _ptr(misc))
    if n < 0:
        raise MemoryError("analysis native sender: out of memory")
    return {"row_series": row_series, "advanced": advanced.view(bool), "pipe": pipe[:n],
            "sacked": sacked[:n], "wireshark": ws[:n], "shown": shown[:n].view(bool),
            "rtx": rx[:nrx.value], "karn": karn[:nkarn.value], "dupacks": int(misc[0]),
            "data_start": int(misc[1])}
