"""analysis.runcheck: a run's recomputed metrics held against its manifest's."""
from analysis import runcheck


def test_the_values_shown_and_where_they_come_from():
    computed = {"metrics": {"a": 1.0, "b": [1, 2], "new": 5}, "checks": {"c": {"x": 1}}}
    manifest = {"metrics": {"a": 1.0, "b": [1, 2, 3], "gone": 7},
                "checks": {"c": {"x": 1}, "host_factors": {"client": {}}}}
    shown = runcheck.against_manifest(computed, manifest, captures_missing=False)
    assert shown == {"metrics": {"a": 1.0, "b": [1, 2], "new": 5, "gone": 7},
                     "checks": {"c": {"x": 1}, "host_factors": {"client": {}}},
                     "from_manifest": {"metrics": ["gone"]},
                     "differs_from_manifest": {"metrics": {"b": {"manifest": [1, 2, 3], "recomputed": [1, 2]}}}}
    gone, differ = runcheck.comparison_notes(shown, [])
    assert gone.startswith("1 metrics and checks are the manifest's, marked (manifest): the files no "
                           "longer give them (a file missing or damaged): gone")
    assert differ.endswith("b [1, 2] (manifest [1, 2, 3])")


def test_with_captures_missing_a_value_that_differs_is_the_manifests():
    """What the captures left give (``path`` of none: {}) is not the run's value."""
    shown = runcheck.against_manifest({"metrics": {}, "checks": {"path": {}}},
                                      {"checks": {"path": {"client-eth0.pcap": 9}}}, captures_missing=True)
    assert shown["checks"] == {"path": {"client-eth0.pcap": 9}}
    assert shown["from_manifest"] == {"checks": ["path"]}
    (note,) = runcheck.comparison_notes(shown, ["pcap/client-eth0.pcap"])
    assert "(captures gone: 1, named above): path" in note


def test_a_manifest_without_metrics_compares_nothing():
    computed = {"metrics": {"a": 1}, "checks": {}}
    assert runcheck.against_manifest(computed, {}, captures_missing=True) == computed
    assert runcheck.comparison_notes(computed, []) == []


def test_files_gone_or_resized_since_the_run(tmp_path):
    """Every inventory file but the captures (their own checks say why they are gone or short)
    is held against the size the run recorded; an entry without one is only checked for being
    there."""
    (tmp_path / "client.jsonl").write_text("{}\n")
    (tmp_path / "metadata.json").write_text("{}")
    manifest = {"files": [{"path": "client.jsonl", "kind": "eventlog", "bytes": 9},
                          {"path": "metadata.json", "kind": "metadata"},
                          {"path": "server.jsonl", "kind": "eventlog", "bytes": 4},
                          {"path": "pcap/c-eth0.pcap", "kind": "pcap", "bytes": 24}]}
    changed = runcheck.changed_files(tmp_path, manifest)
    assert changed == {"missing": ["server.jsonl"], "resized": [["client.jsonl", 3, 9]]}
    assert runcheck.changed_notes(changed) == [
        "1 of the files its manifest lists are missing: server.jsonl (deleted or moved since the "
        "run): what they held is not analysed",
        "1 of the files its manifest lists have changed size since the run: client.jsonl 3 bytes "
        "(at the run 9)"]
    assert runcheck.changed_files(tmp_path, {}) == {"missing": [], "resized": []}
    shown = {"metrics": {"a": 1}, "checks": {}, "from_manifest": {"metrics": ["a"]}}
    (note,) = runcheck.comparison_notes(shown, ["pcap/c-eth0.pcap"], ["server.jsonl"])
    assert "(captures gone: 1, files gone: 1, named above): a" in note
