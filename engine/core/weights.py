"""A round's stored task weights, as trainers and samplers read them (``weight_sets`` / ``task_weights``).

Computing and storing weights is ``coevolve_engine.curriculum``; reading them is here, so a trainer's batch
source needs nothing above the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from coevolve_engine.errors import CurriculumError
from coevolve_engine.store import Store


@dataclass(frozen=True)
class WeightSet:
    """One round's weights. ``task_ids`` are sorted, and ``weights[i]`` is the weight of ``task_ids[i]``: a
    sampler's index i means ``task_ids[i]`` on every process."""

    round: int
    strategy: str
    params: dict
    step: int | None
    reason: str
    task_ids: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.task_ids)

    @property
    def by_task(self) -> dict[str, float]:
        """Task id -> weight: the shape of ``BatchSource.weights`` and of ``WeightedGroupSampler``'s mapping."""
        return {str(t): float(w) for t, w in zip(self.task_ids, self.weights)}

    @property
    def probabilities(self) -> np.ndarray:
        return self.weights / self.weights.sum()


def latest_round(store: Store) -> int | None:
    return store.scalar("SELECT max(round) FROM weight_sets")


def load_weights(store: Store, round: int | None = None) -> WeightSet:
    """A round's weights (the latest round when ``round`` is None) as numpy arrays, sorted by task id."""
    if round is None:
        round = latest_round(store)
        if round is None:
            raise CurriculumError("the store has no weights yet; compute them with "
                                  "`coevolve-engine weights --strategy coevolve`")
    header = store.con.execute("SELECT strategy, params, step, reason FROM weight_sets WHERE round = $round",
                               {"round": round}).fetchall()
    if not header:
        known = [r[0] for r in store.con.execute("SELECT round FROM weight_sets ORDER BY round").fetchall()]
        raise CurriculumError(f"round {round} has no weights (rounds with weights: "
                              f"{', '.join(map(str, known)) or 'none'}); compute them with "
                              f"`coevolve-engine weights --round {round}`")
    strategy, params, step, reason = header[0]
    arrays = store.con.execute("SELECT task_id, weight FROM task_weights WHERE round = $round ORDER BY task_id",
                               {"round": round}).fetchnumpy()
    return WeightSet(round, strategy, json.loads(params), step, reason, np.asarray(arrays["task_id"]),
                     np.asarray(arrays["weight"], dtype=np.float64))
