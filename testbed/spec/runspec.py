"""``RunSpec``: everything that defines one run, as one frozen value.

A run = a topology (name, structural parameters, named-link overrides, backend, seed) + a
workload (name, parameters) + socket and host factors + what to capture.  ``execute(spec,
out_dir)`` (``testbed/run/execute.py``) runs it and records ``spec.to_dict()`` in the run's
manifest; two runs that differ in one factor differ in exactly one path of their specs
(``spec.diff(other)``).

Paths name one value for ``set``/``get``/``diff``: ``topology``, ``backend``, ``seed``,
``workload``, ``client_host``, ``server_host``, ``timeout``, ``capture.hosts``,
``capture.full_payload``, ``capture.keep``, and one key of a mapping: ``params.mode``,
``socket.cc``, ``host.ack``, ``topology_params.rate1``, ``links.bottleneck.down.queue``
(the link key is ``LINK.DIR.FIELD``, see ``topologies.base``).  ``set(path, None)`` on a
mapping key removes it (back to the default).

The spec checks values on their own (types, the backend, loopback's limits); checking names and
values against the registries (workloads, topologies, links, factors) is
``testbed.run.plan.resolve``, which makes the run's ``Plan`` once.

Values in the mappings are JSON scalars (str, int, float, bool) in the units the registries
parse (``"64KB"``, ``"100ms"``, ``"3%"``); ``to_json``/``from_json`` round-trip exactly.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from testbed.spec.errors import UsageError

MAPPINGS = ("topology_params", "links", "params", "socket", "host")
SCALARS = {"topology": str, "backend": str, "seed": int, "workload": str, "timeout": float,
           "client_host": str, "server_host": str}
BACKENDS = ("auto", "netem", "userspace")
#: the largest seed: netem's is 64 bits unsigned and the kernel backend adds each link
#: direction's index to it (``backends/kernel.py``); 2^63-1 leaves room for those and is a
#: signed 64-bit integer wherever results are stored (Parquet, NumPy)
MAX_SEED = 2**63 - 1
SEED_RANGE = f"a whole number from 0 to 2^63-1 ({MAX_SEED})"
LOOPBACK = "loopback"   # not a topology: processes on this host over 127.0.0.1, no root
#: other names of a workload with parameters fixed: ``udpreq`` was reqresp over the UDP transport
#: before the transport became a parameter (older manifests and experiment files use it)
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {"udpreq": ("reqresp", {"transport": "udp"})}
#: parameters renamed since manifests were first written: workload → {old name: new name}
#: (reqresp's ``resume`` became ``tls_resume``: ``--resume`` means "continue" elsewhere)
RENAMED_PARAMS: dict[str, dict[str, str]] = {"reqresp": {"resume": "tls_resume"}}


def resolve_alias(name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(workload, params) for ``name``: an alias becomes its workload with its fixed parameters
    (UsageError when ``params`` give one of them another value)."""
    if name not in ALIASES:
        return name, dict(params)
    target, fixed = ALIASES[name]
    clash = [k for k, v in fixed.items() if k in params and params[k] != v]
    if clash:
        raise UsageError(f"workload {name!r} is {target} with " + ", ".join(
            f"{k} {v}" for k, v in fixed.items()) + f"; it cannot take {clash[0]}={params[clash[0]]!r}")
    return target, {**params, **fixed}


@dataclass(frozen=True)
class CaptureSpec:
    """Captures of a run: tcpdump on every interface of ``hosts`` ("all", "none" or a tuple of
    host names), headers only unless ``full_payload``; ``keep=False`` deletes the pcaps once
    the metrics were computed."""
    hosts: str | tuple[str, ...] = "all"
    full_payload: bool = False
    keep: bool = True

    def __post_init__(self):
        hosts = self.hosts
        if isinstance(hosts, (list, tuple)):
            object.__setattr__(self, "hosts", tuple(str(h) for h in hosts))
        elif isinstance(hosts, str) and hosts not in ("all", "none"):
            object.__setattr__(self, "hosts", tuple(h for h in hosts.split(",") if h))
            if not self.hosts:
                raise UsageError(f"capture hosts {hosts!r}: give 'all', 'none' or host names")
        elif not isinstance(hosts, str):
            raise UsageError(f"capture hosts {hosts!r}: give 'all', 'none' or host names")
        for name in ("full_payload", "keep"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"capture.{name} must be true or false, not {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": self.hosts if isinstance(self.hosts, str) else list(self.hosts),
                "full_payload": self.full_payload, "keep": self.keep}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CaptureSpec":
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise UsageError(f"unknown capture field(s) {sorted(unknown)}; allowed: hosts, full_payload, keep")
        return cls(**d)


def _scalar(path: str, value: Any) -> Any:
    if isinstance(value, (str, bool, int, float)) and value is not None:
        return value
    raise UsageError(f"{path}: value {value!r} must be a string, number or boolean")


@dataclass(frozen=True)
class RunSpec:
    topology: str = "longhaul"
    topology_params: Mapping[str, str] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)
    backend: str = "auto"
    seed: int = 1
    workload: str = "reqresp"
    params: Mapping[str, Any] = field(default_factory=dict)
    socket: Mapping[str, Any] = field(default_factory=dict)
    host: Mapping[str, Any] = field(default_factory=dict)
    capture: CaptureSpec = field(default_factory=CaptureSpec)
    client_host: str | None = None
    server_host: str | None = None
    timeout: float = 600.0

    def __post_init__(self):
        for name in MAPPINGS:
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise UsageError(f"{name} must be a mapping, not {type(value).__name__}")
            object.__setattr__(self, name, {str(k): _scalar(f"{name}.{k}", v)
                                            for k, v in sorted(value.items())})
        if isinstance(self.capture, Mapping):
            object.__setattr__(self, "capture", CaptureSpec.from_dict(self.capture))
        elif not isinstance(self.capture, CaptureSpec):
            raise UsageError(f"capture must be a CaptureSpec, not {type(self.capture).__name__}")
        for name, typ in SCALARS.items():
            value = getattr(self, name)
            if value is None and name in ("client_host", "server_host"):
                continue
            if typ is float and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
            elif not isinstance(value, typ) or isinstance(value, bool):
                raise UsageError(f"{name} must be a {typ.__name__}, not {value!r}")
        workload, params = resolve_alias(self.workload, self.params)   # udpreq → reqresp, udp
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "params", dict(sorted(params.items())))
        if self.backend not in BACKENDS:
            raise UsageError(f"unknown backend {self.backend!r}; allowed: {', '.join(BACKENDS)}")
        if not 0 <= self.seed <= MAX_SEED:
            raise UsageError(f"seed {self.seed}: give {SEED_RANGE}")
        if not 0 < self.timeout < math.inf:
            raise UsageError(f"timeout {self.timeout:g} must be > 0 seconds and finite")
        if self.topology == LOOPBACK:
            if self.topology_params or self.links:
                raise UsageError("topology 'loopback' has no parameters or links")
            if isinstance(self.capture.hosts, tuple):
                raise UsageError("topology 'loopback' has no hosts to capture on; use capture 'none'")

    def __hash__(self) -> int:          # the mappings are dicts: hash the canonical JSON
        return hash(self.to_json())

    # --- paths --------------------------------------------------------------------------------
    @staticmethod
    def _split(path: str) -> tuple[str, str | None]:
        head, _, rest = path.partition(".")
        if head in MAPPINGS:
            if not rest:
                raise UsageError(f"path {path!r}: name a key, e.g. {head}.NAME")
            return head, rest
        if head == "capture":
            if rest not in ("hosts", "full_payload", "keep"):
                raise UsageError(f"path {path!r}: allowed capture.hosts, capture.full_payload, capture.keep")
            return head, rest
        if head in SCALARS and not rest:
            return head, None
        raise UsageError(f"unknown RunSpec path {path!r}; allowed: {', '.join(SCALARS)}, "
                         f"capture.FIELD, or {'|'.join(MAPPINGS)}.KEY")

    def set(self, path: str, value: Any) -> "RunSpec":
        """A new spec with one value changed (see the module docstring for paths)."""
        head, key = self._split(path)
        if head in MAPPINGS:
            mapping = dict(getattr(self, head))
            if value is None:
                mapping.pop(key, None)
            else:
                mapping[key] = value
            return dataclasses.replace(self, **{head: mapping})
        if head == "capture":
            return dataclasses.replace(self, capture=dataclasses.replace(self.capture, **{key: value}))
        if SCALARS[head] in (int, float) and isinstance(value, str):
            try:
                value = SCALARS[head](value)
            except ValueError:
                raise UsageError(f"{head}: {value!r} is not a number") from None
        return dataclasses.replace(self, **{head: value})

    def get(self, path: str) -> Any:
        """The value at ``path``; for a mapping key that is not set, None."""
        head, key = self._split(path)
        if head in MAPPINGS:
            return getattr(self, head).get(key)
        if head == "capture":
            return getattr(self.capture, key)
        return getattr(self, head)

    def flat(self) -> dict[str, Any]:
        """Every set value by path (mapping keys only where set)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in MAPPINGS:
                out.update({f"{f.name}.{k}": v for k, v in value.items()})
            elif f.name == "capture":
                out.update({f"capture.{k}": v for k, v in value.to_dict().items()})
            else:
                out[f.name] = value
        return out

    def diff(self, other: "RunSpec") -> dict[str, tuple[Any, Any]]:
        """path → (value here, value there) for every path whose values differ."""
        a, b = self.flat(), other.flat()
        return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}

    # --- serialization ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in MAPPINGS:
            d[name] = dict(d[name])
        d["capture"] = self.capture.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunSpec":
        """The spec of ``to_dict`` output, also one written by an older version (renamed
        parameters, ``RENAMED_PARAMS``, read under their new names)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise UsageError(f"unknown RunSpec field(s) {sorted(unknown)}; allowed: {', '.join(sorted(names))}")
        d = dict(d)
        workload = resolve_alias(d.get("workload", "reqresp"), {})[0]
        renamed = RENAMED_PARAMS.get(workload, {})
        if renamed and isinstance(d.get("params"), Mapping):
            d["params"] = {renamed.get(k, k): v for k, v in d["params"].items()}
        if "capture" in d:
            d["capture"] = CaptureSpec.from_dict(d["capture"])
        return cls(**d)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, **kw)

    @classmethod
    def from_json(cls, text: str) -> "RunSpec":
        return cls.from_dict(json.loads(text))
