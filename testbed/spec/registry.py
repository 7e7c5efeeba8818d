"""``Registry``: the one way the testbed declares a kind of thing and looks it up by name.

Topologies, workloads, factors, models and experiments each have one registry (``TOPOLOGIES``
in ``topologies``, ``WORKLOADS`` in ``testbed.workloads``, ``FACTORS`` in
``testbed.spec.factors``, ``MODELS`` in ``analysis.models``, ``EXPERIMENTS`` in
``experiments.definition``).  A record is declared once, where it is defined::

    @TOPOLOGIES.register            # a class or function with a ``name``
    class Chain(TestbedTopo):
        name = "chain"

    WORKLOADS.register(Workload("bulk", ...))     # a record with a ``name``

``get(name)`` returns it, or raises ``UsageError`` naming the allowed names.  Built-in records
are registered when their package is imported (the package's ``__init__`` imports its modules);
records of the user's own are found by ``testbed.spec.plugins`` (directories on
``TESTBED_PATH``, Python entry points) before the first lookup.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, Iterator, TypeVar

from testbed.spec.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    """Records of one kind by name, in the order they were registered."""

    def __init__(self, kind: str, key: Callable[[T], str] = lambda r: r.name):
        self.kind = kind
        self._key = key
        self._records: dict[str, T] = {}
        self._loaders: list[Callable[[], None]] = []
        self._loading = False

    def register(self, record: T) -> T:
        """Add ``record`` (usable as a decorator); a second record of the same name is an error."""
        name = self._key(record)
        if not name:
            raise ValueError(f"a {self.kind} needs a name: {record!r}")
        if name in self._records and self._records[name] is not record:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._records[name] = record
        return record

    def add_loader(self, loader: Callable[[], None]) -> None:
        """``loader()`` runs once, before the first lookup (it registers more records)."""
        self._loaders.append(loader)

    def _load(self) -> None:
        if self._loading or not self._loaders:
            return
        self._loading = True
        try:
            while self._loaders:
                self._loaders.pop(0)()
        finally:
            self._loading = False

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._records[name]
        except KeyError:
            raise UsageError(f"unknown {self.kind} {name!r}; allowed: "
                             f"{', '.join(self._records) or 'none'}") from None

    def names(self) -> list[str]:
        self._load()
        return list(self._records)

    def items(self) -> Iterator[tuple[str, T]]:
        self._load()
        return iter(list(self._records.items()))

    def values(self) -> Iterator[T]:
        self._load()
        return iter(list(self._records.values()))

    def __contains__(self, name: Any) -> bool:
        self._load()
        return name in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load()
        return len(self._records)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def unregister(self, name: str) -> None:
        """Remove a record (tests that add a toy one clean up after themselves)."""
        self._records.pop(name, None)
