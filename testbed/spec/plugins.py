"""Records of the user's own, from outside the package: the directories on ``TESTBED_PATH`` and
the ``testbed.plugins`` entry points, loaded once, before the first lookup of any registry.

* ``TESTBED_PATH``: directories, separated by ``os.pathsep`` (``:``).  Every ``*.py`` file
  directly in one is imported as the top-level module of its file name; importing it registers
  its records (``@TOPOLOGIES.register``, ``WORKLOADS.register(...)``, ``MODELS``).  Every
  ``*.toml`` file there is an experiment definition (``experiments.definition`` reads them).
  The directories are added to ``sys.path`` and to the environment's ``PYTHONPATH``, so the
  programs a run starts (``python -m MODULE`` inside the hosts) import a user's module too.
* Entry points of group ``testbed.plugins`` of an installed distribution, e.g. in its
  ``pyproject.toml``: ``[project.entry-points."testbed.plugins"] mine = "mypackage.records"``;
  each names a module, imported the same way.

``load()`` does both, once (each registry calls it through ``Registry.add_loader``);
``import_file(path)`` imports one file given by path (a topology: ``--topo ./chain.py``).  A
plugin that fails to import is one ``UsageError`` naming its file.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from testbed.spec.errors import UsageError
from testbed.spec.registry import LOADING

ENV = "TESTBED_PATH"
GROUP = "testbed.plugins"
_loaded = False


def search_path() -> list[Path]:
    """The directories on ``TESTBED_PATH`` (absolute), in order; UsageError for one that is not
    a directory."""
    dirs = []
    for entry in os.environ.get(ENV, "").split(os.pathsep):
        if not entry:
            continue
        d = Path(entry).expanduser().resolve()
        if not d.is_dir():
            raise UsageError(f"{ENV} entry {entry!r} is not a directory")
        dirs.append(d)
    return dirs


def load() -> None:
    """Import every ``*.py`` of the ``TESTBED_PATH`` directories and every ``testbed.plugins``
    entry point, the first time it is called (later calls, also one made while loading, return)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for d in search_path():
        for path in sorted(d.glob("*.py")):
            import_file(path)
    for ep in importlib.metadata.entry_points(group=GROUP):
        try:
            ep.load()
        except UsageError:
            raise
        except Exception as exc:
            spec = importlib.util.find_spec(ep.module.split(".")[0])
            where = f" ({spec.origin})" if spec is not None and spec.origin else ""
            raise UsageError(f"plugin {ep.value!r} (entry point {ep.name!r} of group {GROUP})"
                             f"{where} failed to load: {type(exc).__name__}: {exc}") from exc


def is_path(ref: str) -> bool:
    """Whether a reference to a record is a file path (it ends in ``.py`` or has a ``/``), not a
    name: ``--topo ./chain.py``, ``topology = "chain.py"``."""
    return ref.endswith(".py") or "/" in ref


def import_file(path: Path | str) -> ModuleType:
    """The module of the Python file ``path``, imported (once) as the top-level module of its
    file name, its directory added to ``sys.path`` and ``PYTHONPATH``; UsageError naming the
    file when it is missing, its name is another module's, or importing it fails."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"{path}: no such file; a plugin is a Python file (NAME.py)")
    if path.suffix != ".py":
        raise UsageError(f"{path}: not a Python file; a plugin is a file NAME.py")
    name = path.stem
    if not name.isidentifier():
        raise UsageError(f"plugin {path}: {name!r} is not a Python module name; rename the file")
    _add_to_path(path.parent)
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None) and Path(main.__file__).resolve() == path:
        return main         # the file runs as the program (python -m NAME): not a second time
    importlib.invalidate_caches()           # the directory may have changed since it was read
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    origin = spec.origin if spec is not None else None
    if origin is None or Path(origin).resolve() != path:
        raise UsageError(f"plugin {path}: its module name {name!r} is already taken"
                         f"{f' by {origin}' if origin else ''}; rename the file")
    other = _found_elsewhere(name, path)
    if other is not None:
        raise UsageError(f"plugin {path}: its module name {name!r} is already taken by {other}; "
                         f"rename the file")
    token = LOADING.set(str(path))          # what registers meanwhile comes from this file
    try:
        return importlib.import_module(name)
    except Exception as exc:
        raise UsageError(f"plugin {path} failed to load: {type(exc).__name__}: {exc}") from exc
    finally:
        LOADING.reset(token)


def source_of(fn: Any) -> str:
    """The file a function is defined in (a plugin's metrics or model), else its module."""
    import inspect
    try:
        return inspect.getsourcefile(fn) or fn.__module__
    except TypeError:
        return getattr(fn, "__module__", None) or repr(fn)


def _found_elsewhere(name: str, path: Path) -> str | None:
    """Where a finder of ``sys.meta_path`` finds a module ``name`` that is not ``path`` (its
    file, or what it is for one without), else None.  An editable install's finder
    (``pip install -e``: this project's ``analysis``, ``experiments``) comes after the path
    finder, so a plugin file of that name would hide the package."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, None)
        except Exception:       # a finder that cannot answer for a top-level name hides nothing
            continue
        if spec is None:
            continue
        if spec.origin in (None, "built-in", "frozen") or not Path(spec.origin).is_file():
            return spec.origin or f"the namespace package {name!r}"
        if Path(spec.origin).resolve() != path:
            return spec.origin
    return None


def _add_to_path(d: Path) -> None:
    """``d`` on ``sys.path`` (last: a user's module never hides a library's) and on the
    environment's ``PYTHONPATH`` (what the processes a run starts inherit)."""
    if str(d) not in sys.path:
        sys.path.append(str(d))
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    if str(d) not in entries:
        os.environ["PYTHONPATH"] = os.pathsep.join([*entries, str(d)])
