"""``Factor`` records refuse a mistake when they are made, with the factor named and what is
allowed, instead of failing later in ``--help``, in a run or in every run's check."""
import socket

import pytest

from testbed.spec.factors import SIZE, Factor, Route, SockOpt, Sysctl, Verify, count, positive_size

LOWAT = SockOpt(socket.IPPROTO_TCP, getattr(socket, "TCP_NOTSENT_LOWAT", 25))


@pytest.mark.parametrize("args,kw,message", [
    # parse and allowed swapped (the record's positional order is name, where, parse, allowed, help)
    (("lowat", "socket", SIZE, positive_size, "h"), {"sockopt": LOWAT},
     r"factor lowat: parse must be a function \(value as given -> canonical value\), not 'a size"),
    (("lowat", "socket", positive_size, 16, "h"), {"sockopt": LOWAT},
     "factor lowat: allowed must be a string or a function returning one, not 16"),
    (("lowat", "socket", positive_size, SIZE, None), {"sockopt": LOWAT},
     "factor lowat: help must be a string, not None"),
    (("ecn", "host", count(0, 2), "0..2", "h"), {"sysctl": "net.ipv4.tcp_ecn"},
     r"factor ecn: sysctl must be a Sysctl\(\.\.\.\), not 'net.ipv4.tcp_ecn'"),
    (("qa", "host", count(0, 1), "0/1", "h"), {"route": "quickack"},
     r"factor qa: route must be a Route\(\.\.\.\), not 'quickack'"),
    (("lowat", "socket", positive_size, SIZE, "h"), {"sockopt": (socket.IPPROTO_TCP, 25)},
     r"factor lowat: sockopt must be a SockOpt\(\.\.\.\), not \(6, 25\)"),
    (("lowat", "socket", positive_size, SIZE, "h"), {"sockopt": LOWAT, "check": "yes"},
     r"factor lowat: check must be True, False, None or a Verify\(\.\.\.\), not 'yes'"),
    (("lowat", "socket", positive_size, SIZE, "h"), {"sockopt": LOWAT, "implies": {"sndbuf": 1}},
     "factor lowat: implies must be a function or None"),
    (("notsent-lowat", "socket", positive_size, SIZE, "h"), {"sockopt": LOWAT},
     r"factor 'notsent-lowat': a name is letters, digits and _ \(its option dashes it\)"),
    # a socket factor applied by a function of its own, checked, but with nothing to read back
    (("lowat", "socket", positive_size, SIZE, "h"), {"apply": LOWAT.set, "check": True},
     r"factor lowat: check=True compares the read-back with the level; give read \(or a sockopt\)"),
])
def test_a_mistaken_record_is_refused_naming_the_field(args, kw, message):
    with pytest.raises(ValueError, match=message):
        Factor(*args, **kw)


def test_the_guides_kinds_of_records_are_accepted():
    Factor("lowat", "socket", positive_size, SIZE, "h", sockopt=LOWAT, check=True)
    Factor("lowat", "socket", positive_size, lambda: SIZE, "h", apply=LOWAT.set, read=LOWAT.get,
           check=Verify("rule", ("socket_readback",), lambda level, checks: None))
    Factor("ecn", "host", count(0, 2), "0..2", "h", sysctl=Sysctl("net.ipv4.tcp_ecn"), check=True)
    Factor("cwnd", "host", count(1, 9), "1..9", "h", route=Route("initcwnd"), check=False)
    Factor("both", "socket", positive_size, SIZE, "h", implies=lambda v: {"sndbuf": v})
