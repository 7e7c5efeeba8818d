"""An event log whose last line was cut short (its app killed while writing it) is read up to its
last whole line, with a warning naming the file and the line and the result's ``damage``; a bad
line before the last is an error, as is a file that is not text."""
import json
import logging

import pytest

from analysis import applog
from tests.testbed.cli.test_analyze import analyze, rr_pcap  # noqa: F401  (the fixtures)

EVENTS = [{"t": 1000 + k, "event": "request_issued", "req": k} for k in range(5)]


def _write(path, text: str):
    path.write_text(text)
    return path


def _whole(events=EVENTS) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_whole_log_has_no_damage(tmp_path, caplog):
    events = applog.load(_write(tmp_path / "client.jsonl", _whole()))
    assert [e["req"] for e in events] == [0, 1, 2, 3, 4] and events.damage == []
    assert _warnings(caplog) == []
    last_unended = applog.load(_write(tmp_path / "unended.jsonl", _whole().rstrip("\n")))
    assert len(last_unended) == 5 and last_unended.damage == []    # its object is whole


@pytest.mark.parametrize("tail", ["", "\n", "\n\n"])
def test_a_last_line_cut_short_is_left_out_warned_and_listed(tmp_path, caplog, tail):
    """Cut inside the sixth event (then, as after a restart, maybe a newline or two): the five
    whole events, one warning naming the file and line 6, and the same in ``damage``."""
    path = _write(tmp_path / "client.jsonl", _whole() + json.dumps(EVENTS[0])[:17] + tail)
    events = applog.load(path)
    assert [e["req"] for e in events] == [0, 1, 2, 3, 4]
    (d,) = events.damage
    assert d["kind"] == "truncated" and d["line"] == 6
    assert d["message"] == ("cut short: line 6 is 17 characters of an event after the 5 whole ones "
                            "(the log's end is missing)")
    assert _warnings(caplog) == [f"{path}: {d['message']}"]
    applog.load(path)                                   # read again: said once
    assert len(_warnings(caplog)) == 1


def test_a_log_of_one_cut_line_is_empty_and_damaged(tmp_path):
    events = applog.load(_write(tmp_path / "client.jsonl", '{"t": 12, "ev'))
    assert events == [] and events.damage[0]["line"] == 1


@pytest.mark.parametrize("text,says", [
    (_whole(EVENTS[:2]) + '{"t": 3, "ev\n' + _whole(EVENTS[2:]), r":3: not JSON \(Unterminated string"),
    (_whole() + '{"t": "6", "event": "x"}\n', r":6: need an object with integer \"t\""),
    (_whole() + "[1, 2]", r":6: need an object with integer \"t\""),
])
def test_a_bad_line_that_is_no_cut_is_an_error(tmp_path, caplog, text, says):
    """A bad line before the last is damage in the middle, and a last line that is whole JSON but
    no event is not a cut: both stay errors naming the file and the line."""
    path = _write(tmp_path / "client.jsonl", text)
    with pytest.raises(ValueError, match=f"{path}{says}"):
        applog.load(path)
    assert _warnings(caplog) == []


def test_a_log_that_is_not_text_is_an_error(tmp_path):
    path = tmp_path / "client.jsonl"
    path.write_bytes(_whole().encode() + b"\xff\xfe")
    with pytest.raises(ValueError, match=f"{path}: not text; an event log is JSON lines"):
        applog.load(path)


def test_analyze_reads_a_run_whose_log_was_cut(rr_pcap, analyze, tmp_path):  # noqa: F811
    """``testbed analyze RUN_DIR`` with a client log cut inside its last event: it analyses the
    run (the requests joined from the whole lines) and warns naming the file and the line."""
    f, log = rr_pcap
    d = tmp_path / "run"
    (d / "pcap").mkdir(parents=True)
    (d / "pcap" / "client-eth0.pcap").write_bytes(f.read_bytes())
    (d / "manifest.json").write_text(json.dumps({"schema": 1, "status": "complete"}))
    lines = log.read_text().splitlines()
    (d / "client.jsonl").write_text("\n".join(lines) + "\n" + lines[1][:20])
    code, out, err = analyze(["--json", str(d)])
    assert code == 0 and f"{d / 'client.jsonl'}: cut short: line {len(lines) + 1} is 20 characters" in err
    (flow,) = [r for r in json.loads(out)["captures"][0]["flows"] if r["proto"] == "tcp"]
    assert len(flow["completion"]) == 2
