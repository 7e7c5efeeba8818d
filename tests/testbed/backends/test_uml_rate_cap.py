"""``testbed calibrate --backend netem-uml`` above the rate a UML guest carries is refused before
the guest boots, in the words and with the number the guest itself refuses it with
(``testbed.calibrate.link.check_uml_rate``, ``UML_RATE_MAX``; docs/uml.md, "Guest speed").

Was: the guest booted (2–10 s), then ``calibrate`` in it refused the rate.  No root: the guest is
never booted (``run_cli_in_guest`` is replaced).
"""
from __future__ import annotations

import pytest

from testbed.backends import uml, vm
from testbed.calibrate import link
from testbed.cli import main
from testbed.spec.errors import UsageError


@pytest.fixture
def boots(monkeypatch):
    """The argv each guest would have run (``run_cli_in_guest``, which boots it), exit 0."""
    booted: list = []
    for mod in (uml, vm):
        monkeypatch.setattr(mod, "run_cli_in_guest",
                            lambda argv, **kw: booted.append(argv) or 0)
    return booted


@pytest.mark.parametrize("rate", ["20mbit", "12.5mbit", "unshaped", None])  # None: the 333mbit default
def test_a_rate_above_the_uml_cap_is_refused_before_the_guest_boots(rate, boots, monkeypatch, capsys):
    argv = ["calibrate", "--backend", "netem-uml", "--delay", "50ms", *(["--rate", rate] if rate else [])]
    assert main(argv) == 2
    assert boots == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    shown = rate or "333mbit"
    assert f"--rate {shown}: " in err[0]
    assert "up to 12 Mbit/s, not the long-haul link " + (                     # the cap, the link
        "unshaped" if rate == "unshaped" else f"at {shown[:-4]} Mbit/s each way") in err[0]
    assert "--rate 12mbit or less" in err[0]                                 # what to do
    assert "userspace emulator" in err[0] and "--backend netem-vm where KVM boots" in err[0]
    assert "with TCG it carries about what UML does: docs/vm.md" in err[0]
    # the guest's own refusal, word for word
    monkeypatch.setenv("TESTBED_IN_UML", "1")
    monkeypatch.setattr(link, "measure", lambda *a: pytest.fail("measured"))
    with pytest.raises(UsageError) as got:
        link.calibrate(rate=shown, delay="50ms")
    assert err[0] == f"testbed: error: {got.value}"


def test_up_to_the_cap_and_where_the_guest_has_none_the_guest_boots(boots, monkeypatch):
    assert main(["calibrate", "--backend", "netem-uml", "--rate", "12mbit"]) == 0
    assert main(["calibrate", "--backend", "netem-vm", "--rate", "20mbit"]) == 0   # the VM: no cap
    # a schedule's intervals are not capped in the guest either
    assert main(["calibrate", "--backend", "netem-uml", "--rate", "20mbit", "--schedule", "s.toml"]) == 0
    monkeypatch.setattr(link, "UML_RATE_MAX", 25e6)            # one number, read where it is defined
    assert main(["calibrate", "--backend=netem-uml", "--rate", "20mbit"]) == 0
    assert len(boots) == 4


def test_a_bad_rate_is_one_line_before_the_guest_boots(boots, capsys):
    assert main(["calibrate", "--backend", "netem-uml", "--rate", "fast"]) == 2
    assert boots == [] and len(capsys.readouterr().err.strip().splitlines()) == 1
