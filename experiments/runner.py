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
run is finished too: it is recorded, listed and excluded, not retried).  A resumed experiment may
grow (:data:`GROWABLE`): more repetitions, more levels (or cross levels), other metrics or model
curves; the runs done are kept and the new ones follow, block by block (``order.grow``), and the
manifest records the growth.  Any other difference is refused naming the option and the values,
with the command that continues the experiment as it was.

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

Where the repetition blocks run is the one seam ``where``: :class:`InProcess` (the default: here,
one run after the other) or ``experiments.cluster.DaskCluster`` (each block on one Dask worker,
back to back, its run directories sent back packed and checksummed).  Either way every run
directory lands in ``runs/NNN-LEVEL`` by the same rename, its ``experiment.json`` names the
machine it ran on (``machine``: the host name) and how often it was started (``attempts``: more
than 1 when a worker died under it), and one line per finished run is appended to
``ledger.jsonl`` (:data:`LEDGER`: dir, machine, worker, attempts, sha256 of what was gathered):
the campaign's append-only record.  A run that finished but whose line a killed coordinator
never wrote gets it on resume, marked ``recovered``.

``replace=K`` runs up to K more repetition blocks, one at a time after the schedule, while a timed
run is excluded because its link fidelity verdict names the machine as its cause
(``checks.excluded_for_the_machine``: the host stalled): each such block is the next repetition
of every arm, in the schedule's order and with its seed, so the arms still alternate; whether
one is run depends only on the verdicts, never on a measured value.  The excluded runs stay in
``runs/`` and the summary; the manifest lists each block added (``replacements``: its
repetition, the runs it replaces) and its schedule holds its slots, so ``--resume`` finishes it.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import socket
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable

from testbed.spec.errors import TestbedError, UsageError
from testbed.spec.runresult import MANIFEST, RunResult, load_run, read_manifest

from experiments import checks as ck
from experiments.definition import Experiment, level_label
from experiments.order import Slot, grow, schedule

log = logging.getLogger(__name__)

SCHEMA = 1
RUN_INFO = "experiment.json"
LEDGER = "ledger.jsonl"


def default_out(exp: Experiment, root: str | Path = "results") -> Path:
    return Path(root) / f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    tmp.replace(path)


def promote(tmp: Path, final: Path) -> RunResult:
    """A finished run's directory ``runs/.partial-NNN-LEVEL`` renamed to ``final``, its manifest's
    ``dir`` made the final one (paths inside it are relative to it); its RunResult."""
    tmp.rename(final)
    result = load_run(final)
    result.write()
    return result


def _loadavg() -> list[float] | None:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


def _environment() -> dict:
    from testbed.run.provenance import provenance
    return {**provenance(), "loadavg": _loadavg()}


#: definition keys a resumed experiment may change: reps (only up), levels and cross levels
#: (only added), and what is computed after the runs
GROWABLE = ("reps", "levels", "cross", "metrics", "models", "log_x", "description")
_OPTION = {"reps": "--reps", "warmup": "--warmup", "seed": "--seed", "levels": "--levels",
           "base": "--set/--link/--backend", "name": "the experiment", "factor": "the definition's factor",
           "cross": "--cross-levels"}


def _flat(base: dict) -> dict:
    from testbed.spec.runspec import RunSpec
    try:
        return RunSpec.from_dict(dict(base)).flat()
    except Exception:                               # noqa: BLE001 - a manifest of an older layout
        return {k: json.dumps(v, sort_keys=True) for k, v in base.items()}


def _values(levels) -> str:
    return ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in levels)


def continue_command(manifest: dict, out: Path) -> str:
    """The ``testbed experiment run`` command that continues the experiment in ``out`` as it was
    started: its definition source, and the options that made it differ from that definition."""
    import shlex

    from experiments.definition import BUILTIN_DIR, load_definition
    d = manifest["definition"]
    src = manifest.get("source") or d["name"]
    if Path(src).parent == BUILTIN_DIR:
        src = d["name"]
    argv = ["testbed", "experiment", "run", src]
    try:
        orig = load_definition(src).to_dict()
    except UsageError:
        orig = {}
    for key, opt in (("reps", "--reps"), ("warmup", "--warmup"), ("seed", "--seed")):
        if orig.get(key) != d[key]:
            argv += [opt, str(d[key])]
    if orig.get("levels") != d["levels"]:
        argv += ["--levels", _values(d["levels"])]
    if d.get("cross") and (orig.get("cross") or {}).get("levels") != d["cross"]["levels"]:
        argv += ["--cross-levels", _values(d["cross"]["levels"])]
    was, now = _flat(orig.get("base", {})), _flat(d["base"])
    for path in sorted(set(was) | set(now)):
        if was.get(path) != now.get(path) and path in now:
            v = now[path]
            v = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v).lower() if isinstance(v, bool) else v
            argv += ["--set", f"{path}={v}"]
    return shlex.join(argv + ["--out", str(out), "--resume"])


def _differences(old: dict, new: dict) -> list[str]:
    """What keeps ``new`` from continuing ``old``, one phrase per option."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        opt = _OPTION.get(key, key)
        if key == "reps" and b < a:
            out.append(f"--reps {b} is fewer than the {a} repetitions there (--resume can add "
                       "repetitions, not drop them)")
        elif key == "levels" and not set(map(level_label, a)) <= set(map(level_label, b)):
            gone = [level_label(v) for v in a if level_label(v) not in set(map(level_label, b))]
            out.append(f"--levels leaves out {', '.join(gone)} (run there; levels can be added, not dropped)")
        elif key == "cross":
            if (a or {}).get("factor") != (b or {}).get("factor"):
                out.append(f"cross factor {(b or {}).get('factor')} vs {(a or {}).get('factor')} there")
            elif not set(map(level_label, a["levels"])) <= set(map(level_label, b["levels"])):
                out.append("--cross-levels leaves out levels run there")
        elif key == "base":
            was, now = _flat(a), _flat(b)
            diff = [f"{p}={now.get(p, '(unset)')} (there: {was.get(p, '(unset)')})"
                    for p in sorted(set(was) | set(now)) if was.get(p) != now.get(p)]
            out.append(f"{opt}: {'; '.join(diff)}")
        elif key not in GROWABLE:
            out.append(f"{opt} {b} (there: {a})")
    return out


def experiment_manifest(out: Path | str) -> dict:
    """The manifest of the experiment directory ``out``; a UsageError naming the directory when
    it has none, the file when that is not a JSON object (``read_manifest``) or not an
    experiment's (``kind = "experiment"`` with a definition and a schedule; a run's has a
    ``run_id``)."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        raise UsageError(f"{out}: no {MANIFEST}; not an experiment directory")
    manifest = read_manifest(path)
    if (manifest.get("kind") != "experiment" or not isinstance(manifest.get("definition"), dict)
            or not isinstance(manifest.get("schedule"), list)):
        what = "a run's manifest" if "run_id" in manifest else "no experiment's manifest"
        raise UsageError(f"{out}: not an experiment directory ({path} is {what}; an experiment's has "
                         "kind \"experiment\", a definition and a schedule)")
    return manifest


def start(exp: Experiment, out: Path, resume: bool) -> dict:
    """Create ``out`` with its manifest, or (resume) check that it holds this experiment or one
    this one grows (more repetitions or levels; the manifest's definition and schedule are then
    extended)."""
    path = out / MANIFEST
    if resume:
        if not path.is_file():
            raise UsageError(f"--resume: {out} has no {MANIFEST}; nothing to resume")
        manifest = experiment_manifest(out)
        new = exp.to_dict()
        old = manifest.get("definition") or {}
        try:                        # a manifest written before a key existed: its default
            old = Experiment.from_dict(old).to_dict()
        except (UsageError, TypeError):
            pass
        if old != new:
            why = _differences(old, new)
            if why:
                raise UsageError(f"--resume: the experiment in {out} differs: {'; '.join(why)}. "
                                 f"To continue it as it was: {continue_command(manifest, out)}")
            manifest["growth"] = manifest.get("growth", []) + [
                {"time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                 **{k: {"was": old.get(k), "now": new[k]} for k in GROWABLE if old.get(k) != new[k]}}]
            manifest.update(definition=new, **_rebuild(exp),
                            schedule=[s.to_dict() for s in grow(manifest["schedule"], exp)])
            _write_json(path, manifest)
        return manifest
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose another --out or add --resume")
    (out / "runs").mkdir(parents=True, exist_ok=True)
    manifest = {"schema": SCHEMA, "kind": "experiment", "definition": exp.to_dict(),
                "source": exp.source, "environment": _environment(), **_rebuild(exp),
                "schedule": [s.to_dict() for s in schedule(exp)]}
    _write_json(path, manifest)
    return manifest


def _rebuild(exp: Experiment) -> dict:
    """The manifest's record of whether the topology may stay up across runs, and the links
    whose schedule forces a rebuild (``Experiment.scheduled_links``)."""
    return {"topology_may_stay_up": exp.topology_may_stay_up(), "scheduled_links": list(exp.scheduled_links())}


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
    spec = exp.cell_spec(slot.level, slot.seed)
    if exp.keep_pcaps == "none":
        spec = spec.set("capture.keep", False)
    return plans[slot.level].with_spec(spec)


def _run_one(out: Path, slot: Slot, plan, executor: Callable, kw: dict, tb, setup_s: float,
             where: dict):
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
            "disk_mb": round(sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) / 1e6, 3),
            "machine": socket.gethostname(), "attempts": 1, "lost_on": [], **where}
    _write_json(tmp / RUN_INFO, info)
    return promote(tmp, final)


def run_block(exp: Experiment, plans: dict, block: list[Slot], out: Path, executor: Callable, kw: dict,
              keep: Callable | None = None, where: dict | None = None):
    """Run one repetition block (the arms of one repetition, in the schedule's order) back to back
    into ``out/runs``; yield ``(slot, RunResult)`` after each run.  ``where``: facts about the
    place added to each run's experiment.json (a Dask worker's address)."""
    t0 = time.monotonic()
    block_plans = [run_plan(exp, plans, slot) for slot in block]
    with (keep(block_plans[0]) if keep else nullcontext()) as tb:
        setup_s = round(time.monotonic() - t0, 4) if keep else None
        for slot, plan in zip(block, block_plans):
            yield slot, _run_one(out, slot, plan, executor, kw, tb, setup_s, where or {"worker": None})


class InProcess:
    """The default executor: every block here, in the schedule's order, one run at a time."""

    def prepare(self, plans: dict, checked: bool, keep: Callable | None) -> None:
        """Before the experiment's directory is made: with the real executor (``checked``), what
        the machine must have (root, the backend, the socket factors), once per level."""
        for plan in plans.values() if checked else ():
            plan.preflight()

    def run(self, exp: Experiment, plans: dict, blocks: list[list[Slot]], out: Path, executor: Callable,
            kw: dict, keep: Callable | None):
        """Yield ``(slot, RunResult, sha256 of what was gathered or None)`` per finished run."""
        for block in blocks:
            for slot, result in run_block(exp, plans, block, out, executor, kw, keep):
                yield slot, result, None


def append_ledger(out: Path, slot: Slot, result, sha256: str | None = None, recovered: bool = False) -> None:
    """One line for a finished run, appended (never rewritten) to ``out/ledger.jsonl``.
    ``recovered``: the line is written on resume for a run that finished but whose line a killed
    coordinator never wrote (its ``sha256`` is then unknown: None)."""
    info = json.loads((out / "runs" / slot.dirname / RUN_INFO).read_text())
    line = {"dir": f"runs/{slot.dirname}", "index": slot.index, "status": result.status,
            "machine": info.get("machine"), "worker": info.get("worker"), "attempts": info.get("attempts", 1),
            "sha256": sha256, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if recovered:
        line["recovered"] = True
    with open(out / LEDGER, "a") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _recover_ledger(out: Path, done: list[Slot]) -> None:
    """Append the ledger line of each finished run that has none: the coordinator was killed
    between moving the run into ``runs/`` and writing its line."""
    path = out / LEDGER
    lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
    listed = set()
    for n, line in enumerate(lines, 1):
        try:
            listed.add(json.loads(line)["dir"])
        except (ValueError, TypeError, KeyError):    # a line a crash cut short, or damage
            if line.strip():
                log.warning("%s:%d: not a ledger line, left as it is; the run it stood for gets "
                            "its line again", path, n)
    for slot in done:
        if f"runs/{slot.dirname}" not in listed:
            append_ledger(out, slot, load_run(out / "runs" / slot.dirname), recovered=True)


def _machine_excluded_runs(exp: Experiment, out: Path, slots: list[Slot]) -> list[str]:
    """The finished timed runs of ``slots`` (their ``runs/NNN-LEVEL``) that their link fidelity
    verdict excludes naming the machine as its cause (``checks.excluded_for_the_machine``)."""
    dirs = []
    for s in slots:
        if not s.warmup and finished(out, s):
            r = load_run(out / "runs" / s.dirname)
            if ck.excluded_for_the_machine(r.status, r.fidelity, exp.accept_degraded):
                dirs.append(f"runs/{s.dirname}")
    return dirs


def _replacement_block(exp: Experiment, out: Path, manifest: dict, slots: list[Slot]) -> list[Slot]:
    """Add the next repetition block to ``manifest`` (written) for the runs excluded for the
    machine that no block replaces yet; [] when there are none."""
    replaced = {d for r in manifest.get("replacements", []) for d in r["replaces"]}
    stalled = [d for d in _machine_excluded_runs(exp, out, slots) if d not in replaced]
    if not stalled:
        return []
    rep = 1 + max((s.rep for s in slots if not s.warmup), default=-1)
    grown = grow(manifest["schedule"], dataclasses.replace(exp, reps=rep + 1))
    manifest["schedule"] = [s.to_dict() for s in grown]
    manifest.setdefault("replacements", []).append(
        {"rep": rep, "replaces": stalled, "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
    _write_json(out / MANIFEST, manifest)
    return [s for s in grown if not s.warmup and s.rep == rep]


def run_experiment(exp: Experiment, out: str | Path, *, executor: Callable | None = None,
                   keep_up: Callable | None = None, resume: bool = False, quiet: bool = False,
                   on_run: Callable | None = None, where=None, replace: int = 0) -> Path:
    """Run (or continue) ``exp`` into ``out``; return ``out``.  ``on_run(slot, result)`` is
    called after each new run.  ``where``: :class:`InProcess` (default) or an entered
    ``experiments.cluster.DaskCluster``.  ``replace``: at most this many repetition blocks added
    for runs excluded for the machine (module docstring).  Summary, report and plots are written
    by :func:`experiments.report.write_all` afterwards."""
    if replace < 0:
        raise UsageError(f"replace must be 0 or more repetition blocks, not {replace}")
    from tqdm import tqdm
    out = Path(out)
    plans = exp.validate()
    kw = {}
    where = where or InProcess()
    if executor is None:
        from testbed.run.execute import execute as executor
        kw = {"checked": True}
    keep = keep_up if (keep_up is not None and exp.topology_may_stay_up()) else None
    where.prepare(plans, bool(kw), keep)
    manifest = start(exp, out, resume)
    slots = [Slot(d["index"], d["level"], d["rep"], d["warmup"], d["seed"]) for d in manifest["schedule"]]
    done = {s.index for s in slots if finished(out, s)}
    todo = [s for s in slots if s.index not in done]
    _recover_ledger(out, [s for s in slots if s.index in done])
    blocks = [[s for s in todo if (s.warmup, s.rep) == key]            # repetition blocks, in order
              for key in dict.fromkeys((s.warmup, s.rep) for s in todo)]
    bar = tqdm(total=len(slots), initial=len(slots) - len(todo), unit="run", disable=quiet,
               desc=exp.name, dynamic_ncols=True)
    try:
        while True:             # the schedule's blocks, then one replacement block at a time
            for slot, result, sha256 in where.run(exp, plans, blocks, out, executor, kw, keep):
                append_ledger(out, slot, result, sha256)
                bar.set_postfix_str(f"{slot.dirname} {result.status}")
                bar.update(1)
                if on_run:
                    on_run(slot, result)
            block = _replacement_block(exp, out, manifest, slots) \
                if len(manifest.get("replacements", [])) < replace else []
            if not block:
                break
            slots, blocks = slots + block, [block]
            bar.total += len(block)
    finally:
        bar.close()
    return out
