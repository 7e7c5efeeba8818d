"""A run directory as ``testbed analyze RUN_DIR`` reads it again: its captures, those that are
gone and why, and its metrics recomputed from the files held against its manifest's.

:func:`captures`: the capture files (``pcap/*.pcap`` and ``pcap/*.pcapng``).
:func:`missing_captures`: the captures the run made that are not there, and why: pruned by its
experiment (the record :data:`PRUNED` its pruning left in the run directory names them), deleted by
design (``capture.keep = false``), or missing (anything else).
:func:`changed_files`: the run's other files (logs, sidecars, metadata) that are gone or no longer
have the size its manifest's inventory recorded.
:func:`against_manifest`: the values to show — the recomputed ones, the manifest's where the files
no longer give a value — with which are the manifest's and which differ from it.
"""
from __future__ import annotations

import json
import stat
from pathlib import Path

from analysis.applog import read_object
from testbed.spec.runresult import json_default

KINDS = ("metrics", "checks")
# read back from the hosts while the run ran (testbed.run.execute), never from its files
RECORDED = {"checks": ("host_factors",)}
NAMED = 3          # files named in a warning before "…"
#: the record an experiment's pruning (experiments.report.prune_pcaps) writes in each run
#: directory it deleted captures of: {"files": [paths relative to the run directory],
#: "keep_pcaps": the experiment's policy, "representatives": the runs it kept, "when": ISO 8601}
PRUNED = "pruned.json"


def captures(run_dir: Path) -> list[Path]:
    """The run's capture files, ``pcap/*.pcap`` and ``pcap/*.pcapng``, sorted by path."""
    return sorted(p for p in (run_dir / "pcap").glob("*.pcap*") if p.suffix in (".pcap", ".pcapng"))


def missing_captures(run_dir: Path, manifest: dict, found: list[Path]) -> tuple[list[str], str | None]:
    """(the run's captures that are gone, why) — else ([], why there are none, or None).

    The run's captures are those its manifest's inventory lists and those that left a
    ``.pcap.meta.json`` sidecar; one is gone when its file is not in ``found`` (paths relative to
    the run directory).  Why: *deleted* when the run's spec says ``capture.keep = false``;
    *pruned* when the run's :data:`PRUNED` record (:func:`pruned_record`) names it; else
    *missing*, naming the files (and a ``.pcapng`` of the same name found instead) — with, for a
    run of an experiment that prunes and no record of it, that a testbed older than the record
    may have pruned them."""
    listed = {f["path"] for f in manifest.get("files", ()) if f.get("kind") == "pcap"}
    listed |= {p.relative_to(run_dir).as_posix()[:-len(".meta.json")]
               for p in run_dir.glob("pcap/*.pcap.meta.json")}
    have = {p.relative_to(run_dir).as_posix() for p in found}
    gone = sorted(p for p in listed if p not in have)
    capture = manifest.get("spec", {}).get("capture", {})
    lost = "no per-flow analysis, no plots" if not found else "the analysis covers the rest"
    if gone and capture.get("keep") is False:
        return gone, (f"{len(gone)} of the run's {len(listed)} captures were deleted after its "
                      "metrics were computed (capture.keep = false: --discard-pcaps, or an "
                      f"experiment with keep_pcaps = \"none\"): {_names(gone)}; {lost}")
    record = pruned_record(run_dir) if gone else None
    recorded = set(record.get("files", ())) if record else set()
    pruned = [p for p in gone if p in recorded]
    rest = [p for p in gone if p not in recorded]
    if pruned:
        said = (f"pruned by its experiment (keep_pcaps = \"{record.get('keep_pcaps')}\" keeps only "
                f"each level's representative run's; keep_pcaps = \"all\" keeps every run's; "
                f"{PRUNED}, {record.get('when')}): {_names(pruned)}")
        if not rest:
            return gone, f"{len(gone)} of the run's {len(listed)} captures were {said}; {lost}"
    if gone:
        instead = sorted(f"{p}ng" for p in rest if f"{p}ng" in have)
        also = (f"; found instead: {_names(instead)} (analysed per flow below; the run's metrics "
                "read .pcap captures only)") if instead else ""
        if pruned:
            also += f"; {len(pruned)} more were {said}"
        elif _experiment_keeps(run_dir) == "representative":
            also += (f"; no {PRUNED} says its experiment pruned them, though its keep_pcaps = "
                     "\"representative\" may have: a testbed older than that record kept none")
        return gone, (f"{len(rest)} of the run's {len(listed)} captures are missing: {_names(rest)} "
                      f"(deleted or moved since the run){also}; {lost}")
    if not found:
        why = "capture.hosts = none" if capture.get("hosts") == "none" else "no pcap/*.pcap or *.pcapng"
        return [], f"the run has no captures ({why}): no per-flow analysis, no plots"
    return [], None


def changed_files(run_dir: Path, manifest: dict) -> dict[str, list]:
    """The files of the manifest's inventory (``files``: path, kind, and ``bytes`` when the run
    ended) other than captures (:func:`missing_captures` says why those are gone; a capture's own
    damage report why it is short) that are not there (``missing``: paths) or whose size is
    another now (``resized``: ``[path, bytes now, bytes at the run]``); empty lists when the
    inventory has no such file."""
    out: dict[str, list] = {"missing": [], "resized": []}
    for f in manifest.get("files", ()):
        if f.get("kind") == "pcap" or not isinstance(f.get("path"), str):
            continue
        try:
            st = (run_dir / f["path"]).stat()
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            out["missing"].append(f["path"])
        elif isinstance(f.get("bytes"), int) and st.st_size != f["bytes"]:
            out["resized"].append([f["path"], st.st_size, f["bytes"]])
    return out


def changed_notes(changed: dict) -> list[str]:
    """One warning each for the missing and the resized files of :func:`changed_files`."""
    notes = []
    gone, resized = changed.get("missing") or [], changed.get("resized") or []
    if gone:
        notes.append(f"{len(gone)} of the files its manifest lists are missing: {_names(gone)} "
                     "(deleted or moved since the run): what they held is not analysed")
    if resized:
        said = [f"{p} {now} bytes (at the run {then})" for p, now, then in resized]
        notes.append(f"{len(resized)} of the files its manifest lists have changed size since the run: "
                     f"{_names(said)}")
    return notes


def pruned_record(run_dir: Path) -> dict | None:
    """The run's :data:`PRUNED` record: which of its captures its experiment pruned, under which
    ``keep_pcaps``, when; None when it has none or one that cannot be read (its captures are
    then not said to be pruned)."""
    try:
        record = read_object(run_dir / PRUNED)
    except (ValueError, OSError):
        return None
    if record is None or not isinstance(record.get("files"), list):
        return None
    return record


def _experiment_keeps(run_dir: Path) -> str | None:
    """The ``keep_pcaps`` of the experiment whose run ``run_dir`` is (``experiment.json`` beside
    its manifest, the run in ``<experiment>/runs/``); None for no experiment's run, or one whose
    files cannot be read."""
    if not (run_dir / "experiment.json").is_file() or run_dir.parent.name != "runs":
        return None
    try:
        manifest = read_object(run_dir.parent.parent / "manifest.json") or {}
    except (ValueError, OSError):
        return None
    definition = manifest.get("definition")
    return definition.get("keep_pcaps") if manifest.get("kind") == "experiment" and \
        isinstance(definition, dict) else None


def against_manifest(computed: dict, manifest: dict, captures_missing: bool) -> dict:
    """The run's metrics and checks to show, ``{"metrics", "checks", "from_manifest",
    "differs_from_manifest"}``, from ``computed`` (``{"metrics", "checks"}`` recomputed from the
    run directory) and the manifest's.

    Per name of either kind: the recomputed value; the manifest's where the files give none, or
    give another while ``captures_missing`` (some of the run's captures or logs are gone: the value
    then covers only the files left);
    the manifest's as it is for the values of :data:`RECORDED`.  ``from_manifest``: kind → the
    names shown with the manifest's value (those of ``RECORDED`` left out);
    ``differs_from_manifest``: kind → name → ``{"manifest", "recomputed"}`` for every name both
    have with other values (compared as JSON).  Each of the two is left out when it holds no
    name (always when the manifest has no metrics or checks: another schema)."""
    out: dict = {"from_manifest": {}, "differs_from_manifest": {}}
    for kind in KINDS:
        mine, theirs = dict(computed.get(kind) or {}), manifest.get(kind) or {}
        taken, differ = [], {}
        for name, value in theirs.items():
            if name in RECORDED.get(kind, ()):
                mine[name] = value
            elif name not in mine:
                mine[name] = value
                taken.append(name)
            elif _json(mine[name]) != _json(value):
                differ[name] = {"manifest": value, "recomputed": mine[name]}
                if captures_missing:
                    mine[name] = value
                    taken.append(name)
        out[kind] = mine
        if taken:
            out["from_manifest"][kind] = taken
        if differ:
            out["differs_from_manifest"][kind] = differ
    return {k: v for k, v in out.items() if v or k in KINDS}


def comparison_notes(shown: dict, gone: list[str], files_gone: list[str] = ()) -> list[str]:
    """One warning each (none when there is nothing to say): the values of ``shown``
    (:func:`against_manifest`) that are the manifest's, and those recomputed from the files that
    differ from it; ``gone``: the run's missing captures (:func:`missing_captures`),
    ``files_gone``: its other missing files (:func:`changed_files`)."""
    notes = []
    marked, differs = shown.get("from_manifest", {}), shown.get("differs_from_manifest", {})
    taken = [n for kind in KINDS for n in marked.get(kind, ())]
    if taken:
        counted = [f"{what} gone: {len(x)}" for what, x in (("captures", gone), ("files", files_gone)) if x]
        why = f"{', '.join(counted)}, named above" if counted else "a file missing or damaged"
        notes.append(f"{len(taken)} metrics and checks are the manifest's, marked (manifest): the "
                     f"files no longer give them ({why}): {', '.join(taken)}")
    differ = [(n, d) for kind in KINDS for n, d in differs.get(kind, {}).items()
              if n not in marked.get(kind, ())]
    if differ:
        notes.append(f"{len(differ)} metrics and checks recomputed from the files differ from the "
                     "run's manifest (a file damaged or changed since the run, or other metrics "
                     "code): " + ", ".join(f"{n} {_short(d['recomputed'])} (manifest "
                                           f"{_short(d['manifest'])})" for n, d in differ))
    return notes


def _json(value) -> str:
    """``value`` as JSON text, keys sorted, written as a manifest writes it."""
    return json.dumps(value, sort_keys=True, default=json_default)


def _short(value) -> str:
    """``value`` in a one-line warning: its JSON when short, else a list's or object's size."""
    text = json.dumps(value, default=json_default)
    if len(text) <= 24:
        return text
    if isinstance(value, (list, tuple)):
        return f"[{len(value)} values]"
    if isinstance(value, dict):
        return f"{{{len(value)} entries}}"
    return text[:23] + "…"


def _names(paths: list[str]) -> str:
    """The first :data:`NAMED` of ``paths``, comma-separated, and how many more."""
    more = f" and {len(paths) - NAMED} more" if len(paths) > NAMED else ""
    return ", ".join(paths[:NAMED]) + more
