"""Single-factor experiments: a TOML definition (``definition``), the run order and per-repetition
seeds (``order``), the runner (``runner``), manipulation checks and the fidelity rule (``checks``),
statistics (``stats``), ``summary.json`` (``summary``), ``report.md`` and ``report.html``
(``report``), figures (``plots``), and past results found, compared and exported tidy
(``results``, ``testbed results``).  ``testbed experiment ...`` (testbed/cli/experiment.py) is
the command line.

    from experiments import load_definition, run_experiment, write_all
    exp = load_definition("reuse").with_overrides(reps=5)
    out = run_experiment(exp, "results/reuse-test")      # executor=testbed.run.execute.execute
    summary = write_all(out)                               # summary.json, plots/, report.md

``cluster`` is the Dask executor of the runner (``--cluster``: repetition blocks on many machines,
docs/campaigns.md); the default executor runs them here (``runner.InProcess``).

``reproduce`` (``testbed reproduce``) holds the chapter table: one row per quantity, measured by
the experiments in ``definitions/``.

Division of labour: many runs of one spec with one path varied, and what they show together;
a single run is ``testbed.run``'s.  May import every layer below it (it uses ``testbed.spec``,
``testbed.emulator``, ``analysis``, ``topologies`` and ``testbed.run``); imported only by the CLI.
"""
from experiments.definition import Experiment, builtin_names, load_definition
from experiments.report import write_all
from experiments.runner import run_experiment

__all__ = ["Experiment", "builtin_names", "load_definition", "run_experiment", "write_all"]
