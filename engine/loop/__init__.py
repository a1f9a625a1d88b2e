"""The co-evolution loop: `coevolve-engine run` as a library.

    from coevolve_engine.loop import RunLoop, load_config
    RunLoop("coevolve.duckdb", load_config(Path("run.toml"))).run()
"""

from coevolve_engine.loop.config import ConfigError, RunConfig, load_config, render_template
from coevolve_engine.loop.run import PHASES, RunError, RunLoop, RunReport

__all__ = ["PHASES", "ConfigError", "RunConfig", "RunError", "RunLoop", "RunReport", "load_config",
           "render_template"]
