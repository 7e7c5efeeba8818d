"""The kernel backend (Mininet + htb + netem) for real, on a kernel that has netem.

Marked ``netem``: skipped (with the reason) on a kernel without sch_netem/sch_htb, such as this
project's CI machines; there ``tests/testbed/backends/test_vm.py`` runs this file inside the
Debian VM (testbed/backends/vm), once per ``make test``.  The cases are those the UML guest runs
(tests/testbed/backends/test_uml.py), here in the test's own kernel: the qdiscs as configured and
read back, RTT and loss per direction with the calibrate probe, TCP goodput; the path users take
(``Testbed(..., backend="netem")``); ``testbed calibrate``.  Rates are low
enough for a TCG guest (docs/vm.md: what a guest without KVM carries).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_uml import (_check_qdisc_case, _within_binomial, check_rtt, guest_qdisc_case,
                      guest_testbed_case)

pytestmark = [pytest.mark.root, pytest.mark.netem]


def test_asymmetric_htb_netem():
    """10 Mbit/s, 15 ms, 5% loss up; 20 Mbit/s, 25 ms, no loss down: read back, RTT, loss per
    direction, goodput (test_uml.py's checks)."""
    from testbed.spec.linkspec import LinkSpec
    up = LinkSpec.parse(rate="10mbit", delay="15ms", loss="5%")
    down = LinkSpec.parse(rate="20mbit", delay="25ms")
    r = guest_qdisc_case({"up": up.to_dict(), "down": down.to_dict(), "count": 2000,
                          "seconds": 4, "omit": 2, "cc_up": "bbr", "cc_down": "cubic"})
    _check_qdisc_case(r, up, down)


def test_testbed_longhaul_netem_backend(tmp_path):
    """``Testbed("longhaul", backend="netem")`` as users run it, scaled to 20 Mbit/s: 200 ms
    RTT, 14% loss down only."""
    r = guest_testbed_case({"count": 1500, "results_dir": str(tmp_path),
                            "overrides": {"rate_up": "20mbit", "rate_down": "20mbit"}})
    p = r["probe"]
    assert r["backend"] == "netem"
    check_rtt(r, 200.0)
    assert p["received_up"] == p["sent_up"]
    assert _within_binomial(1 - p["received_down"] / p["sent_down"], 0.14, p["sent_down"])


RATES = ("rate up (Mbit/s)", "rate down (Mbit/s)")


def _calibrate(results: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "testbed", "calibrate", "--backend", "netem",
                          "--rate", "10mbit", "--delay", "50ms", "--packets", "2000", "--json",
                          "--results", str(results)], capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_calibrate_rate_and_loss_lines(tmp_path):
    """``testbed calibrate --backend netem`` at 10 Mbit/s: the loss down line passes and at most
    0.2% is lost up (none configured); each direction's rate within 10% of the configured one,
    the RTT at most 5 ms above it.  calibrate's own tolerances (none lost, ±2%, ±1 ms) measure the
    machine as well: a TCG guest on a busy host misses them in some runs (docs/vm.md).  Even the
    rate's 10% it missed once in 14 lines there (6.45 Mbit/s at host load 3.6; 8.15 in one CI run
    on a 2-core AMD host), and a few seconds in which the host does not run the guest lift the
    RTT median of its probes (each round trip four wake-ups on an emulated CPU) by more than 5 ms:
    a calibration that misses any of these lines is made again, up to ``attempts.ATTEMPTS`` in
    all, and one must meet them all.  No calibration may measure an RTT below the configured one."""
    from tests.fixtures.attempts import attempts, report

    def measure():
        res = _calibrate(tmp_path / f"attempt{len(list(tmp_path.glob('attempt*')))}")
        assert res["backend"] == "netem"
        assert Path(res["run_dir"]).is_dir()
        checks = {c["check"]: c for c in res["checks"]}
        rtt = checks["RTT median (ms)"]
        assert rtt["configured"] <= rtt["measured"], rtt           # netem delays every probe
        return checks

    def misses(checks):
        rtt = checks["RTT median (ms)"]
        out = [f"{name}: {checks[name]['measured']}, not 10 ± 10 %" + (f" — {checks[name]['why']}"
                                                                        if checks[name].get("why") else "")
               for name in RATES if checks[name]["measured"] != pytest.approx(10.0, rel=0.10)]
        if rtt["measured"] > rtt["configured"] + 5.0:
            out.append(f"RTT median {rtt['measured']} ms, more than 5 ms above {rtt['configured']}")
        if not checks["loss down"]["ok"]:                          # 14% inside the 99% interval
            out.append(f"loss down {checks['loss down']}")
        if checks["loss up"]["measured"] > 0.002:                  # none configured
            out.append(f"loss up {checks['loss up']}")
        return out
    tries = attempts(measure, misses)
    assert not tries[-1]["misses"], report(tries)
