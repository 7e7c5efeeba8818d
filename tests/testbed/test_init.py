"""The public API: ``testbed`` re-exports the user-facing names, imported when first used."""
import subprocess
import sys

import pytest

from conftest import REPO


def test_the_user_facing_names_import_from_testbed():
    from testbed import LinkSpec, Plan, RunResult, RunSpec, UsageError, execute, load_run, resolve
    from testbed.run.execute import execute as the_execute
    from testbed.spec.runspec import RunSpec as the_runspec
    assert execute is the_execute and RunSpec is the_runspec
    assert isinstance(resolve(RunSpec(topology="loopback", capture={"hosts": "none"})), Plan)
    assert issubclass(UsageError, ValueError) and callable(load_run)
    assert LinkSpec.parse(rate="10mbit").rate == 10e6 and RunResult.__name__ == "RunResult"


def test_an_unknown_name_is_an_attribute_error():
    import testbed
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        testbed.nothing  # noqa: B018 (the access is the test)


def test_import_testbed_stays_cheap():
    code = ("import sys, testbed; heavy = [m for m in ('testbed.run.execute', 'testbed.workloads', "
            "'mininet', 'numpy') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
