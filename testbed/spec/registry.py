"""``Registry``: the one way the testbed declares a kind of thing and looks it up by name.

Topologies, workloads, factors, models and experiments each have one registry (``TOPOLOGIES``
in ``topologies.base``, ``WORKLOADS`` in ``testbed.workloads.base``, ``FACTORS`` in
``testbed.spec.factors``, ``MODELS`` in ``analysis.models.base``, ``EXPERIMENTS`` in
``experiments.definition``).  A record is declared once, where it is defined::

    @TOPOLOGIES.register            # a class or function with a ``name``
    class Chain(TestbedTopo):
        name = "chain"

    WORKLOADS.register(Workload("bulk", ...))     # a record with a ``name``

``get(name)`` returns it, or raises ``UsageError`` naming the allowed names.  Built-in records
are registered when their package is imported (the package's ``__init__`` imports its modules,
which import the registry's ``base`` module, never the package); records of the user's own are
registered by loaders (``add_loader``: ``testbed.spec.plugins.load`` imports the directories on
``TESTBED_PATH`` and the ``testbed.plugins`` entry points) that run before the first lookup.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Callable, Generic, Iterator, TypeVar

from testbed.spec.errors import UsageError

T = TypeVar("T")
#: the plugin file being imported (``testbed.spec.plugins.import_file``): where a record
#: registered meanwhile comes from (:meth:`Registry.origin`)
LOADING: ContextVar[str | None] = ContextVar("loading", default=None)


class Registry(Generic[T]):
    """Records of one kind by their ``name``, in the order they were registered.  ``kind`` names
    the kind in messages; ``also`` is what a lookup takes besides a name (e.g. "a path to a .py
    file"), shown when a name is unknown."""

    def __init__(self, kind: str, also: str = ""):
        self.kind = kind
        self.also = also
        self._records: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._loaders: list[Callable[[], None]] = []

    def register(self, record: T) -> T:
        """Add ``record`` and return it (so it works as a decorator); a second record of the
        same name is refused (ValueError)."""
        name = getattr(record, "name", None)
        if not name:
            raise ValueError(f"a {self.kind} needs a name: {record!r}")
        if name in self._records and self._records[name] is not record:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._records[name] = record
        if (source := LOADING.get()) is not None:
            self._origins[name] = source
        return record

    def origin(self, name: str) -> str | None:
        """The plugin file the record ``name`` was registered from, None for a built-in one."""
        return self._origins.get(name)

    def add_loader(self, loader: Callable[[], None]) -> None:
        """``loader()`` runs once, before the first lookup; it registers more records."""
        self._loaders.append(loader)

    def load(self) -> None:
        """Run the loaders not run yet (each is taken off the list before it runs, so a lookup
        made while loading sees the records registered so far)."""
        while self._loaders:
            self._loaders.pop(0)()

    def get(self, name: str) -> T:
        """The record named ``name``; UsageError naming the allowed names."""
        self.load()
        try:
            return self._records[name]
        except KeyError:
            also = f" (or {self.also})" if self.also else ""
            raise UsageError(f"unknown {self.kind} {name!r}; allowed: "
                             f"{', '.join(self._records) or 'none'}{also}") from None

    def names(self) -> list[str]:
        self.load()
        return list(self._records)

    def items(self) -> list[tuple[str, T]]:
        self.load()
        return list(self._records.items())

    def values(self) -> list[T]:
        self.load()
        return list(self._records.values())

    def __contains__(self, name: Any) -> bool:
        self.load()
        return name in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._records)

    def __getitem__(self, name: str) -> T:
        return self.get(name)
