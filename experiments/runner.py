"""Run an experiment: every slot of :func:`experiments.order.schedule`, each into its own run
directory, resumable.

Layout of ``OUT`` (``results/<name>-<YYYYmmdd-HHMMSS>/`` by default)::

    manifest.json    schema, definition, environment (testbed.run.provenance), schedule, runner facts
    runs/NNN-LEVEL/  one [core] run directory per run (manifest.json from execute) plus
                     experiment.json (slot, wall-clock seconds, topology bring-up seconds,
                     MB on disk before any pcap was pruned, load average after the run)
    summary.json, report.md, plots/   written by experiments.summary / report / plots

A run is executed into ``runs/.partial-NNN-LEVEL`` and renamed to ``runs/NNN-LEVEL`` once its
manifest and experiment.json are written, so a run directory that exists is finished: a crash or
Ctrl-C loses at most the run in progress, and ``resume=True`` skips every finished run (a failed
run is finished too: it is recorded, listed and excluded, not retried).

Each level's spec is resolved once into its Plan (``testbed.run.plan``; a run's plan is its
level's with the run's seed), and what the machine must have — root for a topology, the backend,
the socket factors — is checked once per level before the experiment's directory is made, not
once per run.  The executor is any callable ``(plan, out_dir, **kw) -> RunResult``
(``testbed.run.execute.execute`` by default, then called with ``checked=True``; tests pass a fake).
When the factor allows it (:meth:`Experiment.topology_may_stay_up`)
and a ``keep_up(plan)`` context manager is given (:func:`topology_keeper`), the topology is
brought up once per repetition block (the arms of one repetition share its link seed) and passed
to the executor as ``testbed=``; its bring-up time is recorded so the report can state the
per-run overhead.  The price: the link backend's summary then covers the whole block, so each
run gets the block's fidelity verdict (experiments.summary) — hence off by default
(``--keep-topology``).
"""
from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable

from testbed.spec.errors import TestbedError, UsageError
from testbed.spec.runresult import MANIFEST, load_run

from experiments.definition import Experiment
from experiments.order import Slot, schedule

SCHEMA = 1
RUN_INFO = "experiment.json"


def default_out(exp: Experiment, root: str | Path = "results") -> Path:
    return Path(root) / f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    tmp.replace(path)


def _loadavg() -> list[float] | None:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


def _environment() -> dict:
    from testbed.run.provenance import provenance
    return {**provenance(), "loadavg": _loadavg()}


def start(exp: Experiment, out: Path, resume: bool) -> dict:
    """Create ``out`` with its manifest, or (resume) check that it holds this experiment."""
    path = out / MANIFEST
    if resume:
        if not path.is_file():
            raise UsageError(f"--resume: {out} has no {MANIFEST}; nothing to resume")
        manifest = json.loads(path.read_text())
        if manifest.get("definition") != exp.to_dict():
            raise UsageError(f"--resume: the experiment in {out} differs from this one "
                             "(definition, levels, reps, seed or --set); resume with the same options")
        return manifest
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose another --out or add --resume")
    (out / "runs").mkdir(parents=True, exist_ok=True)
    manifest = {"schema": SCHEMA, "kind": "experiment", "definition": exp.to_dict(),
                "source": exp.source, "environment": _environment(),
                "topology_may_stay_up": exp.topology_may_stay_up(),
                "schedule": [s.to_dict() for s in schedule(exp)]}
    _write_json(path, manifest)
    return manifest


def topology_keeper(out: Path) -> Callable:
    """``keep_up(plan)``: a Testbed (testbed.run.network) of the plan's topology up for one
    repetition block, its results (metadata, emulator logs) in ``OUT/topology/seedN-…``."""
    @contextmanager
    def keep_up(plan):
        import tempfile

        from testbed.run.network import Testbed
        root = out / "topology"
        root.mkdir(exist_ok=True)
        d = tempfile.mkdtemp(dir=root, prefix=f"seed{plan.spec.seed}-")
        with Testbed.from_plan(plan, run_dir=d) as tb:
            yield tb
    return keep_up


def _rel(d, out: Path) -> str | None:
    try:
        return str(Path(d).resolve().relative_to(out.resolve())) if d else None
    except ValueError:
        return str(d)


def finished(out: Path, slot: Slot) -> bool:
    d = out / "runs" / slot.dirname
    return (d / MANIFEST).is_file() and (d / RUN_INFO).is_file()


def run_plan(exp: Experiment, plans: dict, slot: Slot):
    """The Plan of one scheduled run: its level's, with the run's seed (and pcaps dropped when
    the experiment keeps none)."""
    spec = exp.spec(exp.level(slot.level), slot.seed)
    if exp.keep_pcaps == "none":
        spec = spec.set("capture.keep", False)
    return plans[slot.level].with_spec(spec)


def _run_one(out: Path, slot: Slot, plan, executor: Callable, kw: dict, tb, setup_s: float):
    final = out / "runs" / slot.dirname
    tmp = out / "runs" / f".partial-{slot.dirname}"
    shutil.rmtree(tmp, ignore_errors=True)          # a run a crash interrupted: redo it
    kw = {**kw, "testbed": tb} if tb is not None else kw
    t0 = time.monotonic()
    try:
        result = executor(plan, tmp, **kw)
    except TestbedError as exc:
        result = getattr(exc, "result", None)
        if result is None:                          # nothing recorded: setup is broken, stop
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    info = {**slot.to_dict(), "wall_s": round(time.monotonic() - t0, 4), "setup_s": setup_s,
            "loadavg": _loadavg(), "kept_topology": tb is not None, "topology_dir": _rel(getattr(tb, "dir", None), out),
            "disk_mb": round(sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) / 1e6, 3)}
    _write_json(tmp / RUN_INFO, info)
    tmp.rename(final)
    return load_run(final)


def run_experiment(exp: Experiment, out: str | Path, *, executor: Callable | None = None,
                   keep_up: Callable | None = None, resume: bool = False, quiet: bool = False,
                   on_run: Callable | None = None) -> Path:
    """Run (or continue) ``exp`` into ``out``; return ``out``.  ``on_run(slot, result)`` is
    called after each new run.  Summary, report and plots are written by
    :func:`experiments.report.write_all` afterwards."""
    from tqdm import tqdm
    out = Path(out)
    plans = exp.validate()
    kw = {}
    if executor is None:
        from testbed.run.execute import execute as executor
        for plan in plans.values():
            plan.preflight()          # root, backend, socket factors: before the experiment's directory
        kw = {"checked": True}
    start(exp, out, resume)
    slots = schedule(exp)
    todo = [s for s in slots if not finished(out, s)]
    keep = keep_up if (keep_up is not None and exp.topology_may_stay_up()) else None
    bar = tqdm(total=len(slots), initial=len(slots) - len(todo), unit="run", disable=quiet,
               desc=exp.name, dynamic_ncols=True)
    try:
        for key in dict.fromkeys((s.warmup, s.rep) for s in todo):   # repetition blocks, in order
            block = [s for s in todo if (s.warmup, s.rep) == key]
            t0 = time.monotonic()
            block_plans = [run_plan(exp, plans, slot) for slot in block]
            with (keep(block_plans[0]) if keep else nullcontext()) as tb:
                setup_s = round(time.monotonic() - t0, 4) if keep else None
                for slot, plan in zip(block, block_plans):
                    result = _run_one(out, slot, plan, executor, kw, tb, setup_s)
                    bar.set_postfix_str(f"{slot.dirname} {result.status}")
                    bar.update(1)
                    if on_run:
                        on_run(slot, result)
    finally:
        bar.close()
    return out
