"""Curriculum: per-task weights per round, computed by a strategy from the signals, and the sampler (the one in
``coevolve_engine.core.sampler``, which trainers use too) that draws weighted batches of intact GRPO groups.

    from coevolve_engine.curriculum import compute_weights, load_weights, WeightedGroupSampler

    compute_weights(store, round=1, strategy="coevolve")            # writes task_weights + weight_sets
    weights = load_weights(store, round=1)                           # numpy arrays, sorted by task id
    sampler = WeightedGroupSampler(weights.weights, group_size=8, groups_per_step=32, seed=0)
    task_ids = weights.task_ids[sampler.batch(step=0)]               # 256 ids, each task 8 times in a row
"""

from coevolve_engine.core.sampler import WeightedGroupSampler
from coevolve_engine.curriculum.strategy import (
    STRATEGIES,
    CurriculumError,
    CurriculumStrategy,
    StrategyResult,
    config_help,
    load_strategy,
)
from coevolve_engine.curriculum.weights import WeightSet, compute_weights, latest_round, load_weights

__all__ = [
    "STRATEGIES", "CurriculumError", "CurriculumStrategy", "StrategyResult", "WeightSet", "WeightedGroupSampler",
    "compute_weights", "config_help", "latest_round", "load_strategy", "load_weights",
]
