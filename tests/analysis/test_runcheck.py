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
