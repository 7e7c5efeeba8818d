"""Package hygiene (no root): layers, import cycles (also through ``importlib``), declared
dependencies.

The packages form layers (``LAYERS``, lowest first); a module may import its own layer and the
layers below it, never one above.  ``analysis`` needs nothing of the testbed's I/O: it sits below
topologies, workloads, apps, hosts, backends and runs.
"""
import ast
import configparser
import re
import sys
from pathlib import Path

from conftest import REPO

PACKAGES = ("testbed", "topologies", "analysis", "experiments")
#: Lowest first; a module belongs to the longest prefix that names it.
LAYERS = (
    ("testbed.spec",),                                     # values, units, errors, records
    ("testbed.protocols", "testbed.emulator"),             # sans-I/O cores, the link emulator
    ("testbed.transport",),                                # the UDP/FEC transport (sans-I/O)
    ("analysis",),                                         # files in, numbers and plots out
    ("topologies",),                                       # Mininet Topo descriptions
    ("testbed.workloads",),                                # workload records
    ("testbed.apps",),                                     # in-host programs
    ("testbed.host",),                                     # namespaces, captures, lifecycle
    ("testbed.backends",),                                 # kernel, userspace, UML
    ("testbed.run",),                                      # plan, Testbed, execute
    ("testbed.calibrate",),                                # link measurement
    ("experiments",),                                      # single-factor experiments, reproduce
    ("testbed.cli", "testbed.__main__", "testbed"),        # the command line and public API
)


def layer(module: str) -> int:
    best, level = -1, None
    for i, prefixes in enumerate(LAYERS):
        for pre in prefixes:
            if (module == pre or module.startswith(pre + ".")) and len(pre) > best:
                best, level = len(pre), i
    assert level is not None, f"{module} belongs to no layer: add it to LAYERS"
    return level


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(REPO).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


def imports(name: str, path: Path, mods: set[str] | None = None) -> set[str]:
    """Every module named by an import anywhere in the file (also inside functions, and
    ``importlib.import_module("literal")``).  ``from X import a`` names ``X.a`` when that is a
    module (of ``mods``), else ``X``."""
    mods = set(modules()) if mods is None else mods
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.add(node.args[0].value)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    g = {}
    for m, p in mods.items():
        deps = set()
        for n in imports(m, p, set(mods)):
            while n and n not in mods:
                n = n.rpartition(".")[0]
            if n and n != m:
                deps.add(n)
        g[m] = deps
    return g


def cycles(g: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)
    for v in g:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]


def test_no_import_runs_up_a_layer():
    upward = sorted(f"{m} -> {d}" for m, deps in graph().items() for d in deps
                    if layer(d) > layer(m))
    assert upward == []


def test_layer_check_sees_an_upward_import():
    assert layer("analysis.tcp") < layer("testbed.run.execute")
    assert layer("testbed.cli.run") > layer("experiments.runner") > layer("testbed.run.execute")


def test_importlib_literals_count_as_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import importlib\nimportlib.import_module('testbed.cli')\n")
    assert "testbed.cli" in imports("x.m", f, {"testbed.cli"})


def test_benchmarks_import_no_test_helpers():
    """Benchmarks may use the capture fixtures (``tests.fixtures``), nothing of pytest's."""
    for p in (REPO / "benchmarks").glob("*.py"):
        names = {n for n in imports(f"benchmarks.{p.stem}", p, set())
                 if n.split(".")[0] in ("tests", "conftest", "pytest")}
        assert all(n.startswith("tests.fixtures.") for n in names), (p.name, names)
    for p in (REPO / "tests" / "fixtures").glob("*.py"):
        assert "pytest" not in {n.split(".")[0] for n in imports(f"tests.fixtures.{p.stem}", p, set())}, p.name


def test_runtime_requirements_are_imported_and_test_tools_are_an_extra():
    """install_requires is exactly what the packages import from outside the standard library
    (Mininet aside: a system package, docs/install.md); the test extra holds only tools that the
    tests and benchmarks use, none the packages import."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    name = lambda line: re.split(r"[<>=;\s\[]", line.strip())[0].lower()  # noqa: E731
    req = [name(line) for line in cfg["options"]["install_requires"].strip().splitlines()
           if line.strip() and not line.strip().startswith("#")]
    extra = [name(line) for line in cfg["options.extras_require"]["test"].strip().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    # optional features the packages import lazily (the default path needs none of them)
    optional = [name(line) for key, text in cfg["options.extras_require"].items() if key != "test"
                for line in text.strip().splitlines() if line.strip() and not line.strip().startswith("#")]
    by_import: dict[str, set[str]] = {}
    for m, p in modules().items():
        for n in imports(m, p):
            top = n.split(".")[0]
            if top not in sys.stdlib_module_names and top not in (*PACKAGES, "__future__"):
                by_import.setdefault(top, set()).add(m)
    system = {"mininet"}
    undeclared = {top: sorted(ms) for top, ms in by_import.items()
                  if top.lower() not in req and top not in system and top.lower() not in optional}
    assert undeclared == {}, f"imported at run time but not in install_requires: {undeclared}"
    imported = {top.lower() for top in by_import}       # fontTools is the dist fonttools
    assert [r for r in req if r not in imported] == []
    assert "pytest" not in req and "pytest" in extra
    assert [r for r in extra if r in imported] == [], "a runtime import is only a test extra"
