"""The co-evolution loop: `coevolve-engine run` as a library.

    from coevolve_engine.loop import RunLoop, load_config
    RunLoop("coevolve.duckdb", load_config(Path("run.toml"))).run()

    run.py          RunLoop: check, take the lease, run every unfinished phase in order
    phases.py       the table of a round's phases: name, when, what runs it, how its outputs read
    ledger.py       the state machine in the store (start, finish, resume, configuration checks)
    training.py     bootstrap, weights, warmup, train      evaluation.py   eval
    feedback.py     signals, patterns, synthesize, validate
    launch.py       training in processes of its own       train_round.py  one round's training
    config.py       the settings; config_files.py reads TOML and --set; template.py prints them
    preflight.py    every plugin built before a round      summary.py      what a run shows
"""

from coevolve_engine.loop.config import ConfigError, RunConfig
from coevolve_engine.loop.config_files import load_config
from coevolve_engine.loop.context import RunError
from coevolve_engine.loop.phases import PHASES
from coevolve_engine.loop.run import RunLoop, RunReport
from coevolve_engine.loop.template import render_template

__all__ = ["PHASES", "ConfigError", "RunConfig", "RunError", "RunLoop", "RunReport", "load_config",
           "render_template"]
