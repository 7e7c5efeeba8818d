"""Records of the user's own (``testbed.spec.plugins``): ``TESTBED_PATH`` directories, the
``testbed.plugins`` entry points, files given by path.  Loading changes a process for good, so
what loads goes through a fresh ``python`` process."""
import os
import subprocess
import sys

import pytest

from conftest import REPO
from testbed.spec import plugins
from testbed.spec.errors import UsageError

CHAIN = '''
from topologies import TOPOLOGIES, TestbedTopo


@TOPOLOGIES.register
class Pair(TestbedTopo):
    name = "pair"

    def build(self):
        self.addLink(self.addHost("client"), self.addHost("server"), name="wire")
'''


def python(code: str, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env}, timeout=60)


def test_search_path_is_the_existing_directories(tmp_path, monkeypatch):
    monkeypatch.setenv("TESTBED_PATH", f"{tmp_path}{os.pathsep}{os.pathsep}{tmp_path / 'sub'}")
    with pytest.raises(UsageError, match=f"TESTBED_PATH entry '{tmp_path / 'sub'}' is not a directory"):
        plugins.search_path()
    (tmp_path / "sub").mkdir()
    assert plugins.search_path() == [tmp_path, tmp_path / "sub"]


def test_import_file_imports_once_and_puts_the_directory_on_both_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    (tmp_path / "tb_plugin_probe.py").write_text("LOADS = []\nLOADS.append(1)\n")
    try:
        first = plugins.import_file(tmp_path / "tb_plugin_probe.py")
        assert plugins.import_file(str(tmp_path / "tb_plugin_probe.py")) is first and first.LOADS == [1]
    finally:
        sys.modules.pop("tb_plugin_probe", None)
    assert sys.path[-1] == str(tmp_path)
    assert os.environ["PYTHONPATH"] == f"/elsewhere{os.pathsep}{tmp_path}"


@pytest.mark.parametrize("name,message", [
    ("json.py", "its module name 'json' is already taken by .*json/__init__.py; rename the file"),
    ("my-chain.py", "'my-chain' is not a Python module name; rename the file"),
    ("absent.py", "no such file; a plugin is a Python file"),
    ("hostname", "not a Python file; a plugin is a file NAME.py"),     # it was "no such Python file"
    ("raises.py", r"failed to load: ValueError: workload 'x' is already registered"),
])
def test_import_file_refuses_with_the_file_named(tmp_path, monkeypatch, name, message):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    if name != "absent.py":
        (tmp_path / name).write_text("raise ValueError(\"workload 'x' is already registered\")\n")
    with pytest.raises(UsageError, match=f"{tmp_path / name}.*{message}"):
        plugins.import_file(tmp_path / name)


def test_a_topology_given_by_path_is_loaded_and_records_its_file(tmp_path):
    (tmp_path / "pair.py").write_text(CHAIN)
    r = python("from topologies import topology_class, TOPOLOGIES\n"
               "c = topology_class('./pair.py')\n"
               "print(c.name, c.source, topology_class('pair') is c, 'pair' in TOPOLOGIES)", tmp_path)
    assert r.stdout.split() == ["pair", str(tmp_path / "pair.py"), "True", "True"], r.stderr
    (tmp_path / "empty.py").write_text("X = 1\n")
    r = python("from topologies import topology_class\ntopology_class('empty.py')", tmp_path)
    assert f"UsageError: {tmp_path / 'empty.py'} registers no topology" in r.stderr


def test_testbed_path_files_and_entry_points_register_records(tmp_path):
    """A ``*.py`` on TESTBED_PATH (a topology) and an installed distribution's entry point (a
    model), both seen by the command line; the entry point's failure names its module."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "pair.py").write_text(CHAIN)
    site = tmp_path / "site"
    (site / "toyplug-0.1.dist-info").mkdir(parents=True)
    (site / "toyplug-0.1.dist-info" / "METADATA").write_text("Name: toyplug\nVersion: 0.1\n")
    (site / "toyplug-0.1.dist-info" / "entry_points.txt").write_text(
        "[testbed.plugins]\ntoy = toyplug\n")
    (site / "toyplug.py").write_text(
        "from dataclasses import dataclass\n"
        "from analysis.models.base import Params, Q, param, register\n\n\n"
        "@dataclass(frozen=True)\nclass TwiceParams(Params):\n"
        "    x: float = param(2.0, '1', 'a number')\n\n\n"
        "@register('twice', 'C0', 'twice x', TwiceParams)\n"
        "def twice(p):\n    return {'y': Q(2 * p.x, '1', 'twice x')}\n")
    env = {"PYTHONPATH": f"{site}{os.pathsep}{REPO}", "TESTBED_PATH": str(tmp_path / "mine")}
    r = subprocess.run([sys.executable, "-m", "testbed", "model", "twice", "--x", "3", "--json"],
                       cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert r.returncode == 0 and '"value": 6.0' in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "testbed", "topo", "show", "pair"],
                       cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert r.returncode == 0 and "link wire:" in r.stdout, r.stderr
    (site / "toyplug.py").write_text("raise RuntimeError('broken on purpose')\n")
    r = subprocess.run([sys.executable, "-m", "testbed", "topo", "list"],
                       cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"testbed: error: plugin 'toyplug' (entry point 'toy' of group testbed.plugins) "
        f"({site / 'toyplug.py'}) failed to load: RuntimeError: broken on purpose"), r.stderr


def test_a_workload_program_run_as_main_is_not_imported_again(tmp_path):
    """``python -m MODULE`` of a TESTBED_PATH file that registers a workload: a lookup in that
    process (which loads the plugins) does not register it a second time."""
    (tmp_path / "toyrun.py").write_text(
        "from dataclasses import dataclass\n"
        "from testbed.workloads import WORKLOADS, Workload\n\n\n"
        "@dataclass(frozen=True)\nclass P:\n    pass\n\n\n"
        "WORKLOADS.register(Workload('toyrun', 'a toy', 'toyrun', P, 5999))\n"
        "if __name__ == '__main__':\n    print(WORKLOADS.get('toyrun').module, WORKLOADS.names()[-1])\n")
    r = subprocess.run([sys.executable, "-m", "toyrun"], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}",
                            "TESTBED_PATH": str(tmp_path)}, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["toyrun", "toyrun"], r.stderr


def test_a_workload_parameter_named_like_a_factor_is_refused_naming_its_module(tmp_path):
    (tmp_path / "ccload.py").write_text(
        "from dataclasses import dataclass\n"
        "from testbed.workloads import WORKLOADS, Workload, param\n\n\n"
        "@dataclass(frozen=True)\nclass P:\n    cc: str = param('bbr', 'a name the cc factor has')\n\n\n"
        "WORKLOADS.register(Workload('ccload', 'a toy', 'ccload', P, 5999))\n")
    r = subprocess.run([sys.executable, "-m", "testbed", "run", "--help"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO), "TESTBED_PATH": str(tmp_path)})
    assert r.returncode == 2 and r.stderr.strip() == (
        "testbed: error: workload 'ccload' (ccload): parameter name(s) cc collide with `testbed run` "
        "options or factor names; rename them (e.g. request_timeout)"), r.stderr


def test_a_file_named_like_a_package_of_an_editable_install_is_refused(tmp_path, monkeypatch):
    """An editable install (``pip install -e``, what scripts/install.sh makes) finds this project's
    packages (``analysis``, ``experiments``) with a finder placed after the path finder, so a
    ``TESTBED_PATH`` file ``analysis.py`` was found first and hid the package; it is refused."""
    import importlib.util

    (tmp_path / "pkgs" / "tb_edit_pkg").mkdir(parents=True)
    (tmp_path / "pkgs" / "tb_edit_pkg" / "__init__.py").write_text("")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "tb_edit_pkg.py").write_text("X = 1\n")

    class EditableFinder:                   # as setuptools' __editable___*_finder: a fixed mapping
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "tb_edit_pkg":
                init = tmp_path / "pkgs" / "tb_edit_pkg" / "__init__.py"
                return importlib.util.spec_from_file_location(name, init)
            return None

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, EditableFinder])
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    try:
        with pytest.raises(UsageError, match=f"plugin {tmp_path / 'mine' / 'tb_edit_pkg.py'}: its module "
                           f"name 'tb_edit_pkg' is already taken by .*__init__.py; rename the file"):
            plugins.import_file(tmp_path / "mine" / "tb_edit_pkg.py")
    finally:
        sys.modules.pop("tb_edit_pkg", None)


def test_a_record_knows_the_plugin_file_it_was_registered_from(tmp_path, monkeypatch):
    """Where a factor of the user's came from was guessed by reading every file on TESTBED_PATH
    for its name in quotes; import_file now says which file is loading while it registers."""
    from testbed.spec.registry import LOADING, Registry
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    (tmp_path / "seenload.py").write_text("from testbed.spec.registry import LOADING\nSEEN = LOADING.get()\n")
    assert plugins.import_file(tmp_path / "seenload.py").SEEN == str(tmp_path / "seenload.py")
    assert LOADING.get() is None                                    # only while it imports
    reg = Registry("thing")
    token = LOADING.set("/somewhere/mine.py")
    try:
        reg.register(type("T", (), {"name": "mine"}))
    finally:
        LOADING.reset(token)
    reg.register(type("T", (), {"name": "builtin"}))
    assert reg.origin("mine") == "/somewhere/mine.py" and reg.origin("builtin") is None
