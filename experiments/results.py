"""Past results, found and compared (``testbed results``), and the tidy export of an experiment
or a reproduction.

* :func:`find`: every run, experiment and reproduction directory directly under a results
  directory, as :class:`Entry` records — when, what (a name that says what it is), the headline
  metric and the verdict — newest first.  Recognised by their files only: a run by a
  ``manifest.json`` with a ``run_id``, an experiment by one of ``kind = "experiment"``, a
  reproduction by a ``summary.json`` with ``meta`` and ``rows``.
* :func:`compare`: two experiments (or two reproductions) side by side: what differs in their
  definitions and base specs, and per arm and metric (per row) the medians and the ratio B / A
  of the medians with its 95 % bootstrap CI (``experiments.stats.compare`` over the valid runs'
  values; a reproduction row's ratio is of the two measured values, without a CI); when they
  share no arm or no metric (no row), ``not_compared`` says so with what each has.
* :func:`tidy`: one row per run × metric (experiment, arm, repetition, run directory, valid,
  metric, value — a list metric's value is its median, as in the statistics), written by
  :func:`write_tidy` as ``results.csv`` and, when pyarrow can be imported, ``results.parquet``.
"""
from __future__ import annotations

import csv
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.spec.errors import UsageError
from testbed.spec.runresult import MANIFEST, read_manifest
from testbed.spec.units import format_number

from experiments.runner import experiment_manifest
from experiments.summary import run_value

log = logging.getLogger(__name__)

TIDY_COLUMNS = ("experiment", "arm", "level", "cross", "rep", "warmup", "run", "valid", "metric", "value")


@dataclass(frozen=True)
class Entry:
    """One past result: ``kind`` run / experiment / reproduction; ``when`` seconds since the
    epoch (0 when unknown); ``what`` a name that says what it is; ``headline`` its main
    number(s); ``verdict`` whether it can be trusted as is."""
    path: Path
    kind: str
    when: float
    what: str
    headline: str
    verdict: str

    def to_dict(self) -> dict:
        return {"path": str(self.path), "kind": self.kind, "when": self.when, "what": self.what,
                "headline": self.headline, "verdict": self.verdict}


#: What an experiment's summary.json holds (``experiments.summary``) that this module reads.
EXPERIMENT_SUMMARY_KEYS = ("primary", "levels", "metrics", "by_level", "runs", "complete")


def _read(p: Path, keys: tuple[str, ...] = ()) -> dict | None:
    """The JSON object in ``p`` when it has ``keys``; None when there is none: missing or damaged
    (the report writes it anew)."""
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and all(k in data for k in keys) else None


def _experiment_summary(d: Path) -> dict | None:
    """The experiment's ``summary.json`` when it holds what this module reads, in the shapes
    ``experiments.summary`` writes them; None when it is missing or damaged (a field gone or of
    another kind: the report writes it anew)."""
    s = _read(d / "summary.json", EXPERIMENT_SUMMARY_KEYS)
    if s is None or not (isinstance(s["levels"], list) and isinstance(s["metrics"], list)
                         and isinstance(s["by_level"], dict) and isinstance(s["runs"], list)):
        return None
    levels_sound = all(isinstance(lv, dict) and isinstance(lv.get("n_valid"), int)
                       and isinstance(lv.get("n_runs"), int) and isinstance(lv.get("metrics"), dict)
                       and all(isinstance(v, dict) for v in lv["metrics"].values())
                       for lv in s["by_level"].values())
    runs_sound = all(isinstance(r, dict) and isinstance(r.get("metrics"), dict) and "valid" in r
                     and "level" in r for r in s["runs"])
    return s if levels_sound and runs_sound else None


def _median(summary: dict, label, metric: str):
    """The median of ``metric`` in arm ``label`` of an experiment's summary; None when it has none."""
    return ((summary["by_level"].get(label) or {}).get("metrics", {}).get(metric) or {}).get("median")


def _stamp(text: str | None) -> float:
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S %Z"):
        try:
            return time.mktime(time.strptime(text or "", fmt))
        except ValueError:
            continue
    return 0.0


def _num(v) -> str:
    if v is None:
        return "–"
    return format_number(v)


def _run_entry(d: Path, m: dict) -> Entry:
    spec = m.get("spec") or {}
    params = spec.get("params") or {}
    shown = ", ".join(f"{k}={params[k]}" for k in sorted(params)[:4])
    metrics = m.get("metrics") or {}
    head = next(((k, metrics[k]) for k in ("completion_ms_median", "goodput_mbps", "completion_ms")
                 if isinstance(metrics.get(k), (int, float))), None)
    verdict = m.get("status", "?") + f", fidelity {(m.get('fidelity') or {}).get('verdict', 'unknown')}"
    return Entry(d, "run", float(m.get("started") or 0), f"run: {spec.get('workload')} on {spec.get('topology')}"
                 + (f" ({shown})" if shown else ""), f"{head[0]} {_num(head[1])}" if head else "–", verdict)


def _experiment_entry(d: Path, m: dict, s: dict | None) -> Entry:
    """The entry of experiment directory ``d``: ``m`` its manifest, ``s`` its summary
    (:func:`_experiment_summary`, None when missing or damaged)."""
    de = m.get("definition") or {}
    what = f"experiment {de.get('name')}: {de.get('factor')} = {', '.join(map(str, de.get('levels', [])))}"
    if not s:
        state = "summary damaged" if (d / "summary.json").is_file() else "not summarised"
        return Entry(d, "experiment", _stamp((m.get("environment") or {}).get("created")), what, "–",
                     f"{state} (testbed experiment report DIR writes it)")
    p = s["primary"]
    head = f"{p}: " + ", ".join(f"{lab} {_num(_median(s, lab, p))}" for lab in s["by_level"])
    n_valid = sum(lv["n_valid"] for lv in s["by_level"].values())
    n_runs = sum(lv["n_runs"] for lv in s["by_level"].values())
    verdict = ("complete" if s["complete"] else "INCOMPLETE") + f", {n_valid}/{n_runs} runs valid" + \
        (", UNVERIFIED factor" if s.get("unverified") else "")
    return Entry(d, "experiment", _stamp((m.get("environment") or {}).get("created")), what, head, verdict)


def _reproduction_entry(d: Path, s: dict) -> Entry:
    meta = s["meta"]
    rows = s["rows"]
    if not (isinstance(meta, dict) and isinstance(rows, list)
            and all(isinstance(r, dict) and "id" in r for r in rows)):
        raise UsageError(f"{d / 'summary.json'}: damaged (a reproduction's has an object meta and a "
                         "list rows of objects with an id)")
    measured = [r for r in rows if r.get("measured") is not None]
    ok = sum(r.get("ok") is True for r in rows)
    return Entry(d, "reproduction", _stamp(meta.get("started")), f"reproduce {meta.get('title')} ({meta.get('mode')})",
                 f"{len(measured)} of {len(rows)} rows measured", f"{ok} of {len(measured)} within tolerance")


def entry(d: Path) -> Entry | None:
    """The :class:`Entry` of one directory, None when it has neither a manifest nor a
    reproduction's summary; a UsageError naming its manifest when that is not a JSON object or
    neither a run's nor an experiment's, or its summary.json when that is not a JSON object."""
    return _entry_and_summary(d)[0]


def _entry_and_summary(d: Path) -> tuple[Entry | None, dict | None]:
    """:func:`entry`, with the summary it read (an experiment's when sound, a reproduction's;
    else None), so that :func:`compare` reads each summary.json once."""
    m = read_manifest(d / MANIFEST) if (d / MANIFEST).is_file() else None
    if m is not None and m.get("kind") == "experiment":
        s = _experiment_summary(d)
        return _experiment_entry(d, m, s), s
    if m is not None and "run_id" in m:
        return _run_entry(d, m), None
    summary = d / "summary.json"
    s = _read(summary) if summary.is_file() else None
    if summary.is_file() and s is None:
        raise UsageError(f"{summary}: damaged (not a JSON object)")
    if s is not None and "meta" in s and "rows" in s:
        return _reproduction_entry(d, s), s
    if m is not None:
        raise UsageError(f"{d / MANIFEST}: neither a run's manifest (no run_id) nor an experiment's "
                         "(no kind = \"experiment\")")
    return None, None


def find(root: str | Path) -> list[Entry]:
    """Every result directly under ``root``, newest first; a directory whose manifest cannot be
    read is left out with a warning naming it; a UsageError when ``root`` is no directory."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: no such directory; give --results DIR, where runs and experiments "
                         "were written")
    found = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            e = entry(d)
        except UsageError as exc:
            log.warning("%s; left out", exc)
            continue
        if e is not None:
            found.append(e)
    return sorted(found, key=lambda e: (-e.when, str(e.path)))


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _values(summary: dict, label: str, metric: str) -> list[float]:
    return [r["metrics"][metric] for r in summary["runs"] if r["valid"] and r["level"] == label
            and r["metrics"].get(metric) is not None]


def _shared(what: str, a: list, b: list) -> tuple[list, str | None]:
    """The names of ``a`` also in ``b``, in ``a``'s order; and, when there are none, what each has
    (``"no arm in common (A: new, reuse; B: 20, 1000)"``), else None."""
    both = [x for x in a if x in b]
    return both, None if both else (f"no {what} in common (A: {', '.join(map(str, a)) or 'none'}; "
                                    f"B: {', '.join(map(str, b)) or 'none'})")


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def compare(a: str | Path, b: str | Path) -> dict:
    """The comparison of the module docstring: ``{"kind", "a", "b", "differences": [(key, value
    in A, value in B)], "metrics": [{"arm" | "id", "metric", "a", "b", "ratio", "ratio_ci"}],
    "not_compared": why "metrics" is empty, or None}``; a ValueError naming what is wrong when
    they are not two of a kind."""
    (ea, sa), (eb, sb) = _entry_and_summary(Path(a)), _entry_and_summary(Path(b))
    for p, e in ((a, ea), (b, eb)):
        if e is None or e.kind == "run":
            raise ValueError(f"{p}: not an experiment or reproduction directory (a run's? compare needs "
                             "two experiments or two reproductions)")
    if ea.kind != eb.kind:
        raise ValueError(f"{a} is {_article(ea.kind)} and {b} {_article(eb.kind)}: compare two of a kind")
    out = {"kind": ea.kind, "a": str(a), "b": str(b), "differences": [], "metrics": [], "not_compared": None}
    if ea.kind == "experiment":
        da = _flat(experiment_manifest(a)["definition"])
        db = _flat(experiment_manifest(b)["definition"])
        for d, s in ((a, sa), (b, sb)):
            if s is None:
                raise ValueError(f"{d}: no sound summary.json to compare (write it with testbed "
                                 f"experiment report {d})")
        from experiments.stats import compare as stat_compare
        arms, no_arm = _shared("arm", sa["levels"], sb["levels"])
        metrics, no_metric = _shared("metric", sa["metrics"], sb["metrics"])
        out["not_compared"] = "; ".join(x for x in (no_arm, no_metric) if x) or None
        for lab in arms:
            for m in metrics:
                va, vb = _values(sa, lab, m), _values(sb, lab, m)
                c = stat_compare(vb, va) if va and vb else None
                out["metrics"].append({"arm": lab, "metric": m, "a": _median(sa, lab, m), "b": _median(sb, lab, m),
                                       "ratio": c and c["ratio"], "ratio_ci": c and c["ratio_ci"]})
    else:
        da, db = _flat(sa["meta"]), _flat(sb["meta"])
        rb = {r["id"]: r for r in sb["rows"]}
        ids, out["not_compared"] = _shared("row", [r["id"] for r in sa["rows"]], list(rb))
        for r in (r for r in sa["rows"] if r["id"] in ids):
            o = rb[r["id"]]
            ra, rb_ = r.get("measured"), o.get("measured")
            ratio = (rb_ / ra if isinstance(ra, (int, float)) and ra and isinstance(rb_, (int, float)) else None)
            out["metrics"].append({"id": r["id"], "metric": r.get("unit"), "a": ra, "b": rb_,
                                   "ratio": ratio, "ratio_ci": None})
    skip = ("started", "finished", "load_before", "load_after", "cpu", "resumed")
    out["differences"] = [(k, da.get(k), db.get(k)) for k in sorted(set(da) | set(db))
                          if da.get(k) != db.get(k) and k not in skip]
    return out


def tidy(exp_dir: str | Path, experiment: str | None = None) -> list[dict]:
    """One row per run × metric of an experiment's ``summary.json`` (columns ``TIDY_COLUMNS``)."""
    s = _experiment_summary(Path(exp_dir))
    if s is None:
        return []
    rows = []
    for r in s["runs"]:
        if r["status"] == "missing":
            continue
        lv = s["by_level"].get(r["level"], {})
        for m, v in (r.get("metrics") or {}).items():
            if run_value(v) is None:
                continue                # not a number (e.g. a per-host record)
            rows.append({"experiment": experiment or s["experiment"], "arm": r["level"],
                         "level": lv.get("level", r["level"]), "cross": lv.get("cross"), "rep": r["rep"],
                         "warmup": r["warmup"], "run": str(Path(exp_dir) / r["dir"]), "valid": r["valid"],
                         "metric": m, "value": run_value(v)})
    return rows


def write_tidy(out: str | Path, rows: list[dict]) -> list[Path]:
    """``results.csv`` (and ``results.parquet`` when pyarrow is importable) in ``out``."""
    out = Path(out)
    written = [out / "results.csv"]
    with open(written[0], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=TIDY_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    pq.write_table(pa.Table.from_pylist(rows), out / "results.parquet")
    written.append(out / "results.parquet")
    return written
