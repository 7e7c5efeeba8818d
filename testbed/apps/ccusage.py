"""Which congestion control did every process of a run actually use?

The testbed's apps set TCP_CONGESTION on every socket and log what the kernel read back
(``factors`` events, ``readback.cc``); any other program in a namespace (iperf3, curl, a
browser) gets the namespace's default, ``net.ipv4.tcp_congestion_control`` (recorded for every
host in ``metadata.json``), unless it sets its own — which ``ss -ti`` run inside the namespace
while it is connected shows.  The reqresp and bulk clients print :func:`note` when the two
differ, and log a ``sockets_cc`` event (:func:`snapshot`: every TCP socket of their namespace
and its congestion control, outside programs' included) when their transfers are done.

:func:`cc_used` puts both together for a run directory::

    {"apps": {"client": ["cubic"], "cgw": ["bbr", "cubic"], ...},     # per event log
     "namespace_default": {"client": "bbr", "server": "bbr", ...},    # per host
     "sockets": {"client": [{"local": ..., "peer": ..., "cc": "bbr"}, ...]},  # sockets_cc events
     "differs": ["client: outside programs would use bbr; the testbed's apps used cubic", ...]}
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

DEFAULT_CC_PATH = Path("/proc/sys/net/ipv4/tcp_congestion_control")   # per network namespace
_CC_WORDS = ("reno", "cubic", "bbr", "bbr2", "bbr3", "htcp", "vegas", "westwood", "dctcp",
             "bic", "highspeed", "hybla", "illinois", "lp", "nv", "scalable", "veno", "yeah", "cdg")


def namespace_default() -> str | None:
    """The congestion control of a socket that does not choose one, in this namespace."""
    try:
        return DEFAULT_CC_PATH.read_text().strip()
    except OSError:
        return None


#: how an app's output line that is a diagnostic, not a result, begins (``testbed run`` shows it
#: on stderr, as a warning that ``-q`` silences)
NOTE = "note: "


def note(used: str | None) -> str | None:
    """One line for the app's output when its sockets run ``used`` but outside programs in the
    same network namespace (iperf3, curl) would run the namespace default."""
    default = namespace_default()
    if used and default and used != default:
        return (f"{NOTE}congestion control {used} on the testbed's sockets; programs that do not "
                f"choose one (iperf3, curl) use this network namespace's default, {default} "
                "(net.ipv4.tcp_congestion_control)")
    return None


def parse_ss(text: str) -> list[dict]:
    """``ss -tinH`` output → [{"state", "local", "peer", "cc"}] (cc None when ss shows none)."""
    out, cur = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            fields = line.split()
            if len(fields) >= 5:
                cur = {"state": fields[0], "local": fields[3], "peer": fields[4], "cc": None}
                out.append(cur)
            continue
        if cur is not None and cur["cc"] is None:
            words = re.findall(r"(?<![\w:])([a-z0-9]+)(?=\s|$)", line)
            cur["cc"] = next((w for w in words if w in _CC_WORDS), None)
    return out


def snapshot() -> list[dict]:
    """Every TCP socket of this namespace with its congestion control (``ss -tinH``; empty
    when ss is missing or fails)."""
    try:
        out = subprocess.run(["ss", "-tinH"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_ss(out.stdout) if out.returncode == 0 else []


def cc_used(run_dir: str | Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    apps: dict[str, list[str]] = {}
    sockets: dict[str, list[dict]] = {}
    for log in sorted(run_dir.glob("*.jsonl")):
        seen = set()
        for line in log.read_text(errors="replace").splitlines():
            if '"factors"' not in line and '"sockets_cc"' not in line:
                continue
            e = json.loads(line)
            cc = (e.get("readback") or {}).get("cc")
            if e.get("event") == "factors" and cc and e.get("side") != "listener":
                seen.add(cc)
            elif e.get("event") == "sockets_cc":
                sockets.setdefault(log.stem, []).extend(e.get("sockets", []))
        if seen:
            apps[log.stem] = sorted(seen)
    meta = run_dir / "metadata.json"
    hosts = json.loads(meta.read_text()).get("hosts", {}) if meta.exists() else {}
    default = {h: (v.get("sysctls") or {}).get("net.ipv4.tcp_congestion_control")
               for h, v in hosts.items()}
    differs = [f"{h}: outside programs would use {d}; the testbed's apps used {', '.join(apps[h])}"
               for h, d in sorted(default.items()) if d and h in apps and apps[h] != [d]]
    differs += [f"{h}: socket {x['local']} → {x['peer']} ran {x['cc']}"
                for h, socks in sorted(sockets.items()) for x in socks
                if x.get("cc") and h in apps and x["cc"] not in apps[h]]
    return {"apps": apps, "namespace_default": default, "sockets": sockets, "differs": differs}
