"""uniform: every task is drawn equally often (the baseline with no curriculum)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from coevolve_engine.curriculum.strategy import CurriculumStrategy, StrategyResult


@dataclass(frozen=True)
class UniformConfig:
    """uniform takes no settings."""


class UniformStrategy(CurriculumStrategy):
    name = "uniform"
    Config = UniformConfig
    recent = 1

    def weigh(self, facts: pl.DataFrame) -> StrategyResult:
        # w_i = 1 for every task i
        return StrategyResult(facts.select(
            "task_id", pl.lit(1.0).alias("weight"), pl.struct(pl.lit(1.0).alias("base")).alias("components")))
