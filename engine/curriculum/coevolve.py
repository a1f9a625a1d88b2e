"""coevolve: the CoEvolve task distribution. New synthesized tasks are appended to the task set (they are rows
of ``tasks``), and the tasks the signals flag are drawn more, while a staleness term keeps any task from
starving:

    w_i = base + a * forgetting_i + b * boundary_i + c * rare_i + d * staleness_i + e * new_i - g * dead_i

Each term is recorded in the task's components, so the components add up to its weight. The last term (off by
default, g = 0) draws less of a task whose recent GRPO groups were dead (every reward equal: no gradient), as
GRESO (Zhang et al. 2025) skips prompts predicted to give zero-variance groups from their history; g < base keeps
every weight above 0, and the staleness term brings a task back once it has gone unattempted for a while.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from coevolve_engine.core.settings import setting
from coevolve_engine.curriculum.strategy import CurriculumStrategy, StrategyResult, check_positive


@dataclass(frozen=True)
class CoevolveConfig:
    """Settings of the coevolve strategy (every weight is 1 plus these terms)."""

    base: float = setting(1.0, "Weight every task starts from; > 0 so that nothing starves.")
    forgetting: float = setting(2.0, "a: added times the share of the task's recent steps where forgetting fired.")
    boundary: float = setting(1.0, "b: added times the share of its recent groups with mixed outcomes.")
    rare: float = setting(1.0, "c: added times the share of its recent rollouts with a rare action pattern.")
    staleness: float = setting(0.5, "d: added times min(steps since its last attempt / staleness_horizon, 1).")
    staleness_horizon: int = setting(10, "Steps without an attempt after which the staleness term is full.")
    new_task: float = setting(2.0, "e: added to a synthesized task (source 'synthesized') never attempted yet.")
    dead: float = setting(0.0, "g: subtracted times the share of its recent groups that were dead (every reward "
                               "equal, no gradient); below base. 0 (the default) leaves dead groups alone.")
    recent: int = setting(3, "The signals are read over each task's last RECENT scored steps.")

    def __post_init__(self) -> None:
        check_positive("base", self.base, allow_zero=False)
        for name in ("forgetting", "boundary", "rare", "staleness", "new_task", "dead"):
            check_positive(name, getattr(self, name))
        if self.dead >= self.base:
            raise ValueError(f"dead must be below base ({self.base}) so that no weight reaches 0, got {self.dead}")
        check_positive("staleness_horizon", self.staleness_horizon, allow_zero=False)
        check_positive("recent", self.recent, allow_zero=False)


class CoevolveStrategy(CurriculumStrategy):
    name = "coevolve"
    Config = CoevolveConfig

    def weigh(self, facts: pl.DataFrame) -> StrategyResult:
        c = self.config
        terms = [
            # base: every task keeps a floor, so it is still drawn when no signal flags it
            pl.lit(c.base).alias("base"),
            # a * forgetting_recent: solved before, failing now (docs/architecture.md, "The signals")
            (c.forgetting * pl.col("forgetting_recent")).alias("forgetting"),
            # b * boundary_recent: groups with at least one success and one failure (the paper's uncertainty)
            (c.boundary * pl.col("boundary_recent")).alias("boundary"),
            # c * rare_recent: rollouts whose action pattern had share < theta% at their step
            (c.rare * pl.col("rare_recent")).alias("rare"),
            # d * min(steps_since_attempt / horizon, 1): grows while a task goes unattempted, so none starves
            (c.staleness * (pl.col("steps_since_attempt") / c.staleness_horizon).clip(upper_bound=1.0))
            .alias("staleness"),
            # e * [synthesized and never attempted]: the paper's appended tasks get drawn soon after they arrive
            pl.when((pl.col("source") == "synthesized") & (pl.col("rollouts") == 0))
            .then(pl.lit(c.new_task)).otherwise(pl.lit(0.0)).alias("new_task"),
        ]
        if c.dead > 0:  # off, the term is not there at all: the weight set is the one made before the term existed
            # - g * dead_recent: groups whose rewards were all equal teach nothing; a task that keeps giving them
            # is drawn less (its history predicts the next group, GRESO)
            terms.append((-c.dead * pl.col("dead_recent")).alias("dead"))
        frame = facts.select("task_id", pl.struct(*terms).alias("components"))
        # w_i = the sum of its terms
        weight = pl.sum_horizontal(pl.col("components").struct.field(t.meta.output_name()) for t in terms)
        return StrategyResult(frame.select("task_id", weight.cast(pl.Float64).alias("weight"), "components"))
