"""A round's stored task weights, as trainers and samplers read them (``weight_sets`` / ``task_weights``).

Computing and storing weights is ``coevolve_engine.curriculum``; reading them is here, so a trainer's batch
source needs nothing above the store.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from coevolve_engine.core.errors import CurriculumError
from coevolve_engine.core.store import Store


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


def check_weights(weights: Mapping[str, Any] | Sequence[Any] | np.ndarray, *, what: str = "weights",
                  hint: str = "", error: type[Exception] = CurriculumError) -> np.ndarray:
    """The one check of task weights, wherever they come from: each is a finite number >= 0 and at least one
    is above 0 (a task is drawn with probability ``weight / sum(weights)``). Returns them as float64, in the
    order given (a mapping's values in its order); else raises ``error`` naming the first bad task (a
    sequence's index) with ``what`` in front and ``hint`` (what to do about it) after."""
    if isinstance(weights, Mapping):
        names, values = [str(task) for task in weights], list(weights.values())
    else:
        names, values = None, weights
    if not isinstance(values, np.ndarray) or values.dtype.kind not in "fiu":  # a user's values: each a number
        for index, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise error(f"{what}: {_entry(names, index)} has weight {value!r}; a weight is a finite number "
                            f">= 0{hint}")
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise error(f"{what}: weights must be a flat list of numbers, got shape {array.shape}{hint}")
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        index = int(np.argmax(bad))
        raise error(f"{what}: {_entry(names, index)} has weight {float(array[index])!r}; a weight is a finite number "
                    f">= 0{hint}")
    with np.errstate(over="ignore"):
        total = array.sum()
    if not array.size or total <= 0:
        raise error(f"{what}: no task has a weight above 0, so there is nothing to draw{hint}")
    if not np.isfinite(total):  # each finite, but together beyond a float: every probability would be 0
        raise error(f"{what}: the weights add up to more than a number can hold (the largest is "
                    f"{float(array.max())!r}), so no task could be drawn by its share{hint}")
    return array


def _entry(names: list[str] | None, index: int) -> str:
    return f"task {names[index]!r}" if names is not None else f"entry {index}"


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
