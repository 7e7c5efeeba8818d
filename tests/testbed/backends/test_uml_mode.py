"""A UML mode asked for (``TESTBED_UML_MODE``, ``mode=``) that the build does not have is refused
before anything boots, and never recorded (testbed/backends/uml/builds.py, ``require_mode``).

Was: ``TESTBED_UML_MODE=seccomp`` with Debian's UML 6.1 (no ``seccomp=`` option in its
``--help``) booted a guest that ignored ``seccomp=on`` ("Unknown kernel command line parameters
... seccomp=on, will be passed to user space") and ran in ptrace mode, while the boot cache, the
``GuestResult`` and the run's ``uml_guest`` said "seccomp".  No root: the kernels are scripts.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.backends import uml
from testbed.backends.uml import builds as uml_builds
from testbed.backends.uml import provision as uml_provision
from testbed.backends.uml.builds import ModeUnsupported, UMLBuild

HELP_61 = ("User Mode Linux v6.1.176\n    ubd<n><flags>=<filename>[(<options>)]...\n"
           "    mem=<Amount of desired ram>\n")
HELP_72 = HELP_61.replace("6.1.176", "7.2.0") + "    seccomp=on/off\n    Enable/Disable seccomp mode\n"


def fake_build(root: Path, help_text: str, release: str = "6.1.176",
               source: str = "system") -> UMLBuild:
    """A build whose kernel is a script: ``--version`` and ``--help`` print ``release`` and
    ``help_text``; anything else (a boot) touches ``root/booted`` and fails like a panic."""
    root.mkdir(parents=True)
    (root / "help.txt").write_text(help_text)
    kernel = root / "linux.uml"
    kernel.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo {release}; exit 0; }}\n"
                      f"[ \"$1\" = --help ] && {{ cat {root / 'help.txt'}; exit 0; }}\n"
                      f"touch {root / 'booted'}\necho 'Kernel panic - not syncing: fake'\nexit 1\n")
    kernel.chmod(0o755)
    mods = root / "modules" / release
    mods.mkdir(parents=True)
    (mods / "modules.dep").write_text("".join(f"kernel/net/{m}.ko:\n" for m in uml_builds.MODULES))
    return UMLBuild(source, kernel, root / "modules")


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setattr(uml_builds, "STATE_DIR", tmp_path / "state")
    monkeypatch.delenv("TESTBED_UML_MODE", raising=False)
    return tmp_path / "state"


def test_modes_follow_the_builds_help_and_a_forced_mode_it_lacks_is_refused(tmp_path, state, monkeypatch):
    old, new = fake_build(tmp_path / "61", HELP_61), fake_build(tmp_path / "72", HELP_72, "7.2.0")
    assert uml_builds.modes(old) == ["ptrace"]
    assert uml_builds.modes(new) == ["seccomp", "ptrace"]
    monkeypatch.setenv("TESTBED_UML_MODE", "ptrace")
    assert uml_builds.modes(old) == uml_builds.modes(new) == ["ptrace"]
    monkeypatch.setenv("TESTBED_UML_MODE", "seccomp")
    assert uml_builds.modes(new) == ["seccomp"]
    with pytest.raises(ModeUnsupported) as got:
        uml_builds.modes(old)
    message = str(got.value)
    assert "\n" not in message
    assert message.startswith(f"TESTBED_UML_MODE=seccomp, but system UML 6.1.176 ({old.kernel}) "
                              "has no seccomp mode, only ptrace")                  # asked, has
    assert "unset TESTBED_UML_MODE" in message and "TESTBED_UML=provision" in message  # what to do
    assert got.value.mode == "seccomp" and got.value.release == "6.1.176"
    assert not (tmp_path / "61" / "booted").exists()


def test_choose_refuses_a_forced_mode_no_build_has_without_booting(tmp_path, state, monkeypatch):
    old = fake_build(tmp_path / "61", HELP_61)
    monkeypatch.setattr(uml, "candidates", lambda: [old])
    monkeypatch.setenv("TESTBED_UML_MODE", "seccomp")
    with pytest.raises(uml.UMLUnavailable) as got:
        uml.choose()
    assert str(got.value).startswith("TESTBED_UML_MODE=seccomp, but system UML 6.1.176"), got.value
    assert not (tmp_path / "61" / "booted").exists()
    assert not (state / "boot-cache.json").exists()        # nothing recorded, seccomp least of all
    monkeypatch.setattr(uml.os, "geteuid", lambda: 0)
    monkeypatch.delenv("TESTBED_UML_GUEST", raising=False)
    monkeypatch.delenv("TESTBED_VM_GUEST", raising=False)
    report = uml.doctor_report()
    assert not report["available"] and report["attempts"][0]["mode"] == "seccomp"
    assert report["lines"] == [f"system 6.1.176 seccomp ({old.kernel}): not booted: {got.value}"]


def test_a_forced_mode_takes_the_build_that_has_it(tmp_path, state, monkeypatch):
    """TESTBED_UML=auto with the system's 6.1 and a provisioned 7.2: seccomp is the 7.2's."""
    old = fake_build(tmp_path / "61", HELP_61)
    new = fake_build(tmp_path / "72", HELP_72, "7.2.0", source="provisioned")
    booted = []

    def boot_check(build, mode, refresh=False):
        booted.append((build.source, mode))
        return {"booted": True, "boot_seconds": 1.0, "release": "7.2.0", "cached": False}
    monkeypatch.setattr(uml, "candidates", lambda: [old, new])
    monkeypatch.setattr(uml, "boot_check", boot_check)
    monkeypatch.setenv("TESTBED_UML_MODE", "seccomp")
    guest, attempts = uml.survey()
    assert (guest.build, guest.mode) == (new, "seccomp") and booted == [("provisioned", "seccomp")]
    assert attempts[0]["unsupported"] and attempts[0]["source"] == "system"


def test_run_in_guest_and_boot_check_refuse_seccomp_on_a_build_without_it(tmp_path, state):
    old = fake_build(tmp_path / "61", HELP_61)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ModeUnsupported, match=r"^mode='seccomp', but system UML 6\.1\.176 .* "
                                              r"has no seccomp mode.*pass mode='ptrace'"):
        uml.run_in_guest(["true"], results_dir=out, build=old, mode="seccomp")
    assert not (tmp_path / "61" / "booted").exists() and not (out / "uml-console.log").exists()
    # a boot check recorded before this check (booted, "seccomp") is not believed
    state.mkdir()
    key = f"{uml.host_key()} | {old.identity()} | seccomp"
    (state / "boot-cache.json").write_text(json.dumps({key: {
        "booted": True, "boot_seconds": 1.9, "release": "6.1.176", "reason": None, "console": None,
        "checked": 0}}))
    with pytest.raises(ModeUnsupported):
        uml.boot_check(old, "seccomp")
    assert not (tmp_path / "61" / "booted").exists()
    # ptrace, asked for or not, is every build's
    with pytest.raises(uml.GuestError):
        uml.run_in_guest(["true"], results_dir=out, build=old, mode="ptrace")
    assert (tmp_path / "61" / "booted").exists()


def test_provision_does_not_fetch_a_build_for_a_forced_mode(tmp_path, state, monkeypatch, capsys):
    """Was: 'the system's UML does not boot here' (it does) and a download."""
    old = fake_build(tmp_path / "61", HELP_61)
    monkeypatch.setattr(uml_builds, "system_build", lambda: old)
    monkeypatch.setattr(uml_provision, "provision", lambda *a, **kw: pytest.fail("provisioned"))
    monkeypatch.setenv("TESTBED_UML", "auto")
    monkeypatch.setenv("TESTBED_UML_MODE", "seccomp")
    assert uml_provision.main() == 0
    err = capsys.readouterr().err
    assert err.startswith("uml_provision: TESTBED_UML_MODE=seccomp, but system UML 6.1.176"), err
    assert not (tmp_path / "61" / "booted").exists()
