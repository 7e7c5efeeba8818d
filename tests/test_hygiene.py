"""Package hygiene (no root): import cycles, dependency direction, declared dependencies.

Direction: ``topologies`` → ``testbed`` core value modules (units, linkspec); ``testbed`` (run
machinery) → ``topologies``, ``analysis``; ``experiments`` → ``testbed``, ``analysis``;
``analysis`` → only the testbed's value/file-format modules (never its I/O: namespaces,
processes, backends); the CLI modules (``testbed/cli.py``, ``*_cli.py``) sit on top of all.
"""
import ast
import configparser
import re
import sys
from pathlib import Path

from conftest import REPO

PACKAGES = ("testbed", "topologies", "analysis", "experiments")
# analysis must not import these (the testbed's I/O: namespaces, processes, backends, runs)
IO_MODULES = ("testbed.network", "testbed.lifecycle", "testbed.hosts", "testbed.backends",
              "testbed.execute", "testbed.uml", "testbed.calibrate", "testbed.loopback",
              "testbed.apps.cli", "testbed.topo_cli", "testbed.cli", "testbed.vethpair", "topologies",
              "mininet", "experiments")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(REPO).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


def imports(name: str, path: Path) -> set[str]:
    """Every module named by an import anywhere in the file (also inside functions)."""
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
            if node.module or not node.level:   # ``from . import x`` names submodules, not the package
                out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    g = {}
    for m, p in mods.items():
        deps = set()
        for n in imports(m, p):
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


def test_analysis_imports_nothing_of_the_testbeds_io():
    bad = {}
    for m, p in modules().items():
        if m.split(".")[0] == "analysis" and m != "analysis.cli":   # the CLI is the top layer
            hits = [n for n in imports(m, p) if n.startswith(IO_MODULES)]
            if hits:
                bad[m] = hits
    assert bad == {}


def test_benchmarks_import_no_test_helpers():
    helpers = {p.stem for p in (REPO / "tests").glob("*.py")} | {"tests"}
    for p in (REPO / "benchmarks").glob("*.py"):
        names = {n.split(".")[0] for n in imports(f"benchmarks.{p.stem}", p)}
        assert not names & helpers, p.name


def test_runtime_requirements_are_imported_and_test_tools_are_an_extra():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    req = [re.split(r"[<>=;\s]", line.strip())[0] for line in
           cfg["options"]["install_requires"].strip().splitlines()]
    imported = {n.split(".")[0] for m, p in modules().items() for n in imports(m, p)}
    assert [r for r in req if r not in imported] == []
    assert "pytest" not in req and "pytest" in cfg["options.extras_require"]["test"]
