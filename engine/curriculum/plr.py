"""plr: Prioritized Level Replay (Jiang, Grefenstette and Rocktaeschel, ICML 2021), with tasks as levels.

    S_i    = learning potential of task i (its score in PLR's sense)
    h(S_i) = 1 / rank(S_i) ^ (1 / beta)            rank 1 = the highest potential
    P_S(i) = h(S_i) / sum_j h(S_j)                 the score-prioritised distribution
    P_C(i) = (c - C_i) / sum_j (c - C_j)           staleness: c now, C_i the step task i was last attempted
    P(i)   = (1 - rho) * P_S(i) + rho * P_C(i)

The weight stored is P(i) itself (it sums to 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from coevolve_engine.core.settings import setting
from coevolve_engine.curriculum.strategy import CurriculumStrategy, StrategyResult, check_positive

SCORES = ("variance", "failure")


@dataclass(frozen=True)
class PLRConfig:
    """Settings of the PLR strategy (defaults: the paper's beta = 0.1, rho = 0.1)."""

    score: str = setting("variance", "Learning potential: 'variance' = p(1-p) of the last group (GRPO's mean "
                                    "|advantage| is 2p(1-p)), or 'failure' = 1 - latest score.")
    beta: float = setting(0.1, "Temperature of the rank transform: smaller draws the top ranks more.")
    rho: float = setting(0.1, "Share of the staleness distribution P_C in the mixture, in [0, 1].")
    unseen_first: bool = setting(True, "Tasks never attempted rank first (maximal potential); else last.")

    def __post_init__(self) -> None:
        if self.score not in SCORES:
            raise ValueError(f"score must be one of {', '.join(SCORES)}, got {self.score!r}")
        check_positive("beta", self.beta, allow_zero=False)
        if not 0 <= self.rho <= 1:
            raise ValueError(f"rho is a mixing share in [0, 1], got {self.rho}")


class PLRStrategy(CurriculumStrategy):
    name = "plr"
    Config = PLRConfig
    recent = 1

    def weigh(self, facts: pl.DataFrame) -> StrategyResult:
        c = self.config
        if c.score == "variance":
            # S_i = p(1 - p), p the success rate of the task's last group
            score = pl.col("last_group_p") * (1 - pl.col("last_group_p"))
        else:
            # S_i = 1 - score at the latest step
            score = 1 - pl.col("latest_score")
        # a task never attempted has no score: it ranks above (unseen_first) or below every attempted task
        unseen = pl.col("rollouts") == 0
        sortable = pl.when(unseen).then(pl.lit(float("inf") if c.unseen_first else float("-inf"))).otherwise(score)
        # rank(S_i): 1 for the highest; tied tasks share the best rank of their block ("min" ranking)
        rank = sortable.rank(method="min", descending=True).cast(pl.Float64)
        # h(S_i) = rank^(-1/beta), normalised: P_S
        h = rank.pow(-1.0 / c.beta)
        p_score = h / h.sum()
        # P_C(i) = (c - C_i) / sum_j (c - C_j); uniform when every task was attempted at the latest step
        stale = pl.col("steps_since_attempt").cast(pl.Float64)
        p_stale = pl.when(stale.sum() > 0).then(stale / stale.sum()).otherwise(1.0 / pl.len())
        frame = facts.select(
            "task_id",
            pl.struct(score.alias("score"), rank.alias("rank"), p_score.alias("p_score"), p_stale.alias("p_stale"))
            .alias("components"),
        )
        parts = pl.col("components").struct
        # P(i) = (1 - rho) * P_S(i) + rho * P_C(i)
        weight = (1 - c.rho) * parts.field("p_score") + c.rho * parts.field("p_stale")
        return StrategyResult(frame.select("task_id", weight.alias("weight"), "components"))
