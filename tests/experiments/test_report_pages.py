"""Every kind of HTML report — a run's (``testbed analyze RUN_DIR --html``), an experiment's, a
reproduction's — rendered in headless Chromium: no image missing or blank, no script error, no
figure without its image; the screenshots stay under the test's tmp dir (paths printed).  Every
figure drawn on the way passes matplotlib's layout check (no label outside the canvas, no
overlapping tick labels: ``analysis.plots.layout_problems``).  No root: the runs are the fake
executor's, each carrying one small synthetic capture."""
import argparse
import json

import pytest

pytest.importorskip("scapy.all")
from tests.fixtures.browser import CHROMIUM, check_page, problems  # noqa: E402
from tests.fixtures.fake_execute import FakeExecutor  # noqa: E402
from tests.testbed.cli.test_analyze import rr_pcap  # noqa: E402,F401  (the fixture)

from analysis import plots  # noqa: E402

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (scripts/install.sh installs it)")


def _checked(page, tmp_path) -> None:
    found = check_page(page, tmp_path / "screenshots")
    print(f"screenshot of {page.name}: {found['screenshot']}")
    assert problems(found) == [], f"{page}: {problems(found)}"
    return found


@pytest.fixture
def layout():
    plots.LAYOUT_PROBLEMS.clear()
    yield
    assert plots.LAYOUT_PROBLEMS == [], "figures with layout problems: " + "; ".join(
        f"{p}: {', '.join(why)}" for p, why in plots.LAYOUT_PROBLEMS)


def test_a_runs_page(rr_pcap, tmp_path, capsys, layout):  # noqa: F811
    from testbed.cli import analyze as cli
    pcap, log = rr_pcap
    run = tmp_path / "run"
    (run / "pcap").mkdir(parents=True)
    (run / "pcap" / "client-client-eth0.pcap").write_bytes(pcap.read_bytes())
    (run / "client.jsonl").write_text(log.read_text())
    (run / "manifest.json").write_text(json.dumps({
        "status": "complete", "spec": {"topology": "longhaul", "workload": "reqresp", "params": {"requests": 2}},
        "files": [{"path": "pcap/client-client-eth0.pcap", "kind": "pcap", "host": "client"}],
        "environment": {"git": {"revision": "abc", "dirty": False},
                        "links": [{"name": "bottleneck", "a": "client", "b": "server",
                                   "describe": ["10mbit, delay 5ms", "10mbit, delay 5ms, loss 0.01"]}]},
        "fidelity": {"verdict": "ok", "backend": "userspace", "engine": "native"}}))
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    args = p.parse_args(["analyze", str(run), "--html"])
    assert args.func(args) == 0
    page = run / "report.html"
    text = page.read_text()
    assert text.index("Setup") < text.index("Result") and "10mbit, delay 5ms, loss 0.01" in text
    found = _checked(page, tmp_path)
    assert found["images"] >= 3            # timeline, in flight and time-sequence of the data direction


def test_an_experiments_page(rr_pcap, tmp_path, layout):  # noqa: F811
    from experiments import load_definition, run_experiment, write_all
    pcap, _ = rr_pcap
    exp = load_definition("reuse").with_overrides(reps=3).replace(warmup=0)
    fx = FakeExecutor("params.mode", {"new": 1200.0, "reuse": 250.0}, pcap=pcap)
    out = run_experiment(exp, tmp_path / "e", executor=fx, quiet=True)
    write_all(out)
    text = (out / "report.html").read_text()
    assert text.index("Setup") < text.index("primary metric") < text.index("The representative runs")
    assert "runs/000-new" in text and "Runs: validity and link fidelity" in text
    assert (out / "plots" / "representative.pdf").is_file()
    _checked(out / "report.html", tmp_path)


def test_a_reproductions_page(rr_pcap, tmp_path, layout):  # noqa: F811
    from experiments.reproduce.cases import select
    from experiments.reproduce.report import write
    from experiments.reproduce.run import measure_all, result_rows
    pcap, _ = rr_pcap
    relay = FakeExecutor("params.path", {"direct": 1200.0, "relay": 300.0}, pcap=pcap)
    reuse = FakeExecutor("params.mode", {"new": 1200.0, "reuse": 250.0}, pcap=pcap)
    rows = select(["C4", "C7"])
    measured = measure_all(rows, tmp_path, quick=True,
                           executor=lambda plan, out, **kw: (relay if plan.spec.topology == "relay" else reuse)(
                               plan, out, **kw))
    res = result_rows(rows, measured, quick=True)
    meta = {"title": "C4 C7", "started": "s", "finished": "f", "load_before": "0", "load_after": "0",
            "mode": "quick", "rows": len(res), "measured": 6, "ok": 0, "cores": 2, "cpu": ""}
    summary = write(tmp_path, meta, res)
    assert [f["png"] for f in summary["figures"] if f["case"] == "C7"] == [
        "figures/c7.png", "figures/c7-requests.png", "figures/measured-c7.png"]
    found = _checked(tmp_path / "report.html", tmp_path)
    assert found["images"] == len(summary["figures"])


def test_the_check_fails_on_a_missing_image_a_script_error_and_a_blank_figure(tmp_path):
    import base64
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(2, 2))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    blank = base64.b64encode(buf.getvalue()).decode()
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><title>bad</title></head><body>"
                    "<figure><img alt='gone' src='data:image/png;base64,AAAA'></figure>"
                    f"<figure><img alt='blank' src='data:image/png;base64,{blank}'></figure>"
                    "<script>no_such_function()</script></body></html>")
    got = problems(check_page(page, tmp_path / "screenshots"))
    assert "image did not load: 'gone'" in got and "blank image: 'blank'" in got
    assert any(p.startswith("script error") and "no_such_function" in p for p in got)


def test_the_layout_check_finds_overlapping_tick_labels_and_text_off_the_canvas():
    plt = plots._plt()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([200000, 900000], [0, 1])
    ax.set_xticks([200000 + 100000 * k for k in range(8)])
    ax.annotate("far away", (2.0, 0.5), xycoords="axes fraction")
    got = plots.layout_problems(fig)
    plt.close(fig)
    assert any("tick labels overlap" in p for p in got) and any("far away" in p for p in got)


def test_an_experiment_over_the_udp_transport_draws_its_packets(tmp_path, layout):
    """The representative runs of a UDP-transport experiment: symbols, repair and ACKs per arm
    (not four empty axes)."""
    from tests.analysis.test_transport_analysis import frame, sym, write_pcap
    from testbed.transport import wire
    from experiments import load_definition, run_experiment, write_all
    pcap = tmp_path / "udp.pcap"
    frames = [frame(sym(i, i), 40000, 5003) for i in range(3)] + [frame(sym(3, 4), 40000, 5003)]
    frames.append(frame(wire.encode_ack(wire.AckPacket(0, 5, ((0, 0),), ((3, 0),))), 5003, 40000))
    write_pcap(pcap, frames)
    exp = load_definition("reuse").with_overrides(reps=2).replace(warmup=0)
    out = run_experiment(exp, tmp_path / "e", executor=FakeExecutor(
        "params.mode", {"new": 1200.0, "reuse": 250.0}, pcap=pcap), quiet=True)
    write_all(out)
    assert (out / "plots" / "representative.png").is_file()
    _checked(out / "report.html", tmp_path)
    from testbed.cli import analyze as cli
    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers())
    run = out / "runs" / "000-new"
    args = p.parse_args(["analyze", str(run), "--html"])
    assert args.func(args) == 0
    assert "transport-5003: symbols sent" in (run / "report.html").read_text()
    _checked(run / "report.html", tmp_path)


def test_the_html_tables_are_in_the_headings_unit(tmp_path):
    """max_in_flight_bytes is headed "(kB)", as its figures are drawn: its table's medians are kB
    too (they were bytes, 1.5e+05 under a kB heading); report.md names the unit, bytes."""
    from experiments import load_definition, run_experiment, write_all
    exp = load_definition("reuse").with_overrides(reps=2).replace(warmup=0, metrics=("max_in_flight_bytes",))
    fake = FakeExecutor("params.mode", {"new": 150000.0, "reuse": 300000.0}, metric="max_in_flight_bytes",
                        spread=0.0)
    out = run_experiment(exp, tmp_path / "e", executor=fake, quiet=True)
    write_all(out, plots=False)
    page = (out / "report.html").read_text()
    assert "max in flight (kB)" in page and "<td>150.0</td>" in page and "1.5e+05" not in page
    assert "max in flight (B):" in (out / "report.md").read_text()


def test_the_setup_says_whose_run_its_rows_are_before_them(tmp_path):
    """The setup's run rows are the first run's (cc=cubic in a cc experiment): said before them."""
    from experiments import load_definition, run_experiment, write_all
    from experiments.report import experiment_setup
    exp = load_definition("reuse").with_overrides(reps=1).replace(warmup=0)
    out = run_experiment(exp, tmp_path / "e", executor=FakeExecutor("params.mode", {"new": 1.0, "reuse": 2.0}),
                         quiet=True)
    rows = [k for k, _ in experiment_setup(out, write_all(out, plots=False))]
    assert rows.index("spec of the arms") < rows.index("workload")


def test_the_by_run_figure_marks_the_runs_kept_with_a_degraded_verdict(tmp_path, monkeypatch):
    """A degraded run is kept (the machine's timing error, named in its manifest) and was an
    unmarked outlier in the by-run figure: now circled, in the legend."""
    from experiments import load_definition, plots as xplots, run_experiment, write_all
    exp = load_definition("reuse").with_overrides(reps=2).replace(warmup=0)
    fake = FakeExecutor("params.mode", {"new": 1200.0, "reuse": 300.0}, degraded=(1,), degraded_by=1.3)
    out = run_experiment(exp, tmp_path / "e", executor=fake, quiet=True)
    summary = write_all(out, plots=False)
    assert summary["degraded_kept"] == ["runs/001-reuse"]
    figs = []
    real = xplots._save
    monkeypatch.setattr(xplots, "_save", lambda fig, base: (figs.append(fig), real(fig, base))[1])
    assert xplots.drift_figure(summary, "completion_ms_median", tmp_path / "by-run")
    labels = [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()]
    assert "kept, fidelity degraded" in labels
