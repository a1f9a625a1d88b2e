"""coevolve-engine: LLM agents and their training tasks evolving together, around one DuckDB store.

The public API, for a user who brings their own rollouts (imported when first used, so ``import coevolve_engine``
stays light)::

    from coevolve_engine import Store, WeightedGroupSampler, compute_weights, load_weights

    with Store("mine.duckdb") as store:
        weights = load_weights(store).by_task                    # {task_id: weight}, as BatchSource.weights
    sampler = WeightedGroupSampler(weights, groups_per_step=8, group_size=4, seed=0)
    batch = sampler.batch_ids(step=0)                            # 32 task ids, each task 4 times in a row
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: name -> the module it comes from
_PUBLIC = {
    "Store": "coevolve_engine.core.store",
    "WeightedGroupSampler": "coevolve_engine.core.sampler",
    "WeightSet": "coevolve_engine.core.weights",
    "load_weights": "coevolve_engine.core.weights",
    "compute_weights": "coevolve_engine.curriculum.weights",
    "compute_drift": "coevolve_engine.drift",
    "DriftParams": "coevolve_engine.drift",
    "open_for_reading": "coevolve_engine.drift",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'coevolve_engine' has no attribute {name!r}")
