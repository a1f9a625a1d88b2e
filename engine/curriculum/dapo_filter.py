"""dapo-filter: DAPO's dynamic sampling (Yu et al. 2025) as task weights. A GRPO group whose rollouts all
succeed or all fail has zero advantage everywhere and teaches nothing, so its task is left out:

    w_i = 0  if the task's last group had >= min_rollouts rollouts, all successes or all failures
    w_i = 1  otherwise (mixed outcomes, never attempted, or a group too small to judge)

If that leaves every task at 0, every task weighs 1 (uniform) and the weight set's reason says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from coevolve_engine.core.settings import setting
from coevolve_engine.curriculum.strategy import CurriculumStrategy, StrategyResult, check_positive


@dataclass(frozen=True)
class DAPOFilterConfig:
    """Settings of the dapo-filter strategy."""

    min_rollouts: int = setting(2, "A last group with fewer rollouts than this cannot show mixed outcomes: "
                                  "its task is kept (weight 1). 1 filters single rollouts too.")

    def __post_init__(self) -> None:
        check_positive("min_rollouts", self.min_rollouts, allow_zero=False)


class DAPOFilterStrategy(CurriculumStrategy):
    name = "dapo-filter"
    Config = DAPOFilterConfig
    recent = 1

    def weigh(self, facts: pl.DataFrame) -> StrategyResult:
        n, k = pl.col("last_group_rollouts"), pl.col("last_group_successes")
        # degenerate group: all success (k = n) or all failure (k = 0), judged only when n >= min_rollouts
        degenerate = (n >= self.config.min_rollouts) & ((k == 0) | (k == n))
        kept = degenerate.fill_null(False).not_()
        frame = facts.select("task_id", pl.col("last_group_p"), kept.alias("kept"))
        notes: tuple[str, ...] = ()
        fallback = frame.height > 0 and not frame["kept"].any()
        if fallback:
            # every task filtered out: sample uniformly rather than not at all
            notes = (f"dapo-filter: all {frame.height} tasks had an all-success or all-failure last group, "
                     "so every task weighs 1 (uniform fallback)",)
        weight = pl.lit(1.0) if fallback else pl.col("kept").cast(pl.Float64)
        return StrategyResult(frame.select(
            "task_id", weight.alias("weight"),
            pl.struct("last_group_p", "kept", pl.lit(fallback).alias("fallback")).alias("components"),
        ), notes)
