"""``RunResult``: one run as an object, read from and written to ``<run dir>/manifest.json``.

The manifest (schema ``MANIFEST_SCHEMA``) holds: the ``RunSpec`` that defined the run, its
status (``complete`` or ``failed`` with ``error``), timings (CLOCK_REALTIME seconds; phase
durations in ``timings``), named ``metrics`` and ``checks`` (see ``analysis/runmetrics.py`` for
their exact definitions), the link backend's ``fidelity`` verdict, the capture's cost
(``capture``: CPU seconds of the tcpdumps, packets the kernel dropped), the changes of links
with a schedule (``link_changes``: the origin, every change's configured and actual moment per
direction, warnings; empty without a schedule) and an inventory of every
file (``files``: path relative to the run directory, kind, host and interface where one applies).

Stages meet only through this directory: experiments, reports and ``testbed analyze`` read it;
``load_run(dir)`` needs nothing but the manifest.
"""
from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.spec.errors import UsageError
from testbed.spec.runspec import RunSpec

MANIFEST_SCHEMA = 1
MANIFEST = "manifest.json"
STATUSES = ("complete", "failed")


@dataclass
class RunResult:
    run_id: str
    dir: Path
    spec: RunSpec
    status: str
    error: str | None
    started: float
    finished: float
    metrics: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    fidelity: dict[str, Any] = field(default_factory=lambda: {"verdict": "unknown"})
    files: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)   # phase → seconds
    capture: dict[str, Any] = field(default_factory=dict)     # cpu_s, dropped_by_kernel, ...
    environment: dict[str, Any] = field(default_factory=dict) # provenance: git, kernel, tools
    roles: dict[str, str] = field(default_factory=dict)       # "client"/"server" → host
    apps: dict[str, list] = field(default_factory=dict)       # role → argv of the app started
    link_changes: dict[str, Any] = field(default_factory=dict) # link schedules: origin, changes

    def __post_init__(self):
        self.dir = Path(self.dir)
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r}; allowed: {', '.join(STATUSES)}")

    @property
    def ok(self) -> bool:
        return self.status == "complete"

    def files_of(self, kind: str) -> list[Path]:
        """Absolute paths of the inventory's files of one kind (e.g. ``pcap``)."""
        return [self.dir / f["path"] for f in self.files if f["kind"] == kind]

    def to_manifest(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["dir"] = str(self.dir)
        d["spec"] = self.spec.to_dict()
        return {"schema": MANIFEST_SCHEMA, **d}

    def write(self) -> Path:
        """Write ``manifest.json`` atomically; return its path."""
        path = self.dir / MANIFEST
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_manifest(), indent=1, default=json_default) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def from_manifest(cls, d: dict[str, Any], dir: Path | str | None = None) -> "RunResult":
        schema = d.get("schema")
        if schema != MANIFEST_SCHEMA:
            raise UsageError(f"manifest schema {schema!r} is not {MANIFEST_SCHEMA}, the one this "
                             "version reads")
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["spec"] = RunSpec.from_dict(d["spec"])
        kw["dir"] = Path(dir) if dir is not None else Path(d["dir"])
        return cls(**kw)


def json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):          # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def read_manifest(path: Path | str) -> dict[str, Any]:
    """The JSON object of a manifest file (a run's or an experiment's); a UsageError naming the
    file when it is not valid JSON, not a JSON object, or a run's whose fields of objects and
    arrays (``RunResult``'s) hold something else."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}), "
                         "not a manifest's JSON") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a JSON {type(data).__name__}, not a manifest's object")
    if data.get("kind") != "experiment":
        for name, kind in _run_fields().items():
            if name in data and not isinstance(data[name], kind):
                raise UsageError(f"{path}: {name} is a JSON {_json_name(type(data[name]))}, where a "
                                 f"run's manifest has an {_json_name(kind)}")
        if not all(isinstance(f, dict) and "path" in f and "kind" in f for f in data.get("files", [])):
            raise UsageError(f"{path}: files holds an entry that is no object with a path and a kind")
    return data


def _run_fields() -> dict[str, type]:
    """The run manifest's fields that hold a JSON object or array, from ``RunResult``'s
    annotations (``spec`` is written as its dict)."""
    hints = typing.get_type_hints(RunResult)
    kinds = {name: typing.get_origin(t) for name, t in hints.items()}
    return {"spec": dict, **{name: k for name, k in kinds.items() if k in (dict, list)}}


def _json_name(kind: type) -> str:
    return {dict: "object", list: "array", str: "string", int: "number", float: "number",
            bool: "boolean", type(None): "null"}.get(kind, kind.__name__)


def load_run(dir: Path | str) -> RunResult:
    """The RunResult of a run directory, from its manifest (the directory may have moved)."""
    path = Path(dir) / MANIFEST
    if not path.is_file():
        raise UsageError(f"{dir}: no {MANIFEST}; not a run directory (or the run predates manifests)")
    return RunResult.from_manifest(read_manifest(path), Path(dir).resolve())
